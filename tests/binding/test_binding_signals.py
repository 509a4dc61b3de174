"""Stop requests and parent deaths, with real processes (issue 20, items 3 and 4).

Ctrl+C is simulated as the terminal sends it: SIGINT to the whole process group. ``kill -TERM`` and
``kill -9`` go to the parent only, as a user or a scheduler sends them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.proc import alive, children

pytest.importorskip("bpy", reason="Blender (bpy) is part of the test install: pip install '.[blender]'")

REPO_ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--resolution", "64x48", "--samples", "2"]  # byte-identity with demo_dir (see conftest)
MESSAGE = "interrupted by {}: finished work is kept; rerun the same command to resume"


def _start(out: Path, *extra: str, size: list[str] = SMALL) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [
            sys.executable,
            str(REPO_ROOT / "scripts" / "generate_binding.py"),
            "--dataset",
            "all",
            "--out",
            str(out),
            *size,
            *extra,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _items(out: Path) -> list[Path]:
    """Completed chunks of items in the repo's per-config stores (a chunk's ``.done`` marker is written last)."""
    return sorted(out.glob(".work/*/chunks/*.done"))


def _wait_for_first_item(process: subprocess.Popen, out: Path) -> None:
    deadline = time.monotonic() + 300
    while not _items(out):
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no item was rendered"
        time.sleep(0.02)


def _wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


def _data_bytes(repo: Path) -> dict[str, bytes]:
    """Every config's parquet and CLEVR scene files, the card and the grid of a binding repo."""
    files = sorted((repo / "data").rglob("*.parquet")) + sorted((repo / "scenes").rglob("*.json"))
    files += [repo / "README.md", repo / "grid.png"]
    return {f.relative_to(repo).as_posix(): f.read_bytes() for f in files}


def _kill_leftovers(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.heavy
def test_ctrl_c_stops_single_worker_rendering_and_the_run_resumes(demo_dir, tmp_path, run_binding):
    """Before: Cycles swallowed the KeyboardInterrupt, printed its traceback and the run finished."""
    process = _start(tmp_path)
    _wait_for_first_item(process, tmp_path)
    sent = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr[-3000:]
    assert time.monotonic() - sent < 10
    assert stderr.strip().splitlines()[-1] == MESSAGE.format("SIGINT")
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert len(_items(tmp_path)) < 6  # stopped, not finished (2 chunks per dataset)
    assert not (tmp_path / "README.md").exists()

    run_binding("--dataset", "all", "--out", str(tmp_path), *SMALL)  # the same command resumes
    assert _data_bytes(tmp_path) == _data_bytes(demo_dir)


@pytest.mark.heavy
def test_sigterm_to_the_parent_stops_its_workers(tmp_path):
    process = _start(tmp_path, "--num-workers", "2")
    _wait_for_first_item(process, tmp_path)
    workers = children(process.pid)  # two Blender workers and multiprocessing's resource tracker
    try:
        assert len(workers) >= 2
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 143, stderr[-3000:]
        assert time.monotonic() - sent < 15
        assert stderr.strip().splitlines()[-1] == MESSAGE.format("SIGTERM")
        assert _wait_gone(workers, 10) == []
        written = _items(tmp_path)
        time.sleep(1.5)
        assert _items(tmp_path) == written  # nobody goes on writing into .work
    finally:
        _kill_leftovers(workers)


@pytest.mark.heavy
def test_workers_die_with_a_parent_killed_by_sigkill(tmp_path):
    """Before: the workers rendered on (each item ~1 s here) and went on writing into .work."""
    process = _start(tmp_path, "--num-workers", "2", size=["--resolution", "320x240", "--samples", "16"])
    _wait_for_first_item(process, tmp_path)
    workers = children(process.pid)
    try:
        assert len(workers) >= 2
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)
        written = _items(tmp_path)
        assert _wait_gone(workers, 3) == []
        time.sleep(1.5)
        assert _items(tmp_path) == written
    finally:
        _kill_leftovers(workers)
