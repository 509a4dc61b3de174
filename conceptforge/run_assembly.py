"""Assembly of a run from its store alone: ``conceptforge assemble OUT``, and the last step of
:func:`conceptforge.runner.run_stage` when a process finds every chunk complete.

Why apart from the engine: assembly reads only what the store recorded (run.json, assembly.json,
the chunks, failed items), so it needs none of the stage's code beyond its registered assembler;
keeping it here keeps the engine module about running chunks.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conceptforge.assemblers import Assembler, RepoAssembler, find_assembler
from conceptforge.assembly import AssemblyOutcome, assemble_once
from conceptforge.errors import DataNotFoundError, InvalidArgumentError, StoreError
from conceptforge.failures import failed_items, failures_section
from conceptforge.output import WORK_DIR, RunDir
from conceptforge.serialization import canonical_json
from conceptforge.store import ItemStore, io_error, join

ASSEMBLY_ARGS = "assembly.json"


# -- assembly from the store alone ---------------------------------------------------------------
def assemble_run(
    out: str | os.PathLike[str] | RunDir,
    *,
    store: ItemStore | None = None,
    force: bool = False,
    wait: float = 600.0,
    allow_failed: bool = False,
) -> AssemblyOutcome:
    """Assemble the run in ``out`` from its store, once (see :func:`assemble_once`).

    Items that failed every attempt make it refuse, unless ``allow_failed``: then the dataset is
    assembled without them and its card lists them.
    """
    if store is None:
        run = out if isinstance(out, RunDir) else RunDir(str(out), join(str(out), WORK_DIR))
        if run.existing_store() is None:  # never create a store in a mistyped folder
            raise DataNotFoundError(f"{run} is not a conceptforge run (no {WORK_DIR}/owner.json); check the path")
        store = run.store()
        repo = repo_assembler_of(store)
        if repo is not None:  # a folder of several runs (e.g. one Hub repo with a config per run)
            return repo.assemble(str(run), force=force, wait=wait, **({"allow_failed": True} if allow_failed else {}))
    out = str(out)
    config = store.stored_config()
    if config is None:
        raise StoreError(f"{out} has no finished work yet: run the stage first")
    try:
        spec = json.loads(store.location.read(ASSEMBLY_ARGS))
        assembler, args = spec["assembler"], spec["args"]
        expected = len(plan_chunks_count(config))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        raise StoreError(
            f"{out} does not say how to assemble it ({WORK_DIR}/{ASSEMBLY_ARGS} or run.json is missing or "
            "damaged); rerun the stage"
        ) from None
    done = store.chunk_states()
    if len(done) < expected:
        raise StoreError(
            f"{out}: {expected - len(done)} of {expected} chunks are still missing; finish every shard first (`conceptforge status {out}`)"
        )
    failures = failed_items(store)
    if failures and len(failures) >= int(config["plan"].get("items", 0) or 0):
        raise StoreError(
            f"{out}: every one of its {len(failures)} item(s) failed every attempt (e.g. {failures[0].item_id}: "
            f"{failures[0].error}): there is nothing to assemble; fix the cause and rerun the stage"
        )
    if failures and not allow_failed:
        raise StoreError(
            f"{out}: {len(failures)} item(s) failed every attempt (`conceptforge status {out}` lists them): rerun "
            f"the stage to retry them, or assemble without them: conceptforge assemble {out} --allow-failed"
        )
    found = find_assembler(assembler)
    if not isinstance(found, Assembler):
        raise InvalidArgumentError(f"{out}: {assembler!r} assembles a folder of runs, not one run")
    function = found.assemble
    record = {"config": config, "assembly": spec, **({"failed": [f.item_id for f in failures]} if failures else {})}
    fingerprint = hashlib.sha256(canonical_json(record)).hexdigest()

    def build(staging: Path) -> None:
        function(store, staging, args)
        card = Path(staging) / "README.md"
        if failures and card.exists():  # the card says which items the dataset leaves out
            card.write_text(
                card.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + failures_section(failures), encoding="utf-8"
            )

    return assemble_once(out, store, build, fingerprint=fingerprint, force=force, wait=wait)


def mark_repo(store: ItemStore, assembler: RepoAssembler) -> None:
    """Record in a folder's own store (``OUT/.work``) that it holds several runs
    (``.work/<name>/``) and which :class:`~conceptforge.assemblers.RepoAssembler` finishes them."""
    try:
        store.location.write(ASSEMBLY_ARGS, canonical_json({"repo_assembler": assembler.name}))
    except OSError as error:
        raise io_error(error, "write to", str(store)) from None


def repo_assembler_of(store: ItemStore) -> RepoAssembler | None:
    """The repo assembler a folder of several runs names (see :func:`mark_repo`); None for a
    folder of one run."""
    if store.stored_config() is not None:
        return None
    try:
        spec = json.loads(store.location.read(ASSEMBLY_ARGS))
    except (FileNotFoundError, ValueError):
        return None
    name = spec.get("repo_assembler")
    if name is None:
        return None
    assembler = find_assembler(name)
    if not isinstance(assembler, RepoAssembler):
        raise InvalidArgumentError(f"{name!r} assembles one run, not a folder of runs")
    return assembler


def plan_chunks_count(config: Mapping[str, Any]) -> range:
    """Chunk indices of a stored run (recorded when its first chunk was written)."""
    return range(int(config["plan"].get("chunks", 0)))
