"""``conceptforge leaderboard … --html out.html``: one static page comparing models task by task.

Why static and self-contained: the page is opened from disk, attached to a paper's supplement or
a pull request; it has no server, no script and no external URL. Charts are PNGs embedded as
``data:`` URIs. For each task: the models' breakdowns side by side (bars with bootstrap
intervals, and a table), then for every two models whose per-sample files share items (and name
the same dataset revision), the paired difference with its interval, group by group.
"""

from __future__ import annotations

import base64
import html
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conceptforge.loaders.analysis.bootstrap import BootstrapConfig, Difference, Estimate
from conceptforge.loaders.analysis.breakdowns import TaskBreakdowns, compare, compute_breakdowns, describe, spec_for
from conceptforge.loaders.analysis.leaderboard import VALUES_NOTE, leaderboard_table
from conceptforge.loaders.harness.sample_columns import Samples, read_samples
from conceptforge.loaders.harness.samples import samples_dir

logger = logging.getLogger(__name__)

MAX_ALL_PAIRS = 6  # up to this many models every pair is compared; beyond, each model against the first

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1100px; color: #1b1b1b;
       padding: 0 1rem; line-height: 1.4; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.3rem; border-bottom: 2px solid #0072B2; padding-bottom: .2rem; margin-top: 2.4rem; }
