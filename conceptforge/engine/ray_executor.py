"""Run a stage's chunks on a Ray cluster (``--executor ray``), with the same store and assembly.

Why Ray as well as Slurm/MPI: many clusters are Ray clusters (cloud, KubeRay) with no batch
scheduler to start one process per shard. Here one driver process (the command) owns the run:
it plans the chunks, skips finished ones, writes every chunk file and assembles, exactly as a
local run does; only the work of each chunk runs on Ray workers. So the bytes, the resume rules
and the one-assembly rule are those of :mod:`conceptforge.engine.runner`, whatever Ray does.

- stages without a model (no ``Stage.prepare``) run each chunk as a Ray **task**;
- model-holding stages (``Stage.prepare`` loads the model) run on a pool of **actors** that each
  call ``prepare`` once and then take chunk after chunk;
- a worker that dies (OOM kill, lost node) has its chunk **retried** on another worker (tasks:
  ``max_retries``; actors: restarted, which loads the model again, and the call retried). A
  chunk that still fails raises; the chunks finished before it are already in the store.

``ray`` is an optional extra (``pip install 'conceptforge[ray]'``); nothing imports it unless
the executor is used.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import time
from collections.abc import Sequence
from typing import Any

from conceptforge.engine.runner import Chunk, Stage, run_chunk, write_chunk_results
from conceptforge.engine.store import ItemResult, ItemStore
from conceptforge.errors import InvalidArgumentError
from conceptforge.progress import tqdm

logger = logging.getLogger(__name__)

DEFAULT_RETRIES = 3


def _import_ray():
    try:
        import ray
    except ImportError:
        raise InvalidArgumentError("--executor ray needs Ray: pip install 'conceptforge[ray]'") from None
    return ray


def _run_chunk_task(stage: Stage, chunk: Chunk) -> list[ItemResult]:
    """A Ray task: the results of one chunk (a stage with nothing to load)."""
    return run_chunk(stage, chunk)


class _StageActor:
    """A Ray actor holding one loaded copy of a stage's model (``prepare`` runs once per actor)."""

    def __init__(self, stage: Stage) -> None:
        self.stage = stage
        if stage.prepare is not None:
            stage.prepare()

    def run(self, chunk: Chunk) -> list[ItemResult]:
        return run_chunk(self.stage, chunk)


@dataclasses.dataclass
class RayExecutor:
    """Chunks on Ray. ``address``: an existing cluster (``ray://host:10001``, ``auto``) or None
    for a local one started by ``ray.init()``; ``num_workers``: actors for model-holding stages
    (default: the cluster's CPUs, or GPUs when it has any, at most the number of chunks)."""

    address: str | None = None
    num_workers: int | None = None
    max_retries: int = DEFAULT_RETRIES
    init_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    name: str = "ray"
    #: The signal handlers ray.init replaced, when this executor started Ray (see :meth:`close`).
    _replaced_handlers: dict[int, Any] | None = dataclasses.field(default=None, repr=False)

    def _ray(self):
        ray = _import_ray()
        if not ray.is_initialized():
            options = {"include_dashboard": False, "log_to_driver": True, **self.init_options}
            handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
            ray.init(address=self.address, **options)
            self._replaced_handlers = handlers
            logger.info("Ray: %s", "connected to " + self.address if self.address else "started a local cluster")
        return ray

    def close(self) -> None:
        """Shut down the Ray this executor started and give back the SIGINT/SIGTERM handlers
        ``ray.init`` replaced (ours stop a stage cleanly; a library caller's process keeps its own)."""
        if self._replaced_handlers is None:
            return
        _import_ray().shutdown()
        for sig, handler in self._replaced_handlers.items():
            signal.signal(sig, handler)
        self._replaced_handlers = None

    def _workers(self, ray, chunks: int) -> tuple[int, dict[str, float]]:
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        wanted = self.num_workers or (gpus or int(resources.get("CPU", 1)))
        return max(1, min(wanted, chunks)), ({"num_gpus": 1} if gpus else {"num_cpus": 1})

    def run_chunks(
        self,
        stage: Stage,
        chunks: Sequence[Chunk],
        store: ItemStore,
        *,
        max_items: int | None = None,
        redo: set[int] = frozenset(),
    ) -> int:
        """Make ``chunks`` on Ray and write each to ``store`` as it arrives; returns items made."""
        if max_items is not None:  # whole chunks only, like a local run stopped by --max-items
            kept, total = [], 0
            for chunk in chunks:
                if total + len(chunk.items) > max_items:
                    break
                kept.append(chunk)
                total += len(chunk.items)
            chunks = kept
        if not chunks:
            return 0
        ray = self._ray()
        shipped = ray.put(dataclasses.replace(stage, items=()))  # the items travel with their chunks
        start = time.perf_counter()
        if stage.prepare is None:
            task = ray.remote(max_retries=self.max_retries, retry_exceptions=False)(_run_chunk_task)
            pending = {task.remote(shipped, chunk): chunk for chunk in chunks}
            actors: list[Any] = []
        else:
            count, resources = self._workers(ray, len(chunks))
            actor_class = ray.remote(max_restarts=self.max_retries, max_task_retries=self.max_retries, **resources)(
                _StageActor
            )
            actors = [actor_class.remote(shipped) for _ in range(count)]
            pending = {actors[i % count].run.remote(chunk): chunk for i, chunk in enumerate(chunks)}
            logger.info("Ray: %d actor(s) hold the model of %s", count, stage.name)
        made = 0
        try:
            with tqdm(total=sum(len(c.items) for c in chunks), desc=stage.description, unit=stage.unit) as bar:
                while pending:
                    ready, _ = ray.wait(list(pending), num_returns=1)
                    chunk = pending.pop(ready[0])
                    results = ray.get(ready[0])
                    if len(results) != len(chunk.items):
                        raise RuntimeError(
                            f"{stage.name}: chunk {chunk.index} came back with {len(results)} results for {len(chunk.items)} items"
                        )
                    made += write_chunk_results(store, chunk, results, redo=chunk.index in redo)
                    bar.update(len(chunk.items))
        finally:  # stopped or failed: nothing keeps running for a run that is over
            if not actors:
                for ref in pending:
                    ray.cancel(ref, force=True)
            for actor in actors:
                ray.kill(actor)
        logger.info("Ray: %d chunk(s) in %.1f s", len(chunks), time.perf_counter() - start)
        return made


def executor_from_args(
    executor: str, ray_address: str | None = None, num_workers: int | None = None
) -> RayExecutor | None:
    """The executor a command line asked for: None for ``local`` (the engine's own loop)."""
    if executor == "local":
        if ray_address:
            raise InvalidArgumentError("--ray-address needs --executor ray")
        return None
    if executor == "ray":
        _import_ray()  # fail before anything is written
        return RayExecutor(address=ray_address, num_workers=num_workers)
    raise InvalidArgumentError(f"unknown --executor {executor!r}; choose local or ray")
