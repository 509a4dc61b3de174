"""The one evaluation path: run tasks (or rescore their samples), write the results, hand off.

Every way of invoking ``conceptforge evaluate`` — ``--model M --tasks …``, the per-benchmark
aliases (``evaluate binding …`` turns its flags into task options) and ``--from-predictions`` —
ends here, so they all write the same results JSON (``conceptforge-eval-results/1``), its
markdown table, the per-task samples folder, and call the analyses hook once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conceptforge.errors import ConceptforgeError, InvalidArgumentError

logger = logging.getLogger(__name__)


@dataclass
class Written:
    """What one evaluation wrote: the results JSON, its markdown, the samples folder and files."""

    payload: dict[str, Any]
    results: Path
    markdown: Path
    samples_dir: Path | None = None
    samples: list[Path] = field(default_factory=list)
    analyses: list[Path] = field(default_factory=list)
    main: bool = True  # False on the other ranks of a multi-process run: rank 0 alone wrote the files
    scored: dict[str, int] = field(default_factory=dict)
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # each task's per-sample rows


def check_output(path: str | Path, *, samples: bool) -> None:
    """Fail before any work when the outputs cannot be written where asked."""
    from conceptforge.argtypes import check_writable
    from conceptforge.loaders.harness.runner import claim_results_output
    from conceptforge.loaders.harness.samples import check_samples_target, samples_dir

    claim_results_output(path)  # a .json path; a user's file there (or their .md beside it) is refused
    check_writable(path, what="--output")  # results are written after every task ran: check first
    if samples:
        check_samples_target(samples_dir(path))


def write_outputs(payload: dict[str, Any], path: str | Path, *, samples: dict[str, Any] | None) -> Written:
    """Samples first (a results file never points at a half-written folder), then the JSON and
    markdown, then the analyses hook."""
    from conceptforge.loaders.analysis.write import write_breakdowns_and_charts
    from conceptforge.loaders.harness.runner import write_results
    from conceptforge.loaders.harness.samples import samples_dir, write_run_samples

    folder = samples_dir(path) if samples is not None else None
    existed = {p for p in _run_outputs(Path(path)) if p.exists() or p.is_symlink()}
    try:
        files = write_run_samples(folder, payload, samples) if folder is not None else []
        results, markdown = write_results(payload, path)
        analyses = write_breakdowns_and_charts(results, folder)
    except (OSError, ConceptforgeError):
        _remove_run_outputs(Path(path), existed)  # a full disk half-way: no results file left looking complete
        raise
    return Written(payload, results, markdown, folder, files, analyses)


def _run_outputs(path: Path) -> list[Path]:
    """The files one results set is made of: ``x.json``, ``x.md``, ``x.samples/`` (the guard's:
    ours or refused before the run), then ``x.breakdowns.json`` and ``x.charts/``."""
    from conceptforge.loaders.harness.samples import samples_dir

    stem = path.stem
    return [
        path,
        path.with_suffix(".md"),
        samples_dir(path),
        path.with_name(f"{stem}.breakdowns.json"),
        path.with_name(f"{stem}.charts"),
    ]


def _remove_run_outputs(path: Path, existed: set[Path]) -> None:
    """Remove a results set that could not be written whole, so that none is taken for a finished
    run: the guarded three (ours whatever their age) and the analyses this run created (one that
    was there before is left alone). Rerunning the command writes them again (scores are cached)."""
    import shutil

    for index, item in enumerate(_run_outputs(path)):
        if index >= 3 and item in existed:
            continue
        if item.is_dir() and not item.is_symlink():
            shutil.rmtree(item, ignore_errors=True)
        elif item.is_file():
            item.unlink(missing_ok=True)


def evaluate(
    model: Any,
    selections: Sequence[Any],
    settings: Any,
    output: str | Path,
    *,
    samples: bool = True,
    on_skip: Callable[[str], None] | None = None,
) -> Written:
    """Run ``selections`` on ``model`` and write everything (``samples=False``: no samples folder).
    ``on_skip`` hears each skipped task's one-line reason (the command prints it)."""
    from conceptforge.loaders.harness.distributed import process_group
    from conceptforge.loaders.harness.runner import run_tasks

    main = process_group().is_main  # several processes (accelerate launch, torchrun): rank 0 writes
    if main:
        check_output(output, samples=samples)
    results = run_tasks(model, selections, settings, quiet_skips=True)  # said below: once, or in the error line
    if not main:  # the caller closes the group (ProcessGroup.close) after rank 0 wrote
        path = Path(output)
        rows = {name: part for name, (part, _) in results.samples.items()}
        return Written(
            results.to_dict(), path, path.with_suffix(".md"), main=False, scored=dict(results.scored), rows=rows
        )
    if not results.tasks and results.skipped:
        tasks = {selection.task.name: selection.task for selection in selections}
        if all(tasks[s["task"]].capability_for(model.kind) is not None for s in results.skipped):
            # the model could run them all; an input is missing (--cub-dir …): say that, not the model
            raise InvalidArgumentError(f"nothing to run: {'; '.join(s['reason'] for s in results.skipped)}")
    for skipped in results.skipped:
        (on_skip or logger.info)(skipped["reason"])
    if not results.tasks:
        raise InvalidArgumentError(
            f"no task of --tasks can run with {model.id} (a {model.kind} model): see the skipped lines"
        )
    written = write_outputs(results.to_dict(), output, samples=results.samples if samples else None)
    written.scored = dict(results.scored)
    written.rows = {name: rows for name, (rows, _) in results.samples.items()}
    return written


def evaluate_from_predictions(directory: str | Path, output: str | Path, *, options: Sequence[str] = ()) -> Written:
    """Rescore a samples folder (no model) and write the results beside ``output``."""
    from conceptforge.loaders.harness.rescore import rescore
    from conceptforge.loaders.harness.samples import list_sample_files, read_sample_rows, samples_dir

    payload = rescore(directory, options=options)
    same_folder = samples_dir(output).resolve() == Path(directory).resolve()
    check_output(output, samples=not same_folder)
    if same_folder:  # rescoring in place: the rows are already there
        from conceptforge.loaders.analysis.write import write_breakdowns_and_charts
        from conceptforge.loaders.harness.runner import write_results

        results, markdown = write_results(payload, output)
        return Written(
            payload,
            results,
            markdown,
            Path(directory),
            list_sample_files(directory),
            write_breakdowns_and_charts(results, directory),
        )
    copied: dict[str, Any] = {}
    for file in list_sample_files(directory):
        rows, _ = read_sample_rows(file)
        from conceptforge.loaders.harness.registry import get_task

        name = file.stem
        copied[name] = (rows, get_task(name).columns)
    return write_outputs(payload, output, samples=copied)
