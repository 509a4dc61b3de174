"""Concept-bottleneck models given as a Python factory ``package.module:function``: ``concepts``.

The factory returns a callable on PIL images, a torch module (with its ``transform`` attribute),
or a ``(module, transform)`` pair (``loaders/sub/cbm.py``); the adapter turns any of them into
``concepts(images) -> [B, C]`` attribute logits (or probabilities, as the CBM outputs them).
"""

from __future__ import annotations

from typing import Any

from conceptforge.loaders.harness.adapters.base import CBM


class CBMAdapter:
    family = CBM

    def __init__(self, spec: str, predict: Any) -> None:
        self.model_id = spec
        self.revision = ""  # a factory has no revision: nothing of it is cached
        self._predict = predict

    def concepts(self, images: list[Any]) -> Any:
        return self._predict(images)

    def close(self) -> None:
        return None


def load(model: Any, *, device: str | None, dtype: str | None, cache_dir: str | None) -> CBMAdapter:
    from conceptforge.loaders.sub.cbm import as_concept_predictor, load_cbm_factory

    made = load_cbm_factory(model.id)
    module, transform = made if isinstance(made, tuple) else (made, getattr(made, "transform", None))
    return CBMAdapter(model.id, as_concept_predictor(module, transform=transform, device=device or "cpu"))
