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
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

from conceptforge.engine.runner import Chunk, Stage, run_chunk, write_chunk_results
from conceptforge.engine.store import ItemResult, ItemStore
from conceptforge.errors import ClusterError, DependencyMissingError, InvalidArgumentError
from conceptforge.progress import tqdm

logger = logging.getLogger(__name__)

DEFAULT_RETRIES = 3
#: Seconds ``ray.init`` may take to join an existing cluster (``--ray-address``). Ray itself retries
#: an address that does not answer for minutes, deaf to SIGTERM while it waits in its C++ client.
RAY_CONNECT_TIMEOUT = 30.0
#: Seconds one TCP connection to the cluster's address may take before it counts as unreachable.
PROBE_TIMEOUT = 5.0


def _import_ray():
    try:
        import ray
    except ImportError:
        raise InvalidArgumentError("--executor ray needs Ray: pip install 'conceptforge[ray]'") from None
    return ray


def check_address(address: str | None) -> None:
    """Refuse, before anything is written, a ``--ray-address`` this installation cannot use.

    ``ray://`` needs the Ray Client extra (``ray[client]``); otherwise the address must be
    ``auto``, ``local`` or ``HOST:PORT``.
    """
    if not address:
        return
    if address.startswith("ray://"):
        from ray._private.utils import get_ray_client_dependency_error

        if get_ray_client_dependency_error() is not None:
            raise DependencyMissingError(
                f"--ray-address {address} needs the Ray Client: pip install 'ray[client]' "
                "(or give the cluster's HOST:PORT from the head node)"
            )
        return
    if address in {"auto", "local"}:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or "://" in address:
        raise InvalidArgumentError(f"--ray-address {address!r}: expected HOST:PORT, ray://HOST:PORT, auto or local")


def _reachable(host: str, port: int) -> str | None:
    """None when a TCP connection to ``host:port`` opens within :data:`PROBE_TIMEOUT`, else why not."""
    result: dict[str, str | None] = {}

    def connect() -> None:
        try:
            with socket.create_connection((host, port), timeout=PROBE_TIMEOUT):
                result["why"] = None
        except OSError as error:
            result["why"] = error.strerror or str(error) or type(error).__name__

    thread = threading.Thread(target=connect, daemon=True, name="ray-probe")
    thread.start()
    thread.join(PROBE_TIMEOUT + 1)
    return "timed out" if thread.is_alive() else result.get("why", "timed out")


def _bootstrap_address(ray, address: str) -> tuple[str, int] | None:
    """``HOST:PORT`` Ray will dial for ``address`` (``auto`` read as Ray reads it); None for ray://."""
    if address.startswith("ray://"):
        rest = address.removeprefix("ray://")
        host, _, port = rest.rpartition(":")
        return (host, int(port)) if port.isdigit() else (rest, 10001)
    from ray._private.services import canonicalize_bootstrap_address

    try:
        canonical = canonicalize_bootstrap_address(address)
    except (ConnectionError, ValueError) as error:
        raise ClusterError(f"--ray-address {address}: {' '.join(str(error).split())}") from None
    if canonical is None:
        return None
    host, _, port = canonical.rpartition(":")
    return host.strip("[]"), int(port)


class _QuietThreadWarning(logging.Filter):
    """ray.init off the main thread says it leaves SIGTERM alone: that is why we do it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "handler is not set because current thread is not the main thread" not in record.getMessage()


def connect(ray, address: str, options: dict[str, Any], *, timeout: float = RAY_CONNECT_TIMEOUT) -> None:
    """``ray.init(address=…)`` bounded: one :class:`ClusterError` line when the cluster cannot be used.

    An address nobody listens on is found by one TCP connection; a port that accepts and never
    answers (or a cluster that refuses us) by the time limit: ``ray.init`` runs in a helper thread
    that the main thread waits on in short steps, so Ctrl+C and SIGTERM stop the command at once
    instead of after Ray's minutes of retries.
    """
    from conceptforge.engine.ray_auth import check_token, present_token

    target = _bootstrap_address(ray, address)
    if target is not None:
        why = _reachable(*target)
        if why is not None:
            raise ClusterError(
                f"--ray-address {address}: no Ray cluster answers at {target[0]}:{target[1]} ({why}); "
                "start one (`ray start --head`) or check the address"
            )
        present_token()  # Ray's token authentication: presented as Ray does for "auto" (ray_auth.py)
        check_token(address, *target)  # a refused token: one line now, not "refused" after ~28 s
    outcome: dict[str, BaseException | None] = {}

    def init() -> None:
        try:
            ray.init(address=address, **options)
            outcome["error"] = None
        except BaseException as error:  # handed to the main thread
            outcome["error"] = error

    quiet = _QuietThreadWarning()
    worker_logger = logging.getLogger("ray._private.worker")
    worker_logger.addFilter(quiet)
    try:
        thread = threading.Thread(target=init, daemon=True, name="ray-init")
        thread.start()
        deadline = time.monotonic() + timeout
        while thread.is_alive() and time.monotonic() < deadline:
            thread.join(0.2)
    finally:
        worker_logger.removeFilter(quiet)
    if "error" not in outcome:
        raise ClusterError(
            f"--ray-address {address}: the Ray cluster did not accept the connection within {timeout:g} s; "
            "check the address (the head's GCS port, 6379 by default) and `ray status` on the head node"
        )
    error = outcome["error"]
    if error is not None:
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise error
        raise ClusterError(
            f"--ray-address {address}: Ray refused the connection ({' '.join(str(error).split())[:300]})"
        )


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
            if self.address and self.address != "local":
                connect(ray, self.address, options, timeout=RAY_CONNECT_TIMEOUT)  # bounded: one line when unusable
            else:
                ray.init(address=self.address, **options)
            self._replaced_handlers = handlers
            logger.info("Ray: %s", "connected to " + self.address if self.address else "started a local cluster")
        return ray

    def start(self) -> None:
        """Join (or start) the cluster now: the engine calls this before it writes anything, so an
        address that cannot be used leaves no run folder behind."""
        self._ray()

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
            placed = {chunk.index: stage.resources(chunk) if stage.resources else {} for chunk in chunks}
            gpus = ray.cluster_resources().get("GPU", 0)
            wanting = [index for index, res in placed.items() if res.get("num_gpus") and not gpus]
            if wanting:  # Ray would keep them pending for ever: said at once, before any chunk runs
                raise ClusterError(
                    f"{stage.name}: {len(wanting)} chunk(s) need a GPU and the Ray cluster has none "
                    f"(e.g. chunk {wanting[0]}); join a cluster with GPUs or run those items elsewhere"
                )
            pending = {task.options(**placed[chunk.index]).remote(shipped, chunk): chunk for chunk in chunks}
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
        check_address(ray_address)
        return RayExecutor(address=ray_address, num_workers=num_workers)
    raise InvalidArgumentError(f"unknown --executor {executor!r}; choose local or ray")
