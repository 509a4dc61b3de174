"""conceptforge: generate, filter, publish and evaluate concept-learning benchmarks.

This package holds the core every stage shares (errors by kind, logging and the progress switch,
work items, the item store, the output guard, the run engine, the CUB reader, the command line ``conceptforge``).
Every logger hangs under the one root ``conceptforge``. The stages are its sub-packages, kept in the
repository's top-level folders of the design card and installed under this one namespace:
``conceptforge.generators``, ``conceptforge.filters``, ``conceptforge.cards`` and
``conceptforge.loaders``.
"""

from conceptforge.engine.launchers import resolve_shard
from conceptforge.engine.runner import RunReport, Stage, assemble_run, run_stage, run_work_items
from conceptforge.engine.store import ItemResult, ItemStore
from conceptforge.engine.workitems import ShardSpec, WorkItem, derive_seed, select_shard
from conceptforge.errors import ConceptforgeError
from conceptforge.output import RunDir
from conceptforge.progress import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

#: The one place the version is written: pyproject reads it (``[tool.setuptools.dynamic]``).
__version__ = "0.2.0"

__all__ = [
    "ConceptforgeError",
    "are_progress_bars_disabled",
    "disable_progress_bars",
    "enable_progress_bars",
    "WorkItem",
    "derive_seed",
    "ShardSpec",
    "resolve_shard",
    "select_shard",
    "ItemStore",
    "ItemResult",
    "RunDir",
    "run_work_items",
    "Stage",
    "RunReport",
    "run_stage",
    "assemble_run",
]
