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

import logging
import os
from dataclasses import dataclass
from typing import Mapping

from conceptforge.errors import ConceptforgeError
from conceptforge.workitems import ShardSpec

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
        raise ConceptforgeError(f"environment variable {name}={env[name]!r} is not an integer") from None


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

    The count is ``num_shards`` when given (``--array=0-99%10 ... --num-shards 100``), else the
    array's own bounds; task ids are taken relative to the array's first id.
    """
    env = os.environ if env is None else env
    if not env.get("SLURM_ARRAY_TASK_ID"):
        return None
    task = _int(env, "SLURM_ARRAY_TASK_ID")
    low = _int(env, "SLURM_ARRAY_TASK_MIN") if env.get("SLURM_ARRAY_TASK_MIN") else 0
    if num_shards is None:
        if env.get("SLURM_ARRAY_TASK_COUNT"):
            num_shards = _int(env, "SLURM_ARRAY_TASK_COUNT")
        elif env.get("SLURM_ARRAY_TASK_MAX"):
            num_shards = _int(env, "SLURM_ARRAY_TASK_MAX") - low + 1
        else:
            raise ConceptforgeError("SLURM_ARRAY_TASK_ID is set without the array bounds: pass --num-shards")
    index = task - low
    if not 0 <= index < num_shards:
        raise ConceptforgeError(
            f"Slurm array task {task} is outside --num-shards {num_shards}: use --array=0-{num_shards - 1}"
        )
    return num_shards, index


def resolve_launch(
    num_shards: int | None = None, shard_index: int | None = None, *, env: Mapping[str, str] | None = None
) -> Launch:
    """Combine explicit shards (or a Slurm array) with the process world of the launcher."""
    env = os.environ if env is None else env
    if num_shards is not None and num_shards < 1:
        raise ConceptforgeError(f"--num-shards must be >= 1, got {num_shards}")
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
            raise ConceptforgeError(
                f"--num-shards {num_shards} needs --shard-index (or a Slurm job array to supply it)"
            )
        else:
            outer = ShardSpec()
    world, rank, launcher = process_world(env)
    if launcher is None:
        return Launch(outer, tuple(sources))
    if not 0 <= rank < world:
        raise ConceptforgeError(f"{launcher}: rank {rank} is outside the world of {world} processes")
    sources.append(launcher)
    return Launch(ShardSpec(outer.num_shards * world, outer.shard_index * world + rank), tuple(sources))


def resolve_shard(num_shards: int | None = None, shard_index: int | None = None) -> ShardSpec:
    """The combined :class:`ShardSpec` of this process (see :func:`resolve_launch`)."""
    launch = resolve_launch(num_shards, shard_index)
    if launch.sources:
        logger.info("this process is %s", launch.describe())
    return launch.shard
