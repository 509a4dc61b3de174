"""Agreement numbers of the Validity section: Krippendorff's alpha by hand and against the
``krippendorff`` package, bootstrap intervals, and the VQA filter against people."""

from __future__ import annotations

import random

import krippendorff
import numpy as np
import pytest

from conceptforge.filters.annotation.agreement import agreement_part, annotator_rows, filter_row
from conceptforge.filters.annotation.stats import bootstrap_interval, krippendorff_alpha, percent_agreement


def test_nominal_alpha_by_hand():
    # four items, two answers each: (a,a) (a,b) (b,b) (a,a).
    # coincidences: o_aa = 4, o_ab = o_ba = 1, o_bb = 2; n_a = 5, n_b = 3, n = 8
    # D_o = 2/8; D_e = (5*3 + 3*5) / (8*7) = 30/56; alpha = 1 - (2/8) / (30/56) = 1 - 7/15 = 8/15
    units = [["a", "a"], ["a", "b"], ["b", "b"], ["a", "a"]]
    assert krippendorff_alpha(units, metric="nominal") == pytest.approx(8 / 15)
    assert percent_agreement(units) == pytest.approx(3 / 4)
    # an item with one answer carries no agreement information; no variation at all: undefined
    assert krippendorff_alpha(units + [["b"]], metric="nominal") == pytest.approx(8 / 15)
    assert krippendorff_alpha([["a", "a"], ["a", "a"]], metric="nominal") is None


def test_nominal_alpha_matches_the_krippendorff_package_with_missing_answers():

    rng = random.Random(7)
    coders, items = 4, 40
    table = np.full((coders, items), np.nan)
    for item in range(items):
        truth = rng.randrange(3)
        for coder in range(coders):
            if rng.random() < 0.75:  # some answers missing
                table[coder, item] = truth if rng.random() < 0.7 else rng.randrange(3)
    units = [[int(v) for v in table[:, item] if not np.isnan(v)] for item in range(items)]
    expected = krippendorff.alpha(reliability_data=table, level_of_measurement="nominal")
    assert krippendorff_alpha(units, metric="nominal") == pytest.approx(expected, abs=1e-12)
    ordinal = krippendorff.alpha(reliability_data=table, level_of_measurement="ordinal")
    assert krippendorff_alpha(units, metric="ordinal") == pytest.approx(ordinal, abs=1e-12)


def test_bootstrap_interval_is_fixed_and_brackets_the_estimate():
    units = [["a", "a"]] * 6 + [["a", "b"]] * 2 + [["b", "b"]] * 4
    interval = bootstrap_interval(units, percent_agreement)
    assert interval == bootstrap_interval(units, percent_agreement)  # seeded: the same on every rebuild
    low, high = interval
    assert low <= percent_agreement(units) <= high and 0.0 <= low < high <= 1.0
    assert bootstrap_interval([["a", "a"]] * 5, percent_agreement) == (1.0, 1.0)
    assert bootstrap_interval([["a", "a"]] * 5, lambda u: krippendorff_alpha(u)) is None  # never defined


def _results(study: str, answers: list[tuple[str, str, dict]]) -> dict:
    return {
        "study": study,
        "annotations": [{"annotator": who, "item_id": item, "answers": a} for who, item, a in answers],
    }


def test_vqa_filter_against_people_by_hand():
    results = _results(
        "sub-attribute",
        [
            ("ann1", "i1", {"value": "black"}),
            ("ann2", "i1", {"value": "black"}),
            ("ann1", "i2", {"value": "none"}),
            ("ann1", "i3", {"value": "black"}),
            ("ann1", "i4", {"value": "red"}),
            ("ann2", "i4", {"value": "black"}),  # people tie: left out of the filter comparison
        ],
    )
    rows = {
        "i1": {"vqa_answer": "black", "value": "black"},
        "i2": {"vqa_answer": "Other", "value": "black"},  # the VQA's "Other" is the people's "none"
        "i3": {"vqa_answer": "red", "value": "red"},
        "i4": {"vqa_answer": "black", "value": "black"},
    }
    row = filter_row(results, rows)
    # units (filter, people): (black, black) (none, none) (red, black). n_black = 3, n_none = 2, n_red = 1, n = 6
    # D_o = 2/6; D_e = 2 * (3*2 + 3*1 + 2*1) / (6*5) = 22/30; alpha = 1 - (1/3) / (22/30) = 6/11
    assert row["items"] == 3 and row["tied_items"] == 1
    assert row["alpha"] == pytest.approx(6 / 11)
    assert row["percent_agreement"] == pytest.approx(2 / 3)
    low, high = row["percent_agreement_ci"]
    assert low <= 2 / 3 <= high
    between = annotator_rows(results)
    assert [(r["comparison"], r["items"]) for r in between] == [("between annotators: value", 2)]
    assert between[0]["percent_agreement"] == pytest.approx((1 + 0) / 2)  # i1 agrees, i4 does not


def test_faithfulness_filter_comparison_and_conceptbed_without_filter():
    results = _results(
        "sub-faithfulness",
        [
            ("a", "i1", {"attribute": "yes", "bird": "yes"}),
            ("b", "i1", {"attribute": "somewhat", "bird": "no"}),  # mean 0.75: present
            ("a", "i2", {"attribute": "no", "bird": "yes"}),  # mean 0: absent
        ],
    )
    rows = {"i1": {"vqa_answer": "black", "value": "black"}, "i2": {"vqa_answer": "black", "value": "black"}}
    row = filter_row(results, rows)
    assert (row["items"], row["percent_agreement"]) == (2, 0.5)  # the filter says present for both
    part = agreement_part(results, rows)
    assert [r["comparison"] for r in part["rows"]] == [
        "between annotators: attribute",
        "between annotators: bird",
        "automatic filter vs people (VQA filter vs people: S+ present)",
    ]
    rating = _results("conceptbed-alignment", [("a", "x", {"rating": 4}), ("b", "x", {"rating": 5})])
    assert filter_row(rating, {}) is None
    assert "ConceptBed has no filter" in agreement_part(rating, {})["note"]
