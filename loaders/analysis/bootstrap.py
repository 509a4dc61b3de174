"""Percentile bootstrap intervals for the per-sample breakdowns, with the resampling written out.

Why spelled out here instead of ``scipy.stats.bootstrap``: a reader (and a test) must be able to
redo an interval by hand from the stated seed. The algorithm, for ``resamples`` B and ``seed`` s:

* a fresh ``numpy.random.Generator(PCG64(s))`` for every interval (so one group's interval does
  not depend on which groups were computed before it);
* for b in 0..B-1: for each stratum in ascending stratum order, draw
  ``rng.integers(0, n_stratum, size=n_stratum)`` unit indices (with replacement) and take the mean
  of the drawn units' values; the resample's statistic is the mean of the stratum means (one
  stratum: simply the mean of the drawn units);
* the interval is ``numpy.percentile(stats, [100·α/2, 100·(1−α/2)])`` (linear interpolation).

A *unit* is what gets resampled: an item (its value is the mean of its rows, so an item scored
under several training seeds counts once), a CompMap episode (its value is the episode's
accuracy), and strata keep ConceptBed's per-concept mean over a fixed set of concepts.
A paired difference resamples the units two models share, with the same indices for both.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from conceptforge.errors import InvalidArgumentError


@dataclass(frozen=True)
class BootstrapConfig:
    """How every interval of a breakdowns file was drawn (stated in the output)."""

    resamples: int = 1000
    seed: int = 0
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if self.resamples < 1:
            raise InvalidArgumentError(f"bootstrap resamples must be at least 1, got {self.resamples}")
        if not 0 < self.confidence < 1:
            raise InvalidArgumentError(f"bootstrap confidence must be in (0, 1), got {self.confidence}")

    def to_dict(self) -> dict:
        return {
            "method": "percentile",
            **asdict(self),
            "generator": "numpy.random.Generator(PCG64(seed)), a fresh one per interval",
            "draws": "per resample, per stratum in ascending order: rng.integers(0, n, size=n)",
        }


@dataclass(frozen=True)
class Units:
    """The resampling units of one group: ``keys`` (sorted, unique), their ``values``, their
    ``strata`` (0 everywhere without strata) and ``n_samples``, the rows they were made from."""

    keys: tuple
    values: np.ndarray
    strata: np.ndarray
    n_samples: int

    def __len__(self) -> int:
        return len(self.keys)


def statistic(values: np.ndarray, strata: np.ndarray) -> float:
    """Mean over strata of the mean of each stratum's units (the plain mean with one stratum)."""
    if len(values) == 0:
        return float("nan")
    return float(np.mean([values[strata == s].mean() for s in np.unique(strata)]))


_BLOCK_DRAWS = 1 << 21  # indices drawn at once (16 MiB of int64): bounded memory at any group size


def interval(values: np.ndarray, strata: np.ndarray, config: BootstrapConfig) -> tuple[float, float]:
    """The percentile bootstrap interval of :func:`statistic` (see the module docstring)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return float("nan"), float("nan")
    strata = np.asarray(strata)
    pools = [values[strata == s] for s in np.unique(strata)]
    rng = np.random.Generator(np.random.PCG64(config.seed))
    stats = np.empty(config.resamples)
    if len(pools) == 1:  # one stratum: the same draws as one call per resample, taken in blocks of (rows, n)
        pool, size = pools[0], len(pools[0])
        block = max(1, _BLOCK_DRAWS // size)
        for first in range(0, config.resamples, block):
            rows = min(block, config.resamples - first)
            stats[first : first + rows] = pool[rng.integers(0, size, size=(rows, size))].mean(axis=1)
    else:
        for b in range(config.resamples):
            means = [pool[rng.integers(0, len(pool), size=len(pool))].mean() for pool in pools]
            stats[b] = np.mean(means)
    tail = 100 * (1 - config.confidence) / 2
    low, high = np.percentile(stats, [tail, 100 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class Estimate:
    """A group's statistic, its bootstrap interval, the rows (``n``) and units behind it."""

    value: float
    low: float
    high: float
    n: int
    n_units: int
    unit: str = "item"

    def to_dict(self) -> dict:
        return {key: (None if isinstance(v, float) and v != v else v) for key, v in asdict(self).items()}


def estimate(units: Units, config: BootstrapConfig, *, unit: str = "item") -> Estimate:
    low, high = interval(units.values, units.strata, config)
    return Estimate(statistic(units.values, units.strata), low, high, units.n_samples, len(units), unit)


@dataclass(frozen=True)
class Difference:
    """``a − b`` over the units both models have, with its paired bootstrap interval."""

    value: float
    low: float
    high: float
    n_shared: int
    a: float  # each model's statistic on the shared units only
    b: float
    unit: str = "item"

    def to_dict(self) -> dict:
        return asdict(self)


def paired_difference(a: Units, b: Units, config: BootstrapConfig, *, unit: str = "item") -> Difference | None:
    """Resample the units ``a`` and ``b`` share (same key; strata must agree) with one set of
    indices: the interval of the mean difference. ``None`` when they share no unit."""
    index_a = {key: i for i, key in enumerate(a.keys)}
    shared = [(index_a[key], j) for j, key in enumerate(b.keys) if key in index_a]
    if not shared:
        return None
    ia, ib = (np.array(side) for side in zip(*shared))
    if not np.array_equal(a.strata[ia], b.strata[ib]):
        raise InvalidArgumentError("two models put the same item in different strata (concepts): the samples disagree")
    strata = a.strata[ia]
    diff = a.values[ia] - b.values[ib]
    low, high = interval(diff, strata, config)
    return Difference(
        statistic(diff, strata),
        low,
        high,
        len(shared),
        statistic(a.values[ia], strata),
        statistic(b.values[ib], strata),
        unit,
    )
