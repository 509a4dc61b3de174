"""``conceptforge export DIR``: the three exports written into a dataset folder from the by-answer
items, only files conceptforge wrote replaced, one-line refusals; the parser every export carries
reads answers exactly as the library's; ConceptBed-like folders have no export."""

from __future__ import annotations

import csv
import io
import json
import types

import pytest
from publish_helpers import binding_release, sub_release

from conceptforge.commands import main
from conceptforge.loaders.harness.by_answer import (
    binding_choice_items,
    parse_choice,
    render_choice_prompt,
)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_export_writes_the_by_answer_items_in_three_formats(tmp_path, capsys):
    from conceptforge.loaders.binding.data import load_binding

    binding, _ = binding_release(tmp_path / "binding")
    argv = ["export", str(binding), "--repo-id", "org/binding", "--version", "v1.2.0"]
    assert main(argv) == 0
    assert "wrote 15 export file(s) for org/binding v1.2.0" in capsys.readouterr().out
    exports = binding / "exports"
    splits = {k: v for k, v in load_binding(str(binding)).items() if len(v)}
    questions = [q for q in binding_choice_items(splits) if q.item_id.startswith("gen/")]
    items = [json.loads(line) for line in (exports / "items" / "binding_clip_gen.jsonl").read_text().splitlines()]
    assert [i["prompt"] for i in items] == [render_choice_prompt(q) for q in questions]
    assert [i["answer"] for i in items] == [q.answer_letter for q in questions]
    assert [i["row"] for i in items] == list(range(len(questions)))
    tsv = list(
        csv.DictReader(
            io.StringIO((exports / "vlmevalkit" / "Conceptforge_binding_clip_gen.tsv").read_text()), delimiter="\t"
        )
    )
    assert [r["question"] for r in tsv] == [q.question for q in questions]
    assert [[r[letter] for letter in q.letters] for r, q in zip(tsv, questions)] == [list(q.options) for q in questions]
    assert [r["answer"] for r in tsv] == [q.answer_letter for q in questions]
    assert all(len(r["image"]) > 100 for r in tsv)
    text = (exports / "lmms-eval" / "binding_clip_gen" / "binding_clip_gen.yaml").read_text()
    assert "conceptforge" in text and "org/binding at tag v1.2.0" in text and "org/binding at revision v1.2.0" in text
    assert "dataset_path: !function utils.DATASET_PATH" in text  # the Hub, or a local copy (test_exports_offline)
    assert "def binding_clip_gen_accuracy(" in (exports / "inspect-ai" / "conceptforge_tasks.py").read_text()

    # a rerun replaces our own files; a file we did not write is refused before anything is written
    assert main(argv) == 0
    capsys.readouterr()
    foreign = exports / "lmms-eval" / "binding_clip_gen" / "utils.py"
    foreign.write_text("# mine\n")
    before = (exports / "MANIFEST.json").read_bytes()
    assert main([*argv[:-1], "v1.3.0"]) == 2
    assert _one_line(capsys).endswith("was changed since conceptforge wrote it: move it away first")
    assert foreign.read_text() == "# mine\n" and (exports / "MANIFEST.json").read_bytes() == before
    foreign.unlink()
    (exports / "vlmevalkit" / "notes.txt").write_text("x")
    assert main([*argv, "--formats", "vlmevalkit"]) == 0  # a file beside ours is left alone
    assert (exports / "vlmevalkit" / "notes.txt").exists()
    assert not (exports / "inspect-ai" / "conceptforge_tasks.py").exists()  # ours, no longer asked for: removed
    capsys.readouterr()
    (exports / "MANIFEST.json").unlink()
    assert main([*argv[:-1], "v1.3.0"]) == 2  # the README names the tag: another file than ours on disk
    assert "exists and was not written by conceptforge: move it away first" in _one_line(capsys)


def test_export_refusals_are_one_line(tmp_path, capsys):
    binding, _ = binding_release(tmp_path / "binding")
    assert main(["export", str(binding), "--formats", "lm-eval"]) == 2
    assert _one_line(capsys).startswith("error: unknown export format(s) lm-eval: choose from lmms-eval")
    assert main(["export", str(binding)]) == 2
    assert "pass --repo-id ORG/NAME and --version" in _one_line(capsys)
    sub = sub_release(tmp_path / "sub")
    assert main(["export", str(sub), "--repo-id", "org/sub", "--version", "v1.0.0"]) == 2
    assert "needs CUB's attribute list" in _one_line(capsys)
    assert not (sub / "exports").exists() and not (binding / "exports").exists()


def test_the_exports_carry_the_library_parser(tmp_path):
    """The parser copied into every export reads a table of answers exactly as by_answer does."""
    from conceptforge.loaders.exports.runtime import RUNTIME, parser_source

    copy = types.ModuleType("exported")
    exec(
        compile(RUNTIME + "\nimport re\nfrom collections.abc import Sequence\n" + parser_source(), "exported", "exec"),
        copy.__dict__,
    )
    options = ("red cube", "dark red cube", "blue sphere", "Other")
    answers = [
        "B", "b", "(C)", "C.", "The answer is D", "Answer: (A)", "red cube", "dark red cube", "A and B", "I think so",
        "A red cube.", "**C**", "", "none of them", "Option B, not C", "blue sphere!", "E", "c) blue sphere", None,
    ]  # fmt: skip
    letters = ("A", "B", "C", "D")
    for answer in answers:
        assert copy.parse_choice(answer, letters, options) == parse_choice(answer, letters, options), answer
    item = {"letters": list(letters), "options": list(options), "answer": "C", "s_minus_letters": ["A"]}
    assert copy.score_answer(item, "C") == {"parsed": "C", "correct": True, "s_minus": True}
    assert copy.score_answer(item, "A") == {"parsed": "A", "correct": False, "s_minus": False}
    assert copy.score_answer(item, "hmm") == {"parsed": None, "correct": False, "s_minus": False}  # unparsed: wrong


@pytest.mark.parametrize("formats", ["lmms-eval,inspect-ai", "vlmevalkit"])
def test_formats_choose_the_files(tmp_path, formats, capsys):
    binding, _ = binding_release(tmp_path / "binding")
    assert main(["export", str(binding), "--repo-id", "org/b", "--version", "v1.0.0", "--formats", formats]) == 0
    written = json.loads((binding / "exports" / "MANIFEST.json").read_text())["files"]
    tops = {path.split("/")[1] for path in written}
    assert tops == ({"items", "lmms-eval", "inspect-ai"} if "lmms" in formats else {"vlmevalkit"})
