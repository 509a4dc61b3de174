"""A small stage for the engine tests, runnable as a process: ``python engine_stage.py OUT [opts]``.

Each item's "work" appends its id to a log (O_APPEND, one line per call), so tests can count how
often every item was made; the assembler appends to another log, so tests count assemblies.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from conceptforge.engine.assembly import Assembler
from conceptforge.engine.launchers import resolve_shard
from conceptforge.engine.runner import Stage, run_stage
from conceptforge.engine.store import ItemResult
from conceptforge.engine.workitems import WorkItem, derive_seed


def items(count: int) -> list[WorkItem]:
    return [WorkItem(f"item{n:05d}", derive_seed(7, n), "train" if n % 5 else "test", {"n": n}) for n in range(count)]


def _log(path: str | None, line: str) -> None:
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def make_factory(log: str | None, delay: float):
    def make(item: WorkItem) -> ItemResult:
        if delay:
            time.sleep(delay)
        _log(log, item.item_id)
        payload = hashlib.sha256(str(item.seed).encode()).digest() * 64  # 2 KiB of "image"
        return ItemResult(files={"bin": payload}, metadata={"n": item.payload["n"], "value": item.seed % 97})

    return make


def assemble(store, out_dir: Path, args: dict) -> None:
    """Write data/<split>.parquet in item order, plus README.md (written by the engine's publish)."""
    _log(args.get("log"), f"assembly {os.getpid()}")
    time.sleep(float(args.get("delay", 0)))
    (out_dir / "data").mkdir(parents=True, exist_ok=True)
    for split in ("test", "train"):
        rows = [
            {"item_id": r.item_id, "seed": r.metadata["seed"], "value": r.metadata["value"], "bin": r.read_file("bin")}
            for r in store.records(split)
        ]
        buffer = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows), buffer)
        (out_dir / "data" / f"{split}.parquet").write_bytes(buffer.getvalue())
    (out_dir / "README.md").write_text(f"# test dataset\n{len(store.chunk_states())} chunks\n")


def stage(
    count: int,
    *,
    log: str | None = None,
    delay: float = 0.0,
    chunk_size: int = 8,
    assembly_log: str | None = None,
    assembly_delay: float = 0.0,
) -> Stage:
    return Stage(
        name="test/engine",
        items=items(count),
        settings={"count": count},
        make_item=make_factory(log, delay),
        assembler=Assembler("tests.engine.engine_stage:assemble", assemble),
        assembly_args={"log": assembly_log, "delay": assembly_delay},
        chunk_size=chunk_size,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--chunk-size", type=int, default=8)
    parser.add_argument("--log")
    parser.add_argument("--assembly-log")
    parser.add_argument("--assembly-delay", type=float, default=0.0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--num-shards", type=int)
    parser.add_argument("--shard-index", type=int)
    parser.add_argument("--max-items", type=int)
    args = parser.parse_args(argv)
    from conceptforge.cli import run_cli

    def _main(_argv):
        report = run_stage(
            stage(
                args.count,
                log=args.log,
                delay=args.delay,
                chunk_size=args.chunk_size,
                assembly_log=args.assembly_log,
                assembly_delay=args.assembly_delay,
            ),
            args.out,
            shard=resolve_shard(args.num_shards, args.shard_index),
            max_items=args.max_items,
        )
        print(report.message(args.out))
        return 0

    return run_cli(_main, [])


if __name__ == "__main__":
    sys.exit(main())
