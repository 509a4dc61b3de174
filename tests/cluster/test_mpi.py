"""Real MPI: Debian's Open MPI ``mpirun -n 2`` starts two ranks of a stage; same bytes as one process."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cluster.conftest import BIN, JOB_ENV

MPIRUN = shutil.which("mpirun")
BINDING_SMALL = ["--dataset", "all", "--preset", "demo", "--resolution", "64x48", "--samples", "2", "--chunk-size", "2"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "PMI_", "PMIX_"))} | JOB_ENV


def _bytes(out: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and ".work" not in p.relative_to(out).parts
    }


@pytest.mark.skipif(
    MPIRUN is None,
    reason="Open MPI is not installed (mpirun missing): `make test` installs openmpi-bin as root with apt",
)
def test_mpi_mpirun_two_ranks_give_the_bytes_of_one_process(tmp_path):
    single, ranks = tmp_path / "single", tmp_path / "mpi"
    command = [f"{BIN}/conceptforge", "generate", "binding", *BINDING_SMALL]
    one = subprocess.run([*command, "--out", str(single)], env=_env(), capture_output=True, text=True, timeout=600)
    assert one.returncode == 0, one.stderr[-3000:]
    mpi = [MPIRUN, "--oversubscribe", "-n", "2", "-x", "PATH", "-x", "PYTHONPATH", "-x", "HF_HUB_OFFLINE"]
    if os.geteuid() == 0:
        mpi.insert(1, "--allow-run-as-root")
    result = subprocess.run(
        [*mpi, *command, "--out", str(ranks)], env=_env(), capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "shard 0 of 2 (Open MPI)" in result.stderr and "shard 1 of 2 (Open MPI)" in result.stderr
    assert _bytes(ranks) == _bytes(single)
    shards = sorted(p.name for p in (ranks / ".work" / "single-object" / "shards").iterdir())
    assert shards == ["2-0.json", "2-1.json"]
