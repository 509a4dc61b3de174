"""``conceptforge leaderboard … --html out.html``: one static page comparing models task by task.

Why static and self-contained: the page is opened from disk, attached to a paper's supplement or
a pull request; it has no server, no script and no external URL. Charts are PNGs embedded as
``data:`` URIs. One section per task *and dataset* (repo, config, commit: two configs of one
binding repo are two sections, never one chart or one pair): the models' breakdowns side by side
(bars with their intervals, and a table), then for every two models of the section whose
per-sample files share items, the paired difference with its interval and exact test, group by
group. :func:`leaderboard_json` gives the same numbers, unrounded, as JSON.
"""

from __future__ import annotations

import base64
import html
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conceptforge.loaders.analysis.bootstrap import BootstrapConfig, Difference, Estimate
from conceptforge.loaders.analysis.breakdowns import TaskBreakdowns, compare, compute_breakdowns, describe, spec_for
from conceptforge.loaders.analysis.leaderboard import (
    dataset_key,
    dataset_title,
    distinct_payloads,
    leaderboard_table,
    values_note,
)
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


LEADERBOARD_FORMAT = "conceptforge-leaderboard/1"


@dataclass
class ModelTask:
    """One model's samples and breakdowns of one task."""

    label: str
    samples: Samples
    breakdowns: TaskBreakdowns
    entry: dict[str, Any] = field(default_factory=dict)  # the task's entry in the results file


@dataclass
class Pair:
    """Two models of one panel: their paired differences, or why there are none."""

    a: ModelTask
    b: ModelTask
    diffs: dict[tuple[str, str], Difference]
    reason: str = ""


@dataclass
class Panel:
    """One task on one dataset (repo, config, commit): its models and their pairs."""

    task: str
    dataset: tuple[str, str, str]
    title: str
    models: list[ModelTask]
    pairs: list[Pair] = field(default_factory=list)


def _labels(payloads: Sequence[dict[str, Any]]) -> list[str]:
    """Model ids, with the file name where two files measured the same model."""
    ids = [p["model"]["id"] for p in payloads]
    return [i if ids.count(i) == 1 else f"{i} ({Path(p['_path']).stem})" for i, p in zip(ids, payloads)]


def collect(
    payloads: Sequence[dict[str, Any]], *, config: BootstrapConfig
) -> tuple[dict[tuple[str, tuple[str, str, str]], list[ModelTask]], list[str]]:
    """Per (task, dataset), each model's breakdowns (from ``<stem>.samples/``); notes on what is missing."""
    tasks: dict[tuple[str, tuple[str, str, str]], list[ModelTask]] = {}
    notes = []
    for label, payload in zip(_labels(payloads), payloads):
        folder = samples_dir(payload["_path"])
        if not folder.is_dir():
            notes.append(f"{label}: no per-sample predictions beside {payload['_path']} (expected {folder.name}/)")
            continue
        for entry in payload["tasks"]:
            task = entry["task"]
            path = folder / f"{task}.parquet"
            if spec_for(task) is None:
                continue
            if not path.is_file():
                notes.append(f"{label}: no {path.name} in {folder}")
                continue
            samples = read_samples(path)
            result = compute_breakdowns(samples, config=config, main_metric=entry.get("main_metric"))
            if result is not None:
                tasks.setdefault((task, dataset_key(entry)), []).append(ModelTask(label, samples, result, entry))
    return tasks, notes


def analyse(payloads: Sequence[dict[str, Any]], *, config: BootstrapConfig) -> tuple[list[Panel], list[str]]:
    """The panels (task × dataset) with every pair's paired differences, and the notes. A file
    that repeats another exactly (``leaderboard.distinct_payloads``; the table's notes name it)
    is one model here too, never paired with itself."""
    payloads, _ = distinct_payloads(payloads)
    tasks, notes = collect(payloads, config=config)
    panels = []
    for (task, dataset), models in tasks.items():
        panel = Panel(task, dataset, dataset_title(models[0].entry), models)
        for a, b in _pairs(models):
            rev_a, rev_b = a.samples.metadata.get("dataset_revision"), b.samples.metadata.get("dataset_revision")
            if rev_a and rev_b and rev_a != rev_b:
                panel.pairs.append(Pair(a, b, {}, f"different dataset revisions ({rev_a} vs {rev_b})"))
                continue
            diffs = compare(a.samples, b.samples, a.breakdowns, config=config)
            panel.pairs.append(Pair(a, b, diffs, "" if diffs else "the two runs share no item"))
        panels.append(panel)
    return panels, notes


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


