"""Every metric of every registered task printed in its unit, in every table (issue 45 item 1).

The results file stores a count as a number (``{"value": 8.0, "n": 24}``); every table used to
multiply it by 100 under "values in %" (``800.00``). Here each task's declared metrics are checked
against units worked out by hand from what each metric counts, then each one is walked through the
evaluate table (the stdout text and the ``.md`` are one function), the leaderboard's markdown, HTML
and JSON table, and the entries pushed to the Hub (``.eval_results`` and model-index), with the
expected strings written by hand per unit.
"""

from __future__ import annotations

import html
import json

import pytest

from conceptforge.loaders.harness.registry import all_tasks
from conceptforge.loaders.harness.runner import RESULTS_FORMAT, results_markdown

#: Each declared metric (a sample name of its pattern) and its unit, by hand: accuracies, S+/S−,
#: chance and CZSL numbers are shares of samples (%); CompMap's Δ is a difference of two shares
#: (pp); low_allowed_mass, no_allowed_mass and unparsed_answers count samples; CCD is a difference of oracle
#: probabilities, CLIPScore 2.5·max(cos, 0) and DINO a cosine: numbers on their own scale.
EXPECTED_UNITS = {
    ("binding-clip", "gen_accuracy"): "percent",
    ("binding-clip", "low_allowed_mass"): "count",
    ("binding-clip", "no_allowed_mass"): "count",
    ("binding-clip", "unparsed_answers"): "count",
    ("binding-cdsm", "add.gen_accuracy"): "percent",
    ("compmap-cub", "5-way-1-shot.delta"): "points",
    ("compmap-cub", "5-way-1-shot.prim"): "percent",
    ("compmap-cub", "5-way-1-shot.oracle"): "percent",
    ("compmap-cub", "5-way-1-shot.interv_full"): "percent",
    ("compmap-mit-states", "closed.delta.auc"): "points",
    ("compmap-mit-states", "closed.prim.auc"): "percent",
    ("conceptbed-ccd", "style.ccd"): "score",
    ("conceptbed-ccd", "style.ccd_pooled"): "score",
    ("conceptbed-ccd", "style.accuracy"): "percent",
    ("conceptbed-ccd", "composition.clipscore"): "score",
    ("conceptbed-ccd", "style.dino"): "score",
    ("sub-vlm", "s_plus"): "percent",
    ("sub-vlm", "s_minus"): "percent",
    ("sub-vlm", "chance_s_plus"): "percent",
    ("sub-vlm", "chance_s_minus"): "percent",
    ("sub-vlm", "low_allowed_mass"): "count",
    ("sub-vlm", "no_allowed_mass"): "count",
    ("sub-vlm", "unparsed_answers"): "count",
    ("sub-cbm", "s_plus"): "percent",
    ("sub-cbm", "s_minus"): "percent",
}

#: One stored metric per unit, the cell every table must print for it, its header label and the
#: value pushed to the Hub, by hand: 0.0625 of the samples = 6.25 %; its standard error 0.0125 =
#: 1.25 points; Δ −0.05 = −5.00 percentage points; 8 samples of 24 stay "8 of 24" (never 800.00);
#: a score is printed as stored, to 4 decimals.
STORED = {
    "percent": ({"value": 0.0625, "stderr": None, "n": 16}, "6.25", "%", 6.25),
    "seeded": ({"value": 0.0625, "stderr": 0.0125, "n": 2}, "6.25 ± 1.25", "%", 6.25),
    "points": ({"value": -0.05, "stderr": None, "n": 16}, "-5.00", "pp", -5.0),
    "count": ({"value": 8.0, "stderr": None, "n": 24}, "8 of 24", "count", 8.0),
    "score": ({"value": 0.0625, "stderr": None, "n": 16}, "0.0625", "score", 0.0625),
}


def _kind(task: str, unit: str) -> str:
    return "seeded" if unit == "percent" and all_tasks()[task].seeded else unit


def _payload(task: str, path: str) -> dict:
    """A results file of task ``task`` holding every declared metric, each stored as its unit's
    number (the unit recorded, as a run records it)."""
    spec = all_tasks()[task]
    metrics = {}
    for (name_task, name), unit in EXPECTED_UNITS.items():
        if name_task == task:
            metrics[name] = {**STORED[_kind(task, unit)][0], "unit": unit}
    return {
        "format": RESULTS_FORMAT,
        "conceptforge_version": "0",
        "created": "",
        "model": {"id": f"org/{task}-model", "kind": "clip", "sha": "b" * 40, "source": "hub"},
        "settings": {},
        "tasks": [
            {
                "task": task,
                "benchmark": spec.benchmark,
                "protocol": spec.protocol,
                "adapter": "clip",
                "variant": "v",
                "dataset": {
                    "repo": "org/data",
                    "revision": "v1",
                    "sha": "c" * 40,
                    "source": "hub",
                    "split": spec.split,
                },
                "options": {},
                "seeds": [0, 1] if spec.seeded else [],
                "main_metric": next(iter(metrics)),
                "metrics": metrics,
                "details": {},
                "table": "",
                "seconds": None,
            }
        ],
        "skipped": [],
        "_path": path,
    }


