"""Intervals for the per-sample breakdowns that hold their stated coverage at small n.

Why not the percentile bootstrap alone: on a proportion it covers far less than it says at small
n (63% for a nominal 95% at n = 20, p = 0.05) and shows 0/20 as [0, 0]. So:

* **Proportions** (every unit's value is 0 or 1, one stratum): the exact Clopper–Pearson
  interval, ``[Beta(α/2; k, n−k+1), Beta(1−α/2; k+1, n−k)]`` (0/20: [0, 16.8%]), which covers
  at least the stated level at every n and p. ``proportions="wilson"`` gives Wilson's score
  interval instead (shorter, about the stated coverage on average; 0/20: [0, 16.1%]).
* **Other statistics** (tie-aware credits, means over seeds, episode accuracies, CCD, the
  per-concept mean of strata): the BCa bootstrap (bias-corrected and accelerated; Efron 1987),
  whose coverage error shrinks like 1/n instead of the percentile method's 1/√n. Below
  ``min_units`` units an interval carries a warning: no bootstrap holds its level there.
* **Paired differences** ``a − b`` over the units two models share: for 0/1 outcomes (one
  stratum) Newcombe's hybrid score interval for paired proportions (Newcombe 1998, method 10:
  Wilson intervals of both margins combined with the phi correlation of the 2×2 table), else the
  Student t interval of the mean difference, ``d̄ ± t₍ₙ₋₁, 1−α/2₎ · s/√n`` (with strata: the
  stratified mean, its variance Σₛ sₛ²/nₛ / S², Welch–Satterthwaite degrees of freedom; BCa when a
  stratum has a single unit). Why not BCa here: differences of averaged scores at low accuracy
  are mostly zeros with a few skewed values, and BCa's resamples then understate the spread
  (seeded simulations in tests/analysis/test_intervals.py: BCa 87% at n = 20 and 93.8% at
  n = 200 where the t interval holds 95% and 94.6%). A difference whose units are all equal has
  no spread to estimate: its zero-width interval carries a warning. And an exact
  two-sided sign test on the units whose values differ, which for 0/1 outcomes is the exact
  McNemar test: ``p = min(1, 2·P(X ≤ min(n₊, n₋)))``, X ~ Binomial(n₊ + n₋, ½).

The resampling is written out so that a reader (and a test) can redo an interval by hand, for
``resamples`` B and ``seed`` s:

* a fresh ``numpy.random.Generator(PCG64(s))`` for every interval (so one group's interval does
  not depend on which groups were computed before it);
* for b in 0..B-1: for each stratum in ascending stratum order, draw
  ``rng.integers(0, n_stratum, size=n_stratum)`` unit indices (with replacement) and take the mean
  of the drawn units' values; the resample's statistic θ*_b is the mean of the stratum means (one
  stratum: simply the mean of the drawn units);
* BCa: z₀ = Φ⁻¹((#{θ* < θ̂} + ½·#{θ* = θ̂}) / B), clipped to [½/B, 1 − ½/B] before Φ⁻¹; the
  acceleration a = Σ(θ̄ − θ₍ᵢ₎)³ / (6·(Σ(θ̄ − θ₍ᵢ₎)²)^{3/2}) from the jackknife values θ₍ᵢ₎ (the
  statistic without unit i; 0 when they are all equal); for z = Φ⁻¹(α/2) and Φ⁻¹(1 − α/2) the
  levels Φ(z₀ + (z₀ + z)/(1 − a(z₀ + z))), and the interval is
  ``numpy.percentile(stats, 100·levels)`` (linear interpolation).

A *unit* is what gets resampled: an item (its value is the mean of its rows, so an item scored
under several training seeds counts once), a CompMap episode (its value is the episode's
accuracy), and strata keep ConceptBed's per-concept mean over a fixed set of concepts.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np

from conceptforge.errors import InvalidArgumentError

PROPORTION_METHODS = ("clopper-pearson", "wilson")
#: Below this many units a bootstrap interval is flagged: its coverage is below the stated level.
MIN_BOOTSTRAP_UNITS = 30
_NORMAL = NormalDist()


@dataclass(frozen=True)
class BootstrapConfig:
    """How every interval of a breakdowns file was computed (stated in the output)."""

    resamples: int = 1000
    seed: int = 0
    confidence: float = 0.95
    proportions: str = "clopper-pearson"
    min_units: int = MIN_BOOTSTRAP_UNITS

    def __post_init__(self) -> None:
        if self.resamples < 1:
            raise InvalidArgumentError(f"bootstrap resamples must be at least 1, got {self.resamples}")
        if not 0 < self.confidence < 1:
            raise InvalidArgumentError(f"bootstrap confidence must be in (0, 1), got {self.confidence}")
        if self.proportions not in PROPORTION_METHODS:
            raise InvalidArgumentError(
                f"proportion interval must be one of {', '.join(PROPORTION_METHODS)}, got {self.proportions!r}"
            )

    def to_dict(self) -> dict:
        return {
            "method": f"{self.proportions} for proportions (every unit 0 or 1); bca otherwise",
            **asdict(self),
            "coverage": (
                f"{100 * self.confidence:g}% two-sided; clopper-pearson: at least that at every n and p (exact); "
                f"wilson: about that on average; bca: about that for large n, intervals on fewer than "
                f"{self.min_units} units carry a warning"
            ),
            "generator": "numpy.random.Generator(PCG64(seed)), a fresh one per interval",
            "draws": "per resample, per stratum in ascending order: rng.integers(0, n, size=n)",
            "paired": "difference a − b over shared units: newcombe (1998, method 10) interval for 0/1 outcomes, "
            "student-t otherwise (welch-satterthwaite df with strata; bca when a stratum has one unit); "
            "exact two-sided sign test on the units whose values differ (the exact McNemar test for 0/1 outcomes)",
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


# ----------------------------------------------------------------------------------- exact pieces
def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz's method)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (a, b > 0, 0 <= x <= 1)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def beta_quantile(q: float, a: float, b: float) -> float:
    """The ``q`` quantile of Beta(a, b), by bisection on :func:`betainc` (to 1e-14)."""
    low, high = 0.0, 1.0
    for _ in range(200):
        middle = (low + high) / 2
        if betainc(a, b, middle) < q:
            low = middle
        else:
            high = middle
        if high - low < 1e-14:
            break
    return (low + high) / 2


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper–Pearson) interval of a proportion k/n."""
    if n <= 0:
        return float("nan"), float("nan")
    alpha = 1 - confidence
    low = 0.0 if k == 0 else beta_quantile(alpha / 2, k, n - k + 1)
    high = 1.0 if k == n else beta_quantile(1 - alpha / 2, k + 1, n - k)
    return low, high


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of a proportion k/n."""
    if n <= 0:
        return float("nan"), float("nan")
    z = _NORMAL.inv_cdf(1 - (1 - confidence) / 2)
    p, z2 = k / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_paired(a: np.ndarray, b: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Newcombe's (1998) method 10 interval of p_a − p_b for paired 0/1 outcomes ``a`` and ``b``.

    With the 2×2 table (both right e, only a f, only b g, neither h; n units), p_a = (e+f)/n,
    p_b = (e+g)/n, Wilson intervals (l_a, u_a), (l_b, u_b) and φ = (eh − fg)/√((e+f)(g+h)(e+g)(f+h))
    (0 when a margin is empty): the interval is δ − √((p_a−l_a)² − 2φ(p_a−l_a)(u_b−p_b) + (u_b−p_b)²)
    to δ + √((u_a−p_a)² − 2φ(u_a−p_a)(p_b−l_b) + (p_b−l_b)²)."""
    a, b = np.asarray(a) == 1.0, np.asarray(b) == 1.0
    e, f, g, h = (int(np.sum(x)) for x in (a & b, a & ~b, ~a & b, ~a & ~b))
    n = e + f + g + h
    if n == 0:
        return float("nan"), float("nan")
    pa, pb = (e + f) / n, (e + g) / n
    la, ua = wilson(e + f, n, confidence)
    lb, ub = wilson(e + g, n, confidence)
    margins = (e + f) * (g + h) * (e + g) * (f + h)
    phi = (e * h - f * g) / math.sqrt(margins) if margins > 0 else 0.0
    below = math.sqrt(max(0.0, (pa - la) ** 2 - 2 * phi * (pa - la) * (ub - pb) + (ub - pb) ** 2))
    above = math.sqrt(max(0.0, (ua - pa) ** 2 - 2 * phi * (ua - pa) * (pb - lb) + (pb - lb) ** 2))
    return max(-1.0, pa - pb - below), min(1.0, pa - pb + above)


