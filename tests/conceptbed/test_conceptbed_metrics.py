"""CCD, ECE, accuracy and MSP on hand-built numbers; tables from score records."""

from __future__ import annotations

import math

import pytest

from conceptforge.errors import ConceptforgeError
from conceptforge.loaders.conceptbed.metrics import (
    ORIGINAL,
    ScoreRecord,
    compute_metrics,
    concept_confidence_deviation,
    evaluate,
    expected_calibration_error,
    load_records,
    report,
    save_records,
)


def test_ccd_is_zero_for_identical_distributions():
    probs = {"a": [0.9, 0.7, 0.8], "b": [0.6, 0.65]}
    assert concept_confidence_deviation(probs, probs) == pytest.approx(0.0)


def test_ccd_sign_follows_the_paper():
    real = {"a": [0.9, 0.7], "b": [0.6]}
    worse = {"a": [0.5, 0.3], "b": [0.8]}
    # per concept: real - gen = 0.4 and -0.2; CCD = mean = 0.1 (positive: deviates from real)
    assert concept_confidence_deviation(worse, real) == pytest.approx(0.1)
    assert concept_confidence_deviation({"a": [1.0, 1.0]}, {"a": [0.5]}) == pytest.approx(-0.5)


def test_ccd_needs_real_scores_for_every_concept():
    with pytest.raises(ConceptforgeError, match="no real-image scores"):
        concept_confidence_deviation({"a": [0.5], "b": [0.5]}, {"a": [0.5]})


def test_ece_on_a_known_example():
    # two bins used: conf 0.9 (acc 0.5) and conf 0.6 (acc 1.0); each holds half the samples
    assert expected_calibration_error([0.9, 0.9, 0.6, 0.6], [1, 0, 1, 1]) == pytest.approx(0.5 * 0.4 + 0.5 * 0.4)
    assert expected_calibration_error([0.9, 0.9, 0.6, 0.6], [1, 0, 1, 1], n_bins=10) == pytest.approx(0.4)
    # perfectly calibrated: 3 of 4 right at confidence 0.75
    assert expected_calibration_error([0.75] * 4, [1, 1, 1, 0]) == pytest.approx(0.0)
    assert math.isnan(expected_calibration_error([], []))


def _rec(source, task, concept, p, correct=True, categories=(), m=None):
    return ScoreRecord(source, task, concept, p, p if m is None else m, correct, tuple(categories))


def test_compute_metrics_accuracy_msp():
    gen = [_rec("ti", "object", "a", 0.2, False, m=0.8), _rec("ti", "object", "a", 0.6, True)]
    real = [_rec(ORIGINAL, "object", "a", 0.9)]
    m = compute_metrics(gen, real)
    assert m.n == 2 and m.accuracy == 0.5 and m.msp == pytest.approx(0.7)
    assert m.ccd == pytest.approx(0.9 - 0.4) and m.per_concept_ccd == {"a": pytest.approx(0.5)}


def _records():
    recs = [
        _rec(ORIGINAL, "object", "beagle", 0.9),
        _rec(ORIGINAL, "object", "tabby", 0.8),
        _rec(ORIGINAL, "style", "sketch", 0.7),
        _rec("textual-inversion", "object", "beagle", 0.7),
        _rec("textual-inversion", "object", "tabby", 0.8),
        _rec("textual-inversion", "style", "sketch", 0.2, False, m=0.8),
        _rec("textual-inversion", "composition", "beagle", 0.5, categories=("attribute",)),
        _rec("textual-inversion", "vqa", "beagle", 0.6, categories=("attribute",)),
        _rec("textual-inversion", "vqa", "beagle", 0.4, False, categories=("action", "relation"), m=0.6),
        _rec(ORIGINAL, "vqa", "beagle", 0.8, categories=("attribute",)),
        _rec(ORIGINAL, "vqa", "beagle", 0.9, categories=("action", "relation")),
    ]
    return recs


def test_evaluate_per_task_and_category():
    results = evaluate(_records())
    assert results[("textual-inversion", "object", "")].ccd == pytest.approx(((0.9 - 0.7) + (0.8 - 0.8)) / 2)
    assert results[("textual-inversion", "style", "")].ccd == pytest.approx(0.5)
    assert results[("textual-inversion", "composition", "")].ccd == pytest.approx(0.4)  # vs real beagle images
    assert results[("textual-inversion", "vqa", "")].ccd == pytest.approx(0.85 - 0.5)
    assert results[("textual-inversion", "vqa", "attribute")].ccd == pytest.approx(0.8 - 0.6)
    assert results[("textual-inversion", "vqa", "relation")].ccd == pytest.approx(0.9 - 0.4)
    assert results[("textual-inversion", "vqa", "relation")].accuracy == 0.0
    for key, metrics in results.items():
        if key[0] == ORIGINAL:
            assert metrics.ccd == pytest.approx(0.0)


