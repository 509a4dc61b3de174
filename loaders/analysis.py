"""The one hook from a finished evaluation to its breakdowns and charts.

Why one function: ``conceptforge evaluate`` (a live run or ``--from-predictions``) calls
:func:`write_breakdowns_and_charts` once, after the results JSON and the per-sample files are
written, so whatever analyses exist read the same files and a run without them is unchanged.

The analyses are registered in :data:`ANALYSES` as ``(name, module, function)``: each function
takes ``(results_path, samples_dir)`` and returns the paths it wrote. A listed module that is not
installed is skipped with a debug line; with none importable the hook writes nothing and returns
``[]``. (The breakdowns with bootstrap intervals and the charts/HTML leaderboard plug in here as
``conceptforge.loaders.breakdowns`` and ``conceptforge.loaders.charts``.)
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path

logger = logging.getLogger(__name__)

# (name, module, function(results_path, samples_dir) -> list[Path]), run in this order.
ANALYSES: tuple[tuple[str, str, str], ...] = (
    ("breakdowns", "conceptforge.loaders.breakdowns", "write_breakdowns"),
    ("charts", "conceptforge.loaders.charts", "write_charts"),
)


def write_breakdowns_and_charts(results_path: str | Path, samples_dir: str | Path | None) -> list[Path]:
    """Run every available analysis on one results file and its samples folder; the paths written."""
    if samples_dir is None or not Path(samples_dir).is_dir():
        return []
    written: list[Path] = []
    for name, module_name, function in ANALYSES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name != module_name:
                raise  # the module exists but something it imports is missing: a real error
            logger.debug("analysis %s not installed (%s)", name, module_name)
            continue
        paths = getattr(module, function)(Path(results_path), Path(samples_dir))
        written += [Path(p) for p in paths or []]
    return written
