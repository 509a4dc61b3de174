"""Breakdowns with their intervals (``compute_breakdowns``) vs what a researcher would otherwise write.

Ours: ``conceptforge.loaders.analysis.breakdowns.compute_breakdowns`` on a synthetic ``sub-vlm`` samples
table (S+ / S− rows, one row per item, 200 birds, 28 attribute groups): the overall S+ accuracy
and every group of every breakdown (side, per attribute group and per bird for S+ and S−), each
with its interval (``loaders/analysis/bootstrap.py``).

Two tables, two baselines:

* right/wrong values (``value`` 0 or 1, what SUB writes): every group is a proportion and gets
  the exact Clopper–Pearson interval. Baseline: the groups (and each group's items) gathered with
  Python dicts in one pass per breakdown, then ``scipy.stats.binomtest(k, n).proportion_ci(
  method="exact")`` per group. The benchmark raises unless every point estimate and interval
  agrees within 1e-9.
* tie-aware credits (``value`` in {0, ¼, ⅓, ½, 1}, what binding writes): not proportions, so ours
  draws the BCa bootstrap. Baseline: the same dict grouping and the plain percentile bootstrap a
  researcher would loop (per resample, per group, ``rng.integers(0, n, size=n)`` from one
  ``PCG64(seed)`` per group; ``numpy.percentile``): the same draws, so the point estimates agree
  (checked) and ``extra`` reports how far the BCa intervals are from the percentile ones.
"""

from __future__ import annotations

import numpy as np

from benchmarks._harness import Result, interleave

SIDES = ("S+", "S-")


def _table(n_rows: int, n_birds: int, n_groups: int, seed: int = 7, *, credits: bool = False) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    right = (rng.random(n_rows) < 0.6).astype(np.float64)
    if credits:  # a tie at the top: the true label's share of it
        right = np.where(rng.random(n_rows) < 0.2, 1.0 / rng.integers(2, 5, n_rows), right)
    return {
        "item_id": np.array([f"i{i:07d}" for i in range(n_rows)], dtype=object),
        "side": np.where(rng.random(n_rows) < 0.5, "S+", "S-").astype(object),
        "bird": np.array([f"{b:03d}.Bird_{b}" for b in rng.integers(0, n_birds, n_rows)], dtype=object),
        "attribute_group": np.array([f"has_group_{g:02d}" for g in rng.integers(0, n_groups, n_rows)], dtype=object),
        "value": right,
    }


def _samples(table: dict[str, np.ndarray]):
    from conceptforge.loaders.harness.sample_columns import Column, Samples

    columns = {name: Column.from_values(list(table[name])) for name in ("item_id", "side", "bird", "attribute_group")}
    return Samples("sub-vlm", table["value"].copy(), columns, {"model": "synthetic"})


def _ours(table, resamples: int) -> dict[tuple[str, str], tuple[float, float, float]]:
    from conceptforge.loaders.analysis.bootstrap import BootstrapConfig
    from conceptforge.loaders.analysis.breakdowns import compute_breakdowns

    result = compute_breakdowns(
        _samples(table), config=BootstrapConfig(resamples=resamples, seed=0), main_metric="s_plus"
    )
    out = {("overall", ""): (result.overall.value, result.overall.low, result.overall.high)}
    for breakdown in result.breakdowns:
        for group in breakdown.groups:
            e = group.estimate
            out[(breakdown.name, group.label)] = (e.value, e.low, e.high)
    return out


def _pools(table) -> dict[tuple[str, str], np.ndarray]:
    """The researcher's grouping: one pass of Python dicts per breakdown; a group's units are its
    items' mean values, sorted by item id (the documented unit order)."""
    ids, values = table["item_id"], table["value"]

    def items(rows) -> np.ndarray:
        per_item: dict[str, list[float]] = {}
        for i in rows:
            per_item.setdefault(ids[i], []).append(values[i])
        return np.array([sum(v) / len(v) for _, v in sorted(per_item.items())])

    def by(column: str, rows) -> dict:
        groups: dict[str, list[int]] = {}
        for i in rows:
            groups.setdefault(table[column][i], []).append(i)
        return dict(sorted(groups.items()))

    everything = range(len(values))
    sides = by("side", everything)
    pools = {("overall", ""): items(sides["S+"])}
    pools.update({("side", key): items(rows) for key, rows in sides.items()})
    for name in SIDES:
        slug = "splus" if name == "S+" else "sminus"
        for column, dimension in (("attribute_group", f"{slug}-attribute-group"), ("bird", f"{slug}-bird")):
            pools.update({(dimension, key): items(rows) for key, rows in by(column, sides[name]).items()})
    return pools


