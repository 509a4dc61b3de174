"""Breakdown numbers and their intervals, worked out by hand on tiny fixed inputs.

Every interval is recomputed here from the documented methods (``loaders/analysis/bootstrap.py``):
proportions (every unit 0 or 1, one stratum) by the exact Clopper–Pearson interval, from
``scipy.stats.beta``; everything else by the BCa bootstrap written out below: a fresh
``Generator(PCG64(seed))``, per resample and per stratum ``rng.integers(0, n, size=n)`` over the
units in sorted key order, the bias correction z0 from the share of resamples below the estimate,
the acceleration from the jackknife, and the adjusted percentiles by linear interpolation.
Inputs go through real parquet files of the per-sample schema (tests/analysis/sample_files.py).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from scipy import stats as scipy_stats

from conceptforge.errors import DataFormatError
from conceptforge.loaders.analysis.bootstrap import BootstrapConfig
from conceptforge.loaders.analysis.breakdowns import compare, compute_breakdowns, describe
from conceptforge.loaders.harness.sample_columns import read_samples
from tests.analysis.sample_files import write_samples

CONFIG = BootstrapConfig(resamples=200, seed=7)
NORMAL = NormalDist()


def percentile(sorted_stats: list[float], q: float) -> float:
    """numpy's default (linear) percentile, by hand."""
    position = q / 100 * (len(sorted_stats) - 1)
    below = math.floor(position)
    above = min(below + 1, len(sorted_stats) - 1)
    return sorted_stats[below] + (position - below) * (sorted_stats[above] - sorted_stats[below])


def stratified_mean(pools: list[list[float]]) -> float:
    return sum(sum(pool) / len(pool) for pool in pools) / len(pools)


def hand_resamples(
    pools: list[list[float]], *, resamples: int = CONFIG.resamples, seed: int = CONFIG.seed
) -> list[float]:
    """``pools``: the units' values per stratum, strata and units in sorted key order."""
    rng = np.random.Generator(np.random.PCG64(seed))
    stats = []
    for _ in range(resamples):
        means = []
        for pool in pools:
            drawn = rng.integers(0, len(pool), size=len(pool))
            means.append(sum(pool[int(i)] for i in drawn) / len(pool))
        stats.append(sum(means) / len(means))
    return stats


def hand_bca(pools: list[list[float]]) -> tuple[float, float]:
    """The BCa interval (Efron 1987), every step written out."""
    theta = stratified_mean(pools)
    stats = sorted(hand_resamples(pools))
    if stats[0] == stats[-1]:
        return stats[0], stats[0]
    share = (sum(s < theta for s in stats) + 0.5 * sum(s == theta for s in stats)) / len(stats)
    z0 = NORMAL.inv_cdf(min(max(share, 0.5 / len(stats)), 1 - 0.5 / len(stats)))
    jack = []  # the statistic without each unit in turn
    for p, pool in enumerate(pools):
        for i in range(len(pool)):
            rest = [q if k != p else pool[:i] + pool[i + 1 :] for k, q in enumerate(pools)]
            rest = [q for q in rest if q]
            if rest:
                jack.append(stratified_mean(rest))
    mean = sum(jack) / len(jack)
    squares = sum((mean - j) ** 2 for j in jack)
    a = sum((mean - j) ** 3 for j in jack) / (6 * squares**1.5) if squares > 0 else 0.0
    levels = [NORMAL.cdf(z0 + (z0 + z) / (1 - a * (z0 + z))) for z in (NORMAL.inv_cdf(0.025), NORMAL.inv_cdf(0.975))]
    return percentile(stats, 100 * levels[0]), percentile(stats, 100 * levels[1])


def hand_clopper_pearson(k: int, n: int) -> tuple[float, float]:
    low = 0.0 if k == 0 else scipy_stats.beta.ppf(0.025, k, n - k + 1)
    high = 1.0 if k == n else scipy_stats.beta.ppf(0.975, k + 1, n - k)
    return low, high


