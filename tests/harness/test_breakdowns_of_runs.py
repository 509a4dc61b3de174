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
from tests.evaluation_fixtures import binding_and_sub_argv, compmap_argv

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
    argv, out = binding_and_sub_argv(tiny_clip_dir, single_object_dir, sub_dir, fake_cub, tmp_path)
    assert main(argv) == 0
    tasks, headline = check_run(out)
    assert set(tasks) == {"binding-clip", "binding-cdsm", "sub-vlm"}
    for name, task in tasks.items():
        assert task["overall"]["value"] == pytest.approx(headline[name], abs=1e-12), name
    cdsm = tasks["binding-cdsm"]
    assert cdsm["headline_rows"] == {"binding_model": "add", "split": "gen"}
    assert cdsm["overall"]["n"] == 2 * cdsm["overall"]["n_units"]  # two seeds per image, one unit per image


def test_compmap_breakdowns_agree_with_the_headline(tiny_clip_dir, tmp_path):
    argv, out, _ = compmap_argv(tiny_clip_dir, tmp_path, "compmap-mit-states.epochs=5")
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