SMALL_MARK = "†"


def _fmt(e: Estimate | None, signed: bool) -> str:
    if e is None or e.value != e.value:
        return "–"
    scale, digits = (1.0, 3) if signed else (100.0, 1)
    mark = f' <span class="note" title="{html.escape(e.warning)}">{SMALL_MARK}</span>' if e.warning else ""
    return (
        f'{scale * e.value:.{digits}f} <span class="note">[{scale * e.low:.{digits}f}, {scale * e.high:.{digits}f}]'
        f" n={e.n}</span>{mark}"
    )


def _fmt_diff(d: Difference, signed: bool, config: BootstrapConfig) -> str:
    scale, digits = (1.0, 3) if signed else (100.0, 1)
    css = ("pos" if d.value > 0 else "neg") if d.p_value < 1 - config.confidence else ""
    value = f"{scale * d.value:+.{digits}f}"
    mark = f' <span class="note" title="{html.escape(d.warning)}">{SMALL_MARK}</span>' if d.warning else ""
    return (
        f'<span class="{css}">{value}</span> <span class="note">[{scale * d.low:+.{digits}f}, {scale * d.high:+.{digits}f}]'
        f" n={d.n_shared}; {html.escape(d.test)} p={_p(d.p_value)} ({d.n_plus}+/{d.n_minus}−)</span>{mark}"
    )


def _p(value: float) -> str:
    return f"{value:.2g}" if value >= 0.001 else f"{value:.1e}"


def _short_title(title: str) -> str:
    """``by swap kind (gen split)`` -> ``swap kind``: a chart label's prefix."""
    return title.split(" (")[0].replace("by ", "")


def _pairs(models: list[ModelTask]) -> list[tuple[ModelTask, ModelTask]]:
    if len(models) <= MAX_ALL_PAIRS:
        return list(itertools.combinations(models, 2))
    return [(models[0], other) for other in models[1:]]


def _interval_words(config: BootstrapConfig) -> str:
    return (
        f"{100 * config.confidence:g}% intervals ({config.proportions} for proportions, BCa bootstrap otherwise; "
        f"{SMALL_MARK}: fewer than {config.min_units} units, a bootstrap interval there covers less than it says)"
    )


def _task_section(panel: Panel, anchor: str, *, config: BootstrapConfig) -> str:
    from conceptforge.loaders.analysis.charts import difference_chart, task_chart

    task, models = panel.task, panel.models
    first = models[0].breakdowns
    signed = first.family == "conceptbed-ccd"
    unit = "CCD" if signed else "%"
    where = ", ".join(f"{k}={v}" for k, v in describe(first.headline).items())
    parts = [
        f'<section class="task" id="{html.escape(anchor)}"><h2>{html.escape(task)} '
        f'<span class="note">on {html.escape(panel.title)}</span></h2>',
        f"<p>{html.escape(first.statistic)}; values in {unit} with their {html.escape(_interval_words(config))} "
        "and sample count.</p>",
    ]
    chart = task_chart([(m.label, m.breakdowns) for m in models], config=config, dataset=panel.title)
    if chart is not None:
        parts.append(_png(chart, f"{task} breakdowns on {panel.title}"))
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
    for pair in panel.pairs:
        a, b, diffs = pair.a, pair.b, pair.diffs
        title = f"<h3>{html.escape(a.label)} − {html.escape(b.label)}</h3>"
        if not diffs:
            parts.append(title + f'<p class="note">Not paired: {html.escape(pair.reason)}.</p>')
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
            title + f'<p class="note">Paired over the {diffs[next(iter(diffs))].unit}s both runs share: the interval '
            "of the mean difference (Newcombe's for right/wrong outcomes, else BCa bootstrap with the same resampled "
            "units for both models) and the exact sign test on the units where they differ (McNemar's for "
            f"right/wrong outcomes); blue: the first model higher, orange: lower, where the test's p < "
            f"{1 - config.confidence:.2g}.</p>"
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
                [[html.escape(label), _fmt_diff(d, signed, config)] for label, d in labelled],
            )
        )
    parts.append("</section>")
    return "\n".join(parts)


