"""Seeded study samples and per-annotator orders.

The sample depends only on (seed, study, group, the group's item ids), never on file order or
time: the same command on the same dataset always asks about the same images, so a study can be
resumed, split across machines or repeated by someone else. Each annotator sees the sample in
their own seeded order, which spreads order effects without losing reproducibility.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from conceptforge.engine.workitems import derive_seed


def sample_items(
    rows: Mapping[str, Mapping[str, Any]],
    *,
    group_of: Callable[[Mapping[str, Any]], str],
    per_group: int,
    seed: int,
    study: str,
) -> list[tuple[str, str]]:
    """Return ``[(item_id, group_key)]``: ``per_group`` random items of every group, in a stable order."""
    if per_group < 1:
        raise ValueError("per_group must be at least 1")
    groups: dict[str, list[str]] = {}
    for item_id, row in rows.items():
        groups.setdefault(group_of(row), []).append(item_id)
    sample: list[tuple[str, str]] = []
    for key in sorted(groups):
        ids = sorted(groups[key])
        rng = random.Random(derive_seed(seed, "annotation-sample", study, key))
        chosen = ids if len(ids) <= per_group else rng.sample(ids, per_group)
        sample.extend((item_id, key) for item_id in sorted(chosen))
    return sample


def annotator_order(item_ids: Sequence[str], *, seed: int, annotator: str) -> list[str]:
    """The order in which ``annotator`` is shown the sample."""
    order = list(item_ids)
    random.Random(derive_seed(seed, "annotation-order", annotator)).shuffle(order)
    return order
