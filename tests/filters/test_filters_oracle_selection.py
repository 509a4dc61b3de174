"""Classifier oracle, label mapping, reference-bird and attribute-candidate selection."""

import io
import json
from pathlib import Path

import numpy as np
import pytest
from datasets import Features, Value
from datasets import Image as ImageFeature
from PIL import Image

from conceptforge.commands import main as conceptforge
from conceptforge.errors import ConceptforgeError
from conceptforge.filters.classifier_oracle import ClassifierOracle, OracleError, map_labels, normalize_label
from conceptforge.filters.dataset_io import open_split
from conceptforge.filters.sub.candidate_selection import (
    BirdAccuracy,
    GroupAnswer,
    reference_bird_accuracy,
    search_thresholds,
    select_birds,
    threshold_grid,
)
from conceptforge.testing.sub_inputs import image_png
from conceptforge.testing.synthetic import write_dataset
from tests.filters.filter_helpers import select_attributes_args

REPO = Path(__file__).resolve().parents[2]


def _images(n):
    return [Image.open(io.BytesIO(image_png(100 + i))).convert("RGB") for i in range(n)]


def test_normalize_label_matches_cub_spellings():
    assert (
        normalize_label("001.Black_footed_Albatross")
        == normalize_label("Black-footed Albatross")
        == "blackfootedalbatross"
    )
    assert normalize_label("017.Cardinal") == normalize_label("cardinal")


def test_map_labels_sums_onto_targets_and_reports_gaps():
    id2label = {0: "001.Black_footed_Albatross", 1: "017.Cardinal", 2: "cardinal (female)", 3: "Blue Jay"}
    mapping = map_labels(id2label, ["Cardinal", "Blue_Jay"], overrides={"cardinal (female)": "Cardinal"})
    assert mapping.sources == ((1, 2), (3,)) and mapping.unmapped_labels == ("001.Black_footed_Albatross",)
    with pytest.raises(OracleError, match="1 target class\\(es\\) match no label.*Painted_Bunting"):
        map_labels(id2label, ["Cardinal", "Painted_Bunting"])
    lenient = map_labels(id2label, ["Cardinal", "Painted_Bunting"], require_all=False)
    assert lenient.unmapped_targets == ("Painted_Bunting",)


def test_oracle_probabilities(tiny_classifier):
    full = ClassifierOracle.from_pretrained(str(tiny_classifier), device="cpu")
    assert full.classes == ("001.Black_footed_Albatross", "017.Cardinal", "073.Blue_Jay", "094.White_breasted_Nuthatch")
    images = _images(5)
    out_full = full.score(images, batch_size=2)
    np.testing.assert_allclose(out_full.probs.sum(axis=1), 1.0, rtol=1e-9)
    np.testing.assert_allclose(out_full.mapped_mass, 1.0, rtol=1e-9)
    one_by_one = np.concatenate([full.score([im]).probs for im in images])
    np.testing.assert_allclose(out_full.probs, one_by_one, rtol=1e-5, atol=1e-7)

    two = ClassifierOracle.from_pretrained(str(tiny_classifier), device="cpu", target_classes=["Blue_Jay", "Cardinal"])
    out = two.score(images)
    expected_mass = out_full.probs[:, 1] + out_full.probs[:, 2]
    np.testing.assert_allclose(out.mapped_mass, expected_mass, rtol=1e-6)
    np.testing.assert_allclose(out.probs[:, 0], out_full.probs[:, 2] / expected_mass, rtol=1e-6)
    raw = ClassifierOracle.from_pretrained(
        str(tiny_classifier), device="cpu", target_classes=["Blue_Jay"], renormalize=False
    )
    np.testing.assert_allclose(raw.score(images).probs[:, 0], out_full.probs[:, 2], rtol=1e-6)


def _reference_dir(path, birds, per_bird):
    features = Features({"image": ImageFeature(), "bird": Value("string"), "item_id": Value("string")})
    rows = [
        {"image": {"bytes": image_png(7 * i + len(b)), "path": None}, "bird": b, "item_id": f"{b}__{i:03d}"}
        for b in birds
        for i in range(per_bird)
    ]
    return write_dataset(path, {"train": rows}, features)  # select-candidates reads the rows, not the card


def test_reference_bird_accuracy_matches_the_oracle(tiny_classifier, tmp_path):
    refs = open_split(_reference_dir(tmp_path / "refs", ["Blue_Jay", "Cardinal", "Black_footed_Albatross"], 3), "train")
    oracle = ClassifierOracle.from_pretrained(str(tiny_classifier), device="cpu")
    table = reference_bird_accuracy(refs, oracle, batch_size=2, progress=False)
    rows = list(refs.iter_rows())
    predicted = oracle.predict([Image.open(io.BytesIO(r["image"]["bytes"])) for r in rows])
    for entry in table:
        mine = [
            normalize_label(p) == normalize_label(r["bird"]) for p, r in zip(predicted, rows) if r["bird"] == entry.bird
        ]
        assert entry.images == 3 and entry.correct == sum(mine)
    assert select_birds([BirdAccuracy("a", 20, 20), BirdAccuracy("b", 20, 19), BirdAccuracy("c", 0, 0)]) == ["a"]
    assert select_birds([BirdAccuracy("a", 20, 20), BirdAccuracy("b", 20, 19)], min_accuracy=0.95) == ["a", "b"]