def hand_interval(pools: list[list[float]]) -> tuple[float, float]:
    values = [v for pool in pools for v in pool]
    if len(pools) == 1 and all(v in (0.0, 1.0) for v in values):
        return hand_clopper_pearson(int(sum(values)), len(values))
    return hand_bca(pools)


def group(result, breakdown: str, label: str):
    found = next(b for b in result.breakdowns if b.name == breakdown)
    return next(g.estimate for g in found.groups if g.label == label)


def check(estimate, value: float, pools: list[list[float]], n: int) -> None:
    assert estimate.value == pytest.approx(value, abs=1e-12)
    low, high = hand_interval(pools)
    assert (estimate.low, estimate.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert estimate.n == n
    assert estimate.low <= estimate.value <= estimate.high


# ----------------------------------------------------------------------------------- binding
@pytest.mark.parametrize("task", ["binding-clip", "binding-csp", "binding-cdsm"])
def test_binding_relation_group_on_gen_split_by_hand(tmp_path, task):
    rows = [
        {
            "item_id": "gen/g1",
            "split": "gen",
            "dataset": "relational",
            "relation": "left of",
            "swap_kind": "hard-swap",
            "value": 0.5,
        },
        {
            "item_id": "gen/g2",
            "split": "gen",
            "dataset": "relational",
            "relation": "left of",
            "swap_kind": "random",
            "value": 1.0,
        },
        {
            "item_id": "gen/g3",
            "split": "gen",
            "dataset": "relational",
            "relation": "left of",
            "swap_kind": "random",
            "value": 0.0,
        },
        {
            "item_id": "gen/g4",
            "split": "gen",
            "dataset": "relational",
            "relation": "above",
            "swap_kind": "random",
            "value": 0.0,
        },
        {
            "item_id": "gen/g5",
            "split": "gen",
            "dataset": "single-object",
            "relation": None,
            "swap_kind": "hard-swap",
            "value": 1.0,
        },
        {
            "item_id": "train/t1",
            "split": "train",
            "dataset": "relational",
            "relation": "left of",
            "swap_kind": "random",
            "value": 0.0,
        },
    ]
    result = compute_breakdowns(
        read_samples(write_samples(tmp_path, task, rows)), config=CONFIG, main_metric="gen_accuracy"
    )
    assert describe(result.headline) == {
        "split": "gen"
    }  # the headline metric is gen accuracy: train rows are not in it
    check(group(result, "relation", "left of"), (0.5 + 1.0 + 0.0) / 3, [[0.5, 1.0, 0.0]], n=3)  # g1, g2, g3
    check(result.overall, (0.5 + 1.0 + 0.0 + 0.0 + 1.0) / 5, [[0.5, 1.0, 0.0, 0.0, 1.0]], n=5)
    # relation is null when not relational: no "(none)" group; every split is its own group
    assert [g.label for g in next(b for b in result.breakdowns if b.name == "relation").groups] == ["above", "left of"]
    check(group(result, "split", "train"), 0.0, [[0.0]], n=1)
    assert group(result, "swap-kind", "hard-swap").value == pytest.approx((0.5 + 1.0) / 2)


def test_binding_cdsm_headline_model_and_an_image_over_seeds_is_one_unit(tmp_path):
    values = {
        ("csp", 0): {"a": 1.0, "b": 0.0, "c": 1.0},
        ("csp", 1): {"a": 0.0, "b": 0.0, "c": 1.0},
        ("add", 0): {"a": 1.0, "b": 1.0, "c": 1.0},
    }
    rows = [
        {
            "item_id": f"{model}/seed{seed}/gen/{image}",
            "split": "gen",
            "dataset": "two-object",
            "relation": None,
            "swap_kind": "random",
            "binding_model": model,
            "seed": seed,
            "value": v,
        }
        for (model, seed), by_image in values.items()
        for image, v in by_image.items()
    ]
    samples = read_samples(write_samples(tmp_path, "binding-cdsm", rows))
    result = compute_breakdowns(samples, config=CONFIG, main_metric="csp.gen_accuracy")
    assert describe(result.headline) == {"binding_model": "csp", "split": "gen"}
    images = [(1.0 + 0.0) / 2, (0.0 + 0.0) / 2, (1.0 + 1.0) / 2]  # a, b, c: each the mean over the two seeds
    check(result.overall, sum(images) / 3, [images], n=6)  # = mean over seeds of the gen accuracy (2/3 and 1/3)
    assert (result.overall.n_units, result.overall.unit) == (3, "item")
    other = compute_breakdowns(samples, config=CONFIG, main_metric="add.gen_accuracy")
    assert (other.overall.value, other.overall.n) == (1.0, 3)


def test_paired_difference_over_shared_items_by_hand(tmp_path):
    a_rows = [
        {"item_id": f"g{i}", "split": "gen", "dataset": "d", "relation": None, "swap_kind": "random", "value": v}
        for i, v in enumerate([1.0, 1.0, 0.0, 1.0, 0.0])
    ]
    b_rows = [
        {"item_id": f"g{i}", "split": "gen", "dataset": "d", "relation": None, "swap_kind": "random", "value": v}
        for i, v in enumerate([0.0, 1.0, 1.0, 0.0])
    ] + [{"item_id": "only-b", "split": "gen", "dataset": "d", "relation": None, "swap_kind": "random", "value": 1.0}]
    a = read_samples(write_samples(tmp_path / "a", "binding-clip", a_rows))
    b = read_samples(write_samples(tmp_path / "b", "binding-clip", b_rows, model="model-b"))
    diffs = compare(a, b, compute_breakdowns(a, config=CONFIG), config=CONFIG)
    overall = diffs[("overall", "")]
    d = [1.0 - 0.0, 1.0 - 1.0, 0.0 - 1.0, 1.0 - 0.0]  # shared g0..g3; g4 and only-b are not paired
    assert overall.n_shared == 4
    assert overall.value == pytest.approx(sum(d) / 4)
    assert (overall.a, overall.b) == (pytest.approx(0.75), pytest.approx(0.5))
    # right/wrong outcomes: Newcombe's method 10. Shared table: both right g1 (e=1), only a g0, g3
    # (f=2), only b g2 (g=1), neither 0 (h=0): p_a = 3/4, p_b = 2/4, phi = (1*0 - 2*1)/sqrt(3*1*2*2)
    z = NORMAL.inv_cdf(0.975)

    def wilson(k, n):
        p = k / n
        centre, half = (
            (p + z * z / (2 * n)) / (1 + z * z / n),
            z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)),
        )
        return centre - half, centre + half

    (la, ua), (lb, ub), phi = wilson(3, 4), wilson(2, 4), -2 / math.sqrt(12)
    low = 0.25 - math.sqrt((0.75 - la) ** 2 - 2 * phi * (0.75 - la) * (ub - 0.5) + (ub - 0.5) ** 2)
    high = 0.25 + math.sqrt((ua - 0.75) ** 2 - 2 * phi * (ua - 0.75) * (0.5 - lb) + (0.5 - lb) ** 2)
    assert overall.method == "newcombe"
    assert (overall.low, overall.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    # exact McNemar: a right and b wrong on g0 and g3 (n+ = 2), the reverse on g2 (n- = 1);
    # p = 2 * P(X <= 1), X ~ Bin(3, 1/2) = 2 * (1 + 3) / 8 = 1.0
    assert (overall.test, overall.n_plus, overall.n_minus, overall.p_value) == ("exact McNemar", 2, 1, 1.0)


# ----------------------------------------------------------------------------------- SUB
def sub_rows() -> list[dict]:
    spec = [  # item, group, bird, side, value
        ("a1", "crown color", "Blue_Jay", "S+", 1.0),
        ("a2", "crown color", "Cardinal", "S+", 0.0),
        ("a3", "crown color", "Cardinal", "S+", 1.0),
        ("a4", "bill shape", "Blue_Jay", "S+", 0.0),
        ("a1", "crown color", "Blue_Jay", "S-", 1.0),
        ("a2", "crown color", "Cardinal", "S-", 1.0),
        ("a4", "bill shape", "Blue_Jay", "S-", 0.0),
        ("a5", "bill shape", "Blue_Jay", "S-", 1.0),
    ]
    return [
        {
            "item_id": f"{i}/{s}",
            "attribute_group": g,
            "bird": b,
            "attribute": f"has_{g.replace(' ', '_')}::x",
            "side": s,
            "value": v,
        }
        for i, g, b, s, v in spec
    ]


def test_sub_vlm_splus_per_attribute_group_and_sminus_per_bird_by_hand(tmp_path):
    samples = read_samples(write_samples(tmp_path, "sub-vlm", sub_rows()))
    result = compute_breakdowns(samples, config=CONFIG, main_metric="s_plus")
    assert describe(result.headline) == {"side": "S+"}
    check(result.overall, 2 / 4, [[1.0, 0.0, 1.0, 0.0]], n=4)  # S+ only, items a1..a4
    check(group(result, "splus-attribute-group", "crown color"), 2 / 3, [[1.0, 0.0, 1.0]], n=3)
    check(group(result, "sminus-bird", "Blue_Jay"), 2 / 3, [[1.0, 0.0, 1.0]], n=3)  # a1, a4, a5: S− rows only
    check(group(result, "side", "S-"), 3 / 4, [[1.0, 1.0, 0.0, 1.0]], n=4)
    check(compute_breakdowns(samples, config=CONFIG, main_metric="s_minus").overall, 3 / 4, [[1.0, 1.0, 0.0, 1.0]], n=4)


def test_sub_cbm_all_right_group_has_an_exact_interval_not_a_point(tmp_path):
    rows = [r for r in sub_rows() if r["attribute_group"] == "crown color" and r["side"] == "S-"]  # both right
    rows += [r for r in sub_rows() if r["side"] == "S+"]
    result = compute_breakdowns(read_samples(write_samples(tmp_path, "sub-cbm", rows)), config=CONFIG)
    crown = group(result, "sminus-attribute-group", "crown color")
    # every bootstrap resample of 2/2 is 1: the percentile bootstrap said [1, 1]; Clopper-Pearson's
    # lower bound for k = n solves p^n = 0.025: sqrt(0.025) = 0.158
    assert (crown.value, crown.high, crown.n, crown.method) == (1.0, 1.0, 2, "clopper-pearson")
    assert crown.low == pytest.approx(math.sqrt(0.025), abs=1e-12)
    check(group(result, "splus-bird", "Cardinal"), 1 / 2, [[0.0, 1.0]], n=2)


# ----------------------------------------------------------------------------------- CompMap
def test_compmap_cub_mean_over_episodes_resamples_episodes_by_hand(tmp_path):
    rows = []
    queries = {0: [1, 0], 1: [1, 1, 1, 0], 2: [0, 0, 0, 0, 1, 1]}  # 5-way 1-shot episodes of unequal size
    for episode, values in queries.items():
        rows += [
            {"item_id": f"e{episode}q{q}", "n_way": 5, "k_shot": 1, "episode": episode, "value": float(v)}
            for q, v in enumerate(values)
        ]
    rows += [{"item_id": f"x{q}", "n_way": 10, "k_shot": 1, "episode": 0, "value": 1.0} for q in range(3)]
    rows += [
        {"item_id": f"full{q}", "n_way": 200, "k_shot": None, "episode": 0, "value": v}
        for q, v in enumerate([1.0, 0.0, 0.0])
    ]
    samples = read_samples(write_samples(tmp_path, "compmap-cub", rows))
    result = compute_breakdowns(samples, config=CONFIG, main_metric="5-way-1-shot.prim")
    per_episode = [1 / 2, 3 / 4, 2 / 6]
    check(result.overall, sum(per_episode) / 3, [per_episode], n=12)  # 0.5278, not the pooled 6/12
    assert result.overall.value != pytest.approx(6 / 12)
    assert (result.overall.unit, result.overall.n_units) == ("episode", 3)
    check(group(result, "setting", "5-way 1-shot"), sum(per_episode) / 3, [per_episode], n=12)
    full = group(result, "setting", "200-way full shot")  # one pass: its queries are resampled
    check(full, 1 / 3, [[1.0, 0.0, 0.0]], n=3)
    assert full.unit == "item"
    assert [g.label for g in result.breakdowns[0].groups] == ["5-way 1-shot", "10-way 1-shot", "200-way full shot"]
    # without a main metric the headline is the first (n, k) setting
    assert describe(compute_breakdowns(samples, config=CONFIG).headline) == {"n_way": 5, "k_shot": 1}


def test_compmap_cub_rows_as_the_evaluation_writes_them(tmp_path):
    """One row per (setting, row, episode) holding the episode's accuracy; full shot: one per image."""
    shares = {"prim": [0.2, 0.6, 0.4, 1.0], "oracle": [0.9, 0.9, 0.9, 0.9]}
    rows = [
        {
            "item_id": f"5-way-1-shot/{row}/{e}",
            "n_way": 5,
            "k_shot": 1,
            "episode": e,
            "setting": "5-way-1-shot",
            "row": row,
            "value": v,
        }
        for row, values in shares.items()
        for e, v in enumerate(values)
    ]
    rows += [
        {
            "item_id": f"full-shot/prim/{i}",
            "n_way": 200,
            "k_shot": None,
            "episode": 0,
            "setting": "full-shot",
            "row": "prim",
            "value": v,
        }
        for i, v in enumerate([1.0, 1.0, 0.0, 1.0])
    ]
    result = compute_breakdowns(
        read_samples(write_samples(tmp_path, "compmap-cub", rows)), config=CONFIG, main_metric="5-way-1-shot.prim"
    )
    assert describe(result.headline) == {"row": "prim", "setting": "5-way-1-shot"}
    check(result.overall, sum(shares["prim"]) / 4, [shares["prim"]], n=4)  # oracle rows are another metric
    check(group(result, "setting", "200-way full shot"), 3 / 4, [[1.0, 1.0, 0.0, 1.0]], n=4)
    oracle = compute_breakdowns(
        read_samples(tmp_path / "compmap-cub.parquet"), config=CONFIG, main_metric="5-way-1-shot.oracle"
    )
    assert oracle.overall.value == pytest.approx(0.9)


def test_compmap_mit_states_seen_and_unseen_by_hand(tmp_path):
    spec = [
        ("i1", True, 1.0),
        ("i2", True, 0.0),
        ("i3", True, 1.0),
        ("i4", False, 0.0),
        ("i5", False, 1.0),
        ("i6", False, 0.0),
    ]
    rows = [
        {
            "item_id": f"closed/prim/{i}",
            "pair": f"p{i}",
            "attr": "old",
            "obj": "car",
            "seen": s,
            "world": "closed",
            "row": "prim",
            "value": v,
        }
        for i, s, v in spec
    ]
    rows += [
        {**row, "item_id": row["item_id"].replace("closed", "open"), "world": "open", "value": 1.0} for row in rows
    ]
    result = compute_breakdowns(
        read_samples(write_samples(tmp_path, "compmap-mit-states", rows)), config=CONFIG, main_metric="closed.prim.auc"
    )
    assert describe(result.headline) == {"world": "closed", "row": "prim"}  # the open world's rows are another metric
    assert [g.label for g in result.breakdowns[0].groups] == ["seen", "unseen"]
    check(group(result, "seen", "unseen"), 1 / 3, [[0.0, 1.0, 0.0]], n=3)
    check(group(result, "seen", "seen"), 2 / 3, [[1.0, 0.0, 1.0]], n=3)
    check(result.overall, 3 / 6, [[1.0, 0.0, 1.0, 0.0, 1.0, 0.0]], n=6)


# ----------------------------------------------------------------------------------- ConceptBed
def ccd_row(source: str, task: str, concept: str, category: str, item: str, value: float) -> dict:
    return {
        "item_id": f"{source}/{task}/{item}",
        "source": source,
        "oracle_task": task,
        "concept": concept,
        "concept_category": category,
        "value": value,
    }


def test_conceptbed_ccd_per_category_is_a_per_concept_mean_resampled_within_concepts(tmp_path):
    rows = [  # value = mean real confidence − this image's confidence
        ccd_row("ti", "composition", "fish", "action", "f1", 0.3),
        ccd_row("ti", "composition", "fish", "action", "f2", 0.1),
        ccd_row("ti", "composition", "fish", "action", "f3", 0.2),
        ccd_row("ti", "composition", "fish", "action", "f5", 0.0),
        ccd_row("ti", "composition", "style", "action", "s1", -0.1),
        ccd_row("ti", "composition", "style", "action", "s2", 0.0),
        ccd_row("ti", "composition", "fish", "counting", "f4", 0.4),
        ccd_row("ti", "composition", "style", "action;counting", "s3", 0.2),  # in both categories
        ccd_row("ti", "concept", "fish", "concept", "c1", -0.5),  # the other oracle task: not the headline's
        ccd_row("original", "composition", "fish", "action", "r1", 0.05),  # a real image: not generated
    ]
    result = compute_breakdowns(
        read_samples(write_samples(tmp_path, "conceptbed-ccd", rows)), config=CONFIG, main_metric="composition.ccd"
    )
    assert describe(result.headline) == {"source": "not original", "oracle_task": "composition"}
    fish, style = [0.3, 0.1, 0.2, 0.0], [-0.1, 0.0, 0.2]  # action: f1 f2 f3 f5 | s1 s2 s3
    # Eq. 3 within "action": the mean over concepts of each concept's mean, not the pooled mean
    check(group(result, "category", "action"), (0.6 / 4 + 0.1 / 3) / 2, [fish, style], n=7)
    assert group(result, "category", "action").value != pytest.approx(sum(fish + style) / 7)
    check(group(result, "category", "counting"), (0.4 + 0.2) / 2, [[0.4], [0.2]], n=2)
    check(group(result, "concept", "style"), (-0.1 + 0.0 + 0.2) / 3, [[-0.1, 0.0, 0.2]], n=3)
    check(
        result.overall,
        ((0.3 + 0.1 + 0.2 + 0.4 + 0.0) / 5 + (-0.1 + 0.0 + 0.2) / 3) / 2,
        [[0.3, 0.1, 0.2, 0.4, 0.0], [-0.1, 0.0, 0.2]],
        n=8,
    )
    assert [g.label for g in result.breakdowns[0].groups] == ["action", "counting"]


def test_conceptbed_headline_source_and_task_come_from_the_main_metric(tmp_path):
    rows = [
        ccd_row("ti", "composition", "fish", "action", "a", 0.4),
        ccd_row("db", "composition", "fish", "action", "b", 0.1),
        ccd_row("ti", "concept", "fish", "concept", "c", -0.5),
        ccd_row("ti", "concept", "style", "concept", "d", -0.3),
    ]
    samples = read_samples(write_samples(tmp_path, "conceptbed-ccd", rows))
    check(compute_breakdowns(samples, config=CONFIG, main_metric="db.composition.ccd").overall, 0.1, [[0.1]], n=1)
    concept = compute_breakdowns(samples, config=CONFIG, main_metric="ti.concept.ccd")
    check(concept.overall, (-0.5 + -0.3) / 2, [[-0.5], [-0.3]], n=2)


# ----------------------------------------------------------------------------------- input
def test_a_file_without_the_value_column_is_one_error(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "sub-vlm.parquet"
    pq.write_table(pa.table({"item_id": ["a"], "score": [1.0]}), path)
    with pytest.raises(DataFormatError, match="lacks column.s. value of the per-sample schema"):
        read_samples(path)


def test_null_values_are_not_counted(tmp_path):
    rows = [
        {"item_id": "i1", "pair": "p", "attr": "a", "obj": "o", "seen": True, "value": 1.0},
        {"item_id": "i2", "pair": "p", "attr": "a", "obj": "o", "seen": True, "value": None},
    ]
    result = compute_breakdowns(read_samples(write_samples(tmp_path, "compmap-mit-states", rows)), config=CONFIG)
    assert (result.overall.value, result.overall.n) == (1.0, 1)
