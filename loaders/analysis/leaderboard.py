"""Compare models from several ``conceptforge evaluate`` results files in one markdown table.

Why columns are keyed by what was measured: two numbers are only comparable when they were
measured on the same data (dataset id, config, commit) with the same protocol variant. Each such
combination gets its own column (``task [config] @sha7``) instead of silently sharing one: the
single-object and two-object configs of one binding repo share the repo and its commit, and are
still two columns.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError
from conceptforge.loaders.harness.registry import metric_unit
from conceptforge.loaders.harness.runner import RESULTS_FORMAT, dataset_label, short_sha
from conceptforge.loaders.harness.units import UNITS, format_metric, units_note

logger = logging.getLogger(__name__)


def load_results(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The results files' payloads, in order. A ``<stem>.breakdowns.json`` that ``evaluate`` wrote
    beside its results is skipped (``results/*.json`` matches it): it is read through its results
    file, and refusing the glob the README shows would be wrong."""
    from conceptforge.loaders.analysis.breakdowns import BREAKDOWNS_FORMAT

    payloads = []
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise DataNotFoundError(f"results file {path} does not exist")
        try:
            payload = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise DataFormatError(f"{path} is not JSON ({error.msg}, line {error.lineno})") from None
        except UnicodeDecodeError:  # a binary file (an image, a parquet file) given by mistake
            raise DataFormatError(
                f"{path} is not a text file: give the JSON of `conceptforge evaluate --output`"
            ) from None
        if isinstance(payload, dict) and payload.get("format") == BREAKDOWNS_FORMAT:
            logger.info("%s: the breakdowns written beside a results file, not a results file; skipped", path)
            continue
        if not isinstance(payload, dict) or payload.get("format") != RESULTS_FORMAT:
            raise DataFormatError(f"{path} is not a conceptforge evaluate results file (format {RESULTS_FORMAT})")
        problem = structure_problem(payload)
        if problem:
            raise DataFormatError(
                f"{path} says format {RESULTS_FORMAT} but {problem}; rewrite it with `conceptforge evaluate --output`"
            )
        payload["_path"] = str(path)
        payloads.append(payload)
    if not payloads:
        raise InvalidArgumentError(
            "no results files given (give the JSON files `conceptforge evaluate --output` wrote)"
        )
    return payloads


def structure_problem(payload: dict[str, Any]) -> str | None:
    """What a results file lacks that the table reads, or None (the format tag alone proves nothing)."""
    model = payload.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("id"), str) or not isinstance(model.get("kind"), str):
        return "its 'model' is not an object with an 'id' and a 'kind'"
    tasks = payload.get("tasks")
    if not isinstance(tasks, list):
        return "its 'tasks' is not a list"
    for index, task in enumerate(tasks):
        where = f"tasks[{index}]"
        if not isinstance(task, dict):
            return f"{where} is not an object"
        for key, kind in (("task", str), ("main_metric", str), ("metrics", dict), ("dataset", dict)):
            if not isinstance(task.get(key), kind):
                return f"{where} has no {kind.__name__} '{key}'"
        if not isinstance(task["dataset"].get("repo"), str):
            return f"{where}.dataset has no 'repo'"
        for name, metric in task["metrics"].items():
            if metric is not None and not (
                isinstance(metric, dict) and isinstance(metric.get("value", 0), (int, float, type(None)))
            ):
                return f"{where}.metrics.{name} is not an object with a numeric 'value'"
        if task.get("seeds") is not None and not isinstance(task["seeds"], list):
            return f"{where}.seeds is not a list"
    return None


def dataset_key(task: dict[str, Any]) -> tuple[str, str, str]:
    """(repo, config, commit) a result was measured on. Files written before results recorded the
    config (``dataset.config`` null for binding) name it in their ``config`` option."""
    dataset = task["dataset"]
    config = dataset.get("config") or (task.get("options") or {}).get("config") or ""
    return str(dataset.get("repo") or ""), str(config), str(dataset.get("sha") or "")


def dataset_title(task: dict[str, Any]) -> str:
    """``repo [config] @sha7``: the data of a column or panel, for people."""
    repo, config, sha = dataset_key(task)
    return f"{repo}" + (f" [{config}]" if config else "") + (f" @{short_sha(sha, 7)}" if sha else "")


ColumnKey = tuple[str, str, tuple[str, str, str], str, str, str]


def _column_key(task: dict[str, Any], metric: str) -> ColumnKey:
    """What makes a column: task, metric, data, protocol variant, protocol and unit. The protocol
    is part of it so that a probability protocol and a by-answer one (``sub/vlm-choose``,
    ``sub/choose-by-answer``) are never one column, whatever their variant texts say; the unit so
    that a count and a share are never one column either."""
    unit = metric_unit(task["task"], metric, task["metrics"].get(metric))
    return task["task"], metric, dataset_key(task), task.get("variant", ""), task.get("protocol") or "", unit.name


def _columns(payloads: Sequence[dict[str, Any]], metrics: str) -> dict[ColumnKey, None]:
    if metrics not in ("main", "all"):
        raise InvalidArgumentError(f"--metrics must be main or all, got {metrics!r}")
    columns: dict[ColumnKey, None] = {}
    for payload in payloads:
        for task in payload["tasks"]:
            names = [task["main_metric"]] if metrics == "main" else list(task["metrics"])
            for name in names:
                columns.setdefault(_column_key(task, name))
    return columns


