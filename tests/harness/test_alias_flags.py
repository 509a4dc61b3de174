"""The per-benchmark ``conceptforge evaluate <b>`` flags are the tasks' declared options, and
``run_task`` is the command line's runner from Python (issue 31)."""

from __future__ import annotations

import argparse
import importlib

import pytest

from conceptforge import argtypes
from conceptforge.commands.evaluate.options import add_task_options, flag_name, given_options
from conceptforge.errors import ConceptforgeError
from conceptforge.loaders.harness.registry import get_task, select_tasks

#: alias module -> (its tasks, the options it sets by hand)
ALIASES = {
    "binding": (("binding-clip", "binding-cdsm"), {"models"}),
    "sub": (("sub-vlm", "sub-cbm"), set()),
    "compmap": (("compmap-cub", "compmap-mit-states"), set()),
    "conceptbed": (("conceptbed-ccd",), set()),
}


def _parser(alias: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"conceptforge evaluate {alias}")
    importlib.import_module(f"conceptforge.commands.evaluate.{alias}").add_arguments(parser)
    return parser


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_every_task_option_is_a_flag_of_its_alias_with_the_options_parse(alias):
    tasks, by_hand = ALIASES[alias]
    actions = {flag: action for action in _parser(alias)._actions for flag in action.option_strings}
    parses: dict[str, list] = {}  # an option several tasks declare: one flag, typed by one of theirs
    for task in tasks:
        for option in get_task(task).options:
            parses.setdefault(option.name, []).append(option.parse)
    for task in tasks:
        for option in get_task(task).options:
            if option.name in by_hand:  # the alias's own flag of that name, not one built from the option
                assert actions[flag_name(option.name)].dest == option.name
                continue
            action = actions[flag_name(option.name)]
            assert option.help.replace("%", "%%") in action.help, (alias, option.name)  # shared: each task's
            assert action.default is None  # left out: the task's own default, as with --tasks
            if isinstance(option.default, bool):
                assert isinstance(action, argparse.BooleanOptionalAction)
                assert f"--no-{option.name.replace('_', '-')}" in actions
            else:
                assert any(action.type is parse for parse in parses[option.name]), (alias, option.name)


def test_flag_values_become_the_same_options_as_task_option_text():
    parser = _parser("binding")
    tasks = ("binding-clip", "binding-cdsm")
    spaced = parser.parse_args(
        ["--dataset", "d", "--seeds", "0", "1", "--epochs", "3", "--no-calibrate", "--cdsm-score", "scaled-cosine"]
    )
    given = given_options(spaced, tasks, skip=("models",))
    assert given == {"seeds": (0, 1), "epochs": 3, "calibrate": False, "cdsm_score": "scaled-cosine"}
    assert given_options(parser.parse_args(["--dataset", "d", "--seeds", "0,1"]), tasks, skip=("models",)) == {
        "seeds": (0, 1)
    }
    assert given_options(parser.parse_args(["--dataset", "d"]), tasks, skip=("models",)) == {}
    (selection,) = select_tasks(
        "binding-cdsm",
        options=[
            "binding-cdsm.seeds=0,1",
            "binding-cdsm.epochs=3",
            "binding-cdsm.calibrate=false",
            "binding-cdsm.cdsm_score=scaled-cosine",
        ],
    )
    assert {name: selection.options[name] for name in given} == given


@pytest.mark.parametrize(
    "alias, flag, task_option, message",
    [
        ("binding", ["--epochs", "0"], "binding-cdsm.epochs=0", "must be >= 1, got 0"),
        ("binding", ["--seeds", "a,b"], "binding-cdsm.seeds=a,b", "expected comma-separated integers, got 'a,b'"),
        ("sub", ["--s-minus", "neither"], "sub-vlm.s_minus=neither", "expected one of paper, any-original"),
        ("compmap", ["--ways", "1"], "compmap-cub.ways=1", "must be >= 2, got 1"),
        ("conceptbed", ["--ece-bins", "0"], "conceptbed-ccd.ece_bins=0", "must be >= 1, got 0"),
    ],
)
def test_a_bad_value_is_refused_alike_by_the_flag_and_by_task_option(alias, flag, task_option, message, capsys):
    from conceptforge.commands import main

    required = {
        "binding": ["--dataset", "d"],
        "sub": ["--dataset", "d", "--cub-dir", "."],
        "compmap": ["--benchmark", "cub", "--data-dir", "."],
        "conceptbed": [],
    }[alias]
    assert main(["evaluate", alias, *required, *flag]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: conceptforge evaluate {alias}: argument {flag[0]}") and message in line
    with pytest.raises(ConceptforgeError, match=f"--task-option {task_option.split('=')[0]}: .*{message}"):
        select_tasks(task_option.split(".")[0], options=[task_option])


def test_shared_options_are_one_flag_in_a_group_of_their_own():
    parser = argparse.ArgumentParser()
    add_task_options(parser, ("sub-vlm", "sub-cbm"))
    titles = [group.title for group in parser._action_groups]
    assert titles[-3:] == ["options of sub-vlm and sub-cbm", "sub-vlm options", "sub-cbm options"]
    shared = {a.dest for a in parser._action_groups[-3]._group_actions}
    assert shared == {"task_option_s_minus", "task_option_cbm_min_classes"}
    help_text = parser.format_help()
    assert help_text.count("--s-minus {paper,any-original}") == 2  # usage line and its one entry


def test_option_types_by_hand(tmp_path):
    assert argtypes.IntList(2)("5, 10") == (5, 10)
    assert argtypes.StrList()("add, tl,") == ("add", "tl")
    assert argtypes.Choice(("a", "b"))("b") == "b"
    lr = argtypes.Optional(argtypes.positive_float)
    assert lr("none") is None and lr("") is None and lr("1e-3") == 0.001
    names = argtypes.Optional(argtypes.existing_file.as_text(), words=("",), empty="")
    assert names("") == ""
    for parse, text in [
        (argtypes.IntList(2), "1"),
        (argtypes.IntList(), "1.5"),
        (argtypes.IntList(), ","),
        (argtypes.StrList(), " , "),
        (argtypes.Choice(("a", "b")), "c"),
        (lr, "0"),
        (names, str(tmp_path / "missing.txt")),
    ]:
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)


def test_run_task_refuses_what_the_command_line_refuses(tiny_clip_dir, tmp_path):
    from conceptforge.loaders.harness.runner import ModelSession, run_task

    with pytest.raises(ConceptforgeError, match="task binding-clip has no option 'seeds'"):
        run_task("binding-clip", model=tiny_clip_dir, options={"seeds": [0]})
    with pytest.raises(ConceptforgeError, match=r"option binding-cdsm\.epochs: must be >= 1, got 0"):
        run_task("binding-cdsm", model=tiny_clip_dir, options={"epochs": 0})
    with pytest.raises(ConceptforgeError, match="conceptbed-ccd runs with .*generated-images.* is a clip model"):
        run_task("conceptbed-ccd", model=tiny_clip_dir, concepts=tmp_path)
    session = ModelSession.open(tiny_clip_dir, cache_dir=tmp_path / "cache")
    with pytest.raises(ConceptforgeError, match="device is the session's"):
        run_task("binding-clip", model=session, device="cpu")
    session.close()