def binomial_cdf_half(k: int, m: int) -> float:
    """P(X <= k) for X ~ Binomial(m, 1/2): exact integer arithmetic up to m = 2000, else I_½(m−k, k+1)."""
    if k < 0:
        return 0.0
    if k >= m:
        return 1.0
    if m <= 2000:
        return sum(math.comb(m, i) for i in range(k + 1)) / 2**m
    return betainc(m - k, k + 1, 0.5)


def sign_test(differences: np.ndarray) -> tuple[float, int, int]:
    """Exact two-sided sign test of ``differences`` (zeros dropped): (p, n₊, n₋)."""
    plus, minus = int(np.sum(differences > 0)), int(np.sum(differences < 0))
    m = plus + minus
    if m == 0:
        return 1.0, plus, minus
    return min(1.0, 2 * binomial_cdf_half(min(plus, minus), m)), plus, minus


# ----------------------------------------------------------------------------------- bootstrap
_BLOCK_DRAWS = 1 << 21  # indices drawn at once (16 MiB of int64): bounded memory at any group size


def resample(values: np.ndarray, strata: np.ndarray, config: BootstrapConfig) -> np.ndarray:
    """The B resample statistics θ*_b (see the module docstring)."""
    values = np.asarray(values, dtype=np.float64)
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
    return stats


