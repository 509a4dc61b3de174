"""Which slice of the work this process does, read from whatever launched it.

Why environment variables only: every launcher we support (torchrun, ``accelerate launch``,
``srun``, Slurm job arrays, ``mpirun``) announces the world through the environment, so reading
it costs nothing. Importing torch or accelerate to learn that there is no launcher cost ~1.4 s
per process, which adds up over thousands of array tasks.

Launchers compose: an *outer* split (``--num-shards/--shard-index``, or a Slurm job array)
is cut again by an *inner* process world (torchrun/accelerate ranks, MPI ranks, or ``srun``
tasks). ``sbatch --array=0-3`` with ``srun -n 8`` in each task gives 32 disjoint slices.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from conceptforge.engine.workitems import ShardSpec
from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)

#: (size variable, rank variable, launcher name), first match wins. torchrun/accelerate come
#: before Slurm: ``srun torchrun ...`` sets both, and RANK/WORLD_SIZE are then the global ones.
_WORLD_VARIABLES = (
    ("WORLD_SIZE", "RANK", "torchrun/accelerate"),
    ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "Open MPI"),
    ("PMI_SIZE", "PMI_RANK", "MPI (PMI)"),
    ("PMIX_SIZE", "PMIX_RANK", "MPI (PMIx)"),
    ("SLURM_NTASKS", "SLURM_PROCID", "Slurm tasks"),
)


@dataclass(frozen=True)
class Launch:
    """What this process learnt about its launch: the combined shard and where it came from."""

    shard: ShardSpec
    sources: tuple[str, ...]

    def describe(self) -> str:
        origin = " x ".join(self.sources) if self.sources else "single process"
        return f"shard {self.shard.shard_index} of {self.shard.num_shards} ({origin})"


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise InvalidArgumentError(f"environment variable {name}={env[name]!r} is not an integer") from None


def process_world(env: Mapping[str, str] | None = None) -> tuple[int, int, str | None]:
    """(world size, rank, launcher) of the inner process world; (1, 0, None) when not launched."""
    env = os.environ if env is None else env
    for size_var, rank_var, name in _WORLD_VARIABLES:
        if env.get(size_var):
            size = _int(env, size_var)
            rank = _int(env, rank_var) if env.get(rank_var) else 0
            if size > 1:
                return size, rank, name
    return 1, 0, None


def array_task(env: Mapping[str, str] | None = None, num_shards: int | None = None) -> tuple[int, int] | None:
    """(num shards, index) from a Slurm job array, or None when this is not an array task.

    With ``num_shards`` (``--num-shards``) the shard index is the task id itself, so any subset
    of tasks can be resubmitted and runs exactly those shards: ``sbatch --array=3,17,42`` runs
    shards 3, 17 and 42 (Slurm then sets SLURM_ARRAY_TASK_MIN=3 and COUNT=3, which say nothing
    about the shards). Without it only a whole array ``--array=0-(N-1)`` is understood (N shards
    from its bounds); anything else asks for ``--num-shards``.
    """
    env = os.environ if env is None else env
    if not env.get("SLURM_ARRAY_TASK_ID"):
        return None
    task = _int(env, "SLURM_ARRAY_TASK_ID")
    if num_shards is not None:
        if not 0 <= task < num_shards:
            raise InvalidArgumentError(
                f"Slurm array task {task} is outside --num-shards {num_shards}: task ids are shard indices, "
                f"use ids in 0-{num_shards - 1}"
            )
        return num_shards, task
    low = _int(env, "SLURM_ARRAY_TASK_MIN") if env.get("SLURM_ARRAY_TASK_MIN") else 0
    high = _int(env, "SLURM_ARRAY_TASK_MAX") if env.get("SLURM_ARRAY_TASK_MAX") else None
    count = _int(env, "SLURM_ARRAY_TASK_COUNT") if env.get("SLURM_ARRAY_TASK_COUNT") else None
    if high is not None and count is None:
        count = high - low + 1
    if low != 0 or count is None or (high is not None and high != count - 1):
        ids = f"{low}-{high}" if high is not None else f"from {low}"
        raise InvalidArgumentError(
            f"Slurm array task {task} (ids {ids}{f', {count} tasks' if count is not None else ''}) is not part of "
            "a whole array --array=0-(N-1): pass --num-shards N (task ids are shard indices)"
        )
    return count, task


def resolve_launch(
    num_shards: int | None = None, shard_index: int | None = None, *, env: Mapping[str, str] | None = None
) -> Launch:
    """Combine explicit shards (or a Slurm array) with the process world of the launcher."""
    env = os.environ if env is None else env
    if num_shards is not None and num_shards < 1:
        raise InvalidArgumentError(f"--num-shards must be >= 1, got {num_shards}")
    sources: list[str] = []
    if shard_index is not None:
        outer = ShardSpec(num_shards if num_shards is not None else 1, shard_index)
        sources.append("--shard-index")
    else:
        array = array_task(env, num_shards)
        if array is not None:
            outer = ShardSpec(*array)
            sources.append("Slurm array")
        elif num_shards is not None and num_shards > 1:
            raise InvalidArgumentError(
                f"--num-shards {num_shards} needs --shard-index (or a Slurm job array to supply it)"
            )
        else:
            outer = ShardSpec()
    world, rank, launcher = process_world(env)
    if launcher is None:
        return Launch(outer, tuple(sources))
    if not 0 <= rank < world:
        raise InvalidArgumentError(f"{launcher}: rank {rank} is outside the world of {world} processes")
    sources.append(launcher)
    return Launch(ShardSpec(outer.num_shards * world, outer.shard_index * world + rank), tuple(sources))


def resolve_shard(num_shards: int | None = None, shard_index: int | None = None) -> ShardSpec:
    """The combined :class:`ShardSpec` of this process (see :func:`resolve_launch`)."""
    launch = resolve_launch(num_shards, shard_index)
    if launch.sources:
        logger.info("this process is %s", launch.describe())
    return launch.shard


# -- what a scheduler needs to be told to redo some shards ---------------------------------------
def array_spec(indices: Sequence[int]) -> str:
    """``sbatch --array`` syntax for these task ids: ``[1, 3, 4, 5, 9]`` -> ``"1,3-5,9"``."""
    ids = sorted(set(indices))
    parts: list[str] = []
    start = previous = None
    for index in ids + [None]:
        if start is not None and (index is None or index != previous + 1):
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = None
        if index is not None and start is None:
            start = index
        previous = index
    return ",".join(parts)


@functools.lru_cache(maxsize=4)
def _job_script(job_id: str) -> str | None:
    """The batch script a Slurm job was submitted with (``scontrol show job``), or None."""
    try:
        result = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"\bCommand=(\S+)", result.stdout)
    return match.group(1) if match and match.group(1) not in {"(null)", ""} else None


def scheduler_record(env: Mapping[str, str] | None = None) -> dict[str, object]:
    """What a shard report keeps about the Slurm array task that ran it ({} outside an array).

    ``world`` is the inner process world (srun tasks, MPI ranks) that cut the array task again,
    so ``conceptforge status`` can turn missing shards back into array task ids.
    """
    env = os.environ if env is None else env
    if not env.get("SLURM_ARRAY_TASK_ID") or not env.get("SLURM_ARRAY_JOB_ID"):
        return {}
    record: dict[str, object] = {
        "job": f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}",
        "array_task": _int(env, "SLURM_ARRAY_TASK_ID"),
        "world": process_world(env)[0],
    }
    script = _job_script(env.get("SLURM_JOB_ID") or env["SLURM_ARRAY_JOB_ID"])
    if script:
        record["script"] = script
    return {"slurm": record}


def resubmit_hint(env: Mapping[str, str] | None = None) -> str | None:
    """For a Slurm array task: the command that reruns this task alone (None otherwise)."""
    record = scheduler_record(env).get("slurm")
    if not record:
        return None
    return f"sbatch --array={record['array_task']} {record.get('script', 'YOUR_JOB_SCRIPT')}"


#: The command line of the running command (``conceptforge ...``), for the shard reports: after a
#: kill -9 ``conceptforge status`` prints it as the command that reruns what is missing.
_COMMAND: ContextVar[tuple[str, ...] | None] = ContextVar("conceptforge_command", default=None)


@contextmanager
def invoked_as(argv: Sequence[str]) -> Iterator[None]:
    """Within the block, the engine records ``argv`` as the command that runs its shards."""
    token = _COMMAND.set(tuple(argv))
    try:
        yield
    finally:
        _COMMAND.reset(token)


def current_command() -> list[str] | None:
    """The command line set by :func:`invoked_as` (None for a library caller)."""
    command = _COMMAND.get()
    return list(command) if command else None
