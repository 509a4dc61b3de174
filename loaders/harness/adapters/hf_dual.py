"""Dual encoders from transformers (CLIP, SigLIP, …): ``embed`` and ``match``.

``embed`` is the shared :class:`~conceptforge.loaders.harness.embeddings.EmbeddingModel` (its on-disk
cache is keyed by model revision and input content). ``match`` is the model's own image–text
logit, ``logit_scale · cos + logit_bias``, from those cached vectors: a dual encoder never needs
a forward pass per pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conceptforge.loaders.harness.adapters.base import HF_DUAL, load_revision

DUAL_MATCH_PROTOCOL = "dual encoder: logit_scale·cos(image, text) + logit_bias"


class DualEncoderAdapter:
    """``embedder`` (the ``embed`` capability) and :meth:`match` over it."""

    protocol = DUAL_MATCH_PROTOCOL

    def __init__(self, embedder: Any, *, family: str = HF_DUAL) -> None:
        self.embedder = embedder
        self.family = family
        self.model_id = embedder.model_id
        self.revision = embedder.revision

    def match(
        self, images: Sequence[Any], texts: Sequence[Sequence[str]], *, batch_size: int = 32
    ) -> list[list[float]]:
        """Each image's logit with each of its texts (texts embedded once each, cached)."""
        import torch

        unique = list(dict.fromkeys(t for row in texts for t in row))
        position = {t: i for i, t in enumerate(unique)}
        text = self.embedder.embed_texts(unique) if unique else torch.zeros((0, 0))
        image = self.embedder.embed_images(list(images), batch_size=batch_size)
        out = []
        for vector, row in zip(image, texts):
            chosen = text[torch.tensor([position[t] for t in row], dtype=torch.long)]
            logits = self.embedder.logit_scale * (chosen @ vector) + self.embedder.logit_bias
            out.append([float(x) for x in logits.double()])
        return out

    def close(self) -> None:
        self.embedder.close()


def load(
    model: Any, *, device: str | None, dtype: str | None, cache_dir: str | None, placement: Any = None
) -> DualEncoderAdapter:
    from conceptforge.loaders.harness.embeddings import EmbeddingModel

    embedder = EmbeddingModel.from_pretrained(
        model.id, revision=load_revision(model), cache_dir=cache_dir, device=device, dtype=dtype, placement=placement
    )
    return DualEncoderAdapter(embedder)
