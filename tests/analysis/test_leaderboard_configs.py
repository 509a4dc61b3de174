"""The leaderboard never mixes data: results on two configs of one binding repo (same repo, same
commit, overlapping item ids) are two columns, two sections, two charts, and never paired; the
paired differences of runs on the same data are in ``--json``, unrounded, with their exact test."""

from __future__ import annotations

import json
from pathlib import Path

from conceptforge.commands import main
from tests.analysis.sample_files import write_results, write_samples

SHA = "c" * 40


def write_run(folder: Path, model: str, config: str, values: list[float], *, old_format: bool = False) -> Path:
    """A binding-clip run of ``model`` on config ``config`` of one repo; item ids gen/0.. are the
    same in every config (as in our releases)."""
    path = write_results(folder / f"{model}-{config}.json", model, {"binding-clip": "gen_accuracy"})
    payload = json.loads(path.read_text())
    task = payload["tasks"][0]
    task["dataset"] = {"repo": "org/binding", "revision": "v1.0.0", "sha": SHA, "source": "hub", "config": config}
    if old_format:  # written before results recorded the config: the option names it
        task["dataset"]["config"] = None
        task["options"] = {"config": config}
    task["metrics"]["gen_accuracy"]["value"] = sum(values) / len(values)
    path.write_text(json.dumps(payload))
    rows = [
        {"item_id": f"gen/{i}", "split": "gen", "dataset": "org/binding", "swap_kind": "random", "value": v}
        for i, v in enumerate(values)
    ]
    write_samples(folder / f"{model}-{config}.samples", "binding-clip", rows, model=model, dataset_revision=SHA)
    return path


def test_two_configs_of_one_repo_are_two_columns_and_never_paired(tmp_path, capsys):
    single = [1.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    two = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    files = [
        write_run(tmp_path, "clip-a", "single-object", single),
        write_run(tmp_path, "clip-b", "single-object", [0.0, 1.0, 0.0, 0.0, 0.0, 1.0]),
        write_run(tmp_path, "clip-a", "two-object", two),
    ]
    page, numbers = tmp_path / "board.html", tmp_path / "board.json"
    args = [
        "leaderboard",
        *map(str, files),
        "--html",
        str(page),
        "--json",
        str(numbers),
        "--bootstrap-resamples",
        "200",
    ]
    assert main(args) == 0
    header = [c.strip() for c in capsys.readouterr().out.splitlines()[0].strip("|").split("|")]
    assert header[3:] == ["binding-clip gen_accuracy [single-object] (%)", "binding-clip gen_accuracy [two-object] (%)"]

    written = json.loads(numbers.read_text())
    assert written["format"] == "conceptforge-leaderboard/1"
    panels = written["panels"]
    assert [(p["task"], p["dataset"]["config"], [m["label"] for m in p["models"]]) for p in panels] == [
        ("binding-clip", "single-object", ["clip-a (clip-a-single-object)", "clip-b"]),
        ("binding-clip", "two-object", ["clip-a (clip-a-two-object)"]),
    ]
    # the only pair is within single-object; the two configs' gen/0.. are different images
    assert [(p["a"], p["b"]) for p in panels[0]["pairs"]] == [("clip-a (clip-a-single-object)", "clip-b")]
    assert panels[1]["pairs"] == []
    overall = next(d for d in panels[0]["pairs"][0]["paired"] if d["breakdown"] == "overall")
    # a − b per item: [1, 0, 0, 1, 0, 0]: n+ = 2, n− = 0; exact McNemar p = 2 * P(X <= 0 | 2, 1/2) = 0.5
    assert overall["value"] == 2 / 6 and overall["n_shared"] == 6
    assert (overall["test"], overall["n_plus"], overall["n_minus"], overall["p_value"]) == ("exact McNemar", 2, 0, 0.5)
    assert overall["method"] == "newcombe" and overall["low"] < overall["value"] < overall["high"]
    a_overall = panels[0]["models"][0]["overall"]
    assert a_overall["method"] == "clopper-pearson" and a_overall["value"] == 4 / 6

    text = page.read_text()
    assert text.count('<section class="task"') == 2
    assert 'id="task-binding-clip"' in text and 'id="task-binding-clip-2"' in text
    assert "org/binding [single-object] @ccccccc" in text and "org/binding [two-object] @ccccccc" in text
    assert text.count("<h3>") == 1  # one pair, inside single-object


def test_results_written_before_the_config_was_recorded_are_kept_apart_too(tmp_path, capsys):
    files = [
        write_run(tmp_path, "clip-a", "single-object", [1.0, 0.0], old_format=True),
        write_run(tmp_path, "clip-b", "two-object", [0.0, 1.0], old_format=True),
    ]
    numbers = tmp_path / "board.json"
    assert main(["leaderboard", *map(str, files), "--json", str(numbers), "--bootstrap-resamples", "50"]) == 0
    header = [c.strip() for c in capsys.readouterr().out.splitlines()[0].strip("|").split("|")]
    assert header[3:] == ["binding-clip gen_accuracy [single-object] (%)", "binding-clip gen_accuracy [two-object] (%)"]
    assert [p["pairs"] for p in json.loads(numbers.read_text())["panels"]] == [[], []]


def test_json_output_is_written_only_where_allowed(tmp_path, capsys):
    files = [write_run(tmp_path, "clip-a", "single-object", [1.0, 0.0])]
    theirs = tmp_path / "mine.json"
    theirs.write_text("{}\n")
    assert main(["leaderboard", *map(str, files), "--json", str(theirs)]) == 2
    assert "--json" in capsys.readouterr().err and theirs.read_text() == "{}\n"
