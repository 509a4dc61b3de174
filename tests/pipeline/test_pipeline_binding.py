"""Concept binding end to end: generate_binding.py (Blender) -> publish.py (local Hub, v1.0.0) ->
evaluate.py binding on the published revision with a tiny CLIP (zero-shot + one CDSM)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tests.pipeline.pipeline_helpers import load_with_plain_datasets
from tests.user_shell import check, publish, run_script, script_env

REPO_ID = "conceptforge-e2e/binding-relational"


@pytest.mark.heavy
def test_relational_generate_publish_evaluate(tmp_path, hub, hub_env, pipeline_clip):
    pytest.importorskip("bpy")
    out = tmp_path / "binding"
    check(
        run_script(
            "generate_binding.py",
            "--dataset",
            "relational",
            "--preset",
            "demo",
            "--resolution",
            "64x48",
            "--samples",
            2,
            "--out",
            out,
            env=script_env(),
        ),
        "generate_binding.py",
    )
    dataset = out  # one repo folder; this run assembled its config "relational"
    local = {
        path.name.split("-")[0]: pq.read_table(path).to_pylist()
        for path in sorted((dataset / "data" / "relational").glob("*.parquet"))
    }
    assert set(local) == {"train", "val", "gen"}

    published = publish(dataset, REPO_ID, "v1.0.0", hub_env)
    assert f'load_dataset("{REPO_ID}", "relational", revision="v1.0.0")' in published.stdout
    loaded = load_with_plain_datasets(hub_env, REPO_ID, "v1.0.0")
    assert {split: info["rows"] for split, info in loaded.items()} == {
        split: len(rows) for split, rows in local.items()
    }
    assert loaded["gen"]["item_ids"] == [row["item_id"] for row in local["gen"]]
    assert loaded["train"]["image_sizes"][0] == [64, 48]

    report_path = tmp_path / "binding.json"
    done = check(
        run_script(
            "evaluate.py",
            "binding",
            "--dataset",
            REPO_ID,
            "--revision",
            "v1.0.0",
            "--config",
            "relational",
            "--models",
            "clip,add",
            "--seeds",
            0,
            "--epochs",
            1,
            "--clip-model",
            pipeline_clip,
            "--cache-dir",
            tmp_path / "emb",
            "--device",
            "cpu",
            "--output",
            report_path,
            env=hub_env,
        ),
        "evaluate.py binding",
    )
    assert "relational" in done.stdout and "ADD" in done.stdout
    report = json.loads(report_path.read_text())  # the one results format: binding-clip and binding-cdsm entries
    clip, cdsm = report["tasks"]
    for task in (clip, cdsm):
        assert (task["dataset"]["repo"], task["dataset"]["revision"], task["details"]["setting"]) == (
            REPO_ID,
            "v1.0.0",
            "relational",
        )
    assert report["model"]["sha"].startswith("local-")  # the tiny CLIP folder, fingerprinted
    assert (clip["task"], cdsm["task"], cdsm["options"]["models"]) == ("binding-clip", "binding-cdsm", ["add"])
    breakdowns = {"clip": clip["details"]["error_breakdown"], "add": cdsm["details"]["error_breakdown"]["add"]}
    for model, task in (("clip", clip), ("add", cdsm)):
        prefix = "" if model == "clip" else "add."
        for split in ("train", "val", "gen"):
            mean = task["metrics"][f"{prefix}{split}_accuracy"]["value"]
            assert 0.0 <= mean <= 1.0, (model, split, mean)
        # gen errors are split over the relational distractor kinds the generator stored
        if task["metrics"][f"{prefix}gen_accuracy"]["value"] < 1.0:
            assert set(breakdowns[model]) == {"bRa", "aSb", "aRc", "cRb"}
            assert sum(share for share, _ in breakdowns[model].values()) == pytest.approx(1.0)
    (run,) = cdsm["details"]["runs"]["add"]
    assert run["seed"] == 0 and len(run["losses"]) == 1  # one seed, one epoch, really trained
