"""Breakdowns of sub-vlm and sub-cbm: S+ and S− accuracy; per attribute group and per bird, S+ and S− apart."""

from __future__ import annotations

from conceptforge.loaders.analysis.breakdowns import (
    Dimension,
    Filter,
    TaskSpec,
    has_value,
)
from conceptforge.loaders.harness.sample_columns import Samples


def _select_sub(samples: Samples, main: str | None) -> tuple[tuple[Filter, ...], tuple[Filter, ...]]:
    side = "S-" if main == "s_minus" else "S+"
    return (), ((("side", side),) if has_value(samples, "side", side) else ())


def _sub_dimensions() -> tuple[Dimension, ...]:
    dims = [Dimension("side", "S+ and S−", ("side",))]
    for side in ("S+", "S-"):
        slug = "splus" if side == "S+" else "sminus"
        dims += [
            Dimension(f"{slug}-attribute-group", f"{side} by attribute group", ("attribute_group",), (("side", side),)),
            Dimension(f"{slug}-bird", f"{side} by bird", ("bird",), (("side", side),)),
        ]
    return tuple(dims)


SUB = TaskSpec(
    "sub",
    "S+ accuracy (headline); S− accuracy in the S− groups",
    ("attribute_group", "bird", "attribute", "side"),
    _sub_dimensions(),
    _select_sub,
)