def test_every_metric_of_every_task_declares_the_unit_worked_out_by_hand():
    declared = {(name, spec.sample_name): spec.unit.name for name, task in all_tasks().items() for spec in task.metrics}
    assert declared == EXPECTED_UNITS
    for (task, name), _unit in EXPECTED_UNITS.items():  # each sample name is read by its own declaration
        from conceptforge.loaders.harness.units import declared_unit

        assert declared_unit(all_tasks()[task].metrics, name).name == EXPECTED_UNITS[(task, name)]


def test_an_undeclared_metric_is_refused_not_printed_as_a_percentage():
    from dataclasses import replace

    from conceptforge.loaders.harness.task import Metric

    task = replace(all_tasks()["sub-cbm"], score=lambda rows, options: {"s_plus": Metric(0.5), "odd": Metric(3.0)})
    with pytest.raises(RuntimeError, match="sub-cbm: metric odd has no unit"):
        task.scored([], {})
    assert replace(task, score=lambda rows, options: {"s_plus": Metric(0.5, None, 2)}).scored([], {}) == {
        "s_plus": Metric(0.5, None, 2, "percent")
    }


@pytest.mark.parametrize("task", sorted({task for task, _ in EXPECTED_UNITS}))
def test_every_metric_prints_in_its_unit_in_every_table(task, tmp_path):
    from conceptforge.loaders.analysis.leaderboard import leaderboard
    from conceptforge.loaders.analysis.leaderboard_html import leaderboard_html, leaderboard_json
    from conceptforge.loaders.harness.push_results import hub_entries, leaderboard_metrics, model_index_results

    payload = _payload(task, str(tmp_path / f"{task}.json"))
    expected = {
        name: STORED[_kind(task, unit)] for (name_task, name), unit in EXPECTED_UNITS.items() if name_task == task
    }

    # evaluate: the stdout table and the .md (results_markdown): value and unit per row
    text = results_markdown(payload)
    assert "values in %" not in text.lower()
    rows = {cells[1].rstrip(" *"): cells for cells in _markdown_rows(text)}
    for name, (_, cell, label, _) in expected.items():
        assert rows[name][2:4] == [cell, label], name

    # leaderboard markdown: one column per metric, its unit in its header
    board = leaderboard([payload], metrics="all")
    assert "values in %" not in board.lower()
    header, *body = _markdown_rows(board)
    cells = dict(zip(header, body[0]))
    for name, (_, cell, label, _) in expected.items():
        assert cells[f"{task} {name} ({label})"] == cell, name

    # leaderboard HTML and JSON: the same table
    page = leaderboard_html([payload], metrics="all")
    assert "values in %" not in page.lower()
    for name, (_, cell, label, _) in expected.items():
        assert f"<th>{html.escape(f'{task} {name} ({label})')}</th>" in page
        assert f'<td class="num">{html.escape(cell)}</td>' in page
    table = leaderboard_json([payload], metrics="all")["table"]
    assert dict(zip(table["headers"], table["rows"][0])) == cells

    # pushed: the model-index has every metric, .eval_results the task's leaderboard metrics
    index = {r.metric_type: r for r in model_index_results(payload)}
    for name, (_, _, label, value) in expected.items():
        assert (index[f"{task}.{name}"].metric_value, index[f"{task}.{name}"].metric_name) == (
            value,
            f"{task} {name} ({label})",
        )
    pushed = {e.task_id.removeprefix(f"{task}."): e for e in hub_entries(payload)}
    assert set(pushed) == set(expected) & leaderboard_metrics(payload["tasks"][0])
    for name, entry in pushed.items():
        assert entry.value == expected[name][3]


