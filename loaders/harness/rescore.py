"""``conceptforge evaluate --from-predictions DIR``: every metric again from the per-sample files.

Why it reproduces a run exactly: a live run already reports the metrics its task's ``score``
function computes from the rows (after checking them against the protocol code), and the rows,
the task entry and the run's header travel in the parquet files; so rescoring calls the same
function on the same numbers and rebuilds the same results file, with no model loaded.

Named variants that are functions of the stored rows (``--task-option
compmap-mit-states.czsl_curve=authors``) are recomputed here too; the entry then says so in its
``variant`` and ``options``. Variants that change what the model computed (a CDSM's score, the
S− rule, the CUB episode protocol) need a new run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conceptforge.errors import DataFormatError, InvalidArgumentError

logger = logging.getLogger(__name__)


def _overrides(options: Sequence[str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for text in options:
        key, sep, value = text.partition("=")
        name, dot, option = key.partition(".")
        if not sep or not dot:
            raise InvalidArgumentError(f"--task-option wants TASK.NAME=VALUE, got {text!r}")
        out.setdefault(name.strip(), {})[option.strip()] = value
    return out


def check_rows(task: Any, rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> str | None:
    """The first row that contradicts itself or the schema (None: none), as ``row ID: rule``.

    Every task: one row per ``item_id`` (a repeated row would be counted twice), the file's task
    in ``task``, ``correct`` saying whether ``value`` is 1, and a by-answer row whose answer was
    not parsed (``parsed`` false) never correct; then the task's own rules
    (``Task.check_rows``: binding's credit from its scores, SUB's verdict from its prediction and
    label, …), which see the run's options (sub-cbm's threshold)."""
    seen: set[Any] = set()
    for row in rows:
        item = row.get("item_id")
        if item in seen:
            return f"row {item}: item_id appears twice (one row per sample; a repeated row is counted twice)"
        seen.add(item)
        if row.get("task") != task.name:
            return f"row {item}: task is {row.get('task')!r} in the samples file of {task.name}"
        correct, value = row.get("correct"), row.get("value")
        if correct is not None and value is not None and bool(correct) != (float(value) == 1.0):
            return f"row {item}: correct is {bool(correct)} but value is {value}"
        if row.get("parsed") is False and correct:  # by-answer rows (loaders/harness/by_answer.py)
            return f"row {item}: correct is True but its answer was not parsed (an unparsed answer is scored wrong)"
    return task.check_rows(rows, options) if task.check_rows is not None else None


def warn_changed_rows(file: Path, rows: Sequence[dict[str, Any]], metadata: dict[str, str]) -> None:
    """One warning line when ``file`` holds another number of rows than its run wrote (the count
    is in its metadata; files from before it was recorded are not checked): the metrics are then
    those of the rows present, which a reader of the rescored file would take for the run's."""
    from conceptforge.loaders.harness.samples import ROWS_KEY

    try:
        written = int(metadata.get(ROWS_KEY, ""))
    except ValueError:
        return
    if len(rows) < written:
        logger.warning(
            "%s holds %d of the %d rows its run wrote: %d rows were dropped from the file since; "
            "the metrics are rescored from the %d rows left",
            file,
            len(rows),
            written,
            written - len(rows),
            len(rows),
        )
    elif len(rows) > written:
        logger.warning(
            "%s holds %d rows, %d more than the %d its run wrote: rows were added to the file since; "
            "the metrics are rescored from all %d",
            file,
            len(rows),
            len(rows) - written,
            written,
            len(rows),
        )


def rescore(directory: str | Path, *, options: Sequence[str] = ()) -> dict[str, Any]:
    """The results payload rebuilt from ``directory``'s ``<task>.parquet`` files."""
    from conceptforge.loaders.harness.registry import get_task, unknown_option
    from conceptforge.loaders.harness.samples import list_sample_files, read_sample_rows
    from conceptforge.loaders.harness.task import parse_option

    wanted = _overrides(options)
    entries: list[tuple[int, dict[str, Any]]] = []
    run: dict[str, Any] | None = None
    for file in list_sample_files(directory):
        rows, metadata = read_sample_rows(file)
        if "conceptforge.task" not in metadata or "conceptforge.run" not in metadata:
            raise DataFormatError(f"{file} is not a samples file written by conceptforge evaluate (no task record)")
        record = json.loads(metadata["conceptforge.task"])
        header = json.loads(metadata["conceptforge.run"])
        if run is not None and header != run:
            raise DataFormatError(f"{file} comes from another run than the other files in {directory}")
        run = header
        task = get_task(record["task"])
        task_options = {**task.option_defaults(), **record["options"]}
        for name, value in wanted.pop(task.name, {}).items():
            if name not in {option.name for option in task.options}:
                raise unknown_option(task, name)
            if name not in task.rescore_options:
                raise InvalidArgumentError(
                    f"--from-predictions: {task.name}.{name} changes what the model computed; "
                    f"only {', '.join(task.rescore_options) or 'no option'} can be changed here"
                )
            known = {o.name: o for o in task.options}[name]
            task_options[name] = parse_option(known, value, where=f"--task-option {task.name}.{name}")
            record["options"][name] = task_options[name]
            record["variant"] = f"{record['variant']}; rescored with {name}={value}"
        warn_changed_rows(file, rows, metadata)
        problem = check_rows(task, rows, task_options)
        if problem:
            raise DataFormatError(f"{file}: {problem}; rescore only files that evaluate wrote")
        metrics = task.scored(rows, task_options)
        if record["main_metric"] not in metrics:  # e.g. a binding file without its gen rows
            raise DataFormatError(
                f"{file}: no row gives the run's main metric {record['main_metric']} (metrics from the rows: "
                f"{', '.join(metrics) or 'none'}); rescore only files that evaluate wrote"
            )
        position = record.pop("position")
        record["metrics"] = {name: metric.to_dict() for name, metric in metrics.items()}
        if task.rescore_details is not None:  # details that are functions of the rows follow them
            record["details"] = task.rescore_details(rows, task_options, record.get("details") or {})
        entries.append((position, record))
    if wanted:
        raise InvalidArgumentError(
            f"--task-option names task(s) {', '.join(wanted)} with no samples file in {directory}"
        )
    assert run is not None
    return {**run, "tasks": [record for _, record in sorted(entries, key=lambda e: e[0])]}  # "tasks" keeps its place