def test_threshold_search_picks_the_known_optimum():
    groups = {"has_bill_shape": ["dagger", "needle", "cone"]}
    answers = [
        GroupAnswer("has_bill_shape", "dagger", p, frozenset({"dagger"} if ok else {"needle"}))
        for p, ok in [
            (0.62, False),
            (0.72, False),
            (0.78, True),
            (0.81, True),
            (0.86, True),
            (0.90, True),
            (0.93, True),
            (0.99, False),
        ]
    ]
    answers += [GroupAnswer("has_bill_shape", "needle", 0.99, frozenset({"needle"}))] * 2
    table = {row.attribute: row for row in search_thresholds(answers, groups, min_support=3, min_accuracy=0.8)}
    dagger = table["has_bill_shape::dagger"]
    # precision 5/8 up to 0.62, 5/7 up to 0.72, 5/6 from 0.73 to 0.78 (the optimum), then lower.
    assert dagger.threshold == pytest.approx(0.73) and dagger.accuracy == pytest.approx(5 / 6)
    assert dagger.support == 6 and dagger.answered == 8 and dagger.selected
    needle = table["has_bill_shape::needle"]
    assert needle.threshold is None and not needle.selected  # 2 images < min_support 3
    assert not table["has_bill_shape::cone"].selected
    strict = {r.attribute: r for r in search_thresholds(answers, groups, min_support=3, min_accuracy=0.9)}
    assert not strict["has_bill_shape::dagger"].selected
    # Binary accuracy over all 10 images: 7/10 at 0.60, 9/10 from 0.73 to 0.78 (lowest wins), 8/10 at 0.79.
    binary = {r.attribute: r for r in search_thresholds(answers, groups, metric="accuracy", min_support=1)}
    assert binary["has_bill_shape::dagger"].threshold == pytest.approx(0.73)
    assert (
        binary["has_bill_shape::dagger"].accuracy == pytest.approx(0.9)
        and binary["has_bill_shape::dagger"].support == 10
    )
    assert threshold_grid()[0] == 0.6 and threshold_grid()[-1] == 0.95 and len(threshold_grid()) == 36
    with pytest.raises(ConceptforgeError, match="unknown metric"):
        search_thresholds(answers, groups, metric="f1")


def test_select_candidates_writes_a_spec_for_both_steps(tiny_classifier, tiny_vlm, mini_cub, tmp_path, capsys):
    spec = tmp_path / "spec.json"
    refs = _reference_dir(tmp_path / "refs", ["Blue_Jay", "Cardinal"], 2)
    assert (
        conceptforge(
            [
                "select-candidates",
                "birds",
                "--references",
                str(refs),
                "--classifier",
                str(tiny_classifier),
                "--min-accuracy",
                "0.0",
                "--device",
                "cpu",
                "--spec",
                str(spec),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "Blue_Jay" in printed and "2 of 2 classes" in printed
    args = select_attributes_args(
        mini_cub,
        tiny_vlm,
        "--images-per-class",
        "1",
        "--min-accuracy",
        "0.0",
        "--threshold-min",
        "0.0",
        "--spec",
        str(spec),
    )
    assert conceptforge(args) == 0
    data = json.loads(spec.read_text())
    assert data["birds"] == ["Blue_Jay", "Cardinal"]  # kept from the first step
    assert data["reference_selection"]["per_class"][0]["images"] == 2
    table = data["attribute_selection"]["table"]
    assert [r["attribute"] for r in table] == [
        "has_bill_shape::curved_(up_or_down)",
        "has_bill_shape::dagger",
        "has_bill_shape::needle",
    ]
    assert sum(r["answered"] for r in table) <= 4  # 4 images, one answer each (or Other)
    assert set(data["attributes"]) == {r["attribute"] for r in table if r["selected"]}
    from conceptforge.engine.store import ItemStore

    assert ItemStore(tmp_path / "spec.json.work").count("cub") == 4
    # Unknown group: one clear line.
    assert conceptforge([*args[:-2], "--groups", "has_fin_color", "--spec", str(spec)]) == 2
    assert "unknown attribute group 'has_fin_color'" in capsys.readouterr().err
    # --min-accuracy 0 with too little support: the line says why nothing was kept (was "0 of 3 at >= 0%").
    capsys.readouterr()
    strict = [("10" if a == "1" and args[i - 1] == "--min-support" else a) for i, a in enumerate(args)]
    assert conceptforge(strict) == 0
    assert (
        "0 of 3 attributes kept (precision >= 0% on at least 10 images; 3 never reach --min-support 10)"
        in capsys.readouterr().out
    )
