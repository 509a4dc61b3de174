"""``--ray-address`` against a real ``ray start --head`` with token authentication (Ray 2.52+).

A head started where ``~/.ray/auth_token`` exists (``ray get-auth-token --generate``; Ray 2.59+
writes one itself) refuses every client without that token. Ray's own driver presents the token
only for ``address="auto"``, so ``--ray-address HOST:PORT`` used to be refused after ~28 s with
"Ray refused the connection" (issue 45.8). Now the same user (the same ``~/.ray``) runs a stage
on that cluster, and a process without the token fails at once, in one line naming token
authentication and the fix, with nothing written.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conceptforge.testing.slurm import HANG_GUARD
from tests.cluster.conftest import BIN, JOB_ENV, REPO

pytest.importorskip("ray", reason="Ray is not installed: pip install 'conceptforge[ray]' (the test extra has it)")

_RUN = (
    "import logging, sys\n"
    "logging.basicConfig(level=logging.INFO)\n"
    "from conceptforge.engine.ray_executor import RayExecutor\n"
    "from conceptforge.engine.runner import run_stage\n"
    "from conceptforge.errors import ClusterError\n"
    "from tests.engine import engine_stage\n"
    "try:\n"
    "    report = run_stage(engine_stage.stage(4, chunk_size=2), sys.argv[1], executor=RayExecutor(address=sys.argv[2]))\n"
    "except ClusterError as error:\n"
    "    print(error)\n"
    "    sys.exit(3)\n"
    "print('made', report.made, report.assembly.status)\n"
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | JOB_ENV
    return env | {"HOME": str(home), "RAY_DISABLE_USAGE_STATS": "1", "OMP_NUM_THREADS": "1"}


def _our_processes(marker: str) -> list[int]:
    """Pids of the processes whose command line names ``marker`` (this test's own Ray temp dir)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@pytest.fixture(scope="module")
def token_head(tmp_path_factory):
    """A Ray head (1 CPU) started by ``ray start --head --block`` in a HOME whose ~/.ray holds a
    token; yields (address, that HOME). Stopped by its own pids, never ``ray stop`` (which stops
    every Ray of the machine)."""
    home = tmp_path_factory.mktemp("ray-home")
    env = _env(home)
    made = subprocess.run([f"{BIN}/ray", "get-auth-token", "--generate"], env=env, capture_output=True, text=True)
    assert made.returncode == 0 and (home / ".ray" / "auth_token").is_file(), made.stderr[-2000:]
    temp = tempfile.mkdtemp(prefix="cfray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    port = _free_port()
    log = home / "head.log"
    with open(log, "w") as sink:
        head = subprocess.Popen(
            [f"{BIN}/ray", "start", "--head", "--block", "--port", str(port), "--node-ip-address", "127.0.0.1",
             "--num-cpus", "1", "--include-dashboard=false", "--temp-dir", temp, "--disable-usage-stats"],
            env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO,
        )  # fmt: skip
    try:
        guard = time.monotonic() + HANG_GUARD
        while "Ray runtime started" not in log.read_text(errors="replace"):
            assert head.poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < guard, log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        assert "Token authentication is enabled" in log.read_text(errors="replace")  # what users meet
        yield f"127.0.0.1:{port}", home
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        for pid in _our_processes(temp):  # daemons the head started in a session of their own
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _run_on(address: str, home: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [f"{BIN}/python", "-c", _RUN, str(out), address],
        env=_env(home),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )


@pytest.mark.heavy
def test_the_token_in_ray_home_is_presented_and_the_stage_runs_on_the_cluster(token_head, tmp_path):
    address, home = token_head
    result = _run_on(address, home, tmp_path / "out")
    # 4 items in chunks of 2, all made on the cluster's worker, assembled once by this driver
    assert result.returncode == 0 and result.stdout.strip().splitlines()[-1] == "made 4 assembled", (
        result.stdout + result.stderr[-3000:]
    )
    assert f"presenting the token authentication token from {home / '.ray' / 'auth_token'}" in result.stderr


@pytest.mark.heavy
def test_without_the_token_the_refusal_names_token_authentication_at_once(token_head, tmp_path):
    address, _ = token_head
    elsewhere = tmp_path / "home"  # another user, or a node whose ~/.ray lacks the head's token
    elsewhere.mkdir()
    result = _run_on(address, elsewhere, tmp_path / "out")
    assert result.returncode == 3, result.stdout + result.stderr[-3000:]
    assert result.stdout.strip() == (
        f"--ray-address {address}: the Ray cluster uses token authentication and refused this process (this "
        "process has no token): copy the head node's ~/.ray/auth_token to ~/.ray/auth_token here, or set "
        "RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to it (docs/cluster.md, Ray token authentication)"
    )
    assert "Failed to connect" not in result.stderr  # no ray.init retries: the probe answered
    assert not (tmp_path / "out").exists()  # refused before anything was written
    wrong = subprocess.run(
        [f"{BIN}/python", "-c", _RUN, str(tmp_path / "out2"), address],
        env=_env(elsewhere) | {"RAY_AUTH_TOKEN": "0" * 64},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    assert wrong.returncode == 3 and "(the token from RAY_AUTH_TOKEN is not the cluster's)" in wrong.stdout, (
        wrong.stdout + wrong.stderr[-3000:]
    )
