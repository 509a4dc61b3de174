"""What a metric's number is — a share, a difference of shares, a count, a score — and how every
table prints it.

Why one home: the results file stores every metric as a number (``{"value": 8.0, "n": 8}``), and
the tables (``evaluate``'s stdout and ``.md``, the leaderboard's text, markdown and HTML, the
values pushed to the Hub) used to multiply every one by 100 under "values in %": a count of 8
samples read as ``800.00``. Each task now declares the unit of each of its metrics beside the
metric (:class:`MetricSpec` in its ``Task.metrics``; the counts shared by several tasks, such as
``low_allowed_mass``, once beside their name), the runner records it in the results file
(``"unit": "count"``), and every table reads it back (``registry.metric_unit``), formats a value
through :func:`format_metric` and labels
it with :attr:`Unit.label`, so a count is never scaled and a share is never printed as a count.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Unit:
    """How a metric's stored number reads: ``scale`` times the value, ``digits`` decimals, named
    ``label`` in table headers; ``signed``: a difference, printed with its sign."""

    name: str  # recorded in the results file's metrics ("unit": NAME)
    label: str  # a table's column or row label
    scale: float
    digits: int
    words: str  # what its numbers are, for a sentence ("value in WORDS")
    meaning: str  # the table notes' words for it
    signed: bool = False


#: a share of the samples (accuracy, S+, AUC of seen/unseen accuracy), stored as a fraction in [0, 1]
PERCENT = Unit("percent", "%", 100.0, 2, "percent", "% = percent (a share of the samples, stored as a fraction)")
#: a difference of two shares (CompMap's Δ), stored as a difference of fractions
POINTS = Unit(
    "points", "pp", 100.0, 2, "percentage points", "pp = percentage points (a difference of two shares)", signed=True
)
#: how many samples (of the metric's ``n``) something happened to: never scaled
COUNT = Unit("count", "count", 1.0, 0, "samples counted", "count = how many samples, of n")
#: a number on its own scale, printed as stored (CCD, CLIPScore, a cosine similarity)
SCORE = Unit(
    "score",
    "score",
    1.0,
    4,
    "the metric's own scale",
    "score = the metric's own scale, as stored (CCD, CLIPScore, cosine)",
)

UNITS: dict[str, Unit] = {unit.name: unit for unit in (PERCENT, POINTS, COUNT, SCORE)}


@dataclass(frozen=True)
class MetricSpec:
    """One metric (or family of metrics) of a task and its unit: ``pattern`` is the metric's name
    or an ``fnmatch`` pattern over names built at run time (``*_accuracy``, ``*.delta``);
    ``example``: a name the pattern matches (the tests walk every declaration through every table
    with it)."""

    pattern: str
    unit: Unit
    example: str = ""

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.pattern)

    @property
    def sample_name(self) -> str:
        return self.example or self.pattern


def declared_unit(specs: Sequence[MetricSpec], name: str) -> Unit | None:
    """The unit the first declaration matching ``name`` gives (None: ``name`` is undeclared)."""
    return next((spec.unit for spec in specs if spec.matches(name)), None)


def _number(unit: Unit, value: float) -> str:
    if unit is COUNT:
        return f"{value:.0f}" if float(value).is_integer() else f"{value:g}"
    return f"{unit.scale * value:{'+' if unit.signed else ''}.{unit.digits}f}"


def format_metric(metric: Mapping[str, Any] | None, unit: Unit) -> str:
    """One table cell: ``71.25`` or ``71.25 ± 1.10`` (percent), ``+5.00`` (points), ``8 of 240``
    (a count of its ``n``), ``0.1234`` (a score); ``–`` when there is no value."""
    if not metric or metric.get("value") is None or metric["value"] != metric["value"]:
        return "–"
    text = _number(unit, metric["value"])
    if unit is COUNT and metric.get("n") is not None:
        text += f" of {int(metric['n'])}"
    if metric.get("stderr") is not None:
        text += f" ± {unit.scale * metric['stderr']:.{max(unit.digits, 2)}f}"
    return text


def hub_value(metric: Mapping[str, Any], unit: Unit) -> float:
    """The value pushed to the Hub (``EvalResultEntry``, model-index): in ``unit``, rounded."""
    return round(unit.scale * float(metric["value"]), 4)


def units_note(units: Iterable[Unit]) -> str:
    """The tables' note on the units they use (only those), in a fixed order."""
    used = {unit.name for unit in units}
    words = [unit.meaning for unit in UNITS.values() if unit.name in used]
    return "Units: " + "; ".join(words) + "." if words else ""