def _anchors(panels: Sequence[Panel]) -> list[str]:
    """``task-binding-clip``, then ``task-binding-clip-2`` for the task's next dataset."""
    seen: dict[str, int] = {}
    out = []
    for panel in panels:
        seen[panel.task] = seen.get(panel.task, 0) + 1
        out.append(f"task-{panel.task}" + (f"-{seen[panel.task]}" if seen[panel.task] > 1 else ""))
    return out


def leaderboard_html(
    payloads: Sequence[dict[str, Any]],
    *,
    metrics: str = "main",
    config: BootstrapConfig = BootstrapConfig(),
    analysed: tuple[list[Panel], list[str]] | None = None,
) -> str:
    """The whole page (see the module docstring); ``payloads`` from :func:`load_results`,
    ``analysed`` from :func:`analyse` (computed here when not given)."""
    headers, rows, notes = leaderboard_table(payloads, metrics=metrics)
    panels, missing = analysed or analyse(payloads, config=config)
    body = [
        "<h1>conceptforge leaderboard</h1>",
        _table(headers, [[html.escape(c) for c in row] for row in rows], numeric_from=3, table_id="headline"),
        f'<p class="note">{html.escape(values_note(payloads, metrics=metrics))}</p>',
        "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>",
        f'<p class="note">Breakdowns: {html.escape(_interval_words(config))}. The bootstrap draws {config.resamples} '
        f"resamples with numpy <code>Generator(PCG64({config.seed}))</code>, fresh for each interval; items are "
        "resampled (CompMap CUB: episodes; ConceptBed: images within their concept). One section per task and "
        "dataset: runs on different data are never drawn in one chart or paired.</p>",
    ]
    if missing:
        body.append('<ul class="note">' + "".join(f"<li>{html.escape(n)}</li>" for n in missing) + "</ul>")
    anchors = _anchors(panels)
    if panels:
        body.append(
            "<p>Tasks: "
            + ", ".join(
                f'<a href="#{html.escape(anchor)}">{html.escape(p.task)} ({html.escape(p.title)})</a>'
                for p, anchor in zip(panels, anchors)
            )
            + "</p>"
        )
    for panel, anchor in zip(panels, anchors):
        body.append(_task_section(panel, anchor, config=config))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>conceptforge leaderboard</title>'
        f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def leaderboard_json(
    payloads: Sequence[dict[str, Any]],
    *,
    metrics: str = "main",
    config: BootstrapConfig = BootstrapConfig(),
    analysed: tuple[list[Panel], list[str]] | None = None,
) -> dict[str, Any]:
    """The page's numbers unrounded (``leaderboard --json``): the table, and per task and dataset
    every model's breakdowns and every pair's paired differences with their exact test."""
    headers, rows, notes = leaderboard_table(payloads, metrics=metrics)
    panels, missing = analysed or analyse(payloads, config=config)

    def model(m: ModelTask) -> dict[str, Any]:
        found = m.breakdowns.to_dict()
        return {"label": m.label, "overall": found["overall"], "breakdowns": found["breakdowns"]}

    def pair(p: Pair) -> dict[str, Any]:
        titles = {bd.name: bd.title for bd in p.a.breakdowns.breakdowns}
        return {
            "a": p.a.label,
            "b": p.b.label,
            "paired": [
                {"breakdown": name, "title": titles.get(name, name), "group": group, **d.to_dict()}
                for (name, group), d in p.diffs.items()
            ],
            **({"not_paired": p.reason} if not p.diffs else {}),
        }

    return {
        "format": LEADERBOARD_FORMAT,
        "bootstrap": config.to_dict(),
        "table": {"headers": headers, "rows": rows, "notes": notes},
        "missing": missing,
        "panels": [
            {
                "task": p.task,
                "dataset": dict(zip(("repo", "config", "sha"), p.dataset)),
                "models": [model(m) for m in p.models],
                "pairs": [pair(x) for x in p.pairs],
            }
            for p in panels
        ],
    }