def jackknife(values: np.ndarray, strata: np.ndarray) -> np.ndarray:
    """θ₍ᵢ₎: the statistic without unit i, for every unit (a stratum of one unit leaves the
    average of the other strata's means)."""
    values = np.asarray(values, dtype=np.float64)
    strata = np.asarray(strata)
    names = np.unique(strata)
    index = np.searchsorted(names, strata)
    sums = np.bincount(index, weights=values, minlength=len(names))
    counts = np.bincount(index, minlength=len(names))
    means = sums / counts
    own, total, strata_count = counts[index], means.sum(), len(names)
    with np.errstate(divide="ignore", invalid="ignore"):
        left = (sums[index] - values) / (own - 1)  # the unit's stratum mean without it
        kept = (total - means[index] + left) / strata_count
        dropped = (total - means[index]) / (strata_count - 1) if strata_count > 1 else np.full(len(values), np.nan)
    return np.where(own > 1, kept, dropped)


def bca_interval(values: np.ndarray, strata: np.ndarray, config: BootstrapConfig) -> tuple[float, float]:
    """The BCa bootstrap interval of :func:`statistic` (see the module docstring)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return float("nan"), float("nan")
    strata = np.asarray(strata)
    theta = statistic(values, strata)
    stats = resample(values, strata, config)
    if np.all(stats == stats[0]):  # no spread: every resample gives the same number
        return float(stats[0]), float(stats[0])
    below = (np.sum(stats < theta) + 0.5 * np.sum(stats == theta)) / len(stats)
    z0 = _NORMAL.inv_cdf(min(max(below, 0.5 / len(stats)), 1 - 0.5 / len(stats)))
    jack = jackknife(values, strata)
    jack = jack[~np.isnan(jack)]
    spread = jack.mean() - jack if len(jack) else np.zeros(1)
    denominator = 6.0 * float(np.sum(spread**2)) ** 1.5
    acceleration = float(np.sum(spread**3)) / denominator if denominator > 0 else 0.0
    alpha = 1 - config.confidence
    levels = []
    for z in (_NORMAL.inv_cdf(alpha / 2), _NORMAL.inv_cdf(1 - alpha / 2)):
        shifted = z0 + z
        levels.append(_NORMAL.cdf(z0 + shifted / (1 - acceleration * shifted)))
    low, high = np.percentile(stats, [100 * levels[0], 100 * levels[1]])
    return float(low), float(high)


@functools.lru_cache(maxsize=1024)  # one bisection per (level, n): every unstratified group of n units shares it
def student_t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom, from the incomplete beta:
    for t > 0, P(T > t) = ½ · I_{df/(df+t²)}(df/2, ½)."""
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -student_t_quantile(1 - q, df)
    x = beta_quantile(2 * (1 - q), df / 2, 0.5)
    return math.sqrt(df * (1 - x) / x)


def t_interval(values: np.ndarray, strata: np.ndarray, config: BootstrapConfig) -> tuple[float, float] | None:
    """The Student t interval of :func:`statistic` (see the module docstring); ``None`` when a
    stratum has fewer than two units (no variance to estimate there)."""
    values = np.asarray(values, dtype=np.float64)
    strata = np.asarray(strata)
    pools = [values[strata == s] for s in np.unique(strata)]
    if not pools or any(len(pool) < 2 for pool in pools):
        return None
    parts = [pool.var(ddof=1) / len(pool) for pool in pools]  # each stratum mean's variance
    variance = sum(parts) / len(pools) ** 2
    theta = statistic(values, strata)
    if variance == 0:
        return theta, theta
    df = sum(parts) ** 2 / sum(part**2 / (len(pool) - 1) for part, pool in zip(parts, pools) if part > 0)
    half = student_t_quantile(1 - (1 - config.confidence) / 2, df) * math.sqrt(variance)
    return theta - half, theta + half


def constant_warning(values: np.ndarray, method: str) -> str | None:
    """A non-binary statistic whose units are all equal: its interval has zero width because
    there is no spread to resample, not because the number is certain."""
    values = np.asarray(values, dtype=np.float64)
    if method in PROPORTION_METHODS or method == "newcombe" or len(values) < 2 or np.any(values != values[0]):
        return None
    return (
        f"all {len(values)} units have the same value {values[0]:g}: the interval has zero width because "
        "there is no spread to estimate, not because the number is certain"
    )


