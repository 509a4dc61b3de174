"""The run engine: one mechanism for every stage that processes work items.

A stage supplies its items (id, seed, payload), how to process one batch of them, its settings
and how to assemble a dataset from the store. The engine does the rest:

- **chunks**: the items, in spec order, are cut into chunks of ``chunk_size`` (never across a
  ``group`` boundary, e.g. one ConceptBed concept); chunk ``k`` belongs to shard
  ``k % num_shards``. Chunk boundaries depend on the spec alone, so a run may be resumed with
  any number of shards or any launcher;
- **resume**: complete, intact chunks are skipped (one listing); damaged ones are redone;
- **store**: one chunk file per chunk on a local disk or any fsspec URL (:mod:`conceptforge.engine.store`);
- **assembly**: when a process finds every chunk complete it assembles, exactly once, however
  many processes finish together (:mod:`conceptforge.engine.assembly`); nobody waits for slower shards.

The assembled bytes depend only on the spec: chunks are read back in chunk order and every
item's seed is derived from its identity.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from conceptforge.engine.assembly import ASSEMBLY_ARGS, Assembler, AssemblyOutcome, assemble_run
from conceptforge.engine.failures import (
    ITEM_ATTEMPTS,
    FailedItem,
    FailureCounter,
    failed_chunks,
    failed_items,
    is_item_failure,
    make_with_retries,
    record_failures,
)
from conceptforge.engine.launchers import current_command, scheduler_record
from conceptforge.engine.store import ItemResult, ItemStore, io_error
from conceptforge.engine.workitems import ShardSpec, WorkItem, check_unique_ids
from conceptforge.errors import InvalidArgumentError, ItemError, one_line
from conceptforge.interrupts import Interrupted
from conceptforge.output import RunDir
from conceptforge.progress import tqdm
from conceptforge.serialization import canonical_json

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_SIZE = 16


@dataclass
class Stage:
    """What a stage tells the engine.

    ``process_batch`` turns a list of items into their results (same order); stages that make
    one item at a time pass ``make_item`` instead. ``assembler`` (:class:`~conceptforge.engine.assembly.Assembler`)
    is called as ``assemble(store, staging_dir, args)`` with the JSON ``assembly_args``; the store
    keeps its stable name, so ``conceptforge assemble OUT`` finishes any stage's run from the
    store alone. Every generator and filter builds its stage the same way: ``build_stage(config)``.
    """

    name: str
    items: Sequence[WorkItem]
    settings: Mapping[str, Any]
    make_item: Callable[[WorkItem], ItemResult] | None = None
    process_batch: Callable[[Sequence[WorkItem]], Sequence[ItemResult]] | None = None
    assembler: Assembler | None = None
    assembly_args: Mapping[str, Any] = field(default_factory=dict)
    chunk_size: int = DEFAULT_CHUNK_SIZE
    group: Callable[[WorkItem], Any] | None = None
    description: str = "items"
    unit: str = "item"
    #: Called once, before the first item, only when this process has work left (model loads:
    #: a shard with nothing to do never loads a model, and a failed load writes nothing).
    prepare: Callable[[], None] | None = None
    #: Ray resources of one chunk (``{"num_gpus": 1}``) for executors that place chunks; None: one CPU.
    #: Why per chunk: a sweep mixes items whose model needs a GPU with items that run on a CPU.
    resources: Callable[[Chunk], dict[str, float]] | None = None
    #: Claim each chunk before making it (:mod:`conceptforge.engine.claims`), so two processes on
    #: one ``--out`` skip each other's chunks. Why opt-in: a sweep's items are minutes of a model
    #: each; a generator's chunks are cheap, and two of its runs may share a folder on purpose.
    claim_chunks: bool = False

    def __post_init__(self) -> None:
        if (self.make_item is None) == (self.process_batch is None):
            raise ValueError("a Stage needs exactly one of make_item or process_batch")
        if self.chunk_size < 1:
            raise ValueError("chunk_size must be >= 1")
        if self.assembler is not None and not isinstance(self.assembler, Assembler):
            raise TypeError(
                f"Stage.assembler must be a conceptforge.engine.assembly.Assembler, got {self.assembler!r} "
                "(a 'module:function' string: wrap it, Assembler(name, function), or register_assembler(name, function))"
            )


@dataclass(frozen=True)
class Chunk:
    index: int
    items: tuple[WorkItem, ...]


def plan_chunks(
    items: Sequence[WorkItem], chunk_size: int, group: Callable[[WorkItem], Any] | None = None
) -> list[Chunk]:
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


#: Keys of a stage's assembly arguments that only record how one process ran (its command line,
#: device, package versions, batch size): shards and reruns may differ in them. Every other
#: assembly argument decides the assembled dataset and is fixed with the settings in run.json.
RECORD_ONLY_KEYS = frozenset({"command_line", "argv", "device", "packages", "python", "work_dir", "batch_size"})


def output_arguments(value: Any) -> Any:
    """``value`` (assembly arguments) without the :data:`RECORD_ONLY_KEYS`, at any depth."""
    if isinstance(value, Mapping):
        return {str(k): output_arguments(v) for k, v in value.items() if k not in RECORD_ONLY_KEYS}
    if isinstance(value, (list, tuple)):
        return [output_arguments(v) for v in value]
    return value


def run_config(stage: Stage, chunks: Sequence[Chunk] | None = None) -> dict[str, Any]:
    """What run.json fixes: the settings, the items and their chunking, and the assembly arguments
    that decide the dataset.

    Why the assembly arguments too: two runs into one ``--out`` with another ``--keep-fraction``
    (or license, shard size …) used to both exit 0 with one dataset, made with whichever
    arguments were written last; now the second is refused like any other setting.
    """
    chunks = plan_chunks(stage.items, stage.chunk_size, stage.group) if chunks is None else chunks
    config: dict[str, Any] = {
        "stage": stage.name,
        "settings": json.loads(canonical_json(dict(stage.settings))),
        "assembler": stage.assembler.name if stage.assembler else None,
        "plan": {
            "items": len(stage.items),
            "chunk_size": stage.chunk_size,
            "chunks": len(chunks),
            "chunk_items": [len(chunk.items) for chunk in chunks],
            "fingerprint": items_fingerprint(stage.items),
        },
    }
    if stage.assembler:
        config["assembly"] = json.loads(canonical_json(output_arguments(dict(stage.assembly_args))))
    return config


# -- the output folder ----------------------------------------------------------------------------
def check_output(out: str | os.PathLike[str] | RunDir, *, stage: str | None = None, flag: str = "--out") -> RunDir:
    """Refuse an existing, non-empty output that is not one of our runs (never touch its files),
    or, with ``stage``, a run of another stage; returns the :class:`RunDir` to pass on."""
    return RunDir.open(out, stage=stage, flag=flag)


def open_store(out: str | os.PathLike[str] | RunDir) -> ItemStore:
    """The store of the run in ``out`` (``out/.work``), after checking ``out`` is ours or empty."""
    return RunDir.open(out).store()


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
    #: Items of the whole run that failed every attempt (see :mod:`conceptforge.engine.failures`).
    failed: list[FailedItem] = field(default_factory=list)
    #: Items this process left to another process that had claimed their chunks, and who that is.
    held_elsewhere: int = 0
    holders: list[str] = field(default_factory=list)

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
        if self.failed and self.assembly is None:
            return (
                f"{head}; {len(self.failed)} item(s) failed every attempt (`conceptforge status {out}` lists them): "
                f"rerun the same command to retry them, or `conceptforge assemble {out} --allow-failed` to assemble "
                "without them (the card lists them)"
            )
        if self.assembly is not None:
            return f"{head}; {self.assembly.message}"
        if self.held_elsewhere:
            who = ", ".join(self.holders[:3]) + (", ..." if len(self.holders) > 3 else "")
            return (
                f"{head}; {self.held_elsewhere} item(s) were being made by another process ({who}) on this "
                f"--out: it assembles when it finishes (`conceptforge status {out}` shows them)"
            )
        if not self.complete:
            shards = ", ".join(map(str, self.missing_shards[:8])) + (", ..." if len(self.missing_shards) > 8 else "")
            return (
                f"{head}; {self.missing_items} of {self.total_items} items ({self.missing_chunks} chunks) are still missing"
                + (f", in shard(s) {shards} of {self.shard.num_shards}" if self.shard.num_shards > 1 else "")
                + f"; the dataset is assembled when the last shard finishes, or run `conceptforge assemble {out}`"
                + (
                    " after rerunning the missing shards"
                    if self.shard.num_shards > 1
                    else " after rerunning this command"
                )
            )
        return f"{head}; every item is done (not assembled)"


def _batches(
    stage: Stage, chunk: Chunk, budget: int | None, bar: tqdm, counter: FailureCounter | None = None
) -> list[ItemResult | FailedItem] | None:
    """Results of a chunk, or None when ``budget`` runs out inside it (like a killed process).

    An item that raises is retried, then given as a :class:`FailedItem` (:mod:`conceptforge.engine.failures`);
    a batch that raises is made again one item at a time, so only its bad items fail.
    """
    counter = counter or FailureCounter()
    if stage.make_item is not None:
        results: list[ItemResult | FailedItem] = []
        for item in chunk.items:
            if budget is not None and len(results) >= budget:
                return None
            results.append(
                make_with_retries(lambda item=item: stage.make_item(item), item, counter=counter, unit=stage.unit)
            )
            bar.update(1)
        return results
    if budget is not None and budget < len(chunk.items):
        return None
    results = None
    for attempt in range(1, ITEM_ATTEMPTS + 1):
        # The whole chunk again first, grouped as before: a model's float32 results depend on what
        # shares its batch (padding, kernel choice), so a transient error (an OOM, a hiccup) must
        # not change the grouping, or the run would differ from an uninterrupted one.
        try:
            results = list(stage.process_batch(list(chunk.items)))
            break
        except Exception as error:
            if not is_item_failure(error):
                raise
            logger.warning(
                "%s: a batch of %d failed (attempt %d of %d): %s",
                stage.name,
                len(chunk.items),
                attempt,
                ITEM_ATTEMPTS,
                one_line(error),
            )
    if results is None:  # it fails every time: find the bad items, one at a time
        logger.warning("%s: making the %d items of the batch one at a time", stage.name, len(chunk.items))
        results = [
            make_with_retries(lambda item=item: _single(stage, item), item, counter=counter, unit=stage.unit)
            for item in chunk.items
        ]
    if len(results) != len(chunk.items):
        raise RuntimeError(f"{stage.name}: process_batch returned {len(results)} results for {len(chunk.items)} items")
    bar.update(len(results))
    return results


def _claim(store: ItemStore, chunk: Chunk, retry: set[int]) -> Any:
    """This process's claim on ``chunk``, or None when another live process holds it or finished
    it since this run listed the store (:mod:`conceptforge.engine.claims`)."""
    from conceptforge.engine.claims import claim_chunk

    claim = claim_chunk(store, chunk.index)
    if claim is None:
        logger.info("chunk %d is being made by another process: skipping it", chunk.index)
        return None
    if chunk.index not in retry and chunk.index in store.chunk_states():  # made while we waited our turn
        claim.release()
        return None
    return claim


def _single(stage: Stage, item: WorkItem) -> ItemResult:
    results = list(stage.process_batch([item]))
    if len(results) != 1:
        raise RuntimeError(f"{stage.name}: process_batch returned {len(results)} results for 1 item")
    return results[0]


@contextmanager
def _stop_recorded(store: ItemStore, shard: ShardSpec, report_base: Mapping[str, Any]) -> Iterator[None]:
    """Record in the shard report that this shard stopped (a signal, an error) before re-raising,
    so ``conceptforge status`` does not show a cancelled Slurm task as "running" forever."""
    try:
        yield
    except BaseException as error:
        state = (
            f"interrupted by {error.signal_name}"
            if isinstance(error, Interrupted)
            else f"failed ({type(error).__name__})"
        )
        try:
            store.write_shard_report(
                shard.num_shards, shard.shard_index, {**report_base, "state": state, "host": os.uname().nodename}
            )
        except Exception:  # the store itself may be what failed; the original error matters more
            logger.debug("could not record the stop in the shard report", exc_info=True)
        raise


# -- executors: where the chunks' work runs (the store and assembly stay with run_stage) ---------
class Executor(Protocol):
    """Runs chunks somewhere else (e.g. :class:`conceptforge.engine.ray_executor.RayExecutor`) and writes
    each finished chunk to ``store``; returns the number of items made. None = this process.

    An executor may also have ``start()``: called before the run writes anything, it connects to
    the cluster, so one that cannot be reached leaves no run folder behind. :func:`run_stage` passes
    ``max_items`` (None: no limit) and ``redo`` (the indices of chunks done before, whose
    failed items are retried) every time."""

    def run_chunks(
        self, stage: Stage, chunks: Sequence[Chunk], store: ItemStore, *, max_items: int | None, redo: set[int]
    ) -> int: ...


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


def run_chunk(stage: Stage, chunk: Chunk) -> list[ItemResult | FailedItem]:
    """The results of one whole chunk, in whatever process an executor runs it (items that failed
    every attempt come back as :class:`FailedItem`)."""
    return _batches(stage, chunk, None, _NoBar())


def write_chunk_results(
    store: ItemStore, chunk: Chunk, results: Sequence[ItemResult | FailedItem], *, redo: bool
) -> int:
    """Write one finished chunk: its failed items first (so a done chunk's failures are known),
    then the chunk of the others; ``redo``: the chunk was done before (with failures) and is
    replaced. Returns the number of items made."""
    failures = [result for result in results if isinstance(result, FailedItem)]
    pairs = [(item, result) for item, result in zip(chunk.items, results) if not isinstance(result, FailedItem)]
    if redo:  # a chunk with failures, made again: its old marker goes first
        store.drop_chunk(chunk.index)
    record_failures(store, chunk.index, failures)
    store.write_chunk(chunk.index, pairs)
    return len(pairs)


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
    command: Sequence[str] | None = None,
    allow_failed: bool = False,
) -> RunReport:
    """Process this shard's missing chunks of ``stage`` into ``out`` and assemble when all exist.

    ``max_items`` stops after that many new items; a chunk it cuts short is not written (the
    way a killed process leaves it), which is how tests and benchmarks interrupt a run.
    ``command``: the command line that runs this shard (e.g. ``conceptforge evaluate …``; default:
    the one the command line runs, :func:`~conceptforge.engine.launchers.invoked_as`), kept in its
    shard report so ``conceptforge status`` can print it for a process that was killed.
    ``allow_failed``: assemble without the items that failed every attempt (a sweep publishes
    the models that ran) instead of waiting for a rerun to make them.
    """
    if isinstance(out, RunDir):
        run = out
    elif store is not None:  # the caller opened (and vouches for) the store
        run = RunDir(str(out), store.location.url)
    else:
        run = RunDir.open(out)
    if store is not None:
        run._store = store
    out = str(run)
    check_unique_ids(stage.items)
    if not stage.items:  # refused before anything is written: an empty run would fix settings for nothing
        raise InvalidArgumentError(f"{stage.name}: the plan has no items to make (check the counts you asked for)")
    executor = executor or _EXECUTOR.get()
    start = getattr(executor, "start", None)
    if start is not None:  # a cluster that cannot be used is refused before anything is written
        start()
    run.record_stage(stage.name)
    store = run.store()
    chunks = plan_chunks(stage.items, stage.chunk_size, stage.group)
    store.bind_config(run_config(stage, chunks))
    # How to assemble is written once the settings are fixed (here, or with this process's first
    # chunk): a run refused for other settings must not leave its card metadata behind.
    pending = (
        [canonical_json({"assembler": stage.assembler.name, "args": dict(stage.assembly_args)})]
        if stage.assembler
        else []
    )

    def write_assembly_args() -> None:
        if pending and store.settings_fixed:
            try:
                store.location.write(ASSEMBLY_ARGS, pending.pop())
            except OSError as error:
                raise io_error(error, "write to", str(store)) from None

    write_assembly_args()
    damaged = [index for index in store.damaged_chunks() if index < len(chunks)]
    for index in damaged:
        store.drop_chunk(index)
    if damaged:
        logger.warning(
            "%d damaged chunk(s) (%d items) found in %s: making them again",
            len(damaged),
            sum(len(chunks[i].items) for i in damaged),
            store,
        )
    done = store.chunk_states()
    mine = shard_chunks(chunks, shard)
    retry = failed_chunks(store) & set(done)  # chunks with failed items: made again, the failures retried
    todo = [chunk for chunk in mine if chunk.index not in done or chunk.index in retry]
    shard_items = sum(len(c.items) for c in mine)
    skipped = shard_items - sum(len(c.items) for c in todo)
    redone = sum(len(chunks[i].items) for i in damaged if chunks[i] in todo)
    if skipped:
        logger.info("resuming: %d of %d items of this shard already done (%s)", skipped, shard_items, stage.description)
    if any(chunk.index in retry for chunk in todo):
        logger.info("retrying the failed items of %d chunk(s)", sum(chunk.index in retry for chunk in todo))
    command = command if command is not None else current_command()
    report_base = {
        "num_shards": shard.num_shards,
        "shard_index": shard.shard_index,
        "chunks": [c.index for c in mine],
        **scheduler_record(),
        **({"command": list(command), "cwd": os.getcwd()} if command else {}),
    }
    made = attempted = 0
    counter = FailureCounter()
    start = time.perf_counter()
    store.write_shard_report(
        shard.num_shards,
        shard.shard_index,
        {**report_base, "state": "running", "host": os.uname().nodename, "pid": os.getpid()},
    )
    _REPORTED.add((store.location.url, shard.num_shards, shard.shard_index))
    planned: list[Chunk] = []  # the chunks this process tried (not those another process held)
    with _stop_recorded(store, shard, report_base):
        if executor is not None and todo:  # made elsewhere (Ray), written here: nothing left for the loop below
            planned += todo
            made, todo = executor.run_chunks(stage, todo, store, max_items=max_items, redo=set(done)), []
            write_assembly_args()
        if todo and stage.prepare is not None and (max_items is None or max_items > 0):
            stage.prepare()
        # disable=None: no bar when stderr is not a terminal (log files get no carriage returns)
        with tqdm(total=sum(len(c.items) for c in todo), desc=stage.description, unit=stage.unit) as bar:
            for chunk in todo:
                budget = None if max_items is None else max_items - attempted
                if budget is not None and budget <= 0:
                    break
                claim = None
                if stage.claim_chunks:
                    claim = _claim(store, chunk, retry)
                    if claim is None:  # another live process makes it (or just made it)
                        bar.update(len(chunk.items))
                        continue
                try:
                    results = _batches(stage, chunk, budget, bar, counter)
                    if results is None:  # stopped inside this chunk: nothing of it is kept
                        break
                    planned.append(chunk)
                    made += write_chunk_results(store, chunk, results, redo=chunk.index in done)
                finally:
                    if claim is not None:
                        claim.release()
                write_assembly_args()
                attempted += len(chunk.items)
    elapsed = time.perf_counter() - start
    if made:
        logger.info(
            "made %d %s in %.1f s (%.2f %s/s)", made, stage.description, elapsed, made / max(elapsed, 1e-9), stage.unit
        )
    done = store.chunk_states()
    missing = [chunk for chunk in chunks if chunk.index not in done]
    finished_mine = all(chunk.index in done for chunk in mine)
    store.write_shard_report(
        shard.num_shards, shard.shard_index, {**report_base, "state": "finished" if finished_mine else "stopped"}
    )
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
        failed=failed_items(store),
    )
    if stage.claim_chunks and missing:
        from conceptforge.engine.claims import claims_held_elsewhere

        held = claims_held_elsewhere(store, [c.index for c in missing if c in mine])
        report.held_elsewhere = sum(len(chunks[i].items) for i in held)
        report.holders = sorted({f"process {r.get('pid', '?')} on {r.get('host', '?')}" for r in held.values()})
    # Chunks this process finished: their items were either made or failed every attempt. None
    # made means every one failed: the stage or a setting is broken (a resolution the model
    # refuses), not the items; "made 0" with exit 0 would let the next command run on nothing.
    tried = sum(len(chunk.items) for chunk in planned if chunk.index in done)
    if tried and not made:
        first = report.failed[0] if report.failed else None
        raise ItemError(
            f"{stage.name}: every one of the {tried} {stage.unit}(s) tried failed every attempt"
            + (f" (e.g. {first.item_id}: {first.error})" if first else "")
            + f"; nothing was made: fix the cause and rerun (with other settings: into a new --out; "
            f"`conceptforge status {out}` lists the items)"
        )
    if report.failed and not allow_failed:
        logger.warning(
            "%d item(s) failed every attempt; not assembling (`conceptforge status %s` lists them)",
            len(report.failed),
            out,
        )
    if not missing and assemble and stage.assembler and (allow_failed or not report.failed):
        report.assembly = assemble_run(out, store=store, wait=assembly_wait, allow_failed=allow_failed)
    return report


#: (store URL, num_shards, shard_index) of the shards this process reported on: their reports say how
#: they stopped (see :func:`record_stop_before_start`).
_REPORTED: set[tuple[str, int, int]] = set()


def record_stop_before_start(out: str | os.PathLike[str], shard: ShardSpec, state: str) -> None:
    """Record ``state`` (e.g. "interrupted by SIGTERM before its first item") for a shard stopped
    before :func:`run_stage` reported it running: a Slurm task cancelled while it loaded its
    libraries or resolved its models was shown "not started" though its log said it was
    interrupted (issue 45.8). Only into an existing run of ours, never creating one; best effort."""
    try:
        store = RunDir.open(out).existing_store()
        if store is None or (store.location.url, shard.num_shards, shard.shard_index) in _REPORTED:
            return
        store.write_shard_report(
            shard.num_shards,
            shard.shard_index,
            {
                "num_shards": shard.num_shards,
                "shard_index": shard.shard_index,
                **scheduler_record(),
                "state": state,
                "host": os.uname().nodename,
            },
        )
    except Exception:  # a stop must not become another error
        logger.debug("could not record the stop of shard %d", shard.shard_index, exc_info=True)


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
        name=name,
        items=items,
        settings=settings or {},
        make_item=make_item,
        chunk_size=chunk_size,
        description=description,
        unit=unit,
    )
    report = run_stage(stage, out_of_store(store), shard=shard, max_items=max_items, assemble=False, store=store)
    return report.as_counts()


def out_of_store(store: ItemStore) -> RunDir:
    """The run around a store the caller opened (kept for callers; prefer passing a RunDir)."""
    return RunDir.of_store(store)
