"""One task over several processes (``accelerate launch``, ``torchrun``) writes what one process
writes, byte for byte; a killed rank fails the run before anything is written; a rerun resumes.

The launchers are the real ones, started as a user starts them; nothing here sets ``RANK`` or
``WORLD_SIZE`` (the launcher does). The model is the tiny LLaVA scoring binding-clip by VQAScore
(``match``): its forward is reproducible from process to process on this CPU, which the test
checks first (two one-process runs equal). ``SOURCE_DATE_EPOCH`` pins ``created`` and drops the
wall-clock ``seconds``, the only fields that differ between two runs of the same command.

Note: ``accelerate launch --cpu --num_processes N`` starts ONE process on a single machine (its
CPU path wants an MPI host file); ``--multi_gpu --num_processes N`` uses torch's launcher, and on a
machine without GPUs the ranks join over gloo.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy

REPO = Path(__file__).resolve().parents[2]
BATCH = "4"  # 48 items in 12 chunks: every rank gets several


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
    env.update(
        PYTHONPATH=str(REPO),
        HF_HUB_OFFLINE="1",
        OMP_NUM_THREADS="1",
        SOURCE_DATE_EPOCH="1700000000",
        CUDA_VISIBLE_DEVICES="",  # the gloo path on any machine
    )
    return env


def _argv(model: Path, data: Path) -> list[str]:
    return [
        "evaluate",
        "--model",
        str(model),
        "--tasks",
        f"binding-clip:{data}",
        "--device",
        "cpu",
        "--batch-size",
        BATCH,
        "--cache-dir",
        "cache",
        "--output",
        "run.json",
    ]


def _launcher(kind: str, processes: int) -> list[str]:
    if kind == "one":
        return [sys.executable, "-m", "conceptforge"]
    if kind == "accelerate":
        return [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--multi_gpu",
            "--num_processes",
            str(processes),
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--main_process_port",
            str(_port()),
            "-m",
            "conceptforge",
        ]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        str(processes),
        "--master-port",
        str(_port()),
        "-m",
        "conceptforge",
    ]


def _start(kind: str, processes: int, work: Path, model: Path, data: Path) -> subprocess.Popen:
    work.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [*_launcher(kind, processes), *_argv(model, data)],
        cwd=work,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _run(kind: str, processes: int, work: Path, model: Path, data: Path) -> subprocess.CompletedProcess:
    proc = _start(kind, processes, work, model, data)
    out, err = proc.communicate(timeout=600)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert done.returncode == 0, err[:6000] + "\n...\n" + err[-2000:]
    return done


def _files(work: Path) -> dict[str, bytes]:
    """Every file the run wrote (the caches aside), by path relative to ``work``."""
    return {
        str(p.relative_to(work)): p.read_bytes()
        for p in sorted(work.rglob("*"))
        if p.is_file() and "cache" not in p.relative_to(work).parts
    }


def _leaderboard(work: Path) -> dict[str, bytes]:
    board = work / "board"
    board.mkdir()
    subprocess.run(
        [sys.executable, "-m", "conceptforge", "leaderboard", "run.json", "--output", "board/board.md"]
        + ["--json", "board/board.json", "--html", "board/board.html"],
        cwd=work,
        env=_env(),
        check=True,
        capture_output=True,
        timeout=300,
    )
    return {p.name: p.read_bytes() for p in sorted(board.iterdir())}


def _shares(stderr: str, processes: int, missing: int = 48) -> list[int]:
    """Items each rank scored, from its ``process r of N scored k of the M items`` line
    (``missing``: the M items the sample cache lacked)."""
    found = re.findall(rf"binding-clip: process (\d+) of {processes} scored (\d+) of the (\d+) items to score", stderr)
    by_rank = {int(rank): (int(k), int(m)) for rank, k, m in found}
    assert sorted(by_rank) == list(range(processes)), stderr[-3000:]
    assert {m for _, m in by_rank.values()} == {missing}
    return [by_rank[rank][0] for rank in range(processes)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiny_llava_dir, single_object_dir):
    """One process, twice: the run is reproducible here (else byte equality would prove nothing)."""
    root = tmp_path_factory.mktemp("one")
    _run("one", 1, root / "a", tiny_llava_dir, single_object_dir)
    _run("one", 1, root / "b", tiny_llava_dir, single_object_dir)
    files = _files(root / "a")
    assert {"run.json", "run.md", "run.samples/binding-clip.parquet"} <= set(files)
    assert files == _files(root / "b")
    return files, _leaderboard(root / "a")


@pytest.mark.parametrize("kind, processes", [("accelerate", 2), ("accelerate", 3), ("torchrun", 2)])
def test_sharded_run_equals_one_process_byte_for_byte(
    kind, processes, reference, tmp_path, tiny_llava_dir, single_object_dir
):
    files, board = reference
    done = _run(kind, processes, tmp_path, tiny_llava_dir, single_object_dir)
    shares = _shares(done.stderr, processes)
    # 12 chunks of 4 dealt round-robin: every rank scored whole chunks, none scored twice
    assert sum(shares) == 48 and all(k > 0 and k % 4 == 0 for k in shares), shares
    assert _files(tmp_path) == files
    assert _leaderboard(tmp_path) == board
    assert done.stdout.count("results: run.json") == 1  # rank 0 alone reports


def _rank_pid(launcher: subprocess.Popen, rank: int) -> int | None:
    import psutil

    try:
        children = psutil.Process(launcher.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return None
    for child in children:
        try:
            environ = child.environ()
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            continue
        if environ.get("RANK") == str(rank) and "conceptforge" in " ".join(child.cmdline()):
            return child.pid
    return None


def _rows(cache: Path) -> int:
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_killed_rank_fails_in_one_line_writes_nothing_and_a_rerun_resumes(
    reference, tmp_path, tiny_llava_dir, single_object_dir
):
    files, _ = reference
    launcher = _start("accelerate", 2, tmp_path, tiny_llava_dir, single_object_dir)
    killed: list[int] = []

    def kill_rank_one_after_the_first_rows() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and launcher.poll() is None:
            if _rows(tmp_path / "cache" / "samples.sqlite") > 0:
                pid = _rank_pid(launcher, 1)
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_rank_one_after_the_first_rows)
    watcher.start()
    out, err = launcher.communicate(timeout=600)
    watcher.join()
    assert killed, "the run ended before rank 1 could be killed"
    assert launcher.returncode != 0
    assert not (tmp_path / "run.json").exists() and not (tmp_path / "run.md").exists()
    assert not (tmp_path / "run.samples").exists()
    ours = [line for line in err.splitlines() if line.startswith(("error: ", "interrupted by "))]
    assert len(ours) == 1, err[-3000:]  # rank 0's one line (rank 1 died without a word)
    assert "rerun the same command" in ours[0], ours
    # no traceback out of our code (accelerate's launcher prints its own, from the venv's site-packages)
    assert not [line for line in err.splitlines() if f'File "{REPO}' in line and "site-packages" not in line], err
    scored_before = _rows(tmp_path / "cache" / "samples.sqlite")
    assert 0 < scored_before < 48
    again = _run("accelerate", 2, tmp_path, tiny_llava_dir, single_object_dir)
    assert f"{scored_before} of 48 samples from the sample cache" in again.stderr
    assert sum(_shares(again.stderr, 2, missing=48 - scored_before)) == 48 - scored_before
    assert _files(tmp_path) == files
