"""conceptforge generators: emit benchmark candidates from a spec.

The shared machinery (work items, the resumable item store, shard resolution) lives here so that
every generator (TDG over FLUX, per-concept learners, Blender binding scenes) and every filter
uses one mechanism for ids, seeds, resumption and sharding.
"""

from generators.errors import ConceptforgeError
from generators.workitems import WorkItem, derive_seed, ShardSpec, resolve_shard, select_shard
from generators.store import ItemStore, ItemResult
from generators.runner import run_work_items

__all__ = [
    "ConceptforgeError",
    "WorkItem",
    "derive_seed",
    "ShardSpec",
    "resolve_shard",
    "select_shard",
    "ItemStore",
    "ItemResult",
    "run_work_items",
]
