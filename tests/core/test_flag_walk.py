"""Every flag of every sub-command refuses bad values in one line, before any work.

Built from the argument parsers themselves (``conceptforge.commands.base.walk_parsers``): each
flag's type (an :class:`conceptforge.argtypes.ArgType`) names values outside its domain, a
``choices`` flag gets a value outside its choices, and a missing required argument or an unknown
flag is tried once per command. A flag added tomorrow is walked without being listed here; one
added with a bare ``int``/``float``/``Path`` type fails :func:`test_every_value_flag_has_a_checked_type`.

Each run is ``conceptforge.commands.main(argv)`` in this process with the sub-command's ``run``
replaced by a recorder: a bad value the parser accepts shows up as "ran" instead of exit 2, and no
model or dataset is ever loaded. Expected of every run: exit 2, exactly one stderr line starting
``error:``, no traceback, nothing on stdout, and the canary folder (the files and folders offered
as bad paths) byte for byte as it was.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import re
from pathlib import Path

import pytest

from conceptforge import argtypes
from conceptforge.argtypes import ArgType, DeviceType, Examples
from conceptforge.commands import build_parser
from conceptforge.commands.base import walk_parsers

VALUELESS = (
    argparse._HelpAction,
    argparse._VersionAction,
    argparse._StoreConstAction,
    argparse._CountAction,
    argparse._AppendConstAction,
    argparse.BooleanOptionalAction,
    argparse._SubParsersAction,
)
PATH_LIKE = (
    "-dir",
    "--out",
    "--output",
    "--spec",
    "--concepts",
    "--references",
    "--candidates",
    "--export",
    "--apply",
    "--db",
    "--outliers",
    "--work",
    "--from-scores",
    "--save-scores",
)
#: Flags whose value is a path inside another flag's folder, or a name: checked by the command.
RELATIVE_PATHS = {"--split-dir", "--metadata"}


def commands() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    return [(path, parser) for path, parser in walk_parsers(build_parser()) if path]


def value_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments that take a value (hidden ones too): flags and positionals."""
    return [a for a in parser._actions if not isinstance(a, VALUELESS) and a.nargs != 0]


def leaf(parser: argparse.ArgumentParser) -> bool:
    return not any(isinstance(a, argparse._SubParsersAction) and a.required for a in parser._actions)


@pytest.fixture(scope="module")
def canary(tmp_path_factory) -> tuple[Path, Examples]:
    root = tmp_path_factory.mktemp("canary")
    (root / "user.txt").write_text("the user's notes\n")
    folder = root / "someone-elses"
    folder.mkdir()
    (folder / "README.md").write_text("# not ours\n")
    (folder / "data.bin").write_bytes(os.urandom(64))
    examples = Examples(
        missing=str(root / "missing" / "thing"),
        file=str(root / "user.txt"),
        folder=str(folder),
        under_file=str(root / "user.txt" / "out.json"),
    )
    return root, examples


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    state = {}
    for path in sorted(root.rglob("*")):
        mode = path.stat().st_mode
        state[str(path.relative_to(root))] = (
            mode,
            hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir",
        )
    return state


def good_value(action: argparse.Action, examples: Examples) -> str:
    if isinstance(action.type, ArgType):
        return action.type.good_example(examples)
    if action.choices:
        return str(next(iter(action.choices)))
    return "x"


def base_argv(
    path: tuple[str, ...], parser: argparse.ArgumentParser, examples: Examples, *, skip: argparse.Action | None = None
) -> list[str]:
    """The command with every required argument given a good value (``skip`` left out)."""
    argv = list(path)
    for action in value_actions(parser):
        if action is skip:
            continue
        if not action.option_strings:
            argv.append(good_value(action, examples))
        elif action.required:
            argv.append(f"{action.option_strings[-1]}={good_value(action, examples)}")
    return argv


class Ran(Exception):
    """The sub-command's run was reached: the parser accepted every value."""


