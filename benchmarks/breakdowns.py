"""Breakdowns with bootstrap intervals (``compute_breakdowns``) vs a plain per-resample loop over groups.

Ours: ``conceptforge.loaders.analysis.breakdowns.compute_breakdowns`` on a synthetic ``sub-vlm`` samples
table (S+ / S− rows, one row per item, 200 birds, 28 attribute groups): the overall S+ accuracy
and every group of every breakdown (side, per attribute group and per bird for S+ and S−), each
with a seeded percentile bootstrap interval (``loaders/analysis/bootstrap.py``).

Baseline, what a researcher would otherwise write: the groups (and each group's items) gathered
with Python dicts in one pass per breakdown, then a plain loop over resamples, and in it over groups, drawing ``rng.integers(0, n, size=n)`` item
indices from one ``PCG64(seed)`` generator per group (the draws the library documents) and
taking the mean; ``numpy.percentile`` at the end. Both sides therefore use the same index draws:
the benchmark raises unless every point estimate and interval agrees within 1e-12.

The library draws a single stratum's resamples as ``(rows, n)`` blocks of one ``rng.integers``
call each (the same draws as one call per resample) and keeps a per-resample loop for several
strata. ``extra`` also times one whole ``(B, n)`` draw per group and says whether it
reproduces the documented per-resample draws.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks._harness import Result, interleave

SIDES = ("S+", "S-")


def _table(n_rows: int, n_birds: int, n_groups: int, seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "item_id": np.array([f"i{i:07d}" for i in range(n_rows)], dtype=object),
        "side": np.where(rng.random(n_rows) < 0.5, "S+", "S-").astype(object),
        "bird": np.array([f"{b:03d}.Bird_{b}" for b in rng.integers(0, n_birds, n_rows)], dtype=object),
        "attribute_group": np.array([f"has_group_{g:02d}" for g in rng.integers(0, n_groups, n_rows)], dtype=object),
        "value": (rng.random(n_rows) < 0.6).astype(np.float64),
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


def _baseline(table, resamples: int) -> dict[tuple[str, str], tuple[float, float, float]]:
    """The researcher's version: groups from dicts, a loop over resamples, in it over groups."""
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


def _vectorised(table, resamples: int) -> dict[tuple[str, str], tuple[float, float, float]]:
    """The same groups as the baseline, one ``(B, n)`` draw per group (what a vectorised bootstrap would do)."""
    out = {}
    for name, pool in _pools(table).items():
        rng = np.random.Generator(np.random.PCG64(0))
        stats = pool[rng.integers(0, len(pool), size=(resamples, len(pool)))].mean(axis=1)
        low, high = np.percentile(stats, [2.5, 97.5])
        out[name] = (float(pool.mean()), float(low), float(high))
    return out


def _max_difference(a: dict, b: dict) -> float:
    if set(a) != set(b):
        raise AssertionError(
            f"different groups: only ours {sorted(set(a) - set(b))[:5]}, only baseline {sorted(set(b) - set(a))[:5]}"
        )
    return max(abs(x - y) for key in a for x, y in zip(a[key], b[key]))


def run(quick: bool) -> list[Result]:
    n_rows, n_birds, resamples, repeats = (10_000, 50, 200, 5) if quick else (50_000, 200, 1000, 3)
    table = _table(n_rows, n_birds, 28)
    results: dict[str, dict] = {}
    ours_result, baseline_result = _ours(table, resamples), _baseline(table, resamples)  # warm-up
    difference = _max_difference(ours_result, baseline_result)
    if difference > 1e-12:
        raise AssertionError(f"breakdowns and the plain loop disagree by {difference:.3g} (same draws)")
    cpu: dict[str, list[float]] = {}
    ours_s, base_s = interleave(
        lambda r: results.__setitem__("ours", _ours(table, resamples)),
        lambda r: results.__setitem__("baseline", _baseline(table, resamples)),
        repeats,
        cpu,
    )
    if _max_difference(results["ours"], results["baseline"]) > 1e-12:
        raise AssertionError("breakdowns and the plain loop disagree in a timed round")
    vector_s = []
    for _ in range(repeats):
        start = time.perf_counter()
        vectorised = _vectorised(table, resamples)
        vector_s.append(time.perf_counter() - start)
    vector_difference = _max_difference(vectorised, baseline_result)
    return [
        Result(
            "breakdowns bootstrap",
            "ours: compute_breakdowns",
            ours_s,
            "dict grouping + per-resample loop",
            base_s,
            work=f"{n_rows} rows, {len(ours_result)} groups (incl. overall), {resamples} resamples each",
            ours_cpu=cpu["ours"],
            baseline_cpu=cpu["baseline"],
            extra={
                "largest |ours - baseline| over value/low/high": f"{difference:.3g}",
                "one whole (B, n) draw per group (min / median s, after the rounds)": (
                    f"{min(vector_s):.3f} / {sorted(vector_s)[len(vector_s) // 2]:.3f}"
                ),
                "vectorised draw reproduces the documented draws": (
                    "yes"
                    if vector_difference <= 1e-12
                    else f"no (largest difference {vector_difference:.3g} over {len(baseline_result)} groups)"
                ),
            },
        )
    ]