def test_counts_and_shares_of_one_metric_name_are_never_one_leaderboard_column(tmp_path):
    """A file written before units were recorded reads its task's declared unit; the same name in
    two units (as a hand-edited file could hold) gives two columns, not one mixed column."""
    from conceptforge.loaders.analysis.leaderboard import leaderboard_table

    old = _payload("sub-vlm", str(tmp_path / "old.json"))
    for metric in old["tasks"][0]["metrics"].values():
        metric.pop("unit")
    headers, rows, _ = leaderboard_table([old], metrics="all")
    assert dict(zip(headers, rows[0]))["sub-vlm low_allowed_mass (count)"] == "8 of 24"
    odd = _payload("sub-vlm", str(tmp_path / "odd.json"))
    odd["model"]["id"] = "org/other"
    odd["tasks"][0]["metrics"]["low_allowed_mass"]["unit"] = "percent"
    headers, _, _ = leaderboard_table([old, odd], metrics="all")
    assert [h for h in headers if "low_allowed_mass" in h] == [
        "sub-vlm low_allowed_mass (count)",
        "sub-vlm low_allowed_mass (%)",
    ]


def test_identical_leaderboard_rows_are_shown_once_and_said(tmp_path):
    """FP21: two results files of one run (a copy, or a run and its rescoring) made two identical
    rows; now one row, and a note naming both files. A different number keeps its own row."""
    from conceptforge.loaders.analysis.leaderboard import leaderboard, leaderboard_table
    from conceptforge.loaders.analysis.leaderboard_html import leaderboard_json

    first, copy = _payload("sub-cbm", "a.json"), _payload("sub-cbm", "b.json")
    copy["created"] = "2026-01-01T00:00:00Z"  # when it was written is not what the row shows
    headers, rows, notes = leaderboard_table([first, copy])
    assert rows == [["org/sub-cbm-model", "clip", "b" * 12, "6.25"]]
    assert notes[-1] == (
        "b.json repeats a.json (same model org/sub-cbm-model, revision, data, protocols and numbers): shown once"
    )
    assert "b.json repeats a.json" in leaderboard([first, copy])
    assert leaderboard_json([first, copy])["table"]["rows"] == rows
    other = _payload("sub-cbm", "c.json")
    other["tasks"][0]["metrics"]["s_plus"]["value"] = 0.125
    _, rows, notes = leaderboard_table([first, other])
    assert [r[3] for r in rows] == ["6.25", "12.50"] and not any("repeats" in n for n in notes)


def _markdown_rows(text: str) -> list[list[str]]:
    """The cells of a markdown table's rows (header first, the rule line left out)."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    return [rows[0]] + [r for r in rows[1:] if not set("".join(r)) <= {"-"}]


def test_the_results_file_records_each_metric_unit(tmp_path):
    """What a run and --from-predictions write: the unit beside the value (``Metric.to_dict``)."""
    from conceptforge.loaders.harness.task import Metric

    assert json.loads(json.dumps(Metric(8.0, None, 24, "count").to_dict())) == {
        "value": 8.0,
        "stderr": None,
        "n": 24,
        "unit": "count",
    }


def test_a_vlm_run_prints_its_count_of_low_answer_mass_as_a_count(
    offline_single_thread, tiny_llava_dir, sub_dir, fake_cub, tmp_path, capsys
):
    """The case of the issue, end to end: a tiny LLaVA (random weights, so its option letters
    carry little of the next-token mass) on sub-vlm. The count is worked out from the samples
    file's ``allowed_mass`` column (one per image, below 0.5 counts) and must read ``K of N`` with
    unit ``count`` on stdout, in the ``.md`` and in the leaderboard — never ``100·K``."""
    import pyarrow.parquet as pq

    from conceptforge.commands import main

    out = tmp_path / "llava.json"
    argv = ["evaluate", "--model", str(tiny_llava_dir), "--tasks", f"sub-vlm:{sub_dir}", "--cub-dir", str(fake_cub)]
    argv += ["--task-option", "sub-vlm.cbm_min_classes=1", "--device", "cpu", "--cache-dir", str(tmp_path / "c")]
    assert main([*argv, "--output", str(out)]) == 0
    stdout = capsys.readouterr().out
    rows = pq.read_table(tmp_path / "llava.samples" / "sub-vlm.parquet").to_pylist()
    per_image = {r["item_id"].split("/")[0]: r["allowed_mass"] for r in rows}
    low, images = sum(m < 0.5 for m in per_image.values()), len(per_image)
    assert low > 0  # the case worth printing (a random model's letters carry little mass)
    for text in (stdout, out.with_suffix(".md").read_text()):
        table = {cells[1]: cells for cells in _markdown_rows(text)[1:]}
        assert table["low_allowed_mass"][2:4] == [f"{low} of {images}", "count"]
        assert str(100 * low) not in table["low_allowed_mass"][2]
    assert main(["leaderboard", str(out), "--metrics", "all"]) == 0
    header, row = _markdown_rows(capsys.readouterr().out)
    assert dict(zip(header, row))["sub-vlm low_allowed_mass (count)"] == f"{low} of {images}"
