"""One task over many processes: ``accelerate launch`` / ``torchrun`` ranks share a task's items.

Why here and not in each benchmark: every task that scores items goes through
:meth:`TaskSamples.collect <conceptforge.loaders.harness.sample_cache.TaskSamples.collect>`, so
sharding there covers them all at once. Each rank reads the sample cache, waits at a barrier (so
every rank sees the same items still to score), scores its share — the chunks of items still to
score, in the task's order of stable ids, dealt round-robin like the engine's ``select_shard``;
whole chunks, so every batch holds what it holds in one process (CPU and GPU kernels block by
batch size: another batch gives other last bits) — and the rows are gathered on every rank.
Every rank then runs the rest of the task on the same rows (the metrics are cheap), and rank 0
alone writes the results, the samples and the table: the same files, byte for byte, that one
process writes (where one process's run is itself reproducible, see docs/evaluation-scale.md). A rank that dies makes the others fail with one
line, before anything is written; a rerun scores only what the sample cache lacks.

The world is read from the launcher's environment (``WORLD_SIZE``, ``RANK``) and joined through
accelerate's ``PartialState`` (gloo on CPU, NCCL on GPUs), the way ``accelerate launch`` and
``torchrun`` announce it; with no launcher nothing is imported and the run is one process.
On a machine without GPUs the ranks join over gloo (``PartialState(cpu=True)``: without it
accelerate sees no distributed type). Note that ``accelerate launch --cpu --num_processes N``
starts ONE process on one machine (its CPU path needs an MPI host file); ``accelerate launch
--multi_gpu --num_processes N`` (torch's launcher) or ``torchrun --nproc-per-node N`` start N.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from conceptforge.errors import ClusterError

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class ProcessGroup:
    """This process's place in the launcher's world: ``rank`` of ``size`` (1, 0: one process)."""

    size: int = 1
    rank: int = 0
    device: str | None = None  # the launcher's device for this rank (cuda:LOCAL_RANK), None on CPU

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def share(self, work: list[T]) -> list[T]:
        """This rank's share of ``work`` (round-robin, like the engine's ``select_shard``: balanced,
        and a pure function of the list, so the ranks' shares are disjoint and cover it)."""
        return work[self.rank :: self.size]

    def _collective(self, what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except RuntimeError as error:  # gloo/NCCL: a peer's connection closed, a timeout
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ClusterError(
                f"process {self.rank} of {self.size} lost another process while {what} ({first[:200]}): "
                "nothing was written; rerun the same command (rows already scored resume from the sample cache)"
            ) from None

    def barrier(self, what: str) -> None:
        if self.size > 1:
            import torch.distributed as dist

            self._collective(what, dist.barrier)

    def gather(self, value: Any, what: str) -> list[Any]:
        """Every rank's ``value``, in rank order, on every rank (``[value]`` for one process)."""
        if self.size == 1:
            return [value]
        import torch.distributed as dist

        out: list[Any] = [None] * self.size

        def call() -> list[Any]:
            dist.all_gather_object(out, value)
            return out

        return self._collective(what, call)

    def close(self) -> None:
        """Leave the group once every rank is done (a barrier, then gloo/NCCL torn down), so no
        rank exits while another still reads from it: a peer's closed connection mid-collective
        reads as a crash."""
        if self.size > 1:
            import torch.distributed as dist

            self.barrier("finishing")
            if dist.is_initialized():
                dist.destroy_process_group()


SINGLE = ProcessGroup()


def launched_world() -> int:
    """The world size ``torchrun`` / ``accelerate launch`` announced (1 when not launched)."""
    from conceptforge.engine.launchers import process_world

    size, _, launcher = process_world({k: v for k, v in os.environ.items() if k in ("WORLD_SIZE", "RANK")})
    return size if launcher else 1


@functools.cache
def process_group() -> ProcessGroup:
    """This process's :class:`ProcessGroup`, joined once (the launcher's world, or :data:`SINGLE`)."""
    if launched_world() == 1:
        return SINGLE
    try:
        from accelerate import PartialState
    except ImportError:  # pragma: no cover - accelerate comes with the core install
        from conceptforge.errors import DependencyMissingError

        raise DependencyMissingError(
            "evaluating over several processes needs accelerate: pip install accelerate"
        ) from None
    import torch

    try:  # cpu=True on a machine without GPUs: else accelerate sees no distributed type and stays alone
        state = PartialState(cpu=not torch.cuda.is_available())
    except (RuntimeError, ValueError) as error:
        raise ClusterError(f"cannot join the launcher's process group: {str(error).splitlines()[0]}") from None
    device = str(state.device) if state.device.type == "cuda" else None
    group = ProcessGroup(size=state.num_processes, rank=state.process_index, device=device)
    logger.info("evaluating as process %d of %d (%s)", group.rank, group.size, state.backend)
    return group
