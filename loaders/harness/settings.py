"""What an evaluation's models share: where they run and which local data their tasks read.

One set of fields for a single ``conceptforge evaluate`` run
(:class:`~conceptforge.loaders.harness.runner.RunSettings`) and for a sweep over many models
(:class:`~conceptforge.loaders.sweep.SweepConfig`), so a new input is added once and reaches both.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(kw_only=True)
class EvaluationInputs:
    device: str | None = None
    dtype: str | None = None
    batch_size: int = 32
    cache_dir: str | None = None  # embeddings and activations (default: the user's cache)
    cub_dir: str | None = None
    concepts: str | None = None
    mit_states_dir: str | None = None
    sample_cache: bool = True  # resume from the per-sample cache (loaders/harness/sample_cache.py)

    def evaluation_inputs(self) -> dict[str, Any]:
        """These fields alone, by name (to build another settings object from this one)."""
        return {f.name: getattr(self, f.name) for f in fields(EvaluationInputs)}
