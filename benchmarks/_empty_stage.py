"""A stage whose one-item chunks do no work, for timing schedulers alone (benchmarks/schedulers.py).

Run as a process from the repository root: ``python -m benchmarks._empty_stage OUT COUNT
[--shard-index I --num-shards N]`` (a Slurm array task passes only ``--num-shards``).
"""

from __future__ import annotations

import argparse
import sys

from conceptforge.engine.launchers import resolve_shard
from conceptforge.engine.runner import Stage, run_stage
from conceptforge.engine.store import ItemResult
from conceptforge.engine.workitems import WorkItem, derive_seed


def empty_item(item: WorkItem) -> ItemResult:
    return ItemResult(files={"bin": b"x" * 64}, metadata={"n": item.payload["n"]})


def empty_stage(count: int) -> Stage:
    """``count`` one-item chunks; no assembler (nothing but the chunks is timed)."""
    items = [WorkItem(f"item{n:05d}", derive_seed(7, n), "train", {"n": n}) for n in range(count)]
    return Stage(name="bench/empty", items=items, settings={"count": count}, make_item=empty_item, chunk_size=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("count", type=int)
    parser.add_argument("--num-shards", type=int)
    parser.add_argument("--shard-index", type=int)
    args = parser.parse_args(argv)
    run_stage(empty_stage(args.count), args.out, shard=resolve_shard(args.num_shards, args.shard_index))
    return 0


if __name__ == "__main__":
    sys.exit(main())
