"""Breakdowns of conceptbed-ccd: CCD of Eq. 3, the per-concept mean of ``value``
(``mean(real_c) − p(image)``) averaged over concepts, on the generated images of the headline's task
(``composition.ccd``); per concept category (an image in several categories counts in each) and per
concept. Images are resampled within their concept (the concept list is fixed by the benchmark).
"""

from __future__ import annotations

from conceptforge.loaders.analysis.breakdowns import (
    REAL_IMAGES,
    Dimension,
    Filter,
    TaskSpec,
    first_value,
    has_value,
)
from conceptforge.loaders.harness.sample_columns import Not, Samples


def _select_ccd(samples: Samples, main: str | None) -> tuple[tuple[Filter, ...], tuple[Filter, ...]]:
    """Generated images only, of the headline's source (``learner.composition.ccd``) and oracle
    task (``composition``; without a main metric composition where there is one)."""
    parts = (main or "").split(".")
    scope: list[Filter] = [("source", Not(REAL_IMAGES))]
    if len(parts) == 3 and has_value(samples, "source", parts[0]):
        scope.append(("source", parts[0]))
    task = (
        parts[-2]
        if len(parts) >= 2 and has_value(samples, "oracle_task", parts[-2])
        else "composition"
        if has_value(samples, "oracle_task", "composition")
        else first_value(samples, "oracle_task")
    )
    if task is not None:
        scope.append(("oracle_task", task))
    return tuple(scope), ()


CONCEPTBED = TaskSpec(
    "conceptbed-ccd",
    "CCD (Eq. 3): per-concept mean of value, averaged over concepts",
    ("concept", "concept_category"),
    (
        Dimension("category", "by concept category", ("concept_category",), skip_null=False, separator=";"),
        Dimension("concept", "by concept", ("concept",)),
    ),
    _select_ccd,
    stratum="concept",
    axis="CCD (real − generated; 0 = as confident as on real images)",
)