def leaderboard_table(
    payloads: Sequence[dict[str, Any]], *, metrics: str = "main"
) -> tuple[list[str], list[list[str]], list[str]]:
    """The comparison as ``(headers, rows, notes)``: one row per results file (model), one
    column per task metric, its unit in its header (``binding-clip gen_accuracy (%)``); notes
    name each task's dataset and protocol. ``metrics``: ``main`` (each task's headline metric) or
    ``all``. Rows that repeat another row exactly (:func:`distinct_payloads`) are left out here;
    the notes say which."""
    columns = _columns(payloads, metrics)
    by_task: dict[tuple[str, str], list[tuple[tuple[str, str, str], str, str]]] = {}
    for task, metric, data, variant, protocol, _ in columns:
        by_task.setdefault((task, metric), []).append((data, variant, protocol))
    headers = ["model", "kind", "revision"]
    for task, metric, (repo, config, sha), variant, protocol, unit in columns:
        label = f"{task} {metric}"
        others = by_task[(task, metric)]
        if len(others) > 1:  # name what tells this column from the task's others
            if len({d[0] for d, _, _ in others}) > 1:
                label += f" {repo}"
            if len({d[1] for d, _, _ in others}) > 1:
                label += f" [{config or 'default'}]"
            if len({d[2] for d, _, _ in others}) > 1:
                label += f" @{short_sha(sha, 7)}"
            if len({p for _, _, p in others}) > 1:
                label += f" <{protocol}>"
            if len({v for _, v, _ in others}) > 1:
                label += f" ({variant})"
        headers.append(f"{label} ({UNITS[unit].label})")
    rows = []
    notes = []
    kept, repeats = distinct_payloads(payloads)
    for payload in kept:
        model = payload["model"]
        cells = {}
        for task in payload["tasks"]:
            for name, metric in task["metrics"].items():
                key = _column_key(task, name)
                cells[key] = format_metric(metric, UNITS[key[-1]])
        revision = short_sha(model.get("sha") or model.get("revision"), 12)
        rows.append([model["id"], model["kind"], revision] + [cells.get(key, "–") for key in columns])
    seen = set()
    for payload in payloads:
        for task in payload["tasks"]:
            dataset = task["dataset"]
            key = (task["task"], dataset_key(task), task.get("variant", ""), task.get("protocol") or "")
            if key in seen:
                continue
            seen.add(key)
            seeds = f"; seeds {','.join(map(str, task['seeds']))}" if task.get("seeds") else ""
            config = dataset_key(task)[1]
            notes.append(
                f"{task['task']}: {dataset_label(dataset, 40)}{f' config {config}' if config else ''}; "
                f"{task['protocol']}, {task['variant']}{seeds}"
            )
    notes += repeats
    return headers, rows, notes


def _same_measurement(payload: dict[str, Any]) -> str:
    """What a leaderboard row shows of a results file (model, revision, every task's data,
    protocol and metrics), as canonical text: two files with the same text are the same row."""
    model = payload["model"]
    shown = {
        "model": [model.get("id"), model.get("kind"), model.get("sha") or model.get("revision")],
        "tasks": sorted(
            json.dumps(
                [t["task"], dataset_key(t), t.get("variant", ""), t.get("protocol") or "", t["metrics"]],
                sort_keys=True,
                default=str,
            )
            for t in payload["tasks"]
        ),
    }
    return json.dumps(shown, sort_keys=True)


def distinct_payloads(payloads: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The results files that are not an exact repeat of an earlier one (same model and revision,
    same data, protocols and numbers: two copies of one run, or a run and its ``--from-predictions``
    rescoring), and one note per repeat naming both files: a leaderboard never shows two identical
    rows without a word."""
    first: dict[str, dict[str, Any]] = {}
    kept, notes = [], []
    for payload in payloads:
        key = _same_measurement(payload)
        if key in first:
            notes.append(
                f"{payload.get('_path', payload['model']['id'])} repeats {first[key].get('_path', 'an earlier file')} "
                f"(same model {payload['model']['id']}, revision, data, protocols and numbers): shown once"
            )
            continue
        first[key] = payload
        kept.append(payload)
    return kept, notes


def values_note(payloads: Sequence[dict[str, Any]], *, metrics: str = "main") -> str:
    """The table's note on its values: each column's unit (in its header) and what it means."""
    units = [UNITS[key[-1]] for key in _columns(payloads, metrics)]
    return (
        "Each column's unit is in its header; ± standard error over seeds/episodes where the protocol has them. "
        + units_note(units)
    ).rstrip()


def leaderboard(payloads: Sequence[dict[str, Any]], *, metrics: str = "main") -> str:
    """Markdown table, one row per results file (model), one column per task metric.

    ``metrics``: ``main`` (each task's headline metric) or ``all``.
    """
    from conceptforge.loaders.harness.reports import markdown_table

    headers, rows, notes = leaderboard_table(payloads, metrics=metrics)
    note = values_note(payloads, metrics=metrics)
    return markdown_table(headers, rows) + "\n\n" + note + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
