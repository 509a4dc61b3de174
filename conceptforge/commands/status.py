"""``conceptforge status OUT``: per shard, which chunks and items are done and which are left.

Reads only (never writes: a read-only folder or bucket works): the store's listing, small JSON
files and, for an assembled run, the published files, whose sizes and sha256 are checked against
the assembly's manifest (what is missing or changed is named). The shard count is the one the
last processes ran with (``--num-shards`` to ask about another).
"""

from __future__ import annotations

import argparse

from conceptforge import argtypes as at


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", type=at.existing_location, help="the run's --out folder or URL")
    parser.add_argument("--num-shards", type=at.positive_int, default=None, help="report for this many shards (default: as last run)")


def _sub_runs(store) -> list[str]:
    """Names of the runs in ``.work/<name>/`` of a folder that holds several (one repo, a config each)."""
    from conceptforge.store import is_store, join

    location = store.location
    try:
        if location.local:
            import os

            names = sorted(entry.name for entry in os.scandir(location.path("")) if entry.is_dir())
        else:
            location.refresh()
            names = sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in location.fs.ls(location.path(""), detail=True)
                           if e.get("type") == "directory")
    except FileNotFoundError:
        return []
    return [name for name in names if is_store(join(location.url, name))]


def status_lines(out: str, num_shards: int | None = None, *, work: str | None = None, label: str | None = None) -> list[str]:
    """What ``conceptforge status`` prints. Reads only: works on a read-only folder or bucket.

    ``label`` names a run inside a repo of runs in the lines (``OUT [config]``); hints always
    name ``out`` itself, so they run as printed.
    """
    from conceptforge.assembly import damage_message, read_done, verify_assembled
    from conceptforge.errors import DataNotFoundError, InvalidArgumentError
    from conceptforge.output import WORK_DIR
    from conceptforge.store import ItemStore, Location, is_store, join

    label = label or out
    work = work or join(out, WORK_DIR)
    if not is_store(work):
        raise DataNotFoundError(f"{out} is not a conceptforge run (no {WORK_DIR}/owner.json); check the path")
    store = ItemStore(work, create=False)
    config = store.stored_config()
    if config is None:
        subs = _sub_runs(store)
        if subs:  # e.g. a binding repo: one run per config, then the shared card
            lines = []
            for name in subs:
                lines += status_lines(out, num_shards, work=join(work, name), label=f"{out} [{name}]")
            card = read_done(store.location)
            lines.append(f"{out}: card {'written' if card else 'not written yet'}")
            if card and (problems := verify_assembled(Location(out), card)):
                lines.append(f"damaged: {damage_message(out, problems)}")
            return lines
        return [f"{label}: started, nothing finished yet (settings are fixed with the first chunk)"]
    plan = config["plan"]
    sizes = plan.get("chunk_items") or [plan["chunk_size"]] * plan["chunks"]
    done = store.chunk_states()
    damaged = store.damaged_chunks()
    reports = store.shard_reports()
    if num_shards is not None and num_shards < 1:
        raise InvalidArgumentError(f"--num-shards must be >= 1, got {num_shards}")
    if num_shards is None:
        num_shards = max((key[0] for key in reports), default=1) if reports else 1
    done_items = sum(sizes[i] for i in done if i < len(sizes))
    lines = [
        f"{label}: stage {config.get('stage')}, {done_items} of {plan['items']} items done "
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
    lines += failed_lines(store, out)
    finished = read_done(store.location)
    if finished:
        problems = verify_assembled(Location(out), finished)
        if problems:
            lines.append(f"assembled: damaged — {damage_message(out, problems)}")
        else:
            checked = " (sizes and sha256 checked)" if finished.get("manifest") else ""
            lines.append(f"assembled: yes ({len(finished.get('files', []))} files{checked})")
    elif len(done) == plan["chunks"]:
        lines.append(f"assembled: no — every chunk is done: run `conceptforge assemble {out}`")
    else:
        lines.append("assembled: no — the last shard to finish assembles (or `conceptforge assemble` afterwards)")
    return lines


def failed_lines(store, out: str, *, limit: int = 20) -> list[str]:
    """The items that failed every attempt, one line each (see conceptforge.failures)."""
    from conceptforge.failures import failed_items

    failures = failed_items(store)
    if not failures:
        return []
    lines = [f"failed: {len(failures)} item(s) failed every attempt: rerun the same command to retry them, or "
             f"`conceptforge assemble {out} --allow-failed` to assemble without them"]
    lines += [f"  {f.item_id} ({f.split}, {f.attempts} attempts): {f.error}" for f in failures[:limit]]
    if len(failures) > limit:
        lines.append(f"  ... {len(failures) - limit} more")
    return lines


def run(args: argparse.Namespace) -> int:
    for line in status_lines(args.out, args.num_shards):
        print(line)
    return 0
