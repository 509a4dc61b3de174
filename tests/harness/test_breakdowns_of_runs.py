"""Breakdowns of real tiny ``conceptforge evaluate`` runs: each task's overall breakdown number is
its headline metric (where the headline is a per-sample mean), and the run's report links charts.

Needs the per-sample files that ``conceptforge evaluate`` writes (``<stem>.samples/``); skipped
where the command does not write them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conceptforge.commands import main

pytest.importorskip("conceptforge.loaders.evaluation", reason="this conceptforge evaluate writes no per-sample files")


def check_run(out: Path) -> dict:
    results = json.loads(out.read_text())
    breakdowns = json.loads(out.with_name(out.stem + ".breakdowns.json").read_text())
    headline = {t["task"]: t["metrics"][t["main_metric"]]["value"] for t in results["tasks"]}
    report = out.with_suffix(".md").read_text()
    for task in breakdowns["tasks"]:
        chart = out.with_name(out.stem + ".charts") / f"{task['task']}.png"
        assert chart.stat().st_size > 5_000 and f"]({out.stem}.charts/{task['task']}.png)" in report
        low, value, high = task["overall"]["low"], task["overall"]["value"], task["overall"]["high"]
        assert low <= value <= high
    return {t["task"]: t for t in breakdowns["tasks"]}, headline


def test_binding_and_sub_breakdowns_agree_with_the_headline(
    tiny_clip_dir, single_object_dir, sub_dir, fake_cub, tmp_path
):
    out = tmp_path / "run.json"
    assert (
        main(
            [
                "evaluate",
                "--model",
                str(tiny_clip_dir),
                "--tasks",
                f"binding-clip:{single_object_dir},binding-cdsm:{single_object_dir},sub-vlm:{sub_dir}",
                "--cub-dir",
                str(fake_cub),
                "--task-option",
                "binding-cdsm.models=add,mult",
                "--task-option",
                "binding-cdsm.seeds=0,1",
                "--task-option",
                "binding-cdsm.epochs=2",
                "--task-option",
                "sub-vlm.cbm_min_classes=1",
                "--device",
                "cpu",
                "--cache-dir",
                str(tmp_path / "cache"),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    tasks, headline = check_run(out)
    assert set(tasks) == {"binding-clip", "binding-cdsm", "sub-vlm"}
    for name, task in tasks.items():
        assert task["overall"]["value"] == pytest.approx(headline[name], abs=1e-12), name
    cdsm = tasks["binding-cdsm"]
    assert cdsm["headline_rows"] == {"binding_model": "add", "split": "gen"}
    assert cdsm["overall"]["n"] == 2 * cdsm["overall"]["n_units"]  # two seeds per image, one unit per image


def test_compmap_breakdowns_agree_with_the_headline(tiny_clip_dir, tmp_path):
    from tests.compmap.synthetic import write_fake_cub, write_fake_mit_states

    cub, mit = write_fake_cub(tmp_path / "CUB_200_2011"), write_fake_mit_states(tmp_path / "mit")
    out = tmp_path / "compmap.json"
    argv = [
        "evaluate",
        "--model",
        str(tiny_clip_dir),
        "--tasks",
        "compmap-cub,compmap-mit-states",
        "--cub-dir",
        str(cub),
        "--mit-states-dir",
        str(mit),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--device",
        "cpu",
        "--output",
        str(out),
    ]
    for option in (
        "compmap-cub.ways=2,3",
        "compmap-cub.shots=1",
        "compmap-cub.episodes=5",
        "compmap-cub.queries=2",
        "compmap-mit-states.epochs=5",
        "compmap-mit-states.dim=8",
        "compmap-mit-states.targets=primitives",
    ):
        argv += ["--task-option", option]
    assert main(argv) == 0
    tasks, headline = check_run(out)
    cub_task = tasks["compmap-cub"]
    assert cub_task["overall"]["value"] == pytest.approx(headline["compmap-cub"], abs=1e-12)
    assert (cub_task["overall"]["unit"], cub_task["overall"]["n_units"]) == ("episode", 5)
    results = json.loads(out.read_text())
    settings = {g["group"]: g["value"] for g in cub_task["breakdowns"][0]["groups"]}
    metrics = results["tasks"][0]["metrics"]
    assert settings["3-way 1-shot"] == pytest.approx(metrics["3-way-1-shot.prim"]["value"], abs=1e-12)
    assert tasks["compmap-mit-states"]["headline_rows"] == {"world": "closed", "row": "prim"}
