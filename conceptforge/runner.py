"""The run engine: one mechanism for every stage that processes work items.

A stage supplies its items (id, seed, payload), how to process one batch of them, its settings
and how to assemble a dataset from the store. The engine does the rest:

- **chunks**: the items, in spec order, are cut into chunks of ``chunk_size`` (never across a
  ``group`` boundary, e.g. one ConceptBed concept); chunk ``k`` belongs to shard
  ``k % num_shards``. Chunk boundaries depend on the spec alone, so a run may be resumed with
  any number of shards or any launcher;
- **resume**: complete, intact chunks are skipped (one listing); damaged ones are redone;
- **store**: one chunk file per chunk on a local disk or any fsspec URL (:mod:`conceptforge.store`);
- **assembly**: when a process finds every chunk complete it assembles, exactly once, however
  many processes finish together (:mod:`conceptforge.assembly`); nobody waits for slower shards.

The assembled bytes depend only on the spec: chunks are read back in chunk order and every
item's seed is derived from its identity.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from conceptforge.progress import tqdm

from conceptforge.assembly import AssemblyOutcome, assemble_once
from conceptforge.errors import InvalidArgumentError, StoreError
from conceptforge.interrupts import Interrupted
from conceptforge.launchers import scheduler_record
from conceptforge.store import ItemResult, ItemStore, Location, canonical_json, io_error, is_url, join
from conceptforge.workitems import ShardSpec, WorkItem, check_unique_ids

logger = logging.getLogger(__name__)

WORK_DIR = ".work"
ASSEMBLY_ARGS = "assembly.json"
DEFAULT_CHUNK_SIZE = 16


@dataclass
class Stage:
    """What a stage tells the engine.

    ``process_batch`` turns a list of items into their results (same order); stages that make
    one item at a time pass ``make_item`` instead. ``assembler`` is ``"module:function"``,
    called as ``function(store, staging_dir, args)`` with the JSON ``assembly_args``; naming it
    by path lets ``conceptforge assemble OUT`` finish any stage's run from the store alone.
    """

    name: str
    items: Sequence[WorkItem]
    settings: Mapping[str, Any]
    make_item: Callable[[WorkItem], ItemResult] | None = None
    process_batch: Callable[[Sequence[WorkItem]], Sequence[ItemResult]] | None = None
    assembler: str | None = None
    assembly_args: Mapping[str, Any] = field(default_factory=dict)
    chunk_size: int = DEFAULT_CHUNK_SIZE
    group: Callable[[WorkItem], Any] | None = None
    description: str = "items"
    unit: str = "item"
    #: Called once, before the first item, only when this process has work left (model loads:
    #: a shard with nothing to do never loads a model, and a failed load writes nothing).
    prepare: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        if (self.make_item is None) == (self.process_batch is None):
            raise ValueError("a Stage needs exactly one of make_item or process_batch")
        if self.chunk_size < 1:
            raise ValueError("chunk_size must be >= 1")


@dataclass(frozen=True)
class Chunk:
    index: int
    items: tuple[WorkItem, ...]


def plan_chunks(items: Sequence[WorkItem], chunk_size: int, group: Callable[[WorkItem], Any] | None = None) -> list[Chunk]:
    """Cut ``items`` (spec order) into chunks of at most ``chunk_size`` that never span groups."""
    chunks: list[Chunk] = []
    current: list[WorkItem] = []
    current_group: Any = object()
    for item in items:
        key = group(item) if group else None
        if current and (len(current) >= chunk_size or key != current_group):
            chunks.append(Chunk(len(chunks), tuple(current)))
            current = []
        current.append(item)
        current_group = key
    if current:
        chunks.append(Chunk(len(chunks), tuple(current)))
    return chunks


def shard_chunks(chunks: Sequence[Chunk], shard: ShardSpec) -> list[Chunk]:
    return [chunk for chunk in chunks if chunk.index % shard.num_shards == shard.shard_index]


def items_fingerprint(items: Sequence[WorkItem]) -> str:
    digest = hashlib.sha256()
    for item in items:
        digest.update(canonical_json([item.item_id, item.split, item.seed, dict(item.payload)]))
    return digest.hexdigest()


def run_config(stage: Stage, chunks: Sequence[Chunk] | None = None) -> dict[str, Any]:
    """What run.json fixes: the settings, the items and their chunking."""
    chunks = plan_chunks(stage.items, stage.chunk_size, stage.group) if chunks is None else chunks
    return {
        "stage": stage.name,
        "settings": json.loads(canonical_json(dict(stage.settings))),
        "assembler": stage.assembler,
        "plan": {
            "items": len(stage.items),
            "chunk_size": stage.chunk_size,
            "chunks": len(chunks),
            "chunk_items": [len(chunk.items) for chunk in chunks],
            "fingerprint": items_fingerprint(stage.items),
        },
    }


# -- the output folder ---------------------------------------------------------------------------
def check_output(out: str | os.PathLike[str], *, run_children: Sequence[str] = ()) -> None:
    """Refuse an existing, non-empty output that is not one of our runs (never touch its files).

    ``run_children`` names sub-folders that may each hold one of our runs (the binding command
    writes one dataset per sub-folder of its ``--out``).
    """
    out_text = str(out)
    location = Location(out_text)
    try:
        if location.local:
            path = Path(location.root)
            if path.exists() and not path.is_dir():
                raise InvalidArgumentError(f"--out {out_text} is a file; choose a folder")
            entries = [p.name for p in path.iterdir()] if path.is_dir() else []
        else:
            entries = list(location.listdir(""))
            location.refresh()
            try:
                entries += [e.rstrip("/").rsplit("/", 1)[-1] for e in location.fs.ls(location.root, detail=False)]
            except FileNotFoundError:
                pass
    except OSError as error:
        raise io_error(error, "read", out_text) from None
    if not entries:
        return
    if WORK_DIR in entries and _owned_work_dir(out_text):
        return
    if WORK_DIR in entries and Location(join(out_text, WORK_DIR)).exists("run.json"):
        raise StoreError(
            f"--out {out_text} holds a run of conceptforge's first store format (one file per item), which this version "
            "cannot resume; choose a new --out"
        )
    if run_children and all(entry in run_children for entry in entries):
        for entry in entries:
            check_output(join(out_text, entry))
        return
    shown = ", ".join(sorted(entries)[:3]) + (", ..." if len(entries) > 3 else "")
    raise StoreError(
        f"--out {out_text} already holds files that are not a conceptforge run ({shown}); choose an empty or new folder"
    )


def _owned_work_dir(out: str, wait: float = 3.0) -> bool:
    """Whether ``out/.work`` is one of our stores. A process that is creating it right now (srun
    tasks that all start on an empty --out) has made the folder but not yet ``owner.json``:
    give it a few seconds before calling the folder foreign."""
    work = Location(join(out, WORK_DIR))
    deadline = time.monotonic() + wait
    while not work.exists("owner.json"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
        work.refresh()
    return True


def open_store(out: str | os.PathLike[str]) -> ItemStore:
    """The store of the run in ``out`` (``out/.work``), after checking ``out`` is ours or empty."""
    check_output(out)
    return ItemStore(join(out, WORK_DIR))


# -- running ------------------------------------------------------------------------------------
@dataclass
class RunReport:
    """What one process did, and where the whole run stands."""

    shard: ShardSpec
    total_items: int
    shard_items: int
    made: int
    skipped: int
    redone_damaged: int
    missing_chunks: int
    missing_items: int
    missing_shards: list[int]
    assembly: AssemblyOutcome | None = None

    @property
    def complete(self) -> bool:
        return self.missing_chunks == 0

    @property
    def assembled(self) -> bool:
        return self.assembly is not None and self.assembly.status in {"assembled", "already"}

    def as_counts(self) -> dict[str, int]:
        return {"total": self.shard_items, "skipped": self.skipped, "made": self.made}

    def message(self, out: str) -> str:
        """One line for the user about what this process did and what happens next."""
        head = f"shard {self.shard.shard_index} of {self.shard.num_shards}: " if self.shard.num_shards > 1 else ""
        head += f"made {self.made}, already done {self.skipped}"
        if self.redone_damaged:
            head += f", redid {self.redone_damaged} damaged"
        if self.assembly is not None:
            return f"{head}; {self.assembly.message}"
        if not self.complete:
            shards = ", ".join(map(str, self.missing_shards[:8])) + (", ..." if len(self.missing_shards) > 8 else "")
            return (
                f"{head}; {self.missing_items} of {self.total_items} items ({self.missing_chunks} chunks) are still missing"
                + (f", in shard(s) {shards} of {self.shard.num_shards}" if self.shard.num_shards > 1 else "")
                + f"; the dataset is assembled when the last shard finishes, or run `conceptforge assemble {out}`"
                + (" after rerunning the missing shards" if self.shard.num_shards > 1 else " after rerunning this command")
            )
        return f"{head}; every item is done (not assembled)"


def _batches(stage: Stage, chunk: Chunk, budget: int | None, bar: tqdm) -> list[ItemResult] | None:
    """Results of a chunk, or None when ``budget`` runs out inside it (like a killed process)."""
    if stage.make_item is not None:
        results = []
        for item in chunk.items:
            if budget is not None and len(results) >= budget:
                return None
            results.append(stage.make_item(item))
            bar.update(1)
        return results
    if budget is not None and budget < len(chunk.items):
        return None
    results = list(stage.process_batch(list(chunk.items)))
    if len(results) != len(chunk.items):
        raise RuntimeError(f"{stage.name}: process_batch returned {len(results)} results for {len(chunk.items)} items")
    bar.update(len(results))
    return results


@contextmanager
def _stop_recorded(store: ItemStore, shard: ShardSpec, report_base: Mapping[str, Any]) -> Iterator[None]:
    """Record in the shard report that this shard stopped (a signal, an error) before re-raising,
    so ``conceptforge status`` does not show a cancelled Slurm task as "running" forever."""
    try:
        yield
    except BaseException as error:
        state = f"interrupted by {error.signal_name}" if isinstance(error, Interrupted) else f"failed ({type(error).__name__})"
        try:
            store.write_shard_report(shard.num_shards, shard.shard_index, {**report_base, "state": state, "host": os.uname().nodename})
        except Exception:  # the store itself may be what failed; the original error matters more
            logger.debug("could not record the stop in the shard report", exc_info=True)
        raise


# -- executors: where the chunks' work runs (the store and assembly stay with run_stage) ---------
class Executor(Protocol):
    """Runs chunks somewhere else (e.g. :class:`conceptforge.ray_executor.RayExecutor`) and writes
    each finished chunk to ``store``; returns the number of items made. None = this process."""

    def run_chunks(self, stage: Stage, chunks: Sequence[Chunk], store: ItemStore, *, max_items: int | None = None) -> int: ...


#: The executor run_stage uses when none is passed (set by ``--executor``, see :func:`use_executor`).
_EXECUTOR: ContextVar[Executor | None] = ContextVar("conceptforge_executor", default=None)


@contextmanager
def use_executor(executor: Executor | None) -> Iterator[None]:
    """Within the block, every run_stage without an explicit executor uses ``executor``."""
    token = _EXECUTOR.set(executor)
    try:
        yield
    finally:
        _EXECUTOR.reset(token)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass


def run_chunk(stage: Stage, chunk: Chunk) -> list[ItemResult]:
    """The results of one whole chunk, in whatever process an executor runs it."""
    return _batches(stage, chunk, None, _NoBar())


def run_stage(
    stage: Stage,
    out: str | os.PathLike[str],
    *,
    shard: ShardSpec = ShardSpec(),
    max_items: int | None = None,
    assemble: bool = True,
    store: ItemStore | None = None,
    assembly_wait: float = 600.0,
    executor: Executor | None = None,
) -> RunReport:
    """Process this shard's missing chunks of ``stage`` into ``out`` and assemble when all exist.

    ``max_items`` stops after that many new items; a chunk it cuts short is not written (the
    way a killed process leaves it), which is how tests and benchmarks interrupt a run.
    """
    out = str(out)
    check_unique_ids(stage.items)
    store = store or open_store(out)
    chunks = plan_chunks(stage.items, stage.chunk_size, stage.group)
    store.bind_config(run_config(stage, chunks))
    if stage.assembler:
        try:
            store.location.write(ASSEMBLY_ARGS, canonical_json({"assembler": stage.assembler, "args": dict(stage.assembly_args)}))
        except OSError as error:
            raise io_error(error, "write to", str(store)) from None
    damaged = [index for index in store.damaged_chunks() if index < len(chunks)]
    for index in damaged:
        store.drop_chunk(index)
    if damaged:
        logger.warning("%d damaged chunk(s) (%d items) found in %s: making them again", len(damaged), sum(len(chunks[i].items) for i in damaged), store)
    if not chunks:  # nothing to make: the (empty) run is complete, its settings fixed now
        store._ensure_config_written()
    done = store.chunk_states()
    mine = shard_chunks(chunks, shard)
    todo = [chunk for chunk in mine if chunk.index not in done]
    shard_items = sum(len(c.items) for c in mine)
    skipped = shard_items - sum(len(c.items) for c in todo)
    redone = sum(len(chunks[i].items) for i in damaged if chunks[i] in todo)
    if skipped:
        logger.info("resuming: %d of %d items of this shard already done (%s)", skipped, shard_items, stage.description)
    report_base = {"num_shards": shard.num_shards, "shard_index": shard.shard_index, "chunks": [c.index for c in mine],
                   **scheduler_record()}
    made = 0
    start = time.perf_counter()
    store.write_shard_report(shard.num_shards, shard.shard_index, {**report_base, "state": "running", "host": os.uname().nodename, "pid": os.getpid()})
    executor = executor or _EXECUTOR.get()
    with _stop_recorded(store, shard, report_base):
        if executor is not None and todo:  # made elsewhere (Ray), written here: nothing left for the loop below
            made, todo = executor.run_chunks(stage, todo, store, max_items=max_items), []
        if todo and stage.prepare is not None and (max_items is None or max_items > 0):
            stage.prepare()
        # disable=None: no bar when stderr is not a terminal (log files get no carriage returns)
        with tqdm(total=sum(len(c.items) for c in todo), desc=stage.description, unit=stage.unit) as bar:
            for chunk in todo:
                budget = None if max_items is None else max_items - made
                if budget is not None and budget <= 0:
                    break
                results = _batches(stage, chunk, budget, bar)
                if results is None:  # stopped inside this chunk: nothing of it is kept
                    break
                store.write_chunk(chunk.index, list(zip(chunk.items, results)))
                made += len(chunk.items)
    elapsed = time.perf_counter() - start
    if made:
        logger.info("made %d %s in %.1f s (%.2f %s/s)", made, stage.description, elapsed, made / max(elapsed, 1e-9), stage.unit)
    done = store.chunk_states()
    missing = [chunk for chunk in chunks if chunk.index not in done]
    finished_mine = all(chunk.index in done for chunk in mine)
    store.write_shard_report(shard.num_shards, shard.shard_index, {**report_base, "state": "finished" if finished_mine else "stopped"})
    report = RunReport(
        shard=shard,
        total_items=len(stage.items),
        shard_items=shard_items,
        made=made,
        skipped=skipped,
        redone_damaged=redone,
        missing_chunks=len(missing),
        missing_items=sum(len(c.items) for c in missing),
        missing_shards=sorted({c.index % shard.num_shards for c in missing}),
    )
    if not missing and assemble and stage.assembler:
        report.assembly = assemble_run(out, store=store, wait=assembly_wait)
    return report


def run_work_items(
    items: Sequence[WorkItem],
    make_item: Callable[[WorkItem], ItemResult],
    store: ItemStore,
    *,
    shard: ShardSpec = ShardSpec(),
    description: str = "items",
    unit: str = "item",
    max_items: int | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    settings: Mapping[str, Any] | None = None,
    name: str = "items",
) -> dict[str, int]:
    """Make this shard's missing items into ``store`` (no assembly); returns shard counts."""
    stage = Stage(
        name=name, items=items, settings=settings or {}, make_item=make_item, chunk_size=chunk_size,
        description=description, unit=unit,
    )
    report = run_stage(stage, out_of_store(store), shard=shard, max_items=max_items, assemble=False, store=store)
    return report.as_counts()


