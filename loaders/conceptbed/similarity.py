"""ConceptBed's prior metrics beside CCD: CLIPScore (Table 2) and DINO pairwise similarity (Table 3).

* **CLIPScore** (Hessel et al. 2021, the paper's "CLIP" column): ``w · max(cos(image, text), 0)``
  with ``w = 2.5``, for each generated composition image and its caption (the prompt when the row
  has no caption) prefixed with ``"A photo depicts "`` as the authors' released ``clipscore.py``
  does (the prefix moves the score: 0.238 vs 0.344 on the same images), from a dual encoder's
  cached embeddings (``embed``); the metric is the mean over images. ``prefix=""`` is the
  unprefixed variant (docs/metrics.md).
* **DINO** (DreamBooth's metric, the paper's "DINO" column): for each generated concept image, the
  mean cosine similarity of its DINO ViT CLS embedding with the CLS embeddings of the concept's
  real reference images; the metric is the mean over generated images (= the mean over all
  (generated, real) pairs of a concept, pooled over concepts).

Both are per-sample rows of the ``conceptbed-ccd`` samples file (``oracle_task`` ``clipscore`` /
``dino``, ``value`` the image's score), so ``--from-predictions`` recomputes them.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch

from conceptforge.external_errors import weights_error

logger = logging.getLogger(__name__)

CLIPSCORE_W = 2.5
#: Hessel et al.'s ``clipscore.py`` encodes ``prefix + caption`` with this prefix (a trailing space added if missing).
CLIPSCORE_PREFIX = "A photo depicts "
SIMILARITY_TASKS = ("clipscore", "dino")


def clipscore_text(caption: str, prefix: str = CLIPSCORE_PREFIX) -> str:
    """The text CLIPScore encodes for ``caption``: the reference's ``prefix + caption`` (its prefix
    always ends with a space); ``prefix=""`` leaves the caption alone."""
    if prefix and not prefix.endswith(" "):
        prefix += " "
    return prefix + caption


def clipscore(
    embedder: Any,
    images: Sequence[Any],
    texts: Sequence[str],
    *,
    batch_size: int = 32,
    prefix: str = CLIPSCORE_PREFIX,
) -> list[float]:
    """``2.5 · max(cos, 0)`` of each (image, ``prefix + text``) pair (``embedder``:
    ``embed_images``/``embed_texts``)."""
    if not images:
        return []
    image = embedder.embed_images(list(images), batch_size=batch_size)
    text = embedder.embed_texts([clipscore_text(t, prefix) for t in texts])
    cos = (image * text).sum(dim=1).double()
    return [float(CLIPSCORE_W * max(float(c), 0.0)) for c in cos]


class DinoEmbedder:
    """L2-normalised CLS embeddings of the last layer of a DINO ViT (``facebook/dino-vits16``, …)."""

    def __init__(self, model: Any, processor: Any, *, device: str) -> None:
        self.model = model.eval()
        self.processor = processor
        self.device = torch.device(device)

    @classmethod
    def from_pretrained(cls, model_id: str, *, device: str | None = None) -> DinoEmbedder:
        from transformers import AutoImageProcessor, AutoModel

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            try:
                processor = AutoImageProcessor.from_pretrained(model_id, backend="pil")
            except TypeError:
                processor = AutoImageProcessor.from_pretrained(model_id)
            model = AutoModel.from_pretrained(model_id).to(device)
        except (OSError, ValueError) as error:
            raise weights_error("DINO model", model_id, error) from None
        return cls(model, processor, device=device)

    @torch.inference_mode()
    def embed(self, images: Sequence[Any], *, batch_size: int = 32) -> torch.Tensor:
        from conceptforge.loaders.harness.embeddings import load_pil

        out = []
        for start in range(0, len(images), batch_size):
            chunk = [load_pil(image) for image in images[start : start + batch_size]]
            pixels = self.processor(images=chunk, return_tensors="pt")["pixel_values"].to(self.device)
            cls_token = self.model(pixel_values=pixels).last_hidden_state[:, 0].float()
            out.append(torch.nn.functional.normalize(cls_token, dim=-1).cpu())
        return torch.cat(out) if out else torch.zeros((0, 0))


def dino_similarity(generated: torch.Tensor, real: torch.Tensor) -> list[float]:
    """Each generated image's mean cosine with the real images (rows already L2-normalised)."""
    return [float(x) for x in (generated.double() @ real.double().T).mean(dim=1)]


