"""After a run: breakdowns with intervals, their charts, and links to both in the markdown report.

Why one entry point: the evaluation runner calls :func:`write_breakdowns_and_charts` once the
results file and the per-sample files are on disk; everything it writes sits beside the results
(``<stem>.breakdowns.json``, ``<stem>.charts/<task>.png``) and the report ``<stem>.md`` gets a
breakdowns section (replaced, not duplicated, when run again).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from conceptforge.errors import DataFormatError, DataNotFoundError
from conceptforge.loaders.analysis.bootstrap import BootstrapConfig, Estimate
from conceptforge.loaders.analysis.breakdowns import (
    TaskBreakdowns,
    breakdowns_payload,
    compute_breakdowns,
    describe,
    spec_for,
)
from conceptforge.loaders.harness.sample_columns import read_samples

logger = logging.getLogger(__name__)

SECTION_START = "<!-- conceptforge breakdowns: start -->"
SECTION_END = "<!-- conceptforge breakdowns: end -->"


def _main_metrics(results_path: Path) -> dict[str, str]:
    try:
        payload = json.loads(results_path.read_text())
    except json.JSONDecodeError as error:
        raise DataFormatError(f"{results_path} is not JSON ({error.msg}, line {error.lineno})") from None
    except UnicodeDecodeError:
        raise DataFormatError(f"{results_path} is not a text file (a JSON results file was expected)") from None
    return {task["task"]: task.get("main_metric", "") for task in payload.get("tasks", []) if isinstance(task, dict)}


def compute_all(samples_dir: Path, main_metrics: dict[str, str], *, config: BootstrapConfig) -> list[TaskBreakdowns]:
    """The breakdowns of every ``<task>.parquet`` in ``samples_dir`` that has a spec, task order
    as in the results file (then by name)."""
    order = list(main_metrics)
    files = sorted(
        samples_dir.glob("*.parquet"), key=lambda p: (order.index(p.stem) if p.stem in order else len(order), p.stem)
    )
    results = []
    for path in files:
        if spec_for(path.stem) is None:
            logger.info("no breakdowns for %s", path.name)
            continue
        computed = compute_breakdowns(read_samples(path), config=config, main_metric=main_metrics.get(path.stem))
        if computed is not None:
            results.append(computed)
    return results


def _cell(e: Estimate, signed: bool) -> str:
    if e.value != e.value:
        return "–"
    scale, digits = (1.0, 3) if signed else (100.0, 1)
    mark = " †" if e.warning else ""
    return f"{scale * e.value:.{digits}f} [{scale * e.low:.{digits}f}, {scale * e.high:.{digits}f}]{mark}"


def markdown(
    results: Sequence[TaskBreakdowns], *, config: BootstrapConfig, charts: dict[str, str] | None = None
) -> str:
    """Markdown tables of every breakdown (values in %, CCD as is), linking ``charts[task]``."""
    from conceptforge.loaders.harness.reports import markdown_table

    lines = [
        f"Breakdowns: each group's statistic with its {100 * config.confidence:g}% interval: exact "
        f"{config.proportions} for proportions (every unit right or wrong), BCa bootstrap otherwise "
        f"({config.resamples} resamples, numpy PCG64 seed {config.seed}); n = samples, units = what was resampled; "
        f"† = fewer than {config.min_units} units: a bootstrap interval there covers less than it says.",
        "",
    ]
    for result in results:
        signed = result.family == "conceptbed-ccd"
        unit_word = "CCD" if signed else "%"
        where = ", ".join(f"{k}={v}" for k, v in describe(result.headline).items())
        lines += [
            f"### {result.task}",
            "",
            f"{result.statistic}; overall{f' ({where})' if where else ''}: "
            f"{_cell(result.overall, signed)} {unit_word}, n={result.overall.n}, {result.overall.n_units} "
            f"{result.overall.unit}s",
            "",
        ]
        if charts and result.task in charts:
            lines += [f"![{result.task} breakdowns]({charts[result.task]})", ""]
        for breakdown in result.breakdowns:
            rows = [
                [g.label, _cell(g.estimate, signed), g.estimate.n, f"{g.estimate.n_units} {g.estimate.unit}s"]
                for g in breakdown.groups
            ]
            lines += [
                f"**{result.task} {breakdown.title}**",
                "",
                markdown_table(
                    [
                        "group",
                        f"{unit_word} [95% CI]" if config.confidence == 0.95 else f"{unit_word} [CI]",
                        "n",
                        "units",
                    ],
                    rows,
                ),
                "",
            ]
    return "\n".join(lines)


def _replace_section(text: str, section: str) -> str:
    block = f"{SECTION_START}\n{section.rstrip()}\n{SECTION_END}\n"
    if SECTION_START in text and SECTION_END in text:
        head, _, rest = text.partition(SECTION_START)
        _, _, tail = rest.partition(SECTION_END)
        return head + block + tail.lstrip("\n")
    return text.rstrip("\n") + "\n\n" + block if text.strip() else block


def write_breakdowns_and_charts(
    results_path: str | Path, samples_dir: str | Path | None, *, config: BootstrapConfig = BootstrapConfig()
) -> list[Path]:
    """Write ``<stem>.breakdowns.json``, one PNG per task under ``<stem>.charts/`` and the
    breakdowns section of ``<stem>.md``; return the paths written. Nothing is written (``[]``)
    when the run kept no samples (``samples_dir`` None or not a folder) or no sample file has
    breakdowns."""
    from conceptforge.files import write_json
    from conceptforge.loaders.analysis.charts import task_chart
    from conceptforge.serialization import atomic_write_bytes

    results_path = Path(results_path)
    if not results_path.is_file():
        raise DataNotFoundError(f"results file {results_path} does not exist")
    if samples_dir is None or not Path(samples_dir).is_dir():
        logger.debug("no per-sample folder for %s: no breakdowns", results_path)
        return []
    results = compute_all(Path(samples_dir), _main_metrics(results_path), config=config)
    if not results:
        logger.info("no per-sample file in %s has breakdowns", samples_dir)
        return []
    stem = results_path.stem
    written = [
        write_json(
            results_path.with_name(f"{stem}.breakdowns.json"),
            breakdowns_payload(results, config=config, source=results_path.name),
        )
    ]
    charts_dir = results_path.with_name(f"{stem}.charts")
    report = results_path.with_suffix(".md")
    links = {}
    for result in results:
        chart = task_chart([(result.model or stem, result)], config=config)
        if chart is None:  # no countable sample
            continue
        png = charts_dir / f"{result.task}.png"
        charts_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(png, chart)
        written.append(png)
        links[result.task] = Path(os.path.relpath(png, report.parent)).as_posix()
    text = report.read_text() if report.is_file() else ""
    atomic_write_bytes(
        report, _replace_section(text, "## Breakdowns\n\n" + markdown(results, config=config, charts=links)).encode()
    )
    written.append(report)
    logger.info("breakdowns of %d task(s) written beside %s", len(results), results_path)
    return written
