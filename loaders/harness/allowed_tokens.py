"""The allowed-answer math of every evaluation path (local models, served endpoints), and the
per-run count of samples whose allowed answers carried too little of the model's probability.

The math itself (:func:`allowed_distribution`: logits -> answers' probabilities + mass, in log
space; :func:`normalise_allowed`: per-answer log-probabilities -> the same) lives with the local
VQA scorer in ``filters.vqa.allowed`` (the filter layer may not import this one); it is re-exported
here for the harness and the served-model clients.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from conceptforge.filters.vqa.allowed import AllowedDistribution, allowed_distribution, normalise_allowed
from conceptforge.loaders.harness.sample_columns import ALLOWED_MASS_COLUMN, ALLOWED_MASS_FLOOR
from conceptforge.loaders.harness.units import COUNT, MetricSpec

__all__ = [
    "LOW_ALLOWED_MASS",
    "LOW_ALLOWED_MASS_METRIC",
    "NO_ALLOWED_ANSWER",
    "NO_ALLOWED_MASS",
    "NO_ALLOWED_MASS_METRIC",
    "AllowedDistribution",
    "allowed_distribution",
    "count_below_floor",
    "low_allowed_mass_metric",
    "no_allowed_mass",
    "normalise_allowed",
]

#: The run metric: how many samples' allowed answers carried less than ``ALLOWED_MASS_FLOOR``.
LOW_ALLOWED_MASS_METRIC = "low_allowed_mass"
#: ... and its unit, for every task that reports it: a count of samples (of its n), never a share
LOW_ALLOWED_MASS = MetricSpec(LOW_ALLOWED_MASS_METRIC, COUNT)
#: The run metric: how many samples' allowed answers carried no probability at all (a served
#: model's top-20 held none of them): scored wrong, never credited with the first option.
NO_ALLOWED_MASS_METRIC = "no_allowed_mass"
#: ... a count of samples too
NO_ALLOWED_MASS = MetricSpec(NO_ALLOWED_MASS_METRIC, COUNT)
#: The ``prediction`` of such a sample (it chose nothing).
NO_ALLOWED_ANSWER = "(no allowed answer)"


def no_allowed_mass(mass: float | None) -> bool:
    """Whether a sample's allowed answers carried no probability at all: its scores are then the
    renormalisation's uniform split, no information, and the sample is unanswerable (EP05: the
    first option used to be predicted, S− 75% from nothing)."""
    return mass is not None and float(mass) <= 0.0


logger = logging.getLogger(__name__)


def count_below_floor(masses: Sequence[float | None], *, what: str, floor: float = ALLOWED_MASS_FLOOR) -> int:
    """How many samples' allowed answers carried less than ``floor`` of the mass (those with none
    at all among them); logs one warning line for those above 0 (their answers are mostly the
    renormalisation's, not the model's) and one for those at 0, saying so (they are scored wrong)."""
    values = [float(m) for m in masses if m is not None]
    low = sum(1 for m in values if m < floor)
    none = sum(1 for m in values if no_allowed_mass(m))
    if low > none:
        logger.warning(
            "%s: %d of %d samples gave the allowed answers less than %g of the next-token probability"
            "%s (the model mostly wanted to say something else; column allowed_mass in the samples file)",
            what,
            low - none,
            len(values),
            floor,
            " (but more than 0)" if none else "",
        )
    if none:
        logger.warning(
            "%s: %d of %d samples gave the allowed answers no probability at all (mass 0: none of them among "
            "the log-probabilities returned); scored wrong, counted in %s",
            what,
            none,
            len(values),
            NO_ALLOWED_MASS_METRIC,
        )
    return low


def low_allowed_mass_metric(rows: Sequence[dict], *, what: str) -> dict:
    """``{"low_allowed_mass": Metric(count, None, n)}`` over the rows that carry an
    ``allowed_mass`` (none: ``{}``, a protocol without answer tokens); warns as
    :func:`count_below_floor`. Computed from the rows, so a rescored file reports the same."""
    from conceptforge.loaders.harness.task import Metric

    masses = [row.get(ALLOWED_MASS_COLUMN) for row in rows if row.get(ALLOWED_MASS_COLUMN) is not None]
    if not masses:
        return {}
    metrics = {LOW_ALLOWED_MASS_METRIC: Metric(float(count_below_floor(masses, what=what)), None, len(masses))}
    none = sum(1 for m in masses if no_allowed_mass(m))
    if none:  # present only when some sample had none (then its row is scored wrong)
        metrics[NO_ALLOWED_MASS_METRIC] = Metric(float(none), None, len(masses))
    return metrics