@pytest.fixture
def cli(monkeypatch, canary, tmp_path):
    """``cli(argv)`` -> (exit status, stdout, stderr), with the sub-command's run replaced."""
    import conceptforge.commands as commands

    def ran(entries, name, args):
        raise Ran(name)

    monkeypatch.setattr(commands, "run_entry", ran)
    monkeypatch.chdir(tmp_path)  # a default output in the working folder would land here
    monkeypatch.delenv("CUB_DIR", raising=False)  # a default read from the caller's environment

    def call(argv: list[str]) -> tuple[int | str, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status: int | str = commands.main(argv)
            except Ran:
                status = "ran"
            except SystemExit as stop:  # argparse's own exit: must not happen for bad values
                status = f"SystemExit({stop.code})"
        return status, out.getvalue(), err.getvalue()

    return call


def bad_cases(examples: Examples) -> list[tuple[tuple[str, ...], list[str], str]]:
    """(command path, argv, what is bad) for every bad value of every flag of every command."""
    cases = []
    for path, parser in commands():
        if not leaf(parser):
            cases.append((path, list(path), "no sub-command"))
            continue
        cases.append((path, [*path, "--no-such-flag=1"], "unknown flag"))
        actions = value_actions(parser)
        if any(a.required or not a.option_strings for a in actions):
            cases.append((path, list(path), "required arguments missing"))
        for action in actions:
            values = list(action.type.bad_examples(examples)) if isinstance(action.type, ArgType) else []
            if action.choices:
                values.append("not-a-choice")
            for value in values:
                if action.option_strings:
                    argv = [*base_argv(path, parser, examples, skip=action), f"{action.option_strings[-1]}={value}"]
                else:
                    position = [a for a in actions if not a.option_strings].index(action)
                    argv = base_argv(path, parser, examples)
                    argv[len(path) + position] = value
                    if value.startswith("-"):
                        continue  # a leading dash reads as a flag, not as this positional
                name = action.option_strings[-1] if action.option_strings else action.dest
                cases.append((path, argv, f"{name}={value!r}"))
    return cases


def check(call, argv, what) -> list[str]:
    status, out, err = call(argv)
    problems = []
    lines = err.splitlines()
    if status != 2:
        problems.append(f"exit {status}")
    if len(lines) != 1 or not lines[0].startswith("error: "):
        problems.append(f"stderr not one 'error:' line: {err!r}")
    if "Traceback" in err:
        problems.append("traceback")
    if out:
        problems.append(f"stdout: {out!r}")
    return [f"conceptforge {' '.join(argv)} [{what}]: {'; '.join(problems)}"] if problems else []


def test_every_value_flag_has_a_checked_type():
    """No numeric or path flag without a domain: a bare int/float/Path (or an unknown callable) fails here."""
    unchecked = []
    for path, parser in commands():
        for action in value_actions(parser):
            name = action.option_strings[-1] if action.option_strings else action.dest
            where = f"conceptforge {' '.join(path)} {name}"
            if action.type in (int, float, Path) or (
                action.type not in (None, str) and not isinstance(action.type, ArgType)
            ):
                unchecked.append(
                    f"{where}: type {getattr(action.type, '__name__', action.type)} (use conceptforge.argtypes)"
                )
            elif (
                action.type in (None, str)
                and not action.choices
                and any(name.endswith(s) for s in PATH_LIKE)
                and name not in RELATIVE_PATHS
            ):
                unchecked.append(f"{where}: a path flag without a path type")
    assert not unchecked, "\n".join(unchecked)


def test_the_walk_covers_every_command(canary):
    """The tree holds every sub-command the help lists, and the walk reaches each flag."""
    paths = {" ".join(path) for path, _ in commands()}
    for expected in (
        "generate sub",
        "generate binding",
        "generate conceptbed",
        "filter sub",
        "select-candidates birds",
        "select-candidates attributes",
        "train-oracle",
        "publish",
        "evaluate",
        "evaluate sub",
        "evaluate binding",
        "evaluate conceptbed",
        "evaluate compmap",
        "leaderboard",
        "annotate",
        "assemble",
        "status",
    ):
        assert expected in paths
    cases = bad_cases(canary[1])
    walked = {what.split("=")[0] for _, _, what in cases}
    assert {"--ece-bins", "--validation-fraction", "--min-accuracy", "--epochs", "--batch-size", "--device"} <= walked
    assert len(cases) > 300


def test_every_good_base_command_parses(cli, canary):
    """The walk's good values pass: otherwise every bad case would fail for the wrong reason."""
    problems = []
    for path, parser in commands():
        if leaf(parser):
            status, _, err = cli(base_argv(path, parser, canary[1]))
            if status != "ran":
                problems.append(f"conceptforge {' '.join(path)}: {status} {err!r}")
    assert not problems, "\n".join(problems)


def test_every_bad_value_is_one_error_line_and_touches_nothing(cli, canary):
    root, examples = canary
    before = snapshot(root)
    problems = []
    for _, argv, what in bad_cases(examples):
        problems += check(cli, argv, what)
    assert not problems, f"{len(problems)} bad inputs not refused in one line:\n" + "\n".join(problems)
    assert snapshot(root) == before


def test_device_without_cuda_is_one_line_in_every_command(cli, canary, monkeypatch):
    """``--device cuda`` on a machine without CUDA: the shared check, before any model loads."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    problems, checked = [], 0
    for path, parser in commands():
        for action in value_actions(parser):
            # checked_in_run (evaluate --model): the GPU is checked first thing in its run, after
            # --device is refused for a served model; tests/harness/test_endpoint_models.py checks both
            if isinstance(action.type, DeviceType) and action.type.check:
                checked += 1
                argv = [*base_argv(path, parser, canary[1]), f"{action.option_strings[-1]}=cuda"]
                problems += check(cli, argv, "--device cuda without CUDA")
                assert "no CUDA GPU" in cli(argv)[2]
    assert checked >= 5  # filter, select-candidates x2, …; the evaluate aliases check in run_alias (served first)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["evaluate", "conceptbed", "--from-scores", "{file}", "--ece-bins", "0"], "--ece-bins"),
        (
            [
                "train-oracle",
                "--task",
                "style",
                "--concepts",
                "{file}",
                "--out",
                "{missing}",
                "--validation-fraction",
                "1.5",
            ],
            "--validation-fraction",
        ),
        (
            ["train-oracle", "--task", "style", "--concepts", "{file}", "--out", "{missing}", "--epochs", "0"],
            "--epochs",
        ),
        (
            ["select-candidates", "birds", "--references", "{folder}", "--spec", "{missing}", "--min-accuracy", "1.5"],
            "--min-accuracy",
        ),
        (["select-candidates", "attributes", "--spec", "{missing}", "--batch-size", "0"], "--batch-size"),
        (["evaluate", "conceptbed", "--from-scores", "{file}", "--output", "{under_file}"], "--output"),
    ],
)
def test_the_reported_bad_values_are_refused(cli, canary, argv, flag):
    """The cases from issue 24, by name: each used to run (and train on NaN, or print ECE 0)."""
    examples = canary[1]
    argv = [a.format(**examples.__dict__) for a in argv]
    status, _, err = cli(argv)
    assert status == 2 and err.count("\n") == 1 and f"argument {flag}" in err, err


def test_parser_errors_are_one_line_from_the_console_script(tmp_path):
    """The installed ``conceptforge`` prints no usage block before the error line."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "conceptforge", "train-oracle", "--epochs", "0"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: conceptforge train-oracle: argument --epochs: must be >= 1, got 0")
    assert "usage:" not in result.stderr


