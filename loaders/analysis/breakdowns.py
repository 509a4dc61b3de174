"""Per-task breakdowns of the per-sample predictions, each group with a 95% bootstrap interval.

Why: one headline number hides *which* compositions a model fails. Each task's breakdowns group
the per-sample rows (``<results-stem>.samples/<task>.parquet``, ``loaders/harness/sample_columns.py``)
by what the paper varies, and every group's statistic is the headline metric restricted to that
group, computed on the rows the headline metric reads (its *scope*, from the results file's
``main_metric``), so the groups of a breakdown and the headline agree:

Each benchmark declares its :class:`TaskSpec` beside its tasks (``loaders/<benchmark>/breakdowns.py``,
set as ``Task.breakdowns`` in its task table), with the grouping it varies and how the headline's
rows are selected.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from conceptforge.errors import DataFormatError
from conceptforge.loaders.analysis.bootstrap import (
    BootstrapConfig,
    Difference,
    Estimate,
    Units,
    estimate,
    paired_difference,
)
from conceptforge.loaders.harness.sample_columns import NONE_LABEL, Column, Not, Samples

logger = logging.getLogger(__name__)

BREAKDOWNS_FORMAT = "conceptforge-eval-breakdowns/1"


# ----------------------------------------------------------------------------------- specs
Filter = tuple[str, Any]  # (column, value or Not(value)); a column the samples lack filters nothing
REAL_IMAGES = "original"  # ConceptBed's ``source`` of the real images (filters.conceptbed_records.ORIGINAL)


@dataclass(frozen=True)
class Dimension:
    """One breakdown: group the rows matching ``where`` by ``columns``. ``headline``: only the
    rows of the headline (e.g. binding's gen split). ``skip_null``: rows whose group is null are
    left out (binding's relation is null when not relational) instead of labelled ``(none)``.
    ``separator``: a value holds several groups (ConceptBed's ``action;counting``)."""

    name: str
    title: str
    columns: tuple[str, ...]
    where: tuple[Filter, ...] = ()
    headline: bool = False
    skip_null: bool = True
    separator: str | None = None


@dataclass(frozen=True)
class TaskSpec:
    """How one task family's samples are grouped and summarised. ``select(samples, main_metric)``
    gives the scope (rows every breakdown reads) and the headline's further filter."""

    family: str
    statistic: str
    columns: tuple[str, ...]  # the grouping columns of the contract
    dimensions: tuple[Dimension, ...]
    select: Callable[[Samples, str | None], tuple[tuple[Filter, ...], tuple[Filter, ...]]]
    episodes: bool = False  # units are episodes (compmap-cub), items otherwise
    stratum: str | None = None  # per-stratum mean, averaged over strata (conceptbed)
    axis: str = "accuracy (%)"  # what a chart's value axis shows


def has_value(samples: Samples, column: str, value: Any) -> bool:
    return column in samples.columns and bool(samples.columns[column].equals(value).any())


def first_value(samples: Samples, column: str) -> Any:
    return samples.columns[column].first() if column in samples.columns else None


def spec_for(task: str) -> TaskSpec | None:
    """The breakdowns ``task`` declares in its benchmark's task table (``None``: an unknown task,
    or one without breakdowns). The table is the only place a benchmark registers them."""
    from conceptforge.loaders.harness.registry import all_tasks

    tasks = all_tasks()
    if task in tasks:
        return tasks[task].breakdowns
    # a task this version does not list (e.g. samples of an older ``binding-csp`` run): the spec its
    # benchmark's tasks share, when they share one
    family = {t.breakdowns for name, t in tasks.items() if name.split("-")[0] == task.split("-")[0] and t.breakdowns}
    return family.pop() if len(family) == 1 else None


# ----------------------------------------------------------------------------------- units
def combined_keys(samples: Samples, columns: Sequence[str], rows: np.ndarray) -> tuple[np.ndarray, list[tuple]]:
    """For ``rows``: each row's index into the distinct tuples of ``columns``, and those tuples."""
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64), []
    radices = [len(samples.columns[c].values) + 1 for c in columns]
    if math.prod(radices) < 2**62:  # one int64 per row (null = 0): a 1-d unique, far faster than axis=0
        combined = np.zeros(len(rows), dtype=np.int64)
        for c, radix in zip(columns, radices):
            combined = combined * radix + (samples.columns[c].codes[rows] + 1)
        distinct_combined, inverse = np.unique(combined, return_inverse=True)
        distinct = np.empty((len(distinct_combined), len(columns)), dtype=np.int64)
        rest = distinct_combined.copy()
        for j in range(len(columns) - 1, -1, -1):
            distinct[:, j] = rest % radices[j] - 1
            rest //= radices[j]
    else:
        distinct, inverse = np.unique(
            np.stack([samples.columns[c].codes[rows] for c in columns], axis=1), axis=0, return_inverse=True
        )
    keys = [tuple(samples.columns[c].value(int(code)) for c, code in zip(columns, row)) for row in distinct]
    return inverse.reshape(-1), keys


def row_mask(samples: Samples, where: Sequence[tuple[str, Any]]) -> np.ndarray:
    mask = ~np.isnan(samples.value)
    for column, wanted in where:
        if column in samples.columns:
            mask &= samples.columns[column].equals(wanted)
    return mask


def make_units(samples: Samples, mask: np.ndarray, spec: TaskSpec) -> tuple[Units, str]:
    """The resampling units of the rows in ``mask``, sorted by key: items (a unit's value is the
    mean of its rows), or episodes for compmap-cub when the rows span more than one; with
    ``spec.stratum`` each key starts with the unit's stratum (its concept)."""
    rows = np.flatnonzero(mask)
    unit, key_columns = "item", [IMAGE_COLUMN if IMAGE_COLUMN in samples.columns else "item_id"]
    if spec.episodes:
        for column in ("episode", "n_way", "k_shot"):
            if column not in samples.columns:
                raise DataFormatError(f"{samples.path or samples.task}: compmap-cub samples need column {column}")
        if len(np.unique(samples.columns["episode"].codes[rows])) > 1:
            unit, key_columns = "episode", ["n_way", "k_shot", "episode"]
    if spec.stratum:
        if spec.stratum not in samples.columns:
            raise DataFormatError(f"{samples.path or samples.task}: {samples.task} samples need column {spec.stratum}")
        key_columns.insert(0, spec.stratum)
    inverse, keys = combined_keys(samples, key_columns, rows)
    sums = np.bincount(inverse, weights=samples.value[rows], minlength=len(keys))
    counts = np.bincount(inverse, minlength=len(keys))
    if spec.stratum:
        keys = [(str(k[0]),) + k[1:] for k in keys]
    order = sorted(range(len(keys)), key=lambda i: tuple(_sort_key(v) for v in keys[i]))
    values = np.array([sums[i] / counts[i] for i in order], dtype=np.float64)
    strata = np.array([keys[i][0] if spec.stratum else "" for i in order], dtype=object)
    return Units(tuple(keys[i] for i in order), values, strata, int(len(rows))), unit


IMAGE_COLUMN = "_image"  # derived: binding-cdsm's item id without its ``{model}/seed{seed}/`` prefix


def add_image_column(samples: Samples) -> None:
    """binding-cdsm rows are one per (model, seed, image), ids ``{model}/seed{seed}/{split}/{id}``:
    the image is the unit, so the seeds' rows of one image are resampled together."""
    if IMAGE_COLUMN in samples.columns or "seed" not in samples.columns or "binding_model" not in samples.columns:
        return
    ids, models, seeds = (samples.columns[c] for c in ("item_id", "binding_model", "seed"))
    images = []
    for i in range(len(samples)):
        item, prefix = (
            ids.value(int(ids.codes[i])),
            f"{models.value(int(models.codes[i]))}/seed{seeds.value(int(seeds.codes[i]))}/",
        )
        images.append(item[len(prefix) :] if item is not None and item.startswith(prefix) else item)
    samples.columns[IMAGE_COLUMN] = Column.from_values(images)


def _sort_key(value: Any) -> tuple:
    if isinstance(value, (bool, np.bool_)):
        return (0, -int(value), "")  # seen before unseen
    if isinstance(value, (int, float, np.integer, np.floating)):
        return (0, value, "")
    return (1, 0, "" if value is None else str(value))


def format_label(columns: Sequence[str], parts: tuple | None) -> str:
    """A group's label: ``5-way 1-shot``, ``seen``/``unseen``, or the joined values."""
    if parts is None:
        return NONE_LABEL
    if tuple(columns) == ("n_way", "k_shot"):
        n, k = parts
        return f"{n}-way full shot" if k is None or k == 0 else f"{n}-way {k}-shot"
    if tuple(columns) == ("seen",):
        return "seen" if parts[0] else "unseen"
    return " / ".join(NONE_LABEL if p is None or p == "" else str(p) for p in parts)


def group_masks(
    samples: Samples, columns: Sequence[str], mask: np.ndarray, *, skip_null: bool, separator: str | None = None
) -> dict[tuple | None, np.ndarray]:
    """The rows of each group of ``columns`` within ``mask``, groups in sorted order; a group
    whose parts are all null (or empty) is ``None`` (left out with ``skip_null``). With
    ``separator`` (one column) a value ``a;b`` puts its rows in groups ``a`` and ``b``."""
    rows = np.flatnonzero(mask)
    inverse, keys = combined_keys(samples, columns, rows)
    merged: dict[tuple | None, list[int]] = {}
    for index, key in enumerate(keys):
        if all(p is None or p == "" for p in key):
            if skip_null:
                continue
            merged.setdefault(None, []).append(index)
            continue
        parts = [(p,) for p in dict.fromkeys(str(key[0]).split(separator)) if p] if separator else [key]
        for part in parts:
            merged.setdefault(part, []).append(index)
    out = {}
    for key in sorted(merged, key=lambda k: (k is None, tuple(_sort_key(v) for v in (k or ())))):
        member = np.zeros(len(samples), dtype=bool)
        member[rows[np.isin(inverse, merged[key])]] = True
        out[key] = member
    return out


# ----------------------------------------------------------------------------------- results
@dataclass
class Group:
    label: str
    estimate: Estimate
    key: tuple | None = None

    def to_dict(self) -> dict:
        return {"group": self.label, **self.estimate.to_dict()}


@dataclass
class Breakdown:
    name: str
    title: str
    columns: tuple[str, ...]
    where: tuple[Filter, ...]
    groups: list[Group]

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "columns": list(self.columns),
            "where": describe(self.where),
            "groups": [g.to_dict() for g in self.groups],
        }


@dataclass
class TaskBreakdowns:
    """Every breakdown of one task of one model."""

    task: str
    family: str
    statistic: str
    headline: tuple[Filter, ...]  # the rows of the overall estimate (scope and headline filters)
    overall: Estimate
    breakdowns: list[Breakdown]
    model: str = ""
    axis: str = ""
    metadata: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "task": self.task,
            "family": self.family,
            "statistic": self.statistic,
            "headline_rows": describe(self.headline),
            "overall": self.overall.to_dict(),
            "metadata": self.metadata,
            "breakdowns": [b.to_dict() for b in self.breakdowns],
        }


