"""The flags of ``conceptforge evaluate <benchmark>`` built from the options its tasks declare.

Why: each alias used to write its own ``--seeds``, ``--epochs``, ``--s-minus`` … beside the task
tables' ``Option``s (``loaders/<benchmark>/tasks.py``), and the two drifted (defaults, domains,
help). Now a task option is declared once: name, default, parse and help become the flag
(``cdsm_score`` -> ``--cdsm-score``), with the option's parse as the flag's type, so a bad value
is the same one ``error:`` line as ``--task-option TASK.NAME=VALUE`` and the flag walk
(tests/core/test_flag_walk.py) tries its bad values. An option several of the alias's tasks
declare is one flag setting all of them. A ``bool`` option is ``--name/--no-name``; a tuple one
takes several values (``--ways 5 10``) or a comma list (``--seeds 0,1``). A flag left out leaves
the task's own default, so the alias and ``--tasks`` run the same settings. What is the alias's
own (its models, ``--cbm``, the dataset) stays hand-written in the alias's module.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Sequence
from typing import Any

from conceptforge import argtypes

DEST_PREFIX = "task_option_"


def add_cache_and_device(
    parser: argparse.ArgumentParser, *, cache_help: str = "embedding cache (default ~/.cache/conceptforge/embeddings)"
) -> None:
    """``--cache-dir`` and ``--device`` of an alias: where its model's embeddings are cached and
    where the model runs (the settings ``RunSettings`` takes from every alias alike)."""
    from conceptforge import argtypes as at

    parser.add_argument("--cache-dir", type=at.output_dir.as_text(), default=None, help=cache_help)
    parser.add_argument("--device", type=at.device_checked_in_run, default=None)  # run_alias: served model first


def flag_name(option: str) -> str:
    return "--" + option.replace("_", "-")


def _dest(option: str) -> str:
    return DEST_PREFIX + option


def _tasks(names: Sequence[str]) -> list[Any]:
    from conceptforge.loaders.harness.registry import get_task

    return [get_task(name) for name in names]


def _declared(names: Sequence[str], skip: Collection[str]) -> dict[str, list[tuple[str, Any]]]:
    """Each option name -> [(task, Option)] of the tasks declaring it, in declaration order."""
    declared: dict[str, list[tuple[str, Any]]] = {}
    for task in _tasks(names):
        for option in task.options:
            if option.name not in skip:
                declared.setdefault(option.name, []).append((task.name, option))
    for name, owners in declared.items():  # one flag, one default: tasks sharing a name must agree
        if len({repr(option.default) for _, option in owners}) > 1:
            raise ValueError(f"tasks {', '.join(t for t, _ in owners)} declare option {name} with different defaults")
    return declared


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return "none" if value in ("", None) else str(value)


def _help(owners: list[tuple[str, Any]]) -> str:
    helps = list(dict.fromkeys(option.help for _, option in owners))
    text = (
        helps[0]
        if len(helps) == 1
        else "; ".join(f"{task}: {option.help}" for task, option in owners if option.help in helps)
    )
    option = owners[0][1]
    if "default" not in text.lower():
        text += f" (default: {_shown(option.default)})"
    return text.replace("%", "%%")  # argparse formats help with %


def add_task_options(parser: argparse.ArgumentParser, names: Sequence[str], *, skip: Collection[str] = ()) -> None:
    """Add one flag per option of the tasks ``names`` (except ``skip``, which the alias handles
    itself), in argument groups: the options every task shares, then each task's own."""
    declared = _declared(names, skip)
    owner_sets = [tuple(task for task, _ in owners) for owners in declared.values()]
    order = [tuple(names)] + [(name,) for name in names] + owner_sets  # shared first, then each task's
    groups: dict[tuple[str, ...], argparse._ArgumentGroup] = {}
    for tasks in dict.fromkeys(order):
        if tasks in owner_sets:
            title = f"{tasks[0]} options" if len(tasks) == 1 else f"options of {' and '.join(tasks)}"
            note = None if groups else "each flag sets the task option of its name, as --task-option does"
            groups[tasks] = parser.add_argument_group(title, note)
    for name, owners in declared.items():
        tasks = tuple(task for task, _ in owners)
        option = owners[0][1]
        kwargs: dict[str, Any] = {"dest": _dest(name), "default": None, "help": _help(owners)}
        if isinstance(option.default, bool):
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = option.parse
            if isinstance(option.default, tuple):
                kwargs["nargs"] = "+"
            if isinstance(option.parse, argtypes.Choice):
                kwargs["choices"] = option.parse.choices
            else:
                kwargs["metavar"] = name.upper()
        groups[tasks].add_argument(flag_name(name), **kwargs)


def given_options(args: argparse.Namespace, names: Sequence[str], *, skip: Collection[str] = ()) -> dict[str, Any]:
    """The options whose flags were given, by option name (list flags flattened to a tuple)."""
    given: dict[str, Any] = {}
    for name, owners in _declared(names, skip).items():
        value = getattr(args, _dest(name), None)
        if value is None:
            continue
        if isinstance(owners[0][1].default, tuple):  # nargs="+" of comma lists: one flat tuple
            value = tuple(item for part in value for item in part)
        given[name] = value
    return given


def task_values(args: argparse.Namespace, names: Sequence[str], *, skip: Collection[str] = ()) -> dict[str, Any]:
    """One task's options as the alias's flags set them: the task's defaults, then the flags given."""
    (task,) = _tasks(names)
    return {**task.option_defaults(), **given_options(args, names, skip=skip)}


def refuse_unused(
    args: argparse.Namespace,
    names: Sequence[str],
    running: Collection[str],
    *,
    skip: Collection[str] = (),
    how: str = "",
) -> None:
    """Refuse a flag given for an option that only tasks this run leaves out declare (``--ablations``
    with ``--benchmark cub``, ``--calibrate`` with ``--models clip``): it would be silently ignored.
    ``how``: what makes the run include such a task, for the message."""
    from conceptforge.errors import InvalidArgumentError

    for name, owners in _declared(names, skip).items():
        if getattr(args, _dest(name), None) is None:
            continue
        tasks = [task for task, _ in owners]
        if not set(tasks) & set(running):
            raise InvalidArgumentError(
                f"{flag_name(name)} is an option of {' and '.join(tasks)}, which this run does not include"
                + (f" ({how})" if how else "")
                + ": drop it"
            )
