"""Issue 24: evaluate --output x.json overwrote the user's x.md; leaderboard --output any file."""

from __future__ import annotations

import json

import pytest

from conceptforge.commands import main
from conceptforge.errors import ConceptforgeError
from conceptforge.loaders.harness.runner import write_results
from tests.harness.test_evaluate_tasks import _payload


def test_evaluate_never_replaces_a_users_markdown_beside_its_json(tmp_path, capsys):
    notes = tmp_path / "x.md"
    notes.write_text("# my notes\n")
    # refused before the model is even looked up (it does not exist): no evaluation is lost
    code = main(
        [
            "evaluate",
            "--tasks",
            "binding-clip",
            "--model",
            str(tmp_path / "no-model"),
            "--output",
            str(tmp_path / "x.json"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        code == 2
        and err[-1]
        == f"error: --output: {notes} already exists and was not written by conceptforge; move it away or choose another name"
    )
    assert notes.read_text() == "# my notes\n" and not (tmp_path / "x.json").exists()
    with pytest.raises(ConceptforgeError, match="not written by conceptforge"):
        write_results(_payload("a", "1" * 40, 0.5, None), tmp_path / "x.json")
    assert notes.read_text() == "# my notes\n"


def test_evaluate_results_of_its_own_are_replaced(tmp_path):
    payload = _payload("a", "1" * 40, 0.5, None)
    payload["model"]["revision"] = "main"
    write_results(payload, tmp_path / "r.json")
    payload["tasks"][0]["metrics"]["add.gen_accuracy"]["value"] = 0.25
    write_results(payload, tmp_path / "r.json")  # a rerun: both files are ours
    assert json.loads((tmp_path / "r.json").read_text())["tasks"][0]["metrics"]["add.gen_accuracy"]["value"] == 0.25
    (tmp_path / "u.json").write_text('{"mine": 1}\n')
    with pytest.raises(ConceptforgeError, match="not written by conceptforge"):
        write_results(payload, tmp_path / "u.json")
    assert (tmp_path / "u.json").read_text() == '{"mine": 1}\n'


def test_leaderboard_never_replaces_a_users_file(tmp_path, capsys):
    results = tmp_path / "a.json"
    results.write_text(json.dumps(_payload("a", "1" * 40, 0.5, None)))
    table = tmp_path / "table.md"
    table.write_text("my table\n")
    assert main(["leaderboard", str(results), "--output", str(table)]) == 2
    assert "not written by conceptforge" in capsys.readouterr().err and table.read_text() == "my table\n"
    table.unlink()
    assert main(["leaderboard", str(results), "--output", str(table)]) == 0
    assert main(["leaderboard", str(results), "--output", str(table)]) == 0  # its own table is replaced
    assert table.read_text().startswith("| model")