def _baseline_exact(table, resamples: int) -> dict[tuple[str, str], tuple[float, float, float]]:
    """The researcher's version for right/wrong values: groups from dicts, scipy's exact interval."""
    from scipy.stats import binomtest

    out = {}
    for name, pool in _pools(table).items():
        k, n = int(pool.sum()), len(pool)
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        out[name] = (float(pool.mean()), float(ci.low), float(ci.high))
    return out


def _baseline_percentile(table, resamples: int) -> dict[tuple[str, str], tuple[float, float, float]]:
    """The researcher's version for credits: groups from dicts, a loop over resamples, in it over groups."""
    pools = _pools(table)
    names = list(pools)
    rngs = [np.random.Generator(np.random.PCG64(0)) for _ in names]
    stats = np.empty((len(names), resamples))
    for b in range(resamples):
        for g, name in enumerate(names):
            pool = pools[name]
            stats[g, b] = pool[rngs[g].integers(0, len(pool), size=len(pool))].mean()
    out = {}
    for g, name in enumerate(names):
        low, high = np.percentile(stats[g], [2.5, 97.5])
        out[name] = (float(pools[name].mean()), float(low), float(high))
    return out


def _max_difference(a: dict, b: dict, parts: slice = slice(None)) -> float:
    if set(a) != set(b):
        raise AssertionError(
            f"different groups: only ours {sorted(set(a) - set(b))[:5]}, only baseline {sorted(set(b) - set(a))[:5]}"
        )
    return max(abs(x - y) for key in a for x, y in zip(a[key][parts], b[key][parts]))


def _compare(name: str, table, resamples: int, repeats: int, baseline, label: str, exact: bool, work: str) -> Result:
    results: dict[str, dict] = {}
    ours_result, baseline_result = _ours(table, resamples), baseline(table, resamples)  # warm-up
    values = _max_difference(ours_result, baseline_result, slice(0, 1))
    everything = _max_difference(ours_result, baseline_result)
    if values > 1e-12 or (exact and everything > 1e-9):
        raise AssertionError(f"{name}: ours and the baseline disagree by {max(values, everything):.3g}")
    cpu: dict[str, list[float]] = {}
    ours_s, base_s = interleave(
        lambda r: results.__setitem__("ours", _ours(table, resamples)),
        lambda r: results.__setitem__("baseline", baseline(table, resamples)),
        repeats,
        cpu,
    )
    if _max_difference(results["ours"], results["baseline"], slice(0, 1)) > 1e-12:
        raise AssertionError(f"{name}: ours and the baseline disagree in a timed round")
    return Result(
        name,
        "ours: compute_breakdowns",
        ours_s,
        label,
        base_s,
        work=work,
        ours_cpu=cpu["ours"],
        baseline_cpu=cpu["baseline"],
        extra={
            "largest |ours - baseline| over the point estimates": f"{values:.3g}",
            (
                "largest |ours - baseline| over the exact intervals"
                if exact
                else "largest |BCa - percentile| over the interval bounds (different methods, same draws)"
            ): f"{everything:.3g}",
        },
    )


def run(quick: bool) -> list[Result]:
    n_rows, n_birds, resamples, repeats = (10_000, 50, 200, 5) if quick else (50_000, 200, 1000, 3)
    work = f"{n_rows} rows, {{groups}} groups (incl. overall), {resamples} resamples for a bootstrap"
    right = _table(n_rows, n_birds, 28)
    credits = _table(n_rows, n_birds, 28, credits=True)
    groups = len(_pools(right))
    return [
        _compare(
            "breakdowns, right/wrong values (exact intervals)",
            right,
            resamples,
            repeats,
            _baseline_exact,
            "dict grouping + scipy binomtest exact CI per group",
            True,
            work.format(groups=groups),
        ),
        _compare(
            "breakdowns, tie-aware credits (BCa bootstrap)",
            credits,
            resamples,
            repeats,
            _baseline_percentile,
            "dict grouping + per-resample percentile loop",
            False,
            work.format(groups=groups),
        ),
    ]