def _warnings(*found: str | None) -> str | None:
    return "; ".join(w for w in found if w) or None


def is_proportion(values: np.ndarray, strata: np.ndarray) -> bool:
    """Every unit 0 or 1 and one stratum: a count of successes out of n."""
    return len(np.unique(strata)) <= 1 and bool(np.all((values == 0.0) | (values == 1.0)))


def interval(values: np.ndarray, strata: np.ndarray, config: BootstrapConfig) -> tuple[float, float, str]:
    """(low, high, method) of :func:`statistic`: an exact or score interval for a proportion, BCa otherwise."""
    values = np.asarray(values, dtype=np.float64)
    strata = np.asarray(strata)
    if len(values) == 0:
        return float("nan"), float("nan"), "none"
    if is_proportion(values, strata):
        k, n = int(values.sum()), len(values)
        method = config.proportions
        low, high = (clopper_pearson if method == "clopper-pearson" else wilson)(k, n, config.confidence)
        return low, high, method
    low, high = bca_interval(values, strata, config)
    return low, high, "bca"


def small_n_warning(n_units: int, method: str, config: BootstrapConfig) -> str | None:
    if method in ("bca", "student-t") and n_units < config.min_units:
        what = "a bootstrap interval" if method == "bca" else "a t interval of skewed differences"
        return (
            f"{n_units} unit(s): {what} on fewer than {config.min_units} units may cover less than "
            f"{100 * config.confidence:g}%; read it as rough"
        )
    return None


@dataclass(frozen=True)
class Estimate:
    """A group's statistic, its interval (and how it was made), the rows (``n``) and units behind it."""

    value: float
    low: float
    high: float
    n: int
    n_units: int
    unit: str = "item"
    method: str = "bca"
    warning: str | None = None

    def to_dict(self) -> dict:
        return {key: (None if isinstance(v, float) and v != v else v) for key, v in asdict(self).items()}


def estimate(units: Units, config: BootstrapConfig, *, unit: str = "item") -> Estimate:
    low, high, method = interval(units.values, units.strata, config)
    return Estimate(
        statistic(units.values, units.strata),
        low,
        high,
        units.n_samples,
        len(units),
        unit,
        method,
        _warnings(small_n_warning(len(units), method, config), constant_warning(units.values, method)),
    )


@dataclass(frozen=True)
class Difference:
    """``a − b`` over the units both models have: its paired interval (``method``: newcombe for
    0/1 outcomes, student-t otherwise) and exact sign test (McNemar's for 0/1 outcomes): ``p_value``,
    with ``n_plus``/``n_minus`` the units where a is above / below b."""

    value: float
    low: float
    high: float
    n_shared: int
    a: float  # each model's statistic on the shared units only
    b: float
    unit: str = "item"
    method: str = "bca"
    test: str = "exact sign test"
    p_value: float = 1.0
    n_plus: int = 0
    n_minus: int = 0
    warning: str | None = None

    def to_dict(self) -> dict:
        return {key: (None if isinstance(v, float) and v != v else v) for key, v in asdict(self).items()}


def paired_difference(a: Units, b: Units, config: BootstrapConfig, *, unit: str = "item") -> Difference | None:
    """The units ``a`` and ``b`` share (same key; strata must agree): the interval of the mean
    difference (Newcombe's for 0/1 outcomes; else Student's t on the differences, BCa when a
    stratum has one unit) and the exact sign test of the differences. ``None`` when they share no
    unit."""
    index_a = {key: i for i, key in enumerate(a.keys)}
    shared = [(index_a[key], j) for j, key in enumerate(b.keys) if key in index_a]
    if not shared:
        return None
    ia, ib = (np.array(side) for side in zip(*shared))
    if not np.array_equal(a.strata[ia], b.strata[ib]):
        raise InvalidArgumentError("two models put the same item in different strata (concepts): the samples disagree")
    strata = a.strata[ia]
    left, right = a.values[ia], b.values[ib]
    diff = left - right
    binary = is_proportion(left, strata) and is_proportion(right, strata)
    if binary:
        (low, high), method = newcombe_paired(left, right, config.confidence), "newcombe"
    else:
        found = t_interval(diff, strata, config)
        (low, high), method = (found, "student-t") if found is not None else (bca_interval(diff, strata, config), "bca")
    p_value, plus, minus = sign_test(diff)
    return Difference(
        statistic(diff, strata),
        low,
        high,
        len(shared),
        statistic(left, strata),
        statistic(right, strata),
        unit,
        method,
        "exact McNemar" if binary else "exact sign test",
        p_value,
        plus,
        minus,
        _warnings(small_n_warning(len(shared), method, config), constant_warning(diff, method)),
    )