def test_types_by_hand():
    """The domains worked out by hand, at their edges."""
    assert argtypes.positive_int("1") == 1
    assert argtypes.fraction_below_one("0") == 0.0
    assert argtypes.fraction_above_zero("1") == 1.0
    assert argtypes.unit_interval("1") == 1.0
    for parse, text in [
        (argtypes.positive_int, "0"),
        (argtypes.non_negative_int, "-1"),
        (argtypes.fraction_below_one, "1"),
        (argtypes.fraction_above_zero, "0"),
        (argtypes.positive_float, "0"),
        (argtypes.finite_float, "nan"),
        (argtypes.rating, "5.5"),
        (argtypes.port, "65536"),
        (argtypes.seed, "-1"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)
    eights = argtypes.IntRange(8, multiple_of=8)
    assert eights("32") == 32 and eights.good_example(None) == "8" and "9" in eights.bad_examples(None)
    with pytest.raises(argparse.ArgumentTypeError, match=r"must be a multiple of 8, got 31; use 24 or 32"):
        eights("31")  # issue 32: trained, then failed every image, exit 0
    assert argtypes.ListOf(argtypes.seed)("0, 1,2") == [0, 1, 2]
    assert argtypes.Resolution()("320x240") == "320x240"
    assert argtypes.output_location("s3://bucket/run") == "s3://bucket/run"


def test_template_fields_are_checked():
    """An unknown field ended in a KeyError traceback after the model loaded; a missing one gave equal prompts."""
    template = argtypes.Template(allowed={"group", "value"}, required={"value"})
    assert template("the bird's {group} is {value}") == "the bird's {group} is {value}"
    for text, message in [
        ("a {colour} bird", "unknown field(s) {colour}"),
        ("a bird", "lacks {value}"),
        ("a {value", "not a valid template"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
            template(text)


def test_library_loaders_share_the_device_check(monkeypatch, tmp_path):
    """A library caller asking for CUDA on a machine without it gets the same one line, before any weights load."""
    import torch

    from conceptforge.errors import DeviceUnavailableError
    from conceptforge.filters.vqa.scorer import VQAScorer
    from conceptforge.loaders.harness.embeddings import EmbeddingModel

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for load in (
        lambda: VQAScorer.from_pretrained(str(tmp_path / "no-model"), device="cuda"),
        lambda: EmbeddingModel.from_pretrained(str(tmp_path / "no-model"), device="cuda:1"),
    ):
        with pytest.raises(DeviceUnavailableError, match="no CUDA GPU is visible"):
            load()
    assert argtypes.check_device("xpu") == "xpu" and argtypes.check_device(None) is None
