"""Run a generator over this process's shard of work items, skipping completed ones."""

from __future__ import annotations

import logging
import time
from typing import Callable, Sequence

from conceptforge.progress import tqdm

from conceptforge.store import ItemResult, ItemStore
from conceptforge.workitems import ShardSpec, WorkItem, check_unique_ids, select_shard

logger = logging.getLogger(__name__)


def run_work_items(
    items: Sequence[WorkItem],
    make_item: Callable[[WorkItem], ItemResult],
    store: ItemStore,
    *,
    shard: ShardSpec = ShardSpec(),
    description: str = "items",
    unit: str = "item",
    max_items: int | None = None,
) -> dict[str, int]:
    """Make every incomplete item of this shard and write it to ``store``.

    ``max_items`` stops after that many new items (used to simulate an interrupted run in tests
    and benchmarks). Returns counts: ``total`` in the shard, ``skipped`` (already complete),
    ``made``.
    """
    check_unique_ids(items)
    mine = select_shard(items, shard)
    todo = [item for item in mine if not store.is_complete(item)]
    skipped = len(mine) - len(todo)
    if skipped:
        logger.info("resuming: %d of %d %s already complete", skipped, len(mine), description)
    if max_items is not None:
        todo = todo[:max_items]
    made = 0
    start = time.perf_counter()
    with tqdm(total=len(todo), desc=description, unit=unit) as bar:
        for item in todo:
            store.write(item, make_item(item))
            made += 1
            bar.update(1)
    elapsed = time.perf_counter() - start
    if made:
        logger.info("made %d %s in %.1f s (%.2f %s/s)", made, description, elapsed, made / elapsed, unit)
    return {"total": len(mine), "skipped": skipped, "made": made}