h3 { font-size: 1.05rem; margin-top: 1.4rem; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: .88rem; }
th, td { border: 1px solid #d0d7de; padding: .25rem .55rem; text-align: left; vertical-align: top; }
th { background: #f3f6f9; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr:nth-child(even) td { background: #fafbfc; }
img.chart { max-width: 100%; height: auto; border: 1px solid #e5e7eb; display: block; margin: .5rem 0; }
.note { color: #555; font-size: .88rem; } .pos { color: #0b5d9e; font-weight: 600; } .neg { color: #b3410b; font-weight: 600; }
code { background: #f3f6f9; padding: 0 .25rem; }
"""


@dataclass
class ModelTask:
    """One model's samples and breakdowns of one task."""

    label: str
    samples: Samples
    breakdowns: TaskBreakdowns


def _labels(payloads: Sequence[dict[str, Any]]) -> list[str]:
    """Model ids, with the file name where two files measured the same model."""
    ids = [p["model"]["id"] for p in payloads]
    return [i if ids.count(i) == 1 else f"{i} ({Path(p['_path']).stem})" for i, p in zip(ids, payloads)]


def collect(
    payloads: Sequence[dict[str, Any]], *, config: BootstrapConfig
) -> tuple[dict[str, list[ModelTask]], list[str]]:
    """Per task, each model's breakdowns (from ``<stem>.samples/``); notes on what is missing."""
    tasks: dict[str, list[ModelTask]] = {}
    notes = []
    for label, payload in zip(_labels(payloads), payloads):
        folder = samples_dir(payload["_path"])
        if not folder.is_dir():
            notes.append(f"{label}: no per-sample predictions beside {payload['_path']} (expected {folder.name}/)")
            continue
        main = {t["task"]: t.get("main_metric") for t in payload["tasks"]}
        for task in main:
            path = folder / f"{task}.parquet"
            if spec_for(task) is None:
                continue
            if not path.is_file():
                notes.append(f"{label}: no {path.name} in {folder}")
                continue
            samples = read_samples(path)
            result = compute_breakdowns(samples, config=config, main_metric=main[task])
            if result is not None:
                tasks.setdefault(task, []).append(ModelTask(label, samples, result))
    return tasks, notes


def _png(data: bytes, alt: str) -> str:
    return f'<img class="chart" alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int = 1, *, table_id: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{c}</td>' if i >= numeric_from else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    ident = f' id="{table_id}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(e: Estimate | None, signed: bool) -> str:
    if e is None or e.value != e.value:
        return "–"
    scale, digits = (1.0, 3) if signed else (100.0, 1)
    return (
        f'{scale * e.value:.{digits}f} <span class="note">[{scale * e.low:.{digits}f}, {scale * e.high:.{digits}f}]'
        f" n={e.n}</span>"
    )


def _fmt_diff(d: Difference, signed: bool) -> str:
    scale, digits = (1.0, 3) if signed else (100.0, 1)
    css = "pos" if d.low > 0 else "neg" if d.high < 0 else ""
    value = f"{scale * d.value:+.{digits}f}"
    return (
        f'<span class="{css}">{value}</span> <span class="note">[{scale * d.low:+.{digits}f}, {scale * d.high:+.{digits}f}]'
        f" n={d.n_shared}</span>"
    )


def _short_title(title: str) -> str:
    """``by swap kind (gen split)`` -> ``swap kind``: a chart label's prefix."""
    return title.split(" (")[0].replace("by ", "")


def _pairs(models: list[ModelTask]) -> list[tuple[ModelTask, ModelTask]]:
    if len(models) <= MAX_ALL_PAIRS:
        return list(itertools.combinations(models, 2))
    return [(models[0], other) for other in models[1:]]


def _task_section(task: str, models: list[ModelTask], *, config: BootstrapConfig) -> str:
    from conceptforge.loaders.analysis.charts import difference_chart, task_chart

    first = models[0].breakdowns
    signed = first.family == "conceptbed-ccd"
    unit = "CCD" if signed else "%"
    where = ", ".join(f"{k}={v}" for k, v in describe(first.headline).items())
    parts = [
        f'<section class="task" id="task-{html.escape(task)}"><h2>{html.escape(task)}</h2>',
        f"<p>{html.escape(first.statistic)}; values in {unit} with their {100 * config.confidence:g}% bootstrap interval "
        f"and sample count.</p>",
    ]
    chart = task_chart([(m.label, m.breakdowns) for m in models], config=config)
    if chart is not None:
        parts.append(_png(chart, f"{task} breakdowns"))
    rows = [
        ["overall" + (f" ({html.escape(where)})" if where else "")]
        + [_fmt(m.breakdowns.overall, signed) for m in models]
    ]
    for breakdown in first.breakdowns:
        labels = [g.label for g in breakdown.groups]
        for m in models[1:]:
            found = next((b for b in m.breakdowns.breakdowns if b.name == breakdown.name), None)
            labels += [g.label for g in (found.groups if found else []) if g.label not in labels]
        for label in labels:
            cells = []
            for m in models:
                found = next((b for b in m.breakdowns.breakdowns if b.name == breakdown.name), None)
                group = next((g for g in (found.groups if found else []) if g.label == label), None)
                cells.append(_fmt(group.estimate if group else None, signed))
            rows.append([f"{html.escape(breakdown.title)}: {html.escape(label)}"] + cells)
    parts.append(_table(["group"] + [html.escape(m.label) for m in models], rows))
    for a, b in _pairs(models):
        rev_a, rev_b = a.samples.metadata.get("dataset_revision"), b.samples.metadata.get("dataset_revision")
        title = f"<h3>{html.escape(a.label)} − {html.escape(b.label)}</h3>"
        if rev_a and rev_b and rev_a != rev_b:
            parts.append(
                title + f'<p class="note">Not paired: different dataset revisions ({html.escape(rev_a)} vs '
                f"{html.escape(rev_b)}).</p>"
            )
            continue
        diffs = compare(a.samples, b.samples, a.breakdowns, config=config)
        if not diffs:
            parts.append(title + '<p class="note">Not paired: the two runs share no item.</p>')
            continue
        titles = {bd.name: bd.title for bd in a.breakdowns.breakdowns}
        labelled = [
            ("overall" if name == "overall" else f"{titles.get(name, name)}: {group}", d)
            for (name, group), d in diffs.items()
        ]
        short = [
            ("overall" if name == "overall" else f"{_short_title(titles.get(name, name))}: {group}", d)
            for (name, group), d in diffs.items()
        ]
        parts.append(
            title + f'<p class="note">Paired bootstrap over the {diffs[next(iter(diffs))].unit}s both runs share '
            f"(same resampled units for both models); blue: the first model higher, orange: lower, where the interval excludes 0.</p>"
        )
        parts.append(
            _png(
                difference_chart(task, a.label, b.label, short, signed=signed, config=config),
                f"{task}: {a.label} minus {b.label}",
            )
        )
        parts.append(
            _table(
                ["group", f"{html.escape(a.label)} − {html.escape(b.label)}"],
                [[html.escape(label), _fmt_diff(d, signed)] for label, d in labelled],
            )
        )
    parts.append("</section>")
    return "\n".join(parts)


def leaderboard_html(
    payloads: Sequence[dict[str, Any]], *, metrics: str = "main", config: BootstrapConfig = BootstrapConfig()
) -> str:
    """The whole page (see the module docstring); ``payloads`` from :func:`load_results`."""
    headers, rows, notes = leaderboard_table(payloads, metrics=metrics)
    tasks, missing = collect(payloads, config=config)
    body = [
        "<h1>conceptforge leaderboard</h1>",
        _table(headers, [[html.escape(c) for c in row] for row in rows], numeric_from=3, table_id="headline"),
        f'<p class="note">{html.escape(VALUES_NOTE)}</p>',
        "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>",
        f'<p class="note">Breakdowns: {100 * config.confidence:g}% percentile bootstrap intervals, {config.resamples} '
        f"resamples, numpy <code>Generator(PCG64({config.seed}))</code> fresh for each interval; items are resampled "
        "(CompMap CUB: episodes; ConceptBed: images within their concept).</p>",
    ]
    if missing:
        body.append('<ul class="note">' + "".join(f"<li>{html.escape(n)}</li>" for n in missing) + "</ul>")
    if tasks:
        body.append(
            "<p>Tasks: " + ", ".join(f'<a href="#task-{html.escape(t)}">{html.escape(t)}</a>' for t in tasks) + "</p>"
        )
    for task, models in tasks.items():
        body.append(_task_section(task, models, config=config))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>conceptforge leaderboard</title>'
        f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