def describe(filters: Sequence[Filter]) -> dict[str, Any]:
    """Filters as JSON: ``{"split": "gen", "source": "not original"}`` (two on one column: a list)."""
    out: dict[str, Any] = {}
    for column, value in filters:
        value = str(value) if isinstance(value, Not) else value
        if column not in out:
            out[column] = value
        else:
            out[column] = (out[column] if isinstance(out[column], list) else [out[column]]) + [value]
    return out


def compute_breakdowns(
    samples: Samples, *, config: BootstrapConfig = BootstrapConfig(), main_metric: str | None = None
) -> TaskBreakdowns | None:
    """Every breakdown of ``samples``' task with its intervals; ``None`` for a task without a spec.
    ``main_metric`` (the results file's) picks the rows the headline reads."""
    spec = spec_for(samples.task)
    if spec is None:
        logger.info("no breakdowns defined for task %s", samples.task)
        return None
    add_image_column(samples)
    scope, headline = spec.select(samples, main_metric)
    units, unit = make_units(samples, row_mask(samples, scope + headline), spec)
    overall = estimate(units, config, unit=unit)
    breakdowns = []
    for dim in spec.dimensions:
        if any(c not in samples.columns for c in dim.columns):
            logger.info("%s: no column %s, breakdown %s skipped", samples.task, "/".join(dim.columns), dim.name)
            continue
        where = scope + dim.where + (headline if dim.headline else ())
        groups = []
        for key, member in group_masks(
            samples, dim.columns, row_mask(samples, where), skip_null=dim.skip_null, separator=dim.separator
        ).items():
            group_units, group_unit = make_units(samples, member, spec)
            groups.append(Group(format_label(dim.columns, key), estimate(group_units, config, unit=group_unit), key))
        if groups:
            breakdowns.append(Breakdown(dim.name, dim.title, dim.columns, where, groups))
    return TaskBreakdowns(
        samples.task,
        spec.family,
        spec.statistic,
        scope + headline,
        overall,
        breakdowns,
        samples.model,
        spec.axis,
        samples.metadata,
    )


