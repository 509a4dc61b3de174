"""``conceptforge status OUT``: per shard, which chunks and items are done and which are left.

Reads only the store's listing and small JSON files, so it is cheap on object stores too. The
shard count is the one the last processes ran with (``--num-shards`` to ask about another).
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", help="the run's --out folder or URL")
    parser.add_argument("--num-shards", type=int, default=None, help="report for this many shards (default: as last run)")


def status_lines(out: str, num_shards: int | None = None) -> list[str]:
    from conceptforge.assembly import read_done
    from conceptforge.errors import ConceptforgeError
    from conceptforge.runner import WORK_DIR
    from conceptforge.store import ItemStore, is_store, join

    work = join(out, WORK_DIR)
    if not is_store(work):
        raise ConceptforgeError(f"{out} is not a conceptforge run (no {WORK_DIR}/owner.json); check the path")
    store = ItemStore(work)
    config = store.stored_config()
    if config is None:
        return [f"{out}: started, nothing finished yet (settings are fixed with the first chunk)"]
    plan = config["plan"]
    sizes = plan.get("chunk_items") or [plan["chunk_size"]] * plan["chunks"]
    done = store.chunk_states()
    damaged = store.damaged_chunks()
    reports = store.shard_reports()
    if num_shards is not None and num_shards < 1:
        raise ConceptforgeError(f"--num-shards must be >= 1, got {num_shards}")
    if num_shards is None:
        num_shards = max((key[0] for key in reports), default=1) if reports else 1
    done_items = sum(sizes[i] for i in done if i < len(sizes))
    lines = [
        f"{out}: stage {config.get('stage')}, {done_items} of {plan['items']} items done "
        f"({len(done)} of {plan['chunks']} chunks){', ' + str(len(damaged)) + ' damaged (redone on rerun)' if damaged else ''}"
    ]
    for index in range(num_shards):
        mine = [c for c in range(plan["chunks"]) if c % num_shards == index]
        left = [c for c in mine if c not in done]
        state = reports.get((num_shards, index), {}).get("state", "not started")
        items_left = sum(sizes[c] for c in left)
        lines.append(
            f"  shard {index} of {num_shards}: {len(mine) - len(left)}/{len(mine)} chunks done, "
            f"{items_left} items left, last state: {state if left or state != 'running' else 'finished'}"
        )
    finished = read_done(store.location)
    if finished:
        lines.append(f"assembled: yes ({len(finished.get('files', []))} files)")
    elif len(done) == plan["chunks"]:
        lines.append(f"assembled: no — every chunk is done: run `conceptforge assemble {out}`")
    else:
        lines.append("assembled: no — the last shard to finish assembles (or `conceptforge assemble` afterwards)")
    return lines


def run(args: argparse.Namespace) -> int:
    for line in status_lines(args.out, args.num_shards):
        print(line)
    return 0


def main(argv=None) -> int:
    from conceptforge.cli import run_cli, setup_logging

    def _main(argv):
        parser = argparse.ArgumentParser(prog="conceptforge status", description=__doc__.split("\n\n")[0])
        add_arguments(parser)
        setup_logging(False)
        return run(parser.parse_args(argv))

    return run_cli(_main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
