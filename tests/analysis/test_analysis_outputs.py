"""What a run writes beside its results (breakdowns JSON, PNG charts, the report's section) and
the leaderboard command's ``--html`` errors."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from conceptforge.commands import main
from conceptforge.errors import DataNotFoundError
from conceptforge.loaders.analysis.breakdowns import compute_breakdowns
from conceptforge.loaders.analysis.write import SECTION_START, write_breakdowns_and_charts
from conceptforge.loaders.harness.sample_columns import read_samples
from tests.analysis.sample_files import write_results, write_samples

SUB_ROWS = [
    {
        "item_id": f"i{k}",
        "attribute_group": g,
        "bird": b,
        "attribute": "has_crown_color::black",
        "side": side,
        "value": float((k + len(g)) % 3 != 0),
    }
    for k, (g, b) in enumerate([("crown color", "Blue_Jay"), ("bill shape", "Cardinal")] * 3)
    for side in ("S+", "S-")
]
MIT_ROWS = [
    {"item_id": f"m{k}", "pair": "old car", "attr": "old", "obj": "car", "seen": k % 2 == 0, "value": float(k % 3 == 0)}
    for k in range(8)
]


def make_run(folder, model="model-a"):
    results = write_results(
        folder / f"{model}.json", model, {"sub-vlm": "s_plus", "compmap-mit-states": "closed.prim.auc"}
    )
    samples = folder / f"{model}.samples"
    write_samples(samples, "sub-vlm", SUB_ROWS, model=model)
    write_samples(samples, "compmap-mit-states", MIT_ROWS, model=model)
    return results, samples


def test_breakdowns_json_charts_and_report_section(tmp_path):
    results, samples = make_run(tmp_path)
    report = results.with_suffix(".md")
    report.write_text("# conceptforge evaluate: model-a\n\n| task | metric |\n")
    written = write_breakdowns_and_charts(results, samples)
    names = sorted(p.relative_to(tmp_path).as_posix() for p in written)
    assert names == [
        "model-a.breakdowns.json",
        "model-a.charts/compmap-mit-states.png",
        "model-a.charts/sub-vlm.png",
        "model-a.md",
    ]
    payload = json.loads((tmp_path / "model-a.breakdowns.json").read_text())
    assert payload["bootstrap"] == {
        **payload["bootstrap"],
        "method": "clopper-pearson for proportions (every unit 0 or 1); bca otherwise",
        "proportions": "clopper-pearson",
        "min_units": 30,
        "resamples": 1000,
        "seed": 0,
        "confidence": 0.95,
    }
    assert [t["task"] for t in payload["tasks"]] == ["sub-vlm", "compmap-mit-states"]  # the results file's order
    expected = compute_breakdowns(read_samples(samples / "sub-vlm.parquet"))
    assert payload["tasks"][0]["overall"] == expected.overall.to_dict()
    for png in (p for p in written if p.suffix == ".png"):
        with Image.open(png) as image:
            assert image.format == "PNG" and image.width > 500 and image.height > 150
    text = report.read_text()
    assert text.startswith("# conceptforge evaluate: model-a")  # the run's own table is kept
    assert "![sub-vlm breakdowns](model-a.charts/sub-vlm.png)" in text
    assert "(1000 resamples, numpy PCG64 seed 0)" in text
    seen = next(g for g in payload["tasks"][1]["breakdowns"][0]["groups"] if g["group"] == "seen")
    assert f"| seen   | {100 * seen['value']:.1f} [{100 * seen['low']:.1f}, {100 * seen['high']:.1f}]" in text
    write_breakdowns_and_charts(results, samples)  # again: the section is replaced, not appended twice
    assert report.read_text() == text and text.count(SECTION_START) == 1


def test_a_run_without_samples_writes_nothing(tmp_path):
    results, _ = make_run(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert write_breakdowns_and_charts(results, None) == []
    assert write_breakdowns_and_charts(results, tmp_path / "nowhere") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    with pytest.raises(DataNotFoundError, match="results file .* does not exist"):
        write_breakdowns_and_charts(tmp_path / "missing.json", tmp_path / "model-a.samples")


def test_leaderboard_html_bad_samples_is_one_error_line_and_nothing_written(tmp_path, capsys):
    a, _ = make_run(tmp_path, "model-a")
    b, samples_b = make_run(tmp_path, "model-b")
    (samples_b / "sub-vlm.parquet").write_bytes(b"not parquet")
    page, table = tmp_path / "board.html", tmp_path / "board.md"
    assert main(["leaderboard", str(a), str(b), "--html", str(page), "--output", str(table)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "is not a parquet file" in err[0]
    assert not page.exists() and not table.exists()


def test_leaderboard_html_notes_a_run_without_samples(tmp_path, capsys):
    a, _ = make_run(tmp_path, "model-a")
    lonely = write_results(tmp_path / "other" / "model-c.json", "model-c", {"sub-vlm": "s_plus"})
    page = tmp_path / "board.html"
    assert main(["leaderboard", str(a), str(lonely), "--html", str(page), "--bootstrap-resamples", "50"]) == 0
    text = page.read_text()
    assert "model-c: no per-sample predictions beside" in text and "model-c.samples/" in text
    assert "50 resamples" in text and 'id="task-sub-vlm"' in text
    assert "http://" not in text and "https://" not in text  # self-contained
    assert "| model-a" in capsys.readouterr().out  # the markdown table is still printed


def test_a_task_without_countable_samples_gets_no_chart(tmp_path):
    results = write_results(tmp_path / "m.json", "m", {"compmap-mit-states": "closed.prim.auc"})
    write_samples(
        tmp_path / "m.samples",
        "compmap-mit-states",
        [{"item_id": "i", "pair": "p", "attr": "a", "obj": "o", "seen": True, "value": None}],
    )
    written = write_breakdowns_and_charts(results, tmp_path / "m.samples")
    assert [p.name for p in written] == ["m.breakdowns.json", "m.md"]
    overall = json.loads(written[0].read_text())["tasks"][0]["overall"]
    assert (overall["value"], overall["n"]) == (None, 0)
    assert "overall: – %, n=0, 0 items" in written[1].read_text()


def test_metadata_kept_is_the_model_and_revisions(tmp_path):
    import pyarrow.parquet as pq

    path = write_samples(tmp_path, "sub-vlm", SUB_ROWS, model="m", model_revision="abc", dataset_revision="def")
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"conceptforge.run": b'{"big": 1}'}), path)
    assert read_samples(path).metadata == {"model": "m", "model_revision": "abc", "dataset_revision": "def"}


def test_leaderboard_html_zero_resamples_is_one_error_line(tmp_path, capsys):
    a, _ = make_run(tmp_path, "model-a")
    page = tmp_path / "board.html"
    assert main(["leaderboard", str(a), "--html", str(page), "--bootstrap-resamples", "0"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "error: conceptforge leaderboard: argument --bootstrap-resamples: must be >= 1, got 0 (see conceptforge leaderboard --help)"
    )
    assert not page.exists()


def test_the_readme_glob_reads_the_results_and_skips_the_breakdowns_beside_them(tmp_path, capsys):
    """`conceptforge leaderboard results/*.json` (the README's line) also matches each run's
    `<stem>.breakdowns.json`: that file is skipped, not a "not a results file" refusal."""
    for model in ("model-a", "model-b"):
        results, samples = make_run(tmp_path, model)
        write_breakdowns_and_charts(results, samples)
    given = sorted(str(p) for p in tmp_path.glob("*.json"))
    assert len(given) == 4  # two results, two breakdowns
    code = main(["leaderboard", *given, "--output", str(tmp_path / "board.md")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    table = (tmp_path / "board.md").read_text()
    assert "model-a" in table and "model-b" in table and "breakdowns" not in table.split("\n\n")[0]
    only_breakdowns = [p for p in given if p.endswith(".breakdowns.json")]
    assert main(["leaderboard", *only_breakdowns]) == 2
    assert "no results files given" in capsys.readouterr().err
