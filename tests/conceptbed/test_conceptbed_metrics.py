"""CCD, ECE, accuracy and MSP on hand-built numbers; tables from score records."""

from __future__ import annotations

import math

import pytest

from conceptforge.errors import ConceptforgeError
from conceptforge.loaders.conceptbed import (
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
    line = next(l for l in text.splitlines() if l.startswith("| textual-inversion") and "0.1000" in l)
    assert "0.5000" in line and "0.4000" in line  # object, style, composition columns of Table 1
    original = next(l for l in text.splitlines() if l.startswith("| original"))
    assert set(original.strip("| ").split(" | ")[1:]) <= {"0.0000", "-"}
    path = tmp_path / "scores.jsonl"
    save_records(path, _records())
    assert load_records(path) == _records()
    assert report(load_records(path)) == report(_records())