def out_of_store(store: ItemStore) -> str:
    url = store.location.url.rstrip("/")
    return url.rsplit("/", 1)[0] if is_url(url) else str(Path(url).parent)


# -- assembly from the store alone ---------------------------------------------------------------
def resolve_assembler(dotted: str) -> Callable[..., None]:
    module_name, _, function = dotted.partition(":")
    try:
        return getattr(importlib.import_module(module_name), function)
    except (ImportError, AttributeError) as error:
        raise InvalidArgumentError(f"cannot load the assembler {dotted!r} of this run: {error}") from None


def assemble_run(out: str | os.PathLike[str], *, store: ItemStore | None = None, force: bool = False, wait: float = 600.0) -> AssemblyOutcome:
    """Assemble the run in ``out`` from its store, once (see :func:`assemble_once`)."""
    out = str(out)
    if store is None:
        store = ItemStore(join(out, WORK_DIR))
        repo = _repo_assembler(store)
        if repo is not None:  # a folder of several runs (e.g. one Hub repo with a config per run)
            return resolve_assembler(repo)(out, force=force, wait=wait)
    config = store.stored_config()
    if config is None:
        raise StoreError(f"{out} has no finished work yet: run the stage first")
    try:
        spec = json.loads(store.location.read(ASSEMBLY_ARGS))
    except (FileNotFoundError, ValueError):
        raise StoreError(f"{out} does not say how to assemble it (no {WORK_DIR}/{ASSEMBLY_ARGS}); rerun the stage") from None
    plan = config["plan"]
    done = store.chunk_states()
    expected = len(plan_chunks_count(config))
    if len(done) < expected:
        raise StoreError(
            f"{out}: {expected - len(done)} of {expected} chunks are still missing; finish every shard first (`conceptforge status {out}`)"
        )
    function = resolve_assembler(spec["assembler"])
    fingerprint = hashlib.sha256(canonical_json({"config": config, "assembly": spec})).hexdigest()
    return assemble_once(out, store, lambda staging: function(store, staging, spec["args"]), fingerprint=fingerprint, force=force, wait=wait)


def _repo_assembler(store: ItemStore) -> str | None:
    """A folder whose runs live in ``.work/<name>/`` names, in ``.work/assembly.json``, the
    function (``"module:function"``, called as ``function(out, force=, wait=)``) that assembles
    them all and whatever they share, each with :func:`assemble_once`."""
    if store.stored_config() is not None:
        return None
    try:
        spec = json.loads(store.location.read(ASSEMBLY_ARGS))
    except (FileNotFoundError, ValueError):
        return None
    return spec.get("repo_assembler")


def plan_chunks_count(config: Mapping[str, Any]) -> range:
    """Chunk indices of a stored run (recorded when its first chunk was written)."""
    return range(int(config["plan"].get("chunks", 0)))
