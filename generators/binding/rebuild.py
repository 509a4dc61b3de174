"""How verify rebuilds a binding release's stage: the generator's own ``build_stage(config)``; bytes
are compared exactly on the CPU, with the PSNR rule where Cycles rendered on a GPU."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conceptforge.generators.rebuild import EXACT, Rebuilt, tolerance

GENERATOR = "binding"


def rebuild(entry: Mapping[str, Any], weights: Mapping[str, str], device: str | None, out: Path) -> Rebuilt:
    from conceptforge.generators.binding import stage as binding
    from conceptforge.generators.binding.dataset import BindingConfig

    config = BindingConfig(**entry["rebuild"]["config"])
    recorded = entry.get("device", "cpu")
    device = device or recorded
    stage = binding.build_stage(config, device=device)  # one worker, in this process
    rule = (
        EXACT
        if device == recorded == "cpu"
        else tolerance(f"Cycles renders on {device}, recorded on {recorded}: the bytes depend on the GPU")
    )
    return Rebuilt(stage, binding.split_rows, rule)
