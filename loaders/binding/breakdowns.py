"""Breakdowns of the binding-* tasks (binding-clip, binding-csp, binding-cdsm): accuracy per split, and on the
headline split (gen) per dataset, relation and swap kind. binding-cdsm: the headline model's rows
(``csp.gen_accuracy`` -> ``binding_model`` csp); an image scored under several training seeds is one
unit (its mean over seeds), so the statistic is the mean over seeds of the accuracy.
"""

from __future__ import annotations

from conceptforge.loaders.analysis.breakdowns import (
    Dimension,
    Filter,
    TaskSpec,
    first_value,
    has_value,
)
from conceptforge.loaders.harness.sample_columns import Samples


def _select_binding(samples: Samples, main: str | None) -> tuple[tuple[Filter, ...], tuple[Filter, ...]]:
    parts = (main or "").split(".")
    model = (
        parts[0]
        if len(parts) == 2 and has_value(samples, "binding_model", parts[0])
        else first_value(samples, "binding_model")
    )
    split = parts[-1].removesuffix("_accuracy") if parts[-1].endswith("_accuracy") else "gen"
    return (
        (("binding_model", model),) if model is not None else (),
        (("split", split),) if has_value(samples, "split", split) else (),
    )


BINDING = TaskSpec(
    "binding",
    "accuracy (tie-aware expected accuracy over the candidates)",
    ("dataset", "split", "relation", "swap_kind"),
    (
        Dimension("split", "by split", ("split",)),
        Dimension("dataset", "by dataset (gen split)", ("dataset",), headline=True),
        Dimension("relation", "by relation (gen split)", ("relation",), headline=True),
        Dimension("swap-kind", "by swap kind (gen split)", ("swap_kind",), headline=True),
    ),
    _select_binding,
)
