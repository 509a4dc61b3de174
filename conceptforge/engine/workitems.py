"""Work items: the unit of generation, with an id and a seed derived from the spec.

Why: a run must be reproducible and resumable no matter how it is split across processes or how
often it is killed. So an item's seed is a hash of its identity and the run seed — never the
time, the process rank or the position in a queue — and the set of items is a pure function of
the spec. Sharding then only decides *who* makes an item, never *what* it is.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)

_ITEM_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
SEED_MODULUS = 2**31  # fits int32 consumers (Blender's cycles.seed, numpy legacy seeding)


def derive_seed(run_seed: int, *identity: Any) -> int:
    """Return a seed in [0, 2**31) that depends only on ``run_seed`` and ``identity``.

    ``identity`` must be JSON-serialisable (strings, numbers, lists); the hash is stable across
    Python versions and platforms, unlike ``hash()``.
    """
    blob = json.dumps([int(run_seed), *identity], sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(blob.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % SEED_MODULUS


@dataclass(frozen=True)
class WorkItem:
    """One thing to generate.

    ``item_id`` is unique within the run and safe as a file name; ``split`` names the dataset
    split it belongs to; ``payload`` is the JSON-serialisable description of what to make.
    """

    item_id: str
    seed: int
    split: str
    payload: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _ITEM_ID_PATTERN.match(self.item_id):
            raise ValueError(f"item id {self.item_id!r} is not a safe file name")
        if not _ITEM_ID_PATTERN.match(self.split):
            raise ValueError(f"split {self.split!r} is not a safe file name")


def check_unique_ids(items: Sequence[WorkItem]) -> None:
    seen: set[tuple[str, str]] = set()
    for item in items:
        key = (item.split, item.item_id)
        if key in seen:
            raise ValueError(f"duplicate work item id {item.item_id!r} in split {item.split!r}")
        seen.add(key)


@dataclass(frozen=True)
class ShardSpec:
    """Which slice of the work this process does: items ``shard_index::num_shards``."""

    num_shards: int = 1
    shard_index: int = 0

    def __post_init__(self) -> None:
        if self.num_shards < 1:
            raise InvalidArgumentError(f"--num-shards must be >= 1, got {self.num_shards}")
        if not 0 <= self.shard_index < self.num_shards:
            raise InvalidArgumentError(f"--shard-index must be in [0, {self.num_shards}), got {self.shard_index}")

    @property
    def is_main(self) -> bool:
        return self.shard_index == 0


def select_shard(items: Sequence[WorkItem], shard: ShardSpec) -> list[WorkItem]:
    """Round-robin over the spec order: balanced, and a pure function of the spec."""
    return list(items[shard.shard_index :: shard.num_shards])
