"""The task registry of ``conceptforge evaluate --tasks …``: the benchmarks' task tables, selection, listing.

Why a registry: a user names tasks (``sub-vlm,binding-clip,…``) the way lm-evaluation-harness
names its tasks, and every task carries what reproducing its number needs: the dataset repo, its
config/split and pinned revision, the model kinds it accepts, the protocol and variant names, and
the functions that run it and score its per-sample rows. Each benchmark declares its tasks in its
own package, ``loaders/<benchmark>/tasks.py`` (as lighteval's task files), found by
:func:`conceptforge.discovery.benchmark_modules`; this module collects them, parses a user's
selection and prints the list. Adding a task is one entry in its benchmark's ``tasks()``; adding
a benchmark is one package (docs/evaluation-python.md, "Adding a task or a benchmark").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from conceptforge.errors import InvalidArgumentError
from conceptforge.loaders.harness.task import (
    DatasetRef,
    Metric,
    Option,
    Task,
    TaskContext,
    TaskOutcome,
    int_list,
    parse_option,
    str_list,
)
from conceptforge.loaders.harness.units import PERCENT, UNITS, Unit, declared_unit

# The registry's types live in loaders/harness/task.py (the benchmarks' tables import them
# without importing this module back); they are importable from here too.
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
    "select_task",
    "set_option",
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
    given: set[str] = field(default_factory=set)  # options set by --task-option (the rest are defaults)
    spelled: dict[str, str] = field(
        default_factory=dict
    )  # option -> how the user set it (--ablations, --task-option …)

    def data_source(self) -> tuple[str | None, str | None]:
        """(repo, revision) the task reads: the user's, else the task's default repo at its pinned
        revision. Why the pin follows the repo: a task's default revision (binding's ``v1.0.0``) is a
        tag of its default repo only, so another repo without ``@REV`` is read at its ``main``; the
        default repo named again without ``@REV`` still gets the pin (a published number must not
        follow whatever ``main`` is that day)."""
        repo = self.dataset or self.task.dataset
        if self.revision is None and repo is not None and repo == self.task.dataset:
            return repo, self.task.revision
        return repo, self.revision


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
        set_option(target(name.strip(), "--task-option"), option, value, where=f"--task-option {key}")
    return list(selections.values())


def unknown_option(task: Task, name: str) -> InvalidArgumentError:
    """The one line for an option ``task`` does not declare: what it is, the closest name, the list.

    Why one: ``--from-predictions`` called a typo "changes what the model computed"."""
    import difflib

    known = [option.name for option in task.options]
    close = difflib.get_close_matches(name, known, n=1)
    guess = f"did you mean {close[0]!r}? " if close else ""
    return InvalidArgumentError(
        f"task {task.name} has no option {name!r} ({guess}options: {', '.join(known) or 'none'})"
    )


def set_option(selection: TaskSelection, name: str, value: Any, *, where: str) -> None:
    """Set one option of a selection, checked by the option's own parse (text or a value)."""
    known = {o.name: o for o in selection.task.options}
    if name not in known:
        raise unknown_option(selection.task, name)
    selection.options[name] = parse_option(known[name], value, where=where)
    selection.given.add(name)
    selection.spelled[name] = where


def select_task(
    name: str,
    *,
    dataset: str | None = None,
    revision: str | None = None,
    split: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> TaskSelection:
    """One task as a library caller asks for it (what ``--tasks NAME --dataset NAME=REPO@REV
    --task-option NAME.OPTION=VALUE`` selects); option values may be text or values."""
    selection = TaskSelection(get_task(name), dataset, revision, get_task(name).option_defaults(), split)
    for option, value in (options or {}).items():
        set_option(selection, option, value, where=f"option {name}.{option}")
    return selection


def format_task_list() -> str:
    """The ``--tasks list`` tables: per task, each capability it runs with, the protocol it runs
    by it and the model families (adapters) that run it so (a family providing several of a
    task's capabilities runs by the first); then the default data and inputs, the families, and
    the task options."""
    from conceptforge.loaders.harness.adapters.base import CAPABILITIES, FAMILIES
    from conceptforge.loaders.harness.reports import markdown_table

    rows, data = [], []
    for task in all_tasks().values():
        protocols = dict(task.protocols)
        for capability in task.capabilities:
            families = [f.name for f in FAMILIES.values() if task.capability_for(f.name) == capability]
            # the by-answer protocol of a family that prefers another capability: by its option
            chosen = [
                f.name for f in FAMILIES.values() if task.capability_for(f.name, {"by_answer": True}) == capability
            ]
            by_option = [f"{name} (by_answer=true)" for name in chosen if name not in families]
            if families or by_option:
                rows.append(
                    [task.name, capability, ", ".join(families + by_option), protocols.get(capability, task.protocol)]
                )
        folder = next((need for need in task.needs if need.endswith("_dir")), None)
        dataset = (
            f"{task.dataset}@{task.revision}"
            if task.dataset
            else f"(local folder: --{folder.replace('_', '-')})"
            if folder
            else "(generated images: the model, or --dataset TASK=FOLDER)"
        )
        needs = ", ".join("--" + n.replace("_", "-") for n in task.needs) or "–"
        data.append([task.name, dataset, needs])
    families = [
        [f.name, f.title, ", ".join(f.capabilities), f"pip install 'conceptforge[{f.extra}]'" if f.extra else "–"]
        for f in FAMILIES.values()
    ]
    options = []
    for task in all_tasks().values():
        for option in task.options:
            default = ",".join(map(str, option.default)) if isinstance(option.default, tuple) else option.default
            options.append(f"  {task.name}.{option.name} (default {default!s}): {option.help}")
    capabilities = "\n".join(f"  {name}: {text}" for name, text in CAPABILITIES.items())
    return (
        markdown_table(["task", "capability", "model families", "protocol"], rows)
        + "\n\n"
        + markdown_table(["task", "dataset@revision", "needs"], data)
        + "\n\nmodel families (read from the model's own files):\n\n"
        + markdown_table(["family", "what", "capabilities", "needs"], families)
        + "\n\ncapabilities:\n"
        + capabilities
        + "\n\ntask options (--task-option TASK.NAME=VALUE):\n"
        + "\n".join(options)
    )


def metric_unit(task: str, name: str, metric: Mapping[str, Any] | None) -> Unit:
    """The unit of metric ``name`` of task ``task`` as a results file holds it: the one recorded
    beside the value; for a file written before units were recorded, the one the task declares;
    for a task this version does not know, percent (what every table assumed then)."""
    recorded = (metric or {}).get("unit")
    if isinstance(recorded, str) and recorded in UNITS:
        return UNITS[recorded]
    known = all_tasks().get(task)
    return (declared_unit(known.metrics, name) if known is not None else None) or PERCENT
