"""Image–text matching heads (ViLT retrieval, BLIP ITM): ``match``.

The score is the head's own: ViLT's retrieval logit, BLIP's log-odds of "match" from its ITM
head (``BlipForImageTextRetrieval``; its ITC projections are not used). Every (image, text) pair
needs a forward pass; BLIP's image tower runs once per image (the scorer lives with CompMap's
activations, :class:`~conceptforge.loaders.compmap.activations.ItmScorer`, and is shared here).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conceptforge.loaders.harness.adapters.base import ITM, load_revision

PROTOCOLS = {
    "vilt": "ITM head: ViLT image-text retrieval logit",
    "blip": "ITM head: BLIP log-odds of 'match' (BlipForImageTextRetrieval)",
}


class ItmAdapter:
    family = ITM

    def __init__(self, scorer: Any, *, revision: str) -> None:
        self.scorer = scorer
        self.model_id = scorer.model_id
        self.revision = revision
        self.protocol = PROTOCOLS.get(scorer.kind, f"ITM head of a {scorer.kind} model")

    def match(
        self, images: Sequence[Any], texts: Sequence[Sequence[str]], *, batch_size: int = 32
    ) -> list[list[float]]:
        return [
            [float(x) for x in self.scorer.score_image(image, list(row), batch_size=batch_size).double()]
            for image, row in zip(images, texts)
        ]

    def close(self) -> None:
        return None


def load(
    model: Any, *, device: str | None, dtype: str | None, cache_dir: str | None, placement: Any = None
) -> ItmAdapter:
    from conceptforge.loaders.compmap.activations import ItmScorer
    from conceptforge.loaders.harness.embeddings import embedding_revision

    revision = load_revision(model)
    scorer = ItmScorer.from_pretrained(model.id, revision=revision, device=device, placement=placement)
    return ItmAdapter(scorer, revision=embedding_revision(model.id, revision))
