"""scripts/annotate.py as a user runs it: serving, one-line errors, export and apply."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from conceptforge.filters.annotation.session import StudySettings, open_study

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "annotate.py"
ENV = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=ENV, timeout=timeout
    )


def assert_one_line_error(result: subprocess.CompletedProcess, needle: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_study(sub_dataset):
    assert_one_line_error(run(sub_dataset, "--study", "sub-everything"), "unknown study 'sub-everything'")


def test_dataset_lacking_columns(tmp_path, sub_dataset, conceptbed_dataset):
    assert_one_line_error(
        run(conceptbed_dataset, "--study", "sub-faithfulness", "--split", "concept"),
        "lacks the columns bird, attribute, group, value, removed_attribute",
    )
    # by hand: a SUB dataset has none of ConceptBed's concept, learner, reference_images columns
    assert_one_line_error(
        run(sub_dataset, "--study", "conceptbed-alignment"),
        f"error: {sub_dataset} is not a ConceptBed dataset of conceptforge's schema (it lacks the columns "
        "concept, learner, reference_images; see docs/schemas.md): study conceptbed-alignment is for ConceptBed datasets",
    )
    assert_one_line_error(run(tmp_path / "missing", "--study", "sub-attribute"), "argument DATASET_DIR: ")
    (tmp_path / "empty").mkdir()
    assert_one_line_error(run(tmp_path / "empty", "--study", "sub-attribute"), "is not a dataset directory")


def test_port_in_use(sub_dataset, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run(sub_dataset, "--study", "sub-faithfulness", "--port", port, "--db", tmp_path / "db.sqlite")
    assert_one_line_error(result, f"port {port} on 127.0.0.1 is already in use")


def test_export_before_any_study(sub_dataset, tmp_path):
    assert_one_line_error(
        run(
            sub_dataset,
            "--study",
            "sub-faithfulness",
            "--db",
            tmp_path / "none.sqlite",
            "--export",
            tmp_path / "r.json",
        ),
        "no annotations yet",
    )
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(("stop", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_serve_then_stop(sub_dataset, tmp_path, stop, exit_code):
    process = subprocess.Popen(
        [
            sys.executable,
            str(SCRIPT),
            str(sub_dataset),
            "--study",
            "sub-attribute",
            "--port",
            "0",
            "--db",
            str(tmp_path / "db.sqlite"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("serving sub-attribute (18 items) at http://127.0.0.1:"), line
        url = line.split(" at ")[1].split()[0]
        study = json.loads(urllib.request.urlopen(url + "api/study", timeout=10).read())
        assert study["name"] == "sub-attribute" and study["total"] == 18  # 6 pairs x 3 (the default per pair)
    finally:
        process.send_signal(stop)
        _, err = process.communicate(timeout=30)
    assert process.returncode == exit_code  # issue 20.3: a stop signal is an interrupted run, not success
    assert f"stopped by {stop.name}; answers are saved" in err


def test_export_and_apply_conceptbed_with_metric(conceptbed_dataset, tmp_path):
    db = tmp_path / "align.sqlite"
    app, _ = open_study(StudySettings(dataset_dir=conceptbed_dataset, study="conceptbed-alignment", db=db, per_group=2))
    ratings = {"textual-inversion": 5, "dreambooth": 2}
    for annotator, shift in (("a", 0), ("b", -1)):
        for item_id in app.sample:
            app.db.add(annotator, item_id, {"rating": ratings[app.dataset.rows[item_id]["learner"]] + shift})
    metric = tmp_path / "ccd.json"
    metric.write_text(json.dumps({"textual-inversion": 0.1, "dreambooth": 0.7}))
    per_item = tmp_path / "dino.json"
    values = {item_id: float(i) for i, item_id in enumerate(app.sample)}
    per_item.write_text(json.dumps(values))
    out = tmp_path / "validated"
    study = [conceptbed_dataset, "--study", "conceptbed-alignment", "--db", db]
    metrics = ["--metric", f"ccd={metric}", "--metric", f"dino={per_item}"]
    result = run(*study, "--export", tmp_path / "r.json", "--apply", out, *metrics, "--annotated-only")
    assert result.returncode == 0, result.stderr
    assert "pearson(ccd, human) = -1.0000 over 2 learner(s)" in result.stdout
    assert "| textual-inversion | 8 | 4.500 |" in result.stdout
    assert "Krippendorff's alpha (ordinal) = " in result.stdout
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["learners"]["textual-inversion"]["mean_rating"] == pytest.approx(4.5)
    assert results["learners"]["dreambooth"]["mean_rating"] == pytest.approx(1.5)
    dino = results["correlations"][1]
    human = [results["items"][i]["mean_rating"] for i in sorted(values)]
    assert dino["level"] == "item" and dino["pearson"] == pytest.approx(
        np.corrcoef([values[i] for i in sorted(values)], human)[0, 1]
    )
    assert len(results["annotations"]) == 2 * len(app.sample)

    import datasets

    validated = datasets.load_dataset(str(out))
    assert len(validated["concept"]) == len(app.sample)  # --annotated-only
    assert len(validated["composition"]) == 12  # other split copied unchanged
    assert all(
        n == 0 and v is None
        for n, v in zip(validated["composition"]["human_alignment_n"], validated["composition"]["human_alignment"])
    )
    for row in validated["concept"]:
        assert row["human_alignment"] == pytest.approx(results["items"][row["item_id"]]["mean_rating"])
        assert len(row["reference_images"]) == 3
    card = (out / "README.md").read_text()
    assert "license: cc-by-nc-4.0" in card and '"pearson": -1.0' in card and (out / "grid.png").exists()
    # the Validity section: agreement between the two annotators (the study's own alpha, with its interval),
    # no filter to compare with people, ConceptBed's blind baselines on the kept rows
    section = card.split("## Validity", 1)[1].split("## Filter statistics", 1)[0]
    alpha = results["agreement"]["rating"]["krippendorff_alpha"]
    assert f"| between annotators: rating | {len(app.sample)} | {alpha:.3f} (" in section
    assert "No automatic-filter comparison: ConceptBed has no filter" in section
    assert "| concept | concept majority |" in section and "Not applicable: ConceptBed has no training split" in section
    # Applying into the dataset itself is refused.
    assert_one_line_error(  # the one rule for an output inside a dataset (output.nesting_problem)
        run(*study, "--apply", conceptbed_dataset / "out"),
        f"error: --apply {conceptbed_dataset / 'out'} is inside the dataset folder {conceptbed_dataset}, whose files "
        "it would become part of: choose a folder outside it",
    )
    assert_one_line_error(
        run(*study, "--export", tmp_path / "x.json", "--metric", "ccd=/nonexistent.json"), "cannot read metric file"
    )


def test_cub_dir_offers_every_group_value(sub_dataset, tmp_path):
    cub = tmp_path / "CUB_200_2011"
    cub.mkdir()
    (cub / "attributes.txt").write_text(
        "1 has_bill_shape::curved_(up_or_down)\n2 has_bill_shape::cone\n3 has_bill_shape::needle\n"
        "4 has_crown_color::blue\n5 has_crown_color::brown\n6 has_crown_color::red\n7 has_crown_color::black\n"
    )
    app, config = open_study(
        StudySettings(dataset_dir=sub_dataset, study="sub-attribute", db=tmp_path / "c.sqlite", cub_dir=cub)
    )
    assert config["group_values_source"] == "cub"
    item = app.item_payload(next(i for i in app.sample if app.dataset.rows[i]["group"] == "has_crown_color"))
    assert [o["value"] for o in item["questions"][0]["options"]] == ["blue", "brown", "red", "black", "none"]
    (cub / "attributes.txt").write_text("1 has_bill_shape::cone\n")
    assert_one_line_error(
        run(sub_dataset, "--study", "sub-attribute", "--db", tmp_path / "d.sqlite", "--cub-dir", cub, "--port", "0"),
        "is not in CUB's attributes.txt",
    )


def test_alignment_study_refuses_a_dataset_without_reference_images(tmp_path):
    """A ConceptBed dataset made without --embed-references (the default) has no reference images:
    the alignment study used to serve "same concept as the references?" with none on the page."""
    from tests.annotate.conftest import CONCEPTBED_FEATURES, conceptbed_rows, write_dataset

    rows = [{**row, "reference_images": []} for row in conceptbed_rows("concept")]
    dataset = write_dataset(tmp_path / "default", CONCEPTBED_FEATURES, {"concept": rows})
    db = tmp_path / "alignment.sqlite"
    result = run(dataset, "--study", "conceptbed-alignment", "--port", "0", "--db", db)
    assert_one_line_error(result, "has no reference images for 2 concept(s) (art_painting, n01440764)")
    assert "--embed-references" in result.stderr and not db.exists()