def similarity_row(
    kind: str, *, source: str, concept: str, record_id: str, value: float, text: str = "", categories=()
) -> dict[str, Any]:
    """A ``conceptbed-ccd`` sample row for one image's CLIPScore or DINO similarity."""
    return {
        "task": "conceptbed-ccd",
        "item_id": f"{kind}/{source}/{record_id}",
        "candidates": [text or concept],
        "scores": [value],
        "prediction": "",
        "label": concept,
        "correct": None,
        "value": value,
        "concept": concept,
        "concept_category": ";".join(categories) or kind,
        "source": source,
        "oracle_task": kind,
        "categories": list(categories),
        "question": "",
        "record_id": record_id,
        "max_prob": None,
        "oracle_correct": None,
    }


def similarity_metrics(rows: Sequence[dict[str, Any]]) -> dict[str, tuple[float, int]]:
    """``{name: (mean, n)}``: ``[source.]composition.clipscore`` and ``[source.]<kind>.dino``
    (``<kind>`` the concept kind: style, object, cub); the source prefix only when several learners."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in rows:
        if row["oracle_task"] == "clipscore":
            groups[(row["source"], "composition.clipscore")].append(row["value"])
        elif row["oracle_task"] == "dino":
            groups[(row["source"], f"{row['concept_category']}.dino")].append(row["value"])
    several = len({source for source, _ in groups}) > 1
    return {
        (f"{source}.{name}" if several else name): (sum(values) / len(values), len(values))
        for (source, name), values in sorted(groups.items())
    }


def score_similarities(
    generated: Any,
    spec: Any,
    *,
    clip: Any | None,
    dino: DinoEmbedder | None,
    batch_size: int = 32,
    clipscore_prefix: str = CLIPSCORE_PREFIX,
) -> list[dict[str, Any]]:
    """The CLIPScore rows of the ``composition`` split and the DINO rows of the ``concept`` split."""
    rows: list[dict[str, Any]] = []
    if clip is not None and "composition" in generated:
        data = generated["composition"]
        texts = [caption or prompt for caption, prompt in zip(data["caption"], data["prompt"])]
        values = clipscore(clip, list(data["image"]), texts, batch_size=batch_size, prefix=clipscore_prefix)
        for i, value in enumerate(values):
            rows.append(
                similarity_row(
                    "clipscore",
                    source=str(data["learner"][i]),
                    concept=str(data["concept"][i]),
                    record_id=str(data["item_id"][i]),
                    value=value,
                    text=clipscore_text(texts[i], clipscore_prefix),  # the text that was encoded
                    categories=tuple(data["categories"][i] or ()),
                )
            )
    if dino is not None and "concept" in generated:
        data = generated["concept"]
        references = {c.name: list(c.reference_images) for c in spec.concepts}
        real_vectors: dict[str, torch.Tensor] = {}
        for concept in sorted(set(data["concept"])):
            if references.get(concept):
                real_vectors[concept] = dino.embed([str(p) for p in references[concept]], batch_size=batch_size)
        positions = [i for i, concept in enumerate(data["concept"]) if concept in real_vectors]
        vectors = dino.embed([data[i]["image"] for i in positions], batch_size=batch_size) if positions else None
        for j, i in enumerate(positions):
            concept = str(data["concept"][i])
            (value,) = dino_similarity(vectors[j : j + 1], real_vectors[concept])
            rows.append(
                similarity_row(
                    "dino",
                    source=str(data["learner"][i]),
                    concept=concept,
                    record_id=str(data["item_id"][i]),
                    value=value,
                    categories=(str(data["concept_kind"][i]),),
                )
            )
    return rows