def test_report_prints_paper_tables(tmp_path):
    text = report(_records(), per_concept=True)
    assert "Table 1" in text and "Table 2" in text and "Table 7 (Objects (ImageNet))" in text
    assert "Concept alignment on composite prompts per category" in text
    line = next(row for row in text.splitlines() if row.startswith("| textual-inversion") and "0.1000" in row)
    assert "0.5000" in line and "0.4000" in line  # object, style, composition columns of Table 1
    original = next(row for row in text.splitlines() if row.startswith("| original"))
    assert set(original.strip("| ").split(" | ")[1:]) <= {"0.0000", "-"}
    path = tmp_path / "scores.jsonl"
    save_records(path, _records())
    assert load_records(path) == _records()
    assert report(load_records(path)) == report(_records())


def _vqa(source, concept, category, p):
    return ScoreRecord(source, "vqa", concept, p, p, p >= 0.5, (category,))


def test_ccd_aggregations_by_hand():
    """VQA "yes" probabilities. Generated: A/relation .2 .4, B/relation .9, B/action .7,
    C/action .5. Real: A/relation .8, B/relation .6, B/action .9, C/action .7.

    Paper Eq. 3 (per concept, real − gen): A .8 − (.2+.4)/2 = .5; B (.6+.9)/2 − (.9+.7)/2 = −.05;
    C .7 − .5 = .2 -> mean .65/3 = 0.216667.
    Authors' objects script (pooled): real (.8+.6+.9+.7)/4 = .75, gen (.2+.4+.9+.7+.5)/5 = .54
    -> 0.21. Authors' composition script (per category, then mean): relation (.8+.6)/2 −
    (.2+.4+.9)/3 = .7 − .5 = .2; action (.9+.7)/2 − (.7+.5)/2 = .8 − .6 = .2 -> 0.2.
    Their scripts print gen − real; with the paper's sign all three are positive here.
    """
    records = [
        _vqa("ti", "A", "relation", 0.2),
        _vqa("ti", "A", "relation", 0.4),
        _vqa("ti", "B", "relation", 0.9),
        _vqa("ti", "B", "action", 0.7),
        _vqa("ti", "C", "action", 0.5),
        _vqa(ORIGINAL, "A", "relation", 0.8),
        _vqa(ORIGINAL, "B", "relation", 0.6),
        _vqa(ORIGINAL, "B", "action", 0.9),
        _vqa(ORIGINAL, "C", "action", 0.7),
    ]
    results = evaluate(records)
    m = results[("ti", "vqa", "")]
    assert m.ccd == pytest.approx(0.65 / 3)
    assert m.ccd_pooled == pytest.approx(0.21)
    assert m.ccd_category_mean == pytest.approx(0.2)
    assert results[("ti", "vqa", "relation")].ccd_pooled == pytest.approx(0.2)
    assert results[("ti", "vqa", "action")].ccd_pooled == pytest.approx(0.2)
    text = report(records)
    row = next(line for line in text.splitlines() if line.startswith("| ti | vqa"))
    assert row.split(" | ")[2:] == ["0.2167", "0.2100", "0.2000 |"]
    assert "authors' objects script" in text and "authors' composition script" in text


def test_pooled_ccd_for_objects_by_hand():
    """Objects: concept a gen [.2], real [.6, .8]; concept b gen [.5, .7, .9], real [.7].
    Eq. 3: a .7 − .2 = .5, b .7 − .7 = 0 -> .25. Pooled: real (.6+.8+.7)/3 = .7, gen
    (.2+.5+.7+.9)/4 = .575 -> .125. No categories: the composition aggregation is undefined."""
    gen = [ScoreRecord("db", "object", "a", 0.2, 0.2, False)] + [
        ScoreRecord("db", "object", "b", p, p, True) for p in (0.5, 0.7, 0.9)
    ]
    real = [ScoreRecord(ORIGINAL, "object", "a", p, p, True) for p in (0.6, 0.8)] + [
        ScoreRecord(ORIGINAL, "object", "b", 0.7, 0.7, True)
    ]
    m = compute_metrics(gen, real)
    assert m.ccd == pytest.approx(0.25) and m.ccd_pooled == pytest.approx(0.125)
    assert math.isnan(evaluate(gen + real)[("db", "object", "")].ccd_category_mean)
