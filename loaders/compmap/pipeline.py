"""Glue from a model id and a dataset directory to activations: vocabularies, model loading,
and an on-disk cache of whole activation matrices (the ITM path is slow enough to need one)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from conceptforge.cub import readable_attribute
from conceptforge.errors import InvalidArgumentError
from conceptforge.external_errors import weights_error
from conceptforge.loaders.compmap.activations import (
    ConceptVocabulary,
    ItmScorer,
    concept_text_embeddings,
    dual_encoder_activations,
    itm_activations,
)
from conceptforge.loaders.compmap.cub_arrays import CubPrimitives
from conceptforge.loaders.compmap.mit_states import MitStatesData, Pair
from conceptforge.loaders.compmap.prompts import (
    SPEC_ATTRIBUTE_TEMPLATE,
    TemplateChoice,
    attribute_prompts,
    cub_attribute_prompts,
    mit_prompts,
)
from conceptforge.loaders.harness.model_ref import ITM_TYPES

logger = logging.getLogger(__name__)


def cub_vocabulary(cub: CubPrimitives, templates: TemplateChoice) -> ConceptVocabulary:
    """312 attribute concepts, softmax groups = the 28 attribute groups."""
    return ConceptVocabulary(
        names=list(cub.attributes),
        prompts=[cub_attribute_prompts(*readable_attribute(name), templates) for name in cub.attributes],
        groups=cub.groups,
    )


def table_vocabulary(
    names: Sequence[str],
    readable: Sequence[tuple[str, str]],
    groups: dict[str, np.ndarray],
    templates: TemplateChoice,
    *,
    phrase: str,
) -> ConceptVocabulary:
    """A spec's attribute concepts: each (group, value) in the spec's phrase and template; the
    softmax groups are the spec's mutually exclusive attribute groups."""
    return ConceptVocabulary(
        names=list(names),
        prompts=[
            attribute_prompts(group, value, templates, phrase=phrase, template=SPEC_ATTRIBUTE_TEMPLATE)
            for group, value in readable
        ],
        groups=groups,
    )


def mit_vocabulary(data: MitStatesData, templates: TemplateChoice) -> ConceptVocabulary:
    """Attributes then objects (115 + 245 = 360 on MIT-States), one softmax group each."""
    names = data.attrs + data.objs
    return ConceptVocabulary(
        names=names,
        prompts=[mit_prompts(n.replace("_", " "), templates) for n in names],
        groups={"attribute": np.arange(len(data.attrs)), "object": len(data.attrs) + np.arange(len(data.objs))},
    )


def pair_prompts(pairs: Sequence[Pair], templates: TemplateChoice) -> list[list[str]]:
    return [mit_prompts(f"{a} {o}".replace("_", " "), templates) for a, o in pairs]


@dataclass
class VLModel:
    """A dual encoder (``embedder``) or an ITM model (``scorer``), plus a short display name."""

    model_id: str
    kind: str
    name: str
    revision: str
    embedder: Any = None
    scorer: ItmScorer | None = None

    def activations(
        self, images: Sequence[Any], vocabulary: ConceptVocabulary, *, apply_group_softmax: bool, batch_size: int
    ) -> Tensor:
        if self.embedder is not None:
            return dual_encoder_activations(
                self.embedder, images, vocabulary, apply_group_softmax=apply_group_softmax, batch_size=batch_size
            )
        return itm_activations(
            self.scorer, images, vocabulary, apply_group_softmax=apply_group_softmax, batch_size=batch_size
        )


def display_name(model_id: str) -> str:
    base = Path(model_id.rstrip("/")).name.lower()
    for key, label in (("clip", "CLIP"), ("siglip", "SigLIP"), ("vilt", "ViLT"), ("blip", "BLIP")):
        if key in base:
            return "SigLIP" if "siglip" in base else label
    return Path(model_id.rstrip("/")).name


def load_vl_model(
    model_id: str,
    *,
    kind: str = "auto",
    revision: str | None = None,
    device: str | None = None,
    cache_dir: str | None = None,
    name: str | None = None,
) -> VLModel:
    """Load ``model_id`` as a dual encoder or ITM model (``kind='auto'`` reads its config)."""
    from conceptforge.loaders.harness.embeddings import EmbeddingModel, embedding_revision

    if kind == "auto":
        from transformers import AutoConfig

        try:
            model_type = AutoConfig.from_pretrained(model_id, revision=revision).model_type
        except (OSError, ValueError) as error:
            raise weights_error("model", model_id, error) from None
        kind = "itm" if model_type in ITM_TYPES else "dual"
    label = name or display_name(model_id)
    if kind == "dual":
        embedder = EmbeddingModel.from_pretrained(model_id, revision=revision, cache_dir=cache_dir, device=device)
        return VLModel(model_id, "dual", label, embedder.revision, embedder=embedder)
    if kind == "itm":
        scorer = ItmScorer.from_pretrained(model_id, revision=revision, device=device)
        return VLModel(model_id, "itm", label, embedding_revision(model_id, revision), scorer=scorer)
    raise InvalidArgumentError(f"--model-kind must be auto, dual or itm, got {kind!r}")


def cached_tensor(cache_dir: Path | None, key_parts: dict, compute: Callable[[], Tensor]) -> Tensor:
    """Load the tensor stored under the hash of ``key_parts`` or compute and store it atomically."""
    if cache_dir is None:
        return compute()
    digest = hashlib.sha256(json.dumps(key_parts, sort_keys=True, default=str).encode()).hexdigest()[:24]
    path = Path(cache_dir) / f"activations-{digest}.pt"
    if path.is_file():
        logger.info("activations from cache %s", path)
        return torch.load(path, weights_only=True)
    value = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save(value, tmp)
    os.replace(tmp, path)
    return value


def activation_key(
    model: VLModel, vocabulary: ConceptVocabulary, images: Sequence[Any], *, apply_group_softmax: bool
) -> dict:
    image_digest = hashlib.sha256("\n".join(map(str, images)).encode()).hexdigest()
    prompt_digest = hashlib.sha256(json.dumps(vocabulary.prompts).encode()).hexdigest()
    return {
        "model": model.model_id,
        "revision": model.revision,
        "kind": model.kind,
        "images": image_digest,
        "prompts": prompt_digest,
        "group_softmax": apply_group_softmax,
    }


def text_targets(embedder: Any, templates: TemplateChoice) -> Callable[[Sequence[Pair]], Tensor]:
    """Pair -> ensembled text embedding of "this is {attr} {obj}" (the contrastive targets)."""

    def targets(pairs: Sequence[Pair]) -> Tensor:
        return concept_text_embeddings(embedder, pair_prompts(pairs, templates))

    return targets


def session_vl_model(session: Any) -> VLModel:
    """CompMap's view of a run's model (one per run): the session's dual encoder (``embed``), or
    its ``match`` adapter scoring every (image, prompt) pair (an ITM head; a generative VLM's
    VQAScore, as log-odds)."""
    from conceptforge.loaders.harness.model_ref import ITM

    def build() -> VLModel:
        model = session.model
        if session.provides("embed"):
            embedder = session.embedder()
            return VLModel(model.id, "dual", display_name(model.id), embedder.revision, embedder=embedder)
        matcher = session.matcher()  # one line when the model cannot match either
        scorer = matcher.scorer if model.kind == ITM else matcher
        return VLModel(model.id, model.kind, display_name(model.id), matcher.revision, scorer=scorer)

    return session.shared("compmap-vl-model", build)
