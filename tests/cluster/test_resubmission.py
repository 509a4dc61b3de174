"""What `conceptforge status` and a stopped array task say, without a scheduler: the sbatch
--array list of the missing tasks, dead "running" shards, and the executor options' errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conceptforge.commands.status import resubmission_lines, status_lines
from conceptforge.engine.launchers import array_spec, resubmit_hint, scheduler_record
from conceptforge.engine.runner import run_stage
from conceptforge.errors import ConceptforgeError
from tests.engine import engine_stage


@pytest.mark.parametrize("ids, spec", [([1, 3, 4, 5, 9], "1,3-5,9"), ([0], "0"), ([7, 2, 3, 2], "2-3,7"), ([], "")])
def test_array_spec_is_sbatch_syntax(ids, spec):
    assert array_spec(ids) == spec


def _report(index, num_shards, *, world=1, script="/home/me/job.sh", state="finished"):
    return {
        "num_shards": num_shards,
        "shard_index": index,
        "state": state,
        "slurm": {"job": f"7_{index // world}", "array_task": index // world, "world": world, "script": script},
    }


def test_missing_shards_become_array_task_ids():
    reports = {(4, i): _report(i, 4) for i in (0, 2)}
    assert resubmission_lines("OUT", 4, [1, 3], reports) == [
        "missing array tasks: --array=1,3 (of 4 shards)",
        "resubmit them: sbatch --array=1,3 /home/me/job.sh",
    ]
    # array x srun (2 tasks each): shards 2 and 3 are array task 1, shard 7 is task 3
    reports = {(8, i): _report(i, 8, world=2) for i in (0, 1)}
    assert resubmission_lines("OUT", 8, [2, 3, 7], reports)[1] == "resubmit them: sbatch --array=1,3 /home/me/job.sh"
    # two different scripts ran the shards: the user must say which
    reports = {(4, 0): _report(0, 4), (4, 2): _report(2, 4, script="/other.sh")}
    assert resubmission_lines("OUT", 4, [1], reports)[1] == "resubmit them: sbatch --array=1 YOUR_JOB_SCRIPT"
    assert resubmission_lines("OUT", 4, [], reports) == [] and resubmission_lines("OUT", 1, [0], {}) == []
    assert "--shard-index I" in resubmission_lines("OUT", 4, [1, 2], {})[0]


def test_scheduler_record_and_hint_only_in_an_array_task():
    assert scheduler_record({}) == {} and resubmit_hint({}) is None
    env = {
        "SLURM_ARRAY_JOB_ID": "12",
        "SLURM_ARRAY_TASK_ID": "3",
        "SLURM_JOB_ID": "15",
        "SLURM_NTASKS": "2",
        "SLURM_PROCID": "1",
        "PATH": "/nonexistent",
    }  # no scontrol: the script is unknown
    record = scheduler_record(env)["slurm"]
    assert record == {"job": "12_3", "array_task": 3, "world": 2}
    assert resubmit_hint(env) == "sbatch --array=3 YOUR_JOB_SCRIPT"


def test_status_says_a_dead_running_shard_is_stopped(tmp_path):
    out = tmp_path / "out"
    run_stage(engine_stage.stage(16, chunk_size=4), out, shard=engine_stage.resolve_shard(2, 0))
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    from conceptforge.engine.store import ItemStore

    store = ItemStore(str(out / ".work"))
    store.write_shard_report(
        2,
        1,
        {
            "num_shards": 2,
            "shard_index": 1,
            "chunks": [1, 3],
            "state": "running",
            "host": os.uname().nodename,
            "pid": int(dead),
        },
    )
    lines = status_lines(str(out))
    shard1 = next(line for line in lines if line.strip().startswith("shard 1 of 2"))
    assert f"last state: stopped (process {dead} on {os.uname().nodename} is gone)" in shard1
    assert "missing shards: 1 of 2" in "\n".join(lines)


def test_a_stopped_shard_records_its_stop(tmp_path):
    import signal

    from conceptforge.engine.store import ItemStore
    from conceptforge.interrupts import Interrupted

    stage = engine_stage.stage(8, chunk_size=4)
    calls = []

    def make(item):
        calls.append(item)
        if len(calls) == 6:
            raise Interrupted(signal.SIGTERM)
        return engine_stage.make_factory(None, 0)(item)

    stage.make_item = make
    with pytest.raises(Interrupted):
        run_stage(stage, tmp_path / "out")
    report = ItemStore(str(tmp_path / "out" / ".work")).shard_reports()[(1, 0)]
    assert report["state"] == "interrupted by SIGTERM"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--executor", "local", "--ray-address", "auto"], "--ray-address needs --executor ray"),
    ],
)
def test_executor_options_are_checked(argv, message):
    from conceptforge.engine.ray_executor import executor_from_args

    with pytest.raises(ConceptforgeError, match=message):
        executor_from_args(argv[1], argv[3])


def test_private_slurm_says_why_it_cannot_start(monkeypatch):
    from conceptforge.testing import slurm

    monkeypatch.setattr(slurm, "_find", lambda name: None if name == "slurmd" else f"/usr/sbin/{name}")
    assert slurm.unavailable_reason().startswith(
        "Slurm is not installed (slurmd missing): `make test` installs slurm-wlm munge"
    )
    monkeypatch.setattr(slurm, "_find", lambda name: f"/usr/sbin/{name}")
    monkeypatch.setattr(slurm.os, "geteuid", lambda: 1000)
    assert (
        slurm.unavailable_reason()
        == "a private Slurm needs root (slurmd runs jobs as their user); run the Slurm tests as root"
    )
    with pytest.raises(RuntimeError, match="needs root"):
        slurm.start_cluster()


def test_tasks_starting_together_see_the_store_being_created(tmp_path):
    """srun tasks that start together on an empty --out: one has made .work but not yet
    owner.json when another checks --out (seen on real Slurm); that is ours, not a foreign folder."""
    import threading

    from conceptforge.engine.runner import check_output
    from conceptforge.engine.store import ItemStore

    out = tmp_path / "out"
    (out / ".work").mkdir(parents=True)
    timer = threading.Timer(0.5, lambda: ItemStore(str(out / ".work")))
    timer.start()
    check_output(out)  # waits for owner.json instead of refusing
    timer.join()
    foreign = tmp_path / "foreign"
    (foreign / ".work").mkdir(parents=True)
    (foreign / ".work" / "notes.txt").write_text("someone's file")  # an empty .work is a store being made; this is not
    with pytest.raises(ConceptforgeError, match="not a conceptforge run"):
        check_output(foreign)
