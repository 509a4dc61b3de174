"""Intervals that hold at small n: exact and score intervals for proportions against closed forms
and scipy, the exact McNemar/sign test by hand, and the coverage of the breakdowns' intervals by a
seeded (deterministic) simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from conceptforge.loaders.analysis.bootstrap import (
    BootstrapConfig,
    Units,
    bca_interval,
    beta_quantile,
    betainc,
    binomial_cdf_half,
    clopper_pearson,
    estimate,
    newcombe_paired,
    paired_difference,
    resample,
    sign_test,
    wilson,
)

Z = 1.959963984540054  # the 97.5% normal quantile


def test_zero_of_twenty_is_zero_to_sixteen_point_eight_percent():
    # k = 0: the upper bound solves (1 - p)^20 = 0.025
    low, high = clopper_pearson(0, 20)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 20), abs=1e-12)
    assert round(100 * high, 1) == 16.8
    # k = n: the lower bound solves p^20 = 0.025
    assert clopper_pearson(20, 20) == (pytest.approx(0.025 ** (1 / 20), abs=1e-12), 1.0)
    # Wilson's score interval at k = 0: [0, z^2 / (n + z^2)] = 16.1%
    assert wilson(0, 20) == (0.0, pytest.approx(Z**2 / (20 + Z**2), abs=1e-12))


@pytest.mark.parametrize("k,n", [(1, 20), (3, 20), (10, 20), (19, 20), (7, 200), (100, 200), (1, 3), (4321, 20000)])
def test_clopper_pearson_against_scipy_beta_quantiles(k, n):
    low, high = clopper_pearson(k, n)
    assert low == pytest.approx(scipy_stats.beta.ppf(0.025, k, n - k + 1), abs=1e-12)
    assert high == pytest.approx(scipy_stats.beta.ppf(0.975, k + 1, n - k), abs=1e-12)
    # and Wilson against its closed form
    p = k / n
    centre = (p + Z**2 / (2 * n)) / (1 + Z**2 / n)
    half = Z / (1 + Z**2 / n) * math.sqrt(p * (1 - p) / n + Z**2 / (4 * n * n))
    assert wilson(k, n) == (pytest.approx(centre - half, abs=1e-12), pytest.approx(centre + half, abs=1e-12))


def test_incomplete_beta_and_its_quantile():
    for a, b, x in [(0.5, 0.5, 0.3), (3, 18, 0.1), (100, 50, 0.7), (2000, 3000, 0.41), (1, 1, 0.25)]:
        assert betainc(a, b, x) == pytest.approx(scipy_stats.beta.cdf(x, a, b), abs=1e-11)
    assert betainc(1, 1, 0.25) == pytest.approx(0.25)  # Beta(1, 1) is uniform
    assert beta_quantile(0.3, 2, 5) == pytest.approx(scipy_stats.beta.ppf(0.3, 2, 5), abs=1e-12)


def test_exact_mcnemar_by_hand_on_a_tiny_table():
    # paired 0/1 outcomes of 9 items: a right and b wrong on 6 (b = 6), the reverse on 1 (c = 1),
    # both the same on 2. Exact McNemar: p = 2 * P(X <= 1), X ~ Bin(7, 1/2) = 2 * (1 + 7) / 128
    a = np.array([1, 1, 1, 1, 1, 1, 0, 1, 0], dtype=float)
    b = np.array([0, 0, 0, 0, 0, 0, 1, 1, 0], dtype=float)
    assert sign_test(a - b) == (pytest.approx(16 / 128), 6, 1)
    assert 16 / 128 == pytest.approx(scipy_stats.binomtest(1, 7, 0.5).pvalue)
    units = lambda values: Units(tuple(range(9)), values, np.zeros(9), 9)  # noqa: E731
    diff = paired_difference(units(a), units(b), BootstrapConfig(resamples=200))
    assert (diff.test, diff.p_value, diff.n_plus, diff.n_minus) == ("exact McNemar", pytest.approx(0.125), 6, 1)
    assert diff.value == pytest.approx(5 / 9) and diff.n_shared == 9
    # its interval is Newcombe's (both right 1, only a 6, only b 1, neither 1); a score interval, no
    # small-n warning (its coverage is simulated below)
    assert diff.method == "newcombe" and (diff.low, diff.high) == newcombe_paired(a, b)
    assert diff.low < diff.value < diff.high and diff.warning is None
    # no discordant pair: nothing to test, p = 1
    assert sign_test(np.zeros(4)) == (1.0, 0, 0)
    # non-binary values: the same exact test on the signs, named for what it is
    other = paired_difference(units(a * 0.5), units(b), BootstrapConfig(resamples=200))
    assert (other.test, other.method) == ("exact sign test", "bca")
    assert other.warning and "9 unit(s)" in other.warning  # a bootstrap below the stated n
    # large m: the incomplete-beta route agrees with the exact sum
    assert binomial_cdf_half(1480, 3001) == pytest.approx(scipy_stats.binom.cdf(1480, 3001, 0.5), abs=1e-10)


def test_estimates_name_their_method_and_warn_below_the_stated_n():
    config = BootstrapConfig(resamples=200)
    binary = np.array([1.0] * 3 + [0.0] * 17)
    exact = estimate(Units(tuple(range(20)), binary, np.zeros(20), 20), config)
    assert (exact.method, exact.warning, exact.n, exact.n_units) == ("clopper-pearson", None, 20, 20)
    assert (exact.low, exact.high) == clopper_pearson(3, 20)
    credits = np.array([0.5, 1.0, 0.0, 0.25] * 5)  # tie-aware credits: not a proportion
    boot = estimate(Units(tuple(range(20)), credits, np.zeros(20), 20), config)
    assert boot.method == "bca" and "20 unit(s)" in boot.warning and "fewer than 30" in boot.warning
    many = np.tile(credits, 10)
    assert estimate(Units(tuple(range(200)), many, np.zeros(200), 200), config).warning is None
    wilson_config = BootstrapConfig(resamples=200, proportions="wilson")
    assert estimate(Units(tuple(range(20)), binary, np.zeros(20), 20), wilson_config).method == "wilson"
    with pytest.raises(Exception, match="proportion interval must be one of"):
        BootstrapConfig(proportions="wald")


def _coverage(n: int, p: float, replicates: int, seed: int) -> tuple[float, float]:
    """Share of ``replicates`` seeded Bernoulli(p) samples of size n whose breakdown interval
    (``estimate``) and whose plain percentile bootstrap interval hold p. Both depend on the sample
    only through k, so each distinct k is computed once."""
    config = BootstrapConfig()
    ks = np.random.Generator(np.random.PCG64(seed)).binomial(n, p, size=replicates)
    held: dict[int, tuple[bool, bool]] = {}
    for k in map(int, np.unique(ks)):
        values = np.array([1.0] * k + [0.0] * (n - k))
        found = estimate(Units(tuple(range(n)), values, np.zeros(n), n), config)
        low, high = np.percentile(resample(values, np.zeros(n), config), [2.5, 97.5])
        held[k] = (found.low <= p <= found.high, low <= p <= high)
    ours = sum(held[int(k)][0] for k in ks) / replicates
    percentile = sum(held[int(k)][1] for k in ks) / replicates
    return ours, percentile


@pytest.mark.parametrize("n,p,floor", [(20, 0.05, 0.92), (20, 0.5, 0.92), (200, 0.05, 0.94), (200, 0.5, 0.94)])
def test_proportion_intervals_cover_by_simulation(n, p, floor):
    ours, percentile = _coverage(n, p, replicates=4000, seed=20260101)
    assert ours >= floor, (n, p, ours)
    if (n, p) == (20, 0.05):  # what the percentile bootstrap gave: far below its nominal 95%
        assert percentile < 0.70, percentile


def test_bca_covers_the_mean_of_skewed_data_by_simulation():
    """Exponential data (skew 2): BCa at n = 200 holds about its 95%."""
    rng = np.random.Generator(np.random.PCG64(99))
    replicates, held = 300, 0
    for r in range(replicates):
        values = rng.exponential(1.0, size=200)
        low, high = bca_interval(values, np.zeros(200), BootstrapConfig(resamples=1000, seed=r))
        held += low <= 1.0 <= high
    assert held / replicates >= 0.92


@pytest.mark.parametrize(
    "n,cells,floor",
    [
        (20, (0.3, 0.15, 0.05, 0.5), 0.92),
        (20, (0.25, 0.25, 0.25, 0.25), 0.92),
        (200, (0.3, 0.15, 0.05, 0.5), 0.94),
        (200, (0.8, 0.1, 0.05, 0.05), 0.94),
    ],
)
def test_paired_difference_intervals_cover_by_simulation(n, cells, floor):
    """Right/wrong outcomes of two models on n shared items, cells = P(both right, only a, only b,
    neither): Newcombe's interval holds p(only a) − p(only b)."""
    tables = np.random.Generator(np.random.PCG64(7)).multinomial(n, cells, size=3000)
    truth = cells[1] - cells[2]
    held = 0
    for both, only_a, only_b, neither in tables:
        a = np.array([1.0] * (both + only_a) + [0.0] * (only_b + neither))
        b = np.array([1.0] * both + [0.0] * only_a + [1.0] * only_b + [0.0] * neither)
        low, high = newcombe_paired(a, b)
        held += low <= truth <= high
    assert held / len(tables) >= floor
