"""Concept prompting: primitive-concept activations of images from a vision-language model.

Two paths (Appendix A.2 of CompMap paper):

- dual encoders (CLIP, SigLIP) through :class:`loaders.embeddings.EmbeddingModel`: image and
  text embeddings are computed once and cached on disk, and an activation is
  ``logit_scale · cos(image, concept)``; the concept embedding is the renormalised mean of its
  prompts' embeddings (ensembling);
- image–text-matching models (ViLT, BLIP ITM): every (image, prompt) pair needs a forward pass,
  so this path is much slower; the activation is the model's match logit (BLIP: log-odds of
  "match"), averaged over a concept's prompts.

Optionally activations are softmax-normalised within groups of mutually exclusive concepts (the
28 CUB attribute groups; attributes and objects on MIT-States), as the paper does for CUB.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from conceptforge.argtypes import check_device
from conceptforge.errors import ConceptforgeError, InvalidArgumentError, WeightsUnavailableError
from conceptforge.external_errors import weights_error
from conceptforge.progress import tqdm

logger = logging.getLogger(__name__)

DEFAULT_ITM_MODELS = {"vilt": "dandelin/vilt-b32-finetuned-coco", "blip": "Salesforce/blip-itm-base-coco"}


@dataclass(frozen=True)
class ConceptVocabulary:
    """Concepts in output order; ``prompts[i]`` are concept i's prompts (ensembled)."""

    names: list[str]
    prompts: list[list[str]]
    groups: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.names) != len(self.prompts) or any(not p for p in self.prompts):
            raise ValueError("every concept needs at least one prompt")

    def __len__(self) -> int:
        return len(self.names)


class DualEncoder(Protocol):
    logit_scale: float

    def embed_texts(self, texts: Sequence[str], *, batch_size: int = 64) -> Tensor: ...

    def embed_images(self, images: Sequence[Any], *, batch_size: int = 32) -> Tensor: ...


def group_softmax(activations: Tensor, groups: dict[str, np.ndarray]) -> Tensor:
    """Softmax within each group of columns; columns outside every group are left unchanged."""
    out = activations.clone()
    for idx in groups.values():
        cols = torch.as_tensor(np.asarray(idx), dtype=torch.long)
        out[:, cols] = torch.softmax(activations[:, cols], dim=1)
    return out


def concept_text_embeddings(model: DualEncoder, prompts: list[list[str]], *, batch_size: int = 64) -> Tensor:
    """[C, D] ensembled, L2-normalised embeddings: mean over each concept's prompt embeddings."""
    flat = [p for group in prompts for p in group]
    emb = model.embed_texts(flat, batch_size=batch_size)
    owner = torch.repeat_interleave(torch.arange(len(prompts)), torch.tensor([len(p) for p in prompts]))
    summed = torch.zeros(len(prompts), emb.shape[1]).index_add_(0, owner, emb)
    return torch.nn.functional.normalize(summed, dim=-1)


def dual_encoder_activations(
    model: DualEncoder,
    images: Sequence[Any],
    vocabulary: ConceptVocabulary,
    *,
    apply_group_softmax: bool = True,
    scale: float | None = None,
    batch_size: int = 32,
) -> Tensor:
    """[N, C] activations ``scale · cos`` (``scale`` defaults to the model's ``logit_scale``)."""
    image_emb = model.embed_images(list(images), batch_size=batch_size)
    text_emb = concept_text_embeddings(model, vocabulary.prompts)
    logits = (scale if scale is not None else float(model.logit_scale)) * image_emb @ text_emb.T
    return group_softmax(logits, vocabulary.groups) if apply_group_softmax and vocabulary.groups else logits


