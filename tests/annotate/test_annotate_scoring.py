"""Scoring rules, agreement, correlation and sampling on hand-made answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from conceptforge.errors import ConceptforgeError
from conceptforge.filters.annotation.db import Annotation
from conceptforge.filters.annotation.results import Rules, compute_results, row_decision
from conceptforge.filters.annotation.sampling import annotator_order, sample_items
from conceptforge.filters.annotation.stats import krippendorff_alpha, pearson, percent_agreement
from conceptforge.filters.annotation.studies import get_study, validate_answers

# ConceptBed Table 3 (rows: TI-LDM, TI-SD, DreamBooth, Custom Diffusion), as the paper prints it.
TABLE3 = yaml.safe_load((Path(__file__).with_name("conceptbed_table3.yaml")).read_text(encoding="utf-8"))


@pytest.mark.parametrize("task", sorted(TABLE3))
def test_pearson_reproduces_conceptbed_table3(task):
    row = TABLE3[task]
    assert pearson(row["dino"], row["human"]) == pytest.approx(row["r_dino"], abs=5e-5)
    assert pearson(row["ccd"], row["human"]) == pytest.approx(row["r_ccd"], abs=5e-5)


def test_pearson_matches_numpy_and_handles_degenerate_input():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=50), rng.normal(size=50)
    y = 0.3 * x + y
    assert pearson(list(x), list(y)) == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert pearson([1.0], [2.0]) is None
    assert pearson([1, 1, 1], [1, 2, 3]) is None
    with pytest.raises(ValueError):
        pearson([1, 2], [1])


# Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers, 12 units, missing data.
KRIPPENDORFF_EXAMPLE = [
    [1, 1, None, 1],
    [2, 2, 3, 2],
    [3, 3, 3, 3],
    [3, 3, 3, 3],
    [2, 2, 2, 2],
    [1, 2, 3, 4],
    [4, 4, 4, 4],
    [1, 1, 2, 1],
    [2, 2, 2, 2],
    [None, 5, 5, 5],
    [None, None, 1, 1],
    [None, 3, None, None],
]


@pytest.mark.parametrize("metric, expected", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)])
def test_krippendorff_alpha_published_example(metric, expected):
    units = [[v for v in unit if v is not None] for unit in KRIPPENDORFF_EXAMPLE]
    assert krippendorff_alpha(units, metric=metric) == pytest.approx(expected, abs=5e-4)


def test_agreement_edge_cases():
    assert krippendorff_alpha([["a", "a"], ["b", "b"]]) == pytest.approx(1.0)
    assert krippendorff_alpha([["a", "a"], ["a", "a"]]) is None  # no variation: undefined
    assert krippendorff_alpha([["a"], ["b"]]) is None  # nobody overlaps
    # Systematic disagreement is below chance.
    assert krippendorff_alpha([["a", "b"], ["b", "a"], ["a", "b"]]) < 0
    # Items: 3/3 agree -> 1; a,a,b -> 2 of 6 ordered pairs agree -> 1/3; single answers ignored.
    assert percent_agreement([["y", "y", "y"], ["y", "y", "n"], ["n"]]) == pytest.approx((1 + 1 / 3) / 2)
    assert percent_agreement([["y"]]) is None
    with pytest.raises(ValueError):
        krippendorff_alpha([[1, 2]], metric="ratio")


# --------------------------------------------------------------------------------------------
def sub_row(bird: str, attribute: str, index: int, removed: str | None = None) -> dict:
    group, value = attribute.split("::")
    return {
        "item_id": f"{bird}__{value}__{index}",
        "bird": bird,
        "attribute": attribute,
        "group": group,
        "value": value,
        "removed_attribute": f"{group}::brown" if removed is None else removed,
    }


def ann(annotator: str, item_id: str, **answers) -> Annotation:
    return Annotation(annotator, item_id, answers, 0.0, None)


def test_sub_faithfulness_scores_and_rule():
    rows = {}
    for bird in ("Jay", "Wren"):
        for attribute in ("has_crown_color::black", "has_wing_pattern::spotted", "has_bill_shape::needle"):
            for index in range(5):
                row = sub_row(bird, attribute, index)
                rows[row["item_id"]] = row
    wren_red = sub_row("Wren", "has_crown_color::red", 0, removed="has_crown_color::red")  # S+ = S-
    rows[wren_red["item_id"]] = wren_red
    answers = []
    # black: 9 yes + 1 somewhat -> yes share exactly 0.9 -> kept; Wren's birds drift ("no" twice).
    for i in range(5):
        answers.append(ann("a", f"Jay__black__{i}", attribute="yes", bird="yes"))
        answers.append(
            ann("a", f"Wren__black__{i}", attribute="somewhat" if i == 0 else "yes", bird="no" if i < 3 else "somewhat")
        )
    # spotted: 8 yes, 1 somewhat, 1 no -> 0.8 < 0.9 -> dropped with all its pairs.
    for i in range(5):
        answers.append(ann("a", f"Jay__spotted__{i}", attribute="yes", bird="yes"))
        answers.append(ann("a", f"Wren__spotted__{i}", attribute={0: "somewhat", 1: "no"}.get(i, "yes"), bird="yes"))
    # Jay's black pair gets a second annotator who says "no" on the attribute.
    answers.append(ann("b", "Jay__black__0", attribute="no", bird="yes"))
    answers.append(ann("a", "Wren__red__0", attribute="yes", bird="yes"))
    sample = [(r, "") for r in rows]
    results = compute_results(get_study("sub-faithfulness"), rows, answers, config={"split": "test"}, sample=sample)

    black = results["attributes"]["has_crown_color::black"]
    assert black["answers"] == 11 and black["items"] == 10
    assert black["attribute_yes"] == pytest.approx(9 / 11)  # b's "no" counts: 9/11 < 0.9
    assert not black["kept"]
    # Without b's answer the share is exactly 0.9: kept (the rule is "< 90%" drops).
    results = compute_results(
        get_study("sub-faithfulness"), rows, answers[:-2] + answers[-1:], config={"split": "test"}, sample=sample
    )
    black = results["attributes"]["has_crown_color::black"]
    assert black["attribute_yes"] == pytest.approx(0.9) and black["kept"]
    assert black["attribute_score"] == pytest.approx((9 + 0.5) / 10)
    assert results["attributes"]["has_wing_pattern::spotted"]["attribute_score"] == pytest.approx((8 + 0.5) / 10)
    assert not results["attributes"]["has_wing_pattern::spotted"]["kept"]
    assert results["attributes"]["has_bill_shape::needle"]["reason"] == "not annotated"
    assert not results["attributes"]["has_bill_shape::needle"]["kept"]
    pairs = results["pairs"]
    assert pairs["Jay|has_crown_color::black"]["kept"]
    wren_black = pairs["Wren|has_crown_color::black"]
    assert wren_black["bird_score"] == pytest.approx(1.0 / 5) and not wren_black["kept"]
    assert wren_black["reason"].startswith("excessive modification")
    assert pairs["Jay|has_wing_pattern::spotted"]["reason"] == "attribute dropped"
    assert "S+ = S-" in pairs["Wren|has_crown_color::red"]["reason"]
    assert results["birds"]["Wren"]["bird_yes"] == pytest.approx(6 / 11)  # Fig. 9: per-bird faithfulness
    assert results["kept_pairs"] == ["Jay|has_crown_color::black"]
    assert row_decision(results, rows["Jay__black__3"]) == (True, "")
    assert row_decision(results, rows["Jay__needle__0"])[0] is False
    # keep_unvalidated keeps attributes nobody looked at; their pairs are not judged.
    lenient = compute_results(
        get_study("sub-faithfulness"),
        rows,
        answers,
        config={"split": "test"},
        sample=sample,
        rules=Rules(keep_unvalidated=True, min_attribute_yes=0.8),
    )
    assert lenient["pairs"]["Jay|has_bill_shape::needle"]["kept"]
    assert lenient["attributes"]["has_crown_color::black"]["kept"]  # 9/11 >= 0.8


def test_sub_faithfulness_low_attribute_pair():
    rows = {
        r["item_id"]: r for r in [sub_row(b, "has_crown_color::black", i) for b in ("Jay", "Wren") for i in range(10)]
    }
    answers = [ann("a", f"Jay__black__{i}", attribute="yes", bird="yes") for i in range(10)]
    answers += [ann("a", f"Wren__black__{i}", attribute="yes" if i < 9 else "no", bird="yes") for i in range(10)]
    results = compute_results(
        get_study("sub-faithfulness"),
        rows,
        answers,
        config={"split": "test"},
        sample=[],
        rules=Rules(min_pair_attribute=0.95),
    )
    assert results["attributes"]["has_crown_color::black"]["kept"]  # 19/20 yes
    assert results["pairs"]["Wren|has_crown_color::black"]["reason"].startswith("low attribute accuracy")


def test_sub_attribute_human_accuracy():
    rows = {}
    for index in range(4):
        row = sub_row("Jay", "has_crown_color::black", index, removed="has_crown_color::blue")
        rows[row["item_id"]] = row
    other = sub_row("Wren", "has_bill_shape::needle", 0, removed="")  # no S- for this bird and group
    rows[other["item_id"]] = other
    answers = [
        ann("a", "Jay__black__0", value="black"),
        ann("b", "Jay__black__0", value="black"),
        ann("a", "Jay__black__1", value="blue"),  # picked the removed attribute: S+ and S- both wrong
        ann("a", "Jay__black__2", value="none"),  # S+ wrong, S- right
        ann("a", "Jay__black__3", value="black"),
        ann("a", "Wren__needle__0", value="cone"),
    ]
    results = compute_results(
        get_study("sub-attribute"),
        rows,
        answers,
        config={"split": "test"},
        sample=[],
        rules=Rules(min_pair_accuracy=0.5),
    )
    assert results["human"]["splus"] == pytest.approx(100 * 3 / 6)
    assert results["human"]["sminus"] == pytest.approx(100 * 4 / 5)  # Wren's answer has no S-
    attribute = results["attributes"]["has_crown_color::black"]
    assert attribute["splus_accuracy"] == pytest.approx(3 / 5)
    assert attribute["answer_counts"] == {"black": 3, "blue": 1, "none": 1}
    assert results["pairs"]["Wren|has_bill_shape::needle"]["sminus_accuracy"] is None
    assert results["dropped_pairs"] == {"Wren|has_bill_shape::needle": "human S+ accuracy 0.000 < 0.5"}
    assert results["agreement"]["value"]["items_with_2plus_annotators"] == 1
    assert results["agreement"]["value"]["percent_agreement"] == pytest.approx(1.0)


def cb_rows():
    rows = {}
    for learner in ("ti", "db", "cd"):
        for concept in ("cat", "dog"):
            for index in range(2):
                item_id = f"{learner}-{concept}-{index}"
                rows[item_id] = {
                    "item_id": item_id,
                    "learner": learner,
                    "concept": concept,
                    "caption": "x",
                    "category": "action" if index == 0 else "counting",
                }
    return rows


def test_conceptbed_ratings_and_metric_correlation():
    rows = cb_rows()
    ratings = {"ti": [5, 4, 5, 4], "db": [3, 3, 2, 3], "cd": [1, 2, 2, 1]}
    answers = []
    for learner, values in ratings.items():
        for item_id, rating in zip(sorted(k for k in rows if k.startswith(learner + "-")), values):
            answers.append(ann("a", item_id, rating=rating))
            answers.append(ann("b", item_id, rating=min(5, rating + 1)))
    learner_metric = {"ti": 0.05, "db": 0.30, "cd": 0.62, "unknown": 1.0}
    item_metric = {item: float(i) for i, item in enumerate(sorted(rows))}
    results = compute_results(
        get_study("conceptbed-composition"),
        rows,
        answers,
        config={"split": "composition"},
        sample=[],
        metrics={"ccd": learner_metric, "clip": item_metric},
        rules=Rules(min_item_score=2.0),
    )
    means = {name: np.mean(v + [min(5, r + 1) for r in v]) for name, v in ratings.items()}
    for learner, mean in means.items():
        assert results["learners"][learner]["mean_rating"] == pytest.approx(mean)
    ccd = results["correlations"][0]
    assert ccd["level"] == "learner" and ccd["n"] == 3 and ccd["unmatched_keys"] == 1
    expected = np.corrcoef([0.05, 0.30, 0.62], [means["ti"], means["db"], means["cd"]])[0, 1]
    assert ccd["pearson"] == pytest.approx(expected) and ccd["pearson"] < -0.9
    clip = results["correlations"][1]
    assert clip["level"] == "item" and clip["n"] == 12
    assert results["categories"]["action"]["answers"] == 12  # 6 items x 2 annotators
    assert set(results["dropped_items"]) == {"cd-cat-0", "cd-dog-1"}  # (1+2)/2 = 1.5 < 2
    assert row_decision(results, rows["cd-cat-0"])[0] is False
    assert row_decision(results, rows["cd-cat-1"]) == (True, "")
    assert results["agreement"]["rating"]["krippendorff_alpha"] > 0.5
    with pytest.raises(ConceptforgeError, match="fewer than two"):
        compute_results(
            get_study("conceptbed-composition"),
            rows,
            answers,
            config={},
            sample=[],
            metrics={"bad": {"nope": 1.0, "none": 2.0}},
        )


# --------------------------------------------------------------------------------------------
def test_sampling_is_seeded_and_per_group():
    rows = {f"item{i:03d}": {"attribute": f"attr{i % 3}"} for i in range(60)}
    group_of = lambda row: row["attribute"]  # noqa: E731
    first = sample_items(rows, group_of=group_of, per_group=4, seed=0, study="s")
    assert len(first) == 12
    assert {key for _, key in first} == {"attr0", "attr1", "attr2"}
    assert all(sum(1 for _, k in first if k == key) == 4 for key in ("attr0", "attr1", "attr2"))
    shuffled = dict(reversed(list(rows.items())))
    assert sample_items(shuffled, group_of=group_of, per_group=4, seed=0, study="s") == first
    assert sample_items(rows, group_of=group_of, per_group=4, seed=1, study="s") != first
    assert len(sample_items(rows, group_of=group_of, per_group=100, seed=0, study="s")) == 60  # small groups: all
    ids = [item for item, _ in first]
    alice = annotator_order(ids, seed=0, annotator="alice")
    assert sorted(alice) == sorted(ids) and alice == annotator_order(ids, seed=0, annotator="alice")
    assert alice != annotator_order(ids, seed=0, annotator="bob")
    with pytest.raises(ValueError):
        sample_items(rows, group_of=group_of, per_group=0, seed=0, study="s")


def test_validate_answers_rejects_malformed():
    faithfulness, attribute, rating = (
        get_study(n) for n in ("sub-faithfulness", "sub-attribute", "conceptbed-alignment")
    )
    row = sub_row("Jay", "has_crown_color::black", 0)
    groups = {"has_crown_color": ["black", "blue"]}
    assert validate_answers(faithfulness, {"attribute": "yes", "bird": "no"}, row, groups) == {
        "attribute": "yes",
        "bird": "no",
    }
    for bad in (
        None,
        [],
        {"attribute": "yes"},
        {"attribute": "yes", "bird": "maybe"},
        {"attribute": "yes", "bird": "no", "extra": 1},
        {"attribute": 1, "bird": "no"},
    ):
        with pytest.raises(ValueError):
            validate_answers(faithfulness, bad, row, groups)
    assert validate_answers(attribute, {"value": "none"}, row, groups) == {"value": "none"}
    with pytest.raises(ValueError):
        validate_answers(attribute, {"value": "red"}, row, groups)  # not a value of this group
    assert validate_answers(rating, {"rating": 5}, row, groups) == {"rating": 5}
    for bad in ({"rating": 0}, {"rating": 6}, {"rating": "5"}, {"rating": True}, {"rating": 4.0}):
        with pytest.raises(ValueError):
            validate_answers(rating, bad, row, groups)
    with pytest.raises(ConceptforgeError, match="unknown study"):
        get_study("sub-everything")