def compare(
    a: Samples, b: Samples, breakdowns_a: TaskBreakdowns, *, config: BootstrapConfig = BootstrapConfig()
) -> dict[tuple[str, str], Difference]:
    """Paired differences a − b for the overall headline and every group of ``breakdowns_a``,
    over the items (episodes) both share; groups with nothing shared are left out."""
    spec = spec_for(a.task)
    add_image_column(a)
    add_image_column(b)
    out: dict[tuple[str, str], Difference] = {}
    rows = breakdowns_a.headline
    (units_a, unit), (units_b, _) = make_units(a, row_mask(a, rows), spec), make_units(b, row_mask(b, rows), spec)
    diff = paired_difference(units_a, units_b, config, unit=unit)
    if diff:
        out[("overall", "")] = diff
    separators = {dim.name: dim.separator for dim in spec.dimensions}
    for breakdown in breakdowns_a.breakdowns:
        if any(c not in b.columns for c in breakdown.columns):
            continue
        sep = separators.get(breakdown.name)
        masks_a = group_masks(a, breakdown.columns, row_mask(a, breakdown.where), skip_null=False, separator=sep)
        masks_b = group_masks(b, breakdown.columns, row_mask(b, breakdown.where), skip_null=False, separator=sep)
        for group in breakdown.groups:
            if group.key not in masks_a or group.key not in masks_b:
                continue
            (ua, unit), (ub, _) = make_units(a, masks_a[group.key], spec), make_units(b, masks_b[group.key], spec)
            diff = paired_difference(ua, ub, config, unit=unit)
            if diff:
                out[(breakdown.name, group.label)] = diff
    return out


def breakdowns_payload(results: Sequence[TaskBreakdowns], *, config: BootstrapConfig, source: str = "") -> dict:
    """The ``<stem>.breakdowns.json`` payload."""
    return {
        "format": BREAKDOWNS_FORMAT,
        "results": source,
        "bootstrap": config.to_dict(),
        "tasks": [r.to_dict() for r in results],
    }
