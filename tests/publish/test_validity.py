"""The Validity section's numbers (cards.validity and the generators' reports), worked out by hand on tiny cases."""

from __future__ import annotations

import pytest
from datasets import Features, Value

from conceptforge.cards import DatasetMetadata, SplitStats, render_card
from conceptforge.cards.validate import missing_sections
from conceptforge.cards.validity import (
    NOT_COMPUTED,
    chance_accuracy,
    consensus_choice_accuracy,
    consensus_scores,
    majority_accuracy,
    prior_choice_accuracy,
)
from conceptforge.generators.binding.validity import binding_validity, config_validity
from conceptforge.generators.conceptbed.validity import conceptbed_validity
from conceptforge.generators.sub.validity import sub_validity


def test_majority_splits_ties_evenly():
    # fit: a and b tie (2 each) -> half the time a (3 of 10 right), half b (1 of 10): (3 + 1) / 2 / 10
    assert majority_accuracy({"a": 2, "b": 2, "c": 1}, {"a": 3, "b": 1, "c": 6}) == pytest.approx(0.2)
    assert majority_accuracy({"a": 1}, {"a": 1, "b": 3}) == pytest.approx(0.25)
    assert majority_accuracy({}, {"a": 1}) is None and majority_accuracy({"a": 1}, {}) is None


def test_prior_choice_and_chance_by_hand():
    prior = {"red cube": 3, "blue sphere": 1}
    items = [
        (["blue sphere", "red cube", "gray cube"], 1),  # red cube has the top prior: right (1)
        (["blue sphere", "gray cube", "cyan cube"], 1),  # blue sphere wins, truth is gray cube: 0
        (["gray cube", "cyan cube"], 0),  # both unseen (0 vs 0): a tie of two, truth among them: 1/2
    ]
    accuracy, n = prior_choice_accuracy(prior, items)
    assert n == 3 and accuracy == pytest.approx((1 + 0 + 0.5) / 3)
    assert chance_accuracy([5, 5, 4, 0]) == (pytest.approx((0.2 + 0.2 + 0.25) / 3), 3)


def test_relational_distractors_give_the_true_caption_away():
    # true a R b, then bRa, aSb, aRc, cRb (generators.binding.compositions.relational_candidates)
    candidates = [
        "cube left sphere",
        "sphere left cube",
        "cube right sphere",
        "cube left cylinder",
        "cylinder left sphere",
    ]
    # true: 1 (bRa: 'left') + 2 (aSb: cube, sphere) + 2 (aRc: cube, left) + 2 (cRb: left, sphere) = 7
    # bRa: 1 + 0 + 1 + 1 = 3; aSb: 2 + 0 + 1 + 1 = 4; aRc: 2 + 1 + 1 + 1 = 5; cRb: 2 + 1 + 1 + 1 = 5
    assert consensus_scores(candidates) == [7, 3, 4, 5, 5]
    accuracy, n = consensus_choice_accuracy([(candidates, 0), (list(reversed(candidates)), 4)])
    assert (accuracy, n) == (1.0, 2)


def _object(color: str, shape: str, x: float = 0.0, y: float = 0.0) -> dict:
    return {"shape": shape, "color": color, "material": "rubber", "size": "large", "x": x, "y": y, "rotation": 0.0}


def _row(label: str, candidates: list[str], objects: list[dict], camera=None) -> dict:
    return {
        "label": label,
        "candidates": candidates,
        "label_index": candidates.index(label),
        "objects": objects,
        "camera": camera or {"location": [7.4, -6.9, 4.9], "lens": 35.0},
    }


def test_binding_baselines_and_held_out_counts_by_hand():
    rows = {
        "train": [
            _row("blue cube", ["blue cube", "gray sphere", "red cube"], [_object("blue", "cube")]),
            # a train picture that shows a gen composition (red cube): the check must find it
            _row(
                "gray sphere",
                ["red cube", "gray sphere", "blue cube"],
                [_object("gray", "sphere"), _object("red", "cube")],
            ),
        ],
        "val": [_row("brown cube", ["blue cube", "brown cube", "gray sphere"], [_object("brown", "cube")])],
        "gen": [_row("red cube", ["blue cube", "gray sphere", "red cube"], [_object("red", "cube")])],
    }
    part = config_validity("two-object", lambda split: iter(rows[split]), ["train", "val", "gen"])
    got = {(r["split"], r["baseline"]): r["accuracy"] for r in part["baselines"]}
    # train label slots 0 and 1 tie: half the time slot 0, half slot 1
    assert got[("train", "position majority (train)")] == pytest.approx((1 + 1) / 2 / 2)  # one 0 and one 1
    assert got[("val", "position majority (train)")] == pytest.approx((0 + 1) / 2)  # val's true slot is 1
    assert got[("gen", "position majority (train)")] == pytest.approx(0.0)  # gen's is 2
    # caption prior: train labels blue cube 1, gray sphere 1. val: blue cube and gray sphere tie, truth brown cube: 0
    assert got[("val", "caption prior (train)")] == 0.0
    assert got[("train", "caption prior (train)")] == pytest.approx((0.5 + 0.5) / 2)
    assert got[("gen", "caption prior (train)")] == 0.0  # red cube was never a train label
    assert got[("gen", "chance")] == pytest.approx(1 / 3)
    checks = {r["check"]: (r["checked"], r["held_out"], r["found"]) for r in part["held_out"]}
    assert checks["gen compositions in train pictures"] == (2, 8, 1)
    assert checks["val compositions in train pictures"] == (2, 2, 0)
    assert checks["gen compositions in val pictures"] == (1, 8, 0)
    assert checks["val compositions in gen pictures"] == (1, 2, 0)