class ItmScorer:
    """Image–text matching scores from ViLT (``ViltForImageAndTextRetrieval``) or BLIP
    (``BlipForImageTextRetrieval``, ITM head). BLIP's image tower runs once per image."""

    def __init__(
        self, model: Any, processor: Any, *, kind: str, model_id: str, device: str | torch.device = "cpu"
    ) -> None:
        self.model = model.eval()
        self.processor = processor
        self.kind = kind
        self.model_id = model_id
        self.device = torch.device(device)

    @classmethod
    def from_pretrained(
        cls, model_id: str, *, revision: str | None = None, device: str | None = None, placement: Any = None
    ) -> ItmScorer:
        """``placement``: ``--device-map`` (conceptforge/placement.py); inputs go to its first device."""
        from transformers import AutoConfig

        device = check_device(device) or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            config = AutoConfig.from_pretrained(model_id, revision=revision)
            kind = config.model_type
            if kind == "vilt":
                from transformers import ViltForImageAndTextRetrieval as model_cls
            elif kind == "blip":
                from transformers import BlipForImageTextRetrieval as model_cls
            else:
                raise WeightsUnavailableError(f"{model_id} is a {kind!r} model; the ITM path supports vilt and blip")
            model = model_cls.from_pretrained(
                model_id,
                revision=revision,
                **(placement.from_pretrained_kwargs() if placement is not None else {}),
            )
            from conceptforge.loaders.harness.embeddings import pil_processor

            processor = pil_processor(model_id, revision=revision)
        except ConceptforgeError:
            raise
        except (OSError, ValueError) as error:
            raise weights_error("ITM model", model_id, error) from None
        if placement is None:
            return cls(model.to(device), processor, kind=kind, model_id=model_id, device=device)
        from conceptforge.placement import input_device

        return cls(model, processor, kind=kind, model_id=model_id, device=input_device(model))

    @torch.no_grad()
    def score_image(self, image: Any, texts: list[str], *, batch_size: int = 64) -> Tensor:
        """[T] match scores of one image against ``texts``."""
        from conceptforge.loaders.harness.embeddings import load_pil

        pil = load_pil(image)
        out = []
        if self.kind == "blip":
            pixels = self.processor.image_processor(images=[pil], return_tensors="pt")["pixel_values"].to(self.device)
            image_embeds = self.model.vision_model(pixel_values=pixels).last_hidden_state
            for start in range(0, len(texts), batch_size):
                chunk = texts[start : start + batch_size]
                tok = self.processor.tokenizer(chunk, padding=True, truncation=True, return_tensors="pt").to(
                    self.device
                )
                embeds = image_embeds.expand(len(chunk), -1, -1)
                hidden = self.model.text_encoder(
                    input_ids=tok["input_ids"],
                    attention_mask=tok["attention_mask"],
                    encoder_hidden_states=embeds,
                    encoder_attention_mask=torch.ones(embeds.shape[:-1], dtype=torch.long, device=self.device),
                ).last_hidden_state
                logits = self.model.itm_head(hidden[:, 0, :]).float()
                out.append(logits[:, 1] - logits[:, 0])  # log-odds of "match"
        else:
            for start in range(0, len(texts), batch_size):
                chunk = texts[start : start + batch_size]
                inputs = self.processor(
                    images=[pil] * len(chunk), text=chunk, padding=True, truncation=True, return_tensors="pt"
                )
                inputs = {k: v.to(self.device) for k, v in inputs.items()}
                out.append(self.model(**inputs).logits[:, 0].float())
        return torch.cat(out).cpu()


def itm_activations(
    scorer: ItmScorer,
    images: Sequence[Any],
    vocabulary: ConceptVocabulary,
    *,
    apply_group_softmax: bool = True,
    batch_size: int = 64,
) -> Tensor:
    """[N, C] ITM activations, each concept's score averaged over its prompts."""
    flat = [p for group in vocabulary.prompts for p in group]
    owner = torch.repeat_interleave(torch.arange(len(vocabulary)), torch.tensor([len(p) for p in vocabulary.prompts]))
    counts = torch.bincount(owner, minlength=len(vocabulary)).float()
    rows = []
    for image in tqdm(list(images), desc=f"ITM {scorer.kind}", unit="image", leave=False):
        scores = scorer.score_image(image, flat, batch_size=batch_size)
        rows.append(torch.zeros(len(vocabulary)).index_add_(0, owner, scores) / counts)
    if not rows:
        raise InvalidArgumentError("no images to score")
    acts = torch.stack(rows)
    return group_softmax(acts, vocabulary.groups) if apply_group_softmax and vocabulary.groups else acts
