"""Every ``--task-option`` value is checked before any model loads, as the alias flags are.

Walked from the task tables themselves: each option of each task has a checked ``parse`` (an
:class:`conceptforge.argtypes.ArgType`, which names values outside its domain), and each of those
values given as ``--task-option`` is one ``error:`` line naming the option, exit 2, with a model
path that does not even exist (so the option, not the model, must be what is refused) and no
model load. An option added tomorrow is walked without being listed here. What depends on other
options, the model's family or the run's folders (``Task.check_options``) is checked the same way
with a model that resolves but never loads.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from conceptforge.argtypes import ArgType, Examples
from conceptforge.commands import main
from conceptforge.loaders.harness.registry import all_tasks


@pytest.fixture
def examples(tmp_path) -> Examples:
    (tmp_path / "user.txt").write_text("notes\n")
    (tmp_path / "folder").mkdir()
    return Examples(
        missing=str(tmp_path / "missing" / "thing"),
        file=str(tmp_path / "user.txt"),
        folder=str(tmp_path / "folder"),
        under_file=str(tmp_path / "user.txt" / "x"),
    )


@pytest.fixture
def loads(monkeypatch) -> list[str]:
    """Every model load attempted (the adapters' one entry): none may happen in these tests."""
    from conceptforge.loaders.harness.adapters import base

    seen: list[str] = []

    def refuse(model, **kwargs):
        seen.append(model.id)
        raise AssertionError(f"model {model.id} loaded before the options were checked")

    monkeypatch.setattr(base, "load_adapter", refuse)
    return seen


def _cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(argv)
    return status, err.getvalue()


def test_every_task_option_has_a_checked_domain(examples):
    unchecked = [
        f"{task.name}.{option.name}"
        for task in all_tasks().values()
        for option in task.options
        if not isinstance(option.parse, ArgType) or not option.parse.bad_examples(examples)
    ]
    assert unchecked == [], "give these options an argtypes.ArgType parse: " + ", ".join(unchecked)


def test_every_bad_option_value_is_refused_before_any_model_loads(examples, tmp_path, loads):
    problems, walked = [], 0
    model = str(tmp_path / "no-such-model")
    for task in all_tasks().values():
        for option in task.options:
            for value in option.parse.bad_examples(examples):
                walked += 1
                where = f"{task.name}.{option.name}"
                out = tmp_path / "out.json"
                argv = ["evaluate", "--model", model, "--tasks", task.name, "--task-option", f"{where}={value}"]
                status, err = _cli([*argv, "--output", str(out)])
                lines = err.strip().splitlines()
                if status != 2 or len(lines) != 1 or not lines[0].startswith("error: ") or where not in lines[0]:
                    problems.append(f"{where}={value!r}: exit {status}, {err!r}")
                if out.exists():
                    problems.append(f"{where}={value!r}: wrote {out}")
    assert loads == []
    assert walked > 100
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize(
    "option, message",
    [
        ("binding-cdsm.models=add,foo", "unknown name 'foo' in 'add,foo'; choose from csp, add"),
        ("binding-cdsm.models=clip,add", "clip: zero-shot CLIP is task binding-clip"),
        ("sub-cbm.threshold=2", "must be < 1, got 2"),
        ("sub-cbm.threshold=0", "must be > 0, got 0"),
        ("conceptbed-ccd.style_oracle=./oracles/pacs", "no such local folder ./oracles/pacs"),
        ("compmap-cub.templates=a3:9", "list Table A3 ids 1..7"),
    ],
)
def test_the_issues_cases(option, message, tmp_path, loads):
    task = option.split(".")[0]
    status, err = _cli(["evaluate", "--model", str(tmp_path / "absent"), "--tasks", task, "--task-option", option])
    assert status == 2 and message in err, err
    assert loads == []


def _run(model, task: str, options: list[str], **inputs):
    from conceptforge.loaders.harness.registry import select_tasks
    from conceptforge.loaders.harness.runner import RunSettings, run_tasks

    return run_tasks(model, select_tasks(task, options=options), RunSettings(device="cpu", **inputs))


@pytest.mark.parametrize(
    "kind, task, options, message",
    [
        ("open_clip", "binding-cdsm", ["binding-cdsm.models=add,csp"], "csp and clip-ft fine-tune a transformers CLIP"),
        ("clip", "binding-cdsm", ["binding-cdsm.calibrate=true", "binding-cdsm.config=relational"], "Appendix C"),
        ("itm", "compmap-mit-states", ["compmap-mit-states.ablations=true"], "needs a dual encoder's image"),
        ("clip", "compmap-mit-states", ["compmap-mit-states.split_dir=other-split"], "no folder other-split in"),
        ("clip", "compmap-mit-states", ["compmap-mit-states.metadata=meta.t7"], "no file meta.t7 in"),
    ],
)
def test_options_against_the_model_and_the_folders_before_any_load(kind, task, options, message, tmp_path, loads):
    from conceptforge.errors import InvalidArgumentError
    from conceptforge.loaders.harness.model_ref import ModelRef
    from tests.compmap.synthetic import write_fake_mit_states

    mit = write_fake_mit_states(tmp_path / "mit")
    binding = tmp_path / "binding"  # a local folder: resolved without the Hub, never read
    binding.mkdir()
    model = ModelRef(str(tmp_path / "absent"), kind, "local", None, "local-sha256:" + "0" * 16, None)
    with pytest.raises(InvalidArgumentError, match=message):
        _run(model, f"{task}:{binding}" if task.startswith("binding") else task, options, mit_states_dir=str(mit))
    assert loads == []
    # the same check passes a model and options that fit (the refusal is about what was refused)
    from conceptforge.loaders.harness.registry import select_tasks

    fitting = ModelRef(model.id, "clip", "local", None, model.sha, "clip")
    (selection,) = select_tasks(task, options=[o for o in options if "config=" not in o and "_dir=" not in o])
    if "split_dir" not in options[0] and "metadata" not in options[0]:
        selection.task.check_options(selection.options, model=fitting, inputs={"mit_states_dir": str(mit)})


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["evaluate", "compmap", "--benchmark", "cub", "--data-dir", "{dir}", "--ablations"],
            "--ablations is an option of compmap-mit-states, which this run does not include (--benchmark cub)",
        ),
        (
            ["evaluate", "binding", "--dataset", "{dir}", "--models", "clip", "--calibrate"],
            "--calibrate is an option of binding-cdsm, which this run does not include (--models clip)",
        ),
        (
            ["evaluate", "sub", "--dataset", "{dir}", "--cub-dir", "{dir}", "--model", "{dir}", "--threshold", "0.3"],
            "--threshold is an option of sub-cbm, which this run does not include",
        ),
        (
            ["evaluate", "conceptbed", "--from-scores", "{file}", "--style-oracle", "my-org/pacs"],
            "--style-oracle does nothing with --from-scores",
        ),
        (["evaluate", "--model", "{dir}", "--tasks", "binding-clip", "--results-repo", "me/x"], "--results-repo goes"),
        (["evaluate", "--model", "{dir}", "--tasks", "binding-clip", "--results-pr"], "--results-pr goes with"),
    ],
)
def test_options_a_run_would_ignore_are_refused(argv, message, tmp_path, loads):
    """A flag that would change nothing in this run (silently ignored before) is one line, exit 2."""
    (tmp_path / "scores.jsonl").write_text("")
    argv = [a.format(dir=tmp_path, file=tmp_path / "scores.jsonl") for a in argv]
    status, err = _cli(argv)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith(f"error: {message}"), err
    assert loads == []