def test_relational_held_out_check_recomputes_relations_from_positions():
    # CLEVR's camera at (7.4, -6.9, 4.9) looking at the origin: "front" is toward the camera.
    # A cylinder placed toward the camera from a cube is "cylinder front cube": a gen fact.
    cylinder, cube = _object("red", "cylinder", 2.0, -2.0), _object("blue", "cube", -2.0, 2.0)
    train = [_row("cube behind cylinder", ["cube behind cylinder", "cylinder behind cube"], [cube, cylinder])]
    part = config_validity("relational", lambda split: iter(train if split == "train" else []), ["train"])
    checks = {r["check"]: r["found"] for r in part["held_out"]}
    assert checks["gen compositions in train pictures"] == 1
    report = binding_validity({"relational": part})
    assert report["agreement"]["applicable"] is False and report["held_out"]["rows"] == part["held_out"]


def _sub(bird: str, attribute: str, removed: str) -> dict:
    group, value = attribute.split("::")
    return {"bird": bird, "attribute": attribute, "group": group, "value": value, "removed_attribute": removed}


def test_sub_baselines_by_hand():
    rows = [
        _sub("Blue_Jay", "has_crown_color::black", "has_crown_color::blue"),
        _sub("Blue_Jay", "has_crown_color::black", "has_crown_color::blue"),
        _sub("Cardinal", "has_crown_color::black", "has_crown_color::red"),
        _sub("Cardinal", "has_crown_color::blue", "has_crown_color::red"),
        _sub("Cardinal", "has_bill_shape::needle", ""),  # no S- in this group
        _sub("Blue_Jay", "has_crown_color::blue", "has_crown_color::blue"),  # S+ = S-: not an S- row
    ]
    report = sub_validity({"test": iter(rows)})
    got = {r["baseline"]: r for r in report["blind_baselines"]["rows"]}
    # crown colour: black 3, blue 2 -> always black: 3 right; bill shape: needle 1 -> 1 right. (3 + 1) / 6
    assert got["group prior"]["accuracy"] == pytest.approx(4 / 6)
    # S- rows: the 4 crown rows whose removed value differs from S+ (blue, blue, red, red); guessing
    # black avoids every one of them
    assert got["group prior"]["s_minus"] == 1.0 and got["group prior"]["n_minus"] == 4
    assert got["label majority"]["accuracy"] == pytest.approx(3 / 6)
    assert (got['always "none"']["accuracy"], got['always "none"']["s_minus"]) == (0.0, 1.0)
    (check,) = report["held_out"]["rows"]
    assert (check["checked"], check["held_out"], check["found"]) == (6, 5, 1)


def test_conceptbed_report_and_what_does_not_apply():
    rows = {
        "concept": [{"concept": "dog"}, {"concept": "dog"}, {"concept": "cat"}],
        "composition": [{"concept": "dog", "questions": ["is there a dog?", "is there a hat?"]}],
    }
    report = conceptbed_validity({k: iter(v) for k, v in rows.items()})
    got = {(r["split"], r["baseline"]): (r["accuracy"], r["n"]) for r in report["blind_baselines"]["rows"]}
    assert got[("concept", "concept majority")] == (pytest.approx(2 / 3), 3)
    assert got[("composition", 'always "yes"')] == (1.0, 2)
    assert report["held_out"]["applicable"] is False and "no training split" in report["held_out"]["reason"]


def test_card_renders_the_section_or_says_it_was_not_computed():
    features = Features({"x": Value("int32")})
    splits = [SplitStats("test", 6, 10, ["data/test-00000-of-00001.parquet"])]
    rows = [_sub("Blue_Jay", "has_crown_color::black", "has_crown_color::blue")] * 3
    metadata = DatasetMetadata(pretty_name="t", license="cc-by-4.0", summary="s", validity=sub_validity({"test": rows}))
    card = render_card(metadata, features, splits, has_grid=False)
    section = card.split("## Validity", 1)[1]
    assert "| test | group prior | 100.0%; s_minus 100.0% | 3 |" in section
    assert "### Held-out compositions" in section and "Not applicable: no human annotation" in section
    assert "Validity" not in missing_sections(card)
    bare = render_card(DatasetMetadata(pretty_name="t", license="cc-by-4.0", summary="s"), features, splits)
    assert NOT_COMPUTED in bare and "Validity" in missing_sections(bare)
    assert '"validity"' not in bare  # an empty report stays out of the card spec
