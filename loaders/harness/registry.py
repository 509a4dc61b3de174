"""The task registry of ``conceptforge evaluate --tasks …``: the benchmarks' task tables, selection, listing.

Why a registry: a user names tasks (``sub-vlm,binding-clip,…``) the way lm-evaluation-harness
names its tasks, and every task carries what reproducing its number needs: the dataset repo, its
config/split and pinned revision, the model kinds it accepts, the protocol and variant names, and
the functions that run it and score its per-sample rows. Each benchmark declares its tasks in its
own package, ``loaders/<benchmark>/tasks.py`` (as lighteval's task files), found by
:func:`conceptforge.discovery.benchmark_modules`; this module collects them, parses a user's
selection and prints the list. Adding a task is one entry in its benchmark's ``tasks()``; adding
a benchmark is one package (docs/evaluation.md, "Adding a task or a benchmark").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conceptforge.errors import ConceptforgeError, InvalidArgumentError
from conceptforge.loaders.harness.task import (
    DatasetRef,
    Metric,
    Option,
    Task,
    TaskContext,
    TaskOutcome,
    int_list,
    str_list,
)

# The registry's types live in task_spec (the benchmarks' tables import them without importing
# this module back); they are importable from here too.
__all__ = [
    "DatasetRef",
    "Metric",
    "Option",
    "Task",
    "TaskContext",
    "TaskOutcome",
    "TaskSelection",
    "task_tables",
    "all_tasks",
    "get_task",
    "int_list",
    "str_list",
    "parse_dataset_override",
    "select_tasks",
    "format_task_list",
]

logger = logging.getLogger(__name__)

#: The module name a benchmark package declares its tasks in (``tasks()`` returns its rows).
TASKS_MODULE = "tasks"


def task_tables() -> list[Callable[[], list[Task]]]:
    """Every benchmark's ``tasks`` function, in benchmark-name order."""
    from conceptforge.discovery import benchmark_modules

    return [module.tasks for module in benchmark_modules("conceptforge.loaders", TASKS_MODULE)]


def _registry() -> dict[str, Task]:
    tasks: dict[str, Task] = {}
    for table in task_tables():
        for task in table():
            if task.name in tasks:
                raise ValueError(f"task {task.name} is declared twice")
            tasks[task.name] = task
    return tasks


_TASKS: dict[str, Task] | None = None


def all_tasks() -> dict[str, Task]:
    global _TASKS
    if _TASKS is None:
        _TASKS = _registry()
    return _TASKS


def get_task(name: str) -> Task:
    tasks = all_tasks()
    if name not in tasks:
        raise InvalidArgumentError(f"unknown task {name!r}; run --tasks list (tasks: {', '.join(tasks)})")
    return tasks[name]


# ----------------------------------------------------------------------------------- selection
@dataclass
class TaskSelection:
    """A task as the user asked for it: dataset/revision overrides and option values applied."""

    task: Task
    dataset: str | None
    revision: str | None
    options: dict[str, Any]
    split: str | None = None  # None: the task's own split(s)


def parse_dataset_override(text: str) -> tuple[str, str | None, str | None]:
    """``TASK=REPO[@REV]`` or ``TASK:REPO[@REV]`` -> (task, repo, revision); ``TASK=@REV`` keeps the repo."""
    for sep in ("=", ":"):
        if sep in text:
            name, _, target = text.partition(sep)
            break
    else:
        raise InvalidArgumentError(f"--dataset wants TASK=REPO[@REVISION], got {text!r}")
    repo, revision = target, None
    if "@" in target:
        head, _, tail = target.rpartition("@")
        if tail and "/" not in tail:
            repo, revision = head, tail
    return name.strip(), (repo.strip() or None), revision


def select_tasks(
    names: str,
    *,
    datasets: list[str] = (),  # type: ignore[assignment]
    revisions: list[str] = (),  # type: ignore[assignment]
    options: list[str] = (),  # type: ignore[assignment]
) -> list[TaskSelection]:
    """Parse ``--tasks a,b:REPO@REV``, ``--dataset TASK=REPO@REV``, ``--revision TASK=REV`` and
    ``--task-option TASK.NAME=VALUE`` into selections, checking every name up front."""
    selections: dict[str, TaskSelection] = {}
    for part in [p.strip() for p in names.split(",") if p.strip()]:
        if ":" in part:
            name, repo, revision = parse_dataset_override(part)
        else:
            name, repo, revision = part, None, None
        task = get_task(name)
        if name in selections:
            raise InvalidArgumentError(f"task {name} is listed twice in --tasks")
        selections[name] = TaskSelection(task, repo, revision, task.option_defaults())
    if not selections:
        raise InvalidArgumentError("--tasks is empty: name tasks (see --tasks list)")

    def target(name: str, flag: str) -> TaskSelection:
        if name not in selections:
            raise InvalidArgumentError(f"{flag} names task {name!r}, which is not in --tasks ({', '.join(selections)})")
        return selections[name]

    for text in datasets:
        name, repo, revision = parse_dataset_override(text)
        chosen = target(name, "--dataset")
        chosen.dataset = repo or chosen.dataset
        chosen.revision = revision or chosen.revision
    for text in revisions:
        name, sep, revision = text.partition("=")
        if not sep or not revision:
            raise InvalidArgumentError(f"--revision wants TASK=REVISION, got {text!r}")
        target(name.strip(), "--revision").revision = revision.strip()
    for text in options:
        key, sep, value = text.partition("=")
        name, dot, option = key.partition(".")
        if not sep or not dot:
            raise InvalidArgumentError(f"--task-option wants TASK.NAME=VALUE, got {text!r}")
        chosen = target(name.strip(), "--task-option")
        known = {o.name: o for o in chosen.task.options}
        if option not in known:
            raise InvalidArgumentError(f"task {name} has no option {option!r} (options: {', '.join(known) or 'none'})")
        try:
            chosen.options[option] = known[option].parse(value)
        except ConceptforgeError as error:
            raise InvalidArgumentError(f"--task-option {key}: {error}") from None
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"--task-option {key}: cannot read {value!r} ({known[option].help})") from None
    return list(selections.values())


def format_task_list() -> str:
    """The ``--tasks list`` table: name, model kinds, default dataset@revision, protocol, needs."""
    from conceptforge.loaders.harness.reports import markdown_table

    rows = []
    for task in all_tasks().values():
        folder = next((need for need in task.needs if need.endswith("_dir")), None)
        dataset = (
            f"{task.dataset}@{task.revision}"
            if task.dataset
            else f"(local folder: --{folder.replace('_', '-')})"
            if folder
            else "(the model: generated images)"
        )
        needs = ", ".join("--" + n.replace("_", "-") for n in task.needs) or "–"
        rows.append([task.name, ", ".join(task.model_kinds), dataset, task.protocol, needs])
    options = []
    for task in all_tasks().values():
        for option in task.options:
            default = ",".join(map(str, option.default)) if isinstance(option.default, tuple) else option.default
            options.append(f"  {task.name}.{option.name} (default {default!s}): {option.help}")
    return (
        markdown_table(["task", "model kinds", "dataset@revision", "protocol", "needs"], rows)
        + "\n\ntask options (--task-option TASK.NAME=VALUE):\n"
        + "\n".join(options)
    )
