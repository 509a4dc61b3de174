"""GPU time per unit of work, from one table of figures per GPU model (``gpu_costs.json``).

Why a table and not a flag only: a ``--dry-run`` should say what a plan costs before anyone has
timed it on their machine. Each figure says what it is: ``measured`` (seconds per unit, timed by
``python -m benchmarks gpu`` on that GPU model) or ``flop-floor`` (the workload's FLOPs, counted
over the real architecture, at a measured matmul rate: 100% utilisation, a lower bound). A
measured figure wins over a floor; ``--seconds-per-image`` (or ``--seconds-per-step``) wins over
both. Figures are scaled to the run's settings: linearly in the number of denoising steps, and
by the FLOPs of one model pass at the run's resolution against the reference resolution
(``c0 + c1*n + c2*n^2`` in the pass's tokens ``n``, the exact shape of a pass's FLOP count).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from conceptforge.errors import InvalidArgumentError

DEFAULT_GPU = "H100"
#: What ``filter sub`` costs per image with its default model: InternVL-2.5-8B over one 448 px
#: tile (its AutoProcessor's resizing; a processor that tiles a 1024 px image 3x3 + thumbnail
#: costs ~9x: ``filter/vqa-image-10-tiles``).
VQA_WORKLOAD = "filter/vqa-image-1-tile"


@dataclass(frozen=True)
class Estimate:
    """Seconds per unit of ``workload`` on ``gpu`` at the asked settings, and where that comes from."""

    workload: str
    unit: str
    gpu: str
    seconds: float
    kind: str  # "measured", "flop-floor" or "given" (a flag)
    source: str

    def hours(self, units: float) -> float:
        return units * self.seconds / 3600

    def describe(self) -> str:
        """Where the per-unit figure comes from, in one line (for a dry run)."""
        if self.kind == "given":
            return self.source
        if self.kind == "measured":
            return f"measured on {self.gpu}: {self.source}"
        return f"floor from FLOPs on {self.gpu}, not a measurement: {self.source}"


@cache
def load_table() -> dict[str, Any]:
    """The packaged table (``conceptforge/gpu_costs.json``)."""
    text = resources.files("conceptforge").joinpath("gpu_costs.json").read_text(encoding="utf-8")
    return json.loads(text)


def gpu_models(table: dict[str, Any] | None = None) -> list[str]:
    table = table or load_table()
    return sorted({figure["gpu"] for figure in table["figures"]})


def add_gpu_model_argument(group: Any) -> None:
    """``--gpu-model``: which GPU's figures a ``--dry-run`` uses (one of the table's models)."""
    group.add_argument(
        "--gpu-model",
        choices=gpu_models(),
        default=DEFAULT_GPU,
        help=f"GPU model whose cost figures --dry-run uses (default {DEFAULT_GPU}; table: conceptforge/gpu_costs.json)",
    )


def add_dry_run_arguments(
    group: Any,
    dry_run_help: str,
    *,
    per_image_help: str,
    per_step_help: str | None = None,
    gpu_model: bool = True,
) -> None:
    """``--dry-run`` and what replaces this table in its estimate: ``--seconds-per-step`` (where
    the command trains), ``--seconds-per-image``, and ``--gpu-model`` (whose figures; not for CPU
    renders). One builder, so every stage's estimate takes the same flags with the same checks;
    the helps say what each command does."""
    from conceptforge import argtypes as at

    group.add_argument("--dry-run", action="store_true", help=dry_run_help)
    for flag, help in (("--seconds-per-step", per_step_help), ("--seconds-per-image", per_image_help)):
        if help is not None:
            group.add_argument(flag, type=at.seconds_measured, default=None, help=help)
    if gpu_model:
        add_gpu_model_argument(group)


def pass_tokens(scaling: dict[str, Any], resolution: int) -> int:
    """The tokens ``n`` of one model pass at ``resolution`` (FLUX: 16 px per packed latent token
    plus the text tokens; SD: one token per 8x8 latent pixel)."""
    if scaling["tokens"] == "flux":
        return (resolution // 16) ** 2 + int(scaling["text_tokens"])
    if scaling["tokens"] == "sd-latent":
        return (resolution // 8) ** 2
    raise ValueError(f"unknown token rule {scaling['tokens']!r}")


def pass_flops(scaling: dict[str, Any], resolution: int) -> float:
    c0, c1, c2 = scaling["coefficients"]
    n = pass_tokens(scaling, resolution)
    return c0 + c1 * n + c2 * n * n


def scale_factor(workload: dict[str, Any], *, resolution: int | None = None, steps: int | None = None) -> float:
    """How much more work one unit is at (``resolution``, ``steps``) than at the reference."""
    reference = workload.get("reference", {})
    factor = 1.0
    if steps is not None and "steps" in reference:
        factor *= steps / reference["steps"]
    scaling = workload.get("scaling")
    if resolution is not None and scaling is not None and "resolution" in reference:
        factor *= pass_flops(scaling, resolution) / pass_flops(scaling, reference["resolution"])
    return factor


def _settings(workload: dict[str, Any], resolution: int | None, steps: int | None) -> str:
    reference = workload.get("reference", {})
    parts = []
    if "resolution" in reference:
        parts.append(f"{resolution or reference['resolution']} px")
    if "steps" in reference:
        parts.append(f"{steps or reference['steps']} steps")
    if "tiles" in reference:
        parts.append(f"{reference['tiles']} tile{'s' if reference['tiles'] > 1 else ''}")
    return ", ".join(parts)


def estimate(
    workload: str,
    *,
    gpu: str | None = None,
    resolution: int | None = None,
    steps: int | None = None,
    table: dict[str, Any] | None = None,
) -> Estimate:
    """Seconds per unit of ``workload`` (a key of the table's ``workloads``) on ``gpu``."""
    table = table or load_table()
    gpu = gpu or DEFAULT_GPU
    work = table["workloads"].get(workload)
    if work is None:
        raise InvalidArgumentError(f"no cost figures for workload {workload!r}; known: {', '.join(table['workloads'])}")
    known = {g.lower(): g for g in gpu_models(table)}
    if gpu.lower() not in known:
        raise InvalidArgumentError(
            f"--gpu-model {gpu}: no cost figures for that GPU; choose from {', '.join(known.values())} "
            "or pass your own measured time (--seconds-per-image)"
        )
    gpu = known[gpu.lower()]
    figures = [f for f in table["figures"] if f["gpu"] == gpu and f["workload"] in (workload, "*")]
    factor = scale_factor(work, resolution=resolution, steps=steps)
    at = _settings(work, resolution, steps)
    measured = [f for f in figures if f["kind"] == "measured" and f["workload"] == workload]
    if measured:
        figure = measured[0]
        reference = _settings(work, None, None)
        scaled = "" if abs(factor - 1) < 1e-9 else f"; scaled x{factor:.3g} from {reference} to {at} by FLOPs"
        return Estimate(workload, work["unit"], gpu, figure["seconds"] * factor, "measured", figure["source"] + scaled)
    floors = [f for f in figures if f["kind"] == "flop-floor"]
    if not floors:
        raise InvalidArgumentError(f"no cost figure for {workload!r} on {gpu}; pass your own measured time")
    figure = sorted(floors, key=lambda f: f["workload"] == "*")[0]  # a workload's own floor before the catch-all
    flops = work["flops"] * factor
    seconds = flops / (figure["tflops"] * 1e12)
    source = f"{flops / 1e15:.3g} PFLOP per {work['unit']} at {at} {figure['source']}"
    return Estimate(workload, work["unit"], gpu, seconds, "flop-floor", source)


def given(seconds: float, unit: str, flag: str) -> Estimate:
    """A figure the user passed on the command line (it overrides the table)."""
    return Estimate("", unit, "", seconds, "given", f"{flag}, as given")


def format_hours(hours: float) -> str:
    """GPU-hours with as many digits as they need (1,234 / 12.3 / 0.0042)."""
    if hours >= 100:
        return f"{hours:,.0f}"
    if hours >= 0.1:
        return f"{hours:.1f}"
    return f"{hours:.2g}"


def plan_lines(parts: list[tuple[str, float, Estimate]], *, upper_bound: bool = False) -> list[str]:
    """Dry-run lines: total GPU-hours, then per part (``label``, ``units``, estimate) its hours
    and the source of its figure."""
    total = sum(e.hours(units) for _, units, e in parts)
    kinds = {e.kind for _, _, e in parts}
    gpu = next((e.gpu for _, _, e in parts if e.gpu), "")
    on = f" on one {gpu}" if gpu else ""
    note = " (for at most this many images)" if upper_bound else ""
    if kinds == {"flop-floor"}:
        head = f"estimated GPU-hours: at least {format_hours(total)}{note}{on} (a floor from FLOPs: no GPU measurement yet)"
    elif "flop-floor" in kinds:
        head = f"estimated GPU-hours: {format_hours(total)}{note}{on} (partly a floor from FLOPs)"
    else:
        head = f"estimated GPU-hours: {format_hours(total)}{note}{on}"
    lines = [head]
    for label, units, e in parts:
        lines.append(f"  {label}: {units:,.0f} x {e.seconds:.3g} s per {e.unit} = {format_hours(e.hours(units))} h")
        lines.append(f"    source: {e.describe()}")
    return lines
