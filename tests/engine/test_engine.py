"""The run engine: launchers, chunked store on local disk and a real S3 server, one assembly."""

from __future__ import annotations

import collections
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conceptforge.engine.launchers import resolve_launch
from conceptforge.engine.runner import check_output, plan_chunks, run_stage
from conceptforge.engine.store import ItemStore
from conceptforge.engine.workitems import ShardSpec
from conceptforge.errors import ConceptforgeError
from tests.engine import engine_stage

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "tests" / "engine" / "engine_stage.py")
CLEAN_ENV = {
    k: v
    for k, v in os.environ.items()
    if not k.startswith(("SLURM_", "OMPI_", "PMI_", "PMIX_")) and k not in {"WORLD_SIZE", "RANK", "LOCAL_RANK"}
}
ENV = {**CLEAN_ENV, "PYTHONPATH": str(REPO)}


def _run(*args, env=None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, SCRIPT, *map(str, args)],
        env={**ENV, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        **kwargs,
    )


def _cli(command: str, out, env=None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``conceptforge COMMAND OUT`` (status, assemble) in a fresh interpreter."""
    argv = [sys.executable, "-m", "conceptforge", command, str(out)]
    return subprocess.run(argv, env={**ENV, **(env or {})}, capture_output=True, text=True, timeout=timeout)


def _assemble_at_once(out, env=None, n: int = 3) -> list[tuple[str, str]]:
    """``conceptforge assemble OUT`` in n processes started together; each one must succeed."""
    argv = [sys.executable, "-m", "conceptforge", "assemble", str(out)]
    env = {**ENV, **(env or {})}
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * n, outputs
    return outputs


def _dataset_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "data").glob("*.parquet"))} | {
        "README.md": (out / "README.md").read_bytes()
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, bytes]:
    """One uninterrupted single-process run: what every other way of running must reproduce."""
    out = tmp_path_factory.mktemp("reference") / "out"
    result = _run(out, "--count", 40)
    assert result.returncode == 0, result.stderr
    return _dataset_bytes(out)


# -- launchers ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "env, explicit, expected",
    [
        ({}, (None, None), ShardSpec(1, 0)),
        ({}, (3, 2), ShardSpec(3, 2)),
        ({"SLURM_NTASKS": "4", "SLURM_PROCID": "3"}, (None, None), ShardSpec(4, 3)),
        ({"SLURM_NTASKS": "1", "SLURM_PROCID": "0"}, (None, None), ShardSpec(1, 0)),
        (
            {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "8", "SLURM_ARRAY_TASK_MIN": "0"},
            (None, None),
            ShardSpec(8, 5),
        ),
        (
            {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "7"},
            (None, None),
            ShardSpec(8, 5),
        ),
        ({"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "0"}, (10, None), ShardSpec(10, 7)),
        # a resubmission of some tasks (`sbatch --array=1` / `--array=3,17,42`): the task id IS the shard
        (
            {
                "SLURM_ARRAY_TASK_ID": "1",
                "SLURM_ARRAY_TASK_MIN": "1",
                "SLURM_ARRAY_TASK_MAX": "1",
                "SLURM_ARRAY_TASK_COUNT": "1",
            },
            (2, None),
            ShardSpec(2, 1),
        ),
        (
            {
                "SLURM_ARRAY_TASK_ID": "17",
                "SLURM_ARRAY_TASK_MIN": "3",
                "SLURM_ARRAY_TASK_MAX": "42",
                "SLURM_ARRAY_TASK_COUNT": "3",
            },
            (64, None),
            ShardSpec(64, 17),
        ),
        # array x srun tasks: 3 array tasks of 2 srun tasks each = 6 slices
        (
            {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_NTASKS": "2", "SLURM_PROCID": "1"},
            (None, None),
            ShardSpec(6, 5),
        ),
        # srun torchrun: RANK/WORLD_SIZE are the global ones and win over SLURM_PROCID
        ({"SLURM_NTASKS": "2", "SLURM_PROCID": "1", "WORLD_SIZE": "8", "RANK": "6"}, (None, None), ShardSpec(8, 6)),
        ({"WORLD_SIZE": "2", "RANK": "1"}, (2, 1), ShardSpec(4, 3)),
        ({"OMPI_COMM_WORLD_SIZE": "3", "OMPI_COMM_WORLD_RANK": "2"}, (None, None), ShardSpec(3, 2)),
        ({"PMI_SIZE": "2", "PMI_RANK": "1"}, (None, None), ShardSpec(2, 1)),
    ],
)
def test_launchers_compose(env, explicit, expected):
    assert resolve_launch(*explicit, env=env).shard == expected


@pytest.mark.parametrize(
    "explicit, env, message",
    [
        ((0, None), {}, "--num-shards must be >= 1, got 0"),
        ((0, 0), {}, "--num-shards must be >= 1, got 0"),
        ((2, 2), {}, "--shard-index must be in [0, 2)"),
        ((4, None), {}, "needs --shard-index"),
        ((4, None), {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "0"}, "outside --num-shards 4"),
        # without --num-shards only a whole 0-based array says how many shards there are
        (
            (None, None),
            {
                "SLURM_ARRAY_TASK_ID": "1",
                "SLURM_ARRAY_TASK_MIN": "1",
                "SLURM_ARRAY_TASK_MAX": "1",
                "SLURM_ARRAY_TASK_COUNT": "1",
            },
            "pass --num-shards N",
        ),
        (
            (None, None),
            {
                "SLURM_ARRAY_TASK_ID": "4",
                "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_MAX": "6",
                "SLURM_ARRAY_TASK_COUNT": "4",
            },
            "pass --num-shards N",
        ),
    ],
)
def test_bad_shards_are_one_line(explicit, env, message):
    with pytest.raises(ConceptforgeError, match=message.replace("[", r"\[").replace(")", r"\)")):
        resolve_launch(*explicit, env=env)


def test_no_torch_import_to_learn_there_is_no_launcher():
    code = (
        "import sys; from conceptforge.engine.launchers import resolve_shard; resolve_shard(); "
        "print('torch' in sys.modules, 'accelerate' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["False", "False"], result.stderr


def test_chunks_never_span_groups():
    items = engine_stage.items(10)
    chunks = plan_chunks(items, 4, group=lambda item: item.payload["n"] // 3)
    assert [[i.payload["n"] for i in c.items] for c in chunks] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]


# -- four Slurm tasks ---------------------------------------------------------------------------
def test_four_slurm_tasks_make_every_item_once_and_assemble_once(tmp_path, reference):
    out, log, assembly_log = tmp_path / "out", tmp_path / "made.log", tmp_path / "assembled.log"
    procs = [
        subprocess.Popen(
            [sys.executable, SCRIPT, str(out), "--count", "40", "--log", str(log), "--assembly-log", str(assembly_log)],
            env={**ENV, "SLURM_NTASKS": "4", "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(4)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    made = collections.Counter(log.read_text().split())
    assert len(made) == 40 and set(made.values()) == {1}  # every item exactly once
    assert len(assembly_log.read_text().splitlines()) == 1  # one assembly
    assert _dataset_bytes(out) == reference
    status = _cli("status", out, timeout=120)
    assert "40 of 40 items done (5 of 5 chunks)" in status.stdout and "shard 3 of 4: 1/1 chunks done" in status.stdout
    assert "assembled: yes" in status.stdout


def test_explicit_shard_says_what_is_missing(tmp_path, reference):
    out = tmp_path / "out"
    first = _run(out, "--count", 40, "--num-shards", 2, "--shard-index", 0)
    assert first.returncode == 0, first.stderr
    assert (
        "made 24" in first.stdout and "16 of 40 items (2 chunks) are still missing, in shard(s) 1 of 2" in first.stdout
    )
    assert "rerun the same command" not in first.stdout and f"conceptforge assemble {out}" in first.stdout
    status = _cli("status", out)
    assert "shard 0 of 2: 3/3 chunks done, 0 items left" in status.stdout
    assert "shard 1 of 2: 0/2 chunks done, 16 items left" in status.stdout
    second = _run(out, "--count", 40, "--num-shards", 2, "--shard-index", 1)
    assert "assembled" in second.stdout and _dataset_bytes(out) == reference


# -- kill -9 in the middle of a chunk ----------------------------------------------------------
def test_kill_mid_chunk_then_rerun_is_identical(tmp_path, reference):
    out, log = tmp_path / "out", tmp_path / "made.log"
    process = subprocess.Popen(
        [sys.executable, SCRIPT, str(out), "--count", "40", "--log", str(log), "--delay", "0.05"],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    chunks = out / ".work" / "chunks"
    deadline = time.time() + 120
    while time.time() < deadline and not (
        len(list(chunks.glob("*.done"))) >= 2 and len(log.read_text().split()) % 8 >= 3
    ):
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    made_before = log.read_text().split()
    kept = len(list(chunks.glob("*.done")))
    assert 2 <= kept < 5 and len(made_before) > kept * 8  # killed inside a chunk
    assert not (out / "README.md").exists()
    rerun = _run(out, "--count", 40, "--log", log)
    assert rerun.returncode == 0, rerun.stderr
    assert _dataset_bytes(out) == reference
    made = collections.Counter(log.read_text().split())
    assert len(made) == 40  # 0 items lost
    redone = {item for item, count in made.items() if count == 2}
    assert len(redone) == len(made_before) - kept * 8  # only the cut chunk's items were made again
    import pyarrow.parquet as pq

    ids = [
        i
        for split in ("test", "train")
        for i in pq.read_table(out / "data" / f"{split}.parquet")["item_id"].to_pylist()
    ]
    assert len(ids) == len(set(ids)) == 40  # 0 doubled


# -- three concurrent assemblers ----------------------------------------------------------------
def test_three_concurrent_assemblers_make_one_dataset(tmp_path, reference):
    out, assembly_log = tmp_path / "out", tmp_path / "assembled.log"
    store = ItemStore(out / ".work")
    report = run_stage(
        engine_stage.stage(40, assembly_log=str(assembly_log), assembly_delay=1.0), out, assemble=False, store=store
    )
    assert report.complete and not (out / "README.md").exists()
    outputs = _assemble_at_once(out)
    said = sorted(o[0].strip().split(" (")[0] for o in outputs)
    assert said == sorted([f"assembled {out}", f"{out} was already assembled", f"{out} was already assembled"])
    assert len(assembly_log.read_text().splitlines()) == 1
    assert _dataset_bytes(out) == reference
    again = _cli("assemble", out)
    assert (
        again.returncode == 0
        and "already assembled" in again.stdout
        and len(assembly_log.read_text().splitlines()) == 1
    )


def test_a_stale_lock_of_a_dead_assembler_is_taken_over(tmp_path, reference):
    out = tmp_path / "out"
    store = ItemStore(out / ".work")
    run_stage(engine_stage.stage(40), out, assemble=False, store=store)
    lock = out / ".work" / "assembly.lock"
    lock.write_text(json.dumps({"token": "dead", "pid": 999999}))
    old = time.time() - 3600
    os.utime(lock, (old, old))
    result = _cli("assemble", out)
    assert result.returncode == 0 and "assembled" in result.stdout, result.stderr
    assert not lock.exists() and _dataset_bytes(out) == reference


# -- object storage -----------------------------------------------------------------------------
def test_s3_run_with_shards_is_byte_identical(s3_server, tmp_path, reference):
    s3_server.make_bucket("engine-test")
    url = "s3://engine-test/run"
    env = s3_server.env
    for index in (0, 1):
        result = _run(url, "--count", 40, "--num-shards", 2, "--shard-index", index, env=env)
        assert result.returncode == 0, result.stderr
    fs = s3_server.filesystem()
    files = fs.find("engine-test/run")
    assert not any("/items/" in f for f in files)
    assert len([f for f in files if f.endswith(".parquet") and "/chunks/" in f]) == 5  # 40 items in 5 chunk files
    remote = {name: fs.cat_file(f"engine-test/run/data/{name}") for name in ("test.parquet", "train.parquet")}
    remote["README.md"] = fs.cat_file("engine-test/run/README.md")
    assert remote == reference
    again = _run(url, "--count", 40, env=env)
    assert "already done 40" in again.stdout and "already assembled" in again.stdout
    status = _cli("status", url, env=env)
    assert "40 of 40 items done" in status.stdout and "assembled: yes" in status.stdout


@pytest.mark.heavy
def test_s3_concurrent_assemblers(s3_server, tmp_path):
    s3_server.make_bucket("engine-assembly")
    url = "s3://engine-assembly/run"
    log = tmp_path / "assembled.log"
    run_stage(engine_stage.stage(16, assembly_log=str(log), assembly_delay=1.0), url, assemble=False)
    outputs = _assemble_at_once(url, env=s3_server.env)
    assert sum("was already assembled" in o[0] for o in outputs) == 2
    assert len(log.read_text().splitlines()) == 1


# -- never touch a user's files; settings; permissions; damage ----------------------------------
def test_foreign_output_folder_is_refused_untouched(tmp_path):
    out = tmp_path / "mine"
    (out / "data").mkdir(parents=True)
    files = {
        "README.md": b"# my notes\n",
        "grid.png": b"\x89PNG fake",
        "data/notes.txt": b"keep me",
        "train.py": b"print(1)\n",
    }
    for name, data in files.items():
        (out / name).write_bytes(data)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()}
    result = _run(out, "--count", 8)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "not a conceptforge run" in result.stderr
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()} == before
    assert not (out / ".work").exists()
    check_output(tmp_path / "new")  # absent or empty: fine
    (tmp_path / "empty").mkdir()
    check_output(tmp_path / "empty")


def test_settings_are_fixed_by_the_first_chunk_and_named_precisely(tmp_path):
    out = tmp_path / "out"
    store = ItemStore(out / ".work")

    def failing(item):
        raise ConceptforgeError("model failed to load")

    stage = engine_stage.stage(8)
    stage.make_item = failing
    with pytest.raises(ConceptforgeError, match="failed to load"):
        run_stage(stage, out, store=store)
    assert store.stored_config() is None  # a failed start fixes nothing
    other = engine_stage.stage(8)
    other.settings = {"count": 8, "learner": {"model_id": "a", "steps": 2}}
    run_stage(other, out, store=ItemStore(out / ".work"), max_items=8)
    changed = engine_stage.stage(8)
    changed.settings = {"count": 8, "learner": {"model_id": "b", "steps": 2}}
    with pytest.raises(ConceptforgeError, match=r"differs in: learner\.model_id\)"):
        run_stage(changed, out, store=ItemStore(out / ".work"))


def test_files_respect_the_umask(tmp_path):
    out = tmp_path / "out"
    result = subprocess.run(
        ["/bin/sh", "-c", f"umask 022 && exec {sys.executable} {SCRIPT} {out} --count 16"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) > 6
    modes = {str(p.relative_to(out)): stat.S_IMODE(p.stat().st_mode) for p in files}
    assert set(modes.values()) == {0o644}, modes


def test_damaged_chunks_are_redone_and_said(tmp_path, reference):
    out = tmp_path / "out"
    assert _run(out, "--count", 40, "--max-items", 24).returncode == 0
    chunks = out / ".work" / "chunks"
    first = chunks / "c000000.parquet"
    first.write_bytes(first.read_bytes()[:100])  # truncated
    second = chunks / "c000001.parquet"
    data = bytearray(second.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    second.write_bytes(bytes(data))
    result = _run(out, "--count", 40)
    # the truncated chunk is found by the listing and redone; the flipped one by its hash at assembly
    assert "1 damaged chunk(s) (8 items)" in result.stderr
    assert result.returncode == 2 and result.stderr.strip().splitlines()[-1].startswith("error: chunk 1 in")
    assert "rerun the same command" in result.stderr
    again = _run(out, "--count", 40)
    assert again.returncode == 0, again.stderr
    assert _dataset_bytes(out) == reference


def test_io_errors_are_one_line(tmp_path):
    """A file-size limit makes writes fail like a full disk: one line, exit 2, no traceback."""
    out = tmp_path / "out"
    code = (
        "import resource, signal, sys, runpy; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        "resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000)); "
        f"sys.argv = [{SCRIPT!r}, {str(out)!r}, '--count', '16']; runpy.run_path({SCRIPT!r}, run_name='__main__')"
    )
    result = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot write a chunk to") and "File too large" in lines[0]
