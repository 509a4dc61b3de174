"""Issue 32: an assembly killed with kill -9 leaves its lock and staging folder behind. The rerun
used to wait 300 s in silence, `assemble --force` then said "already assembled", and the staging
folders stayed; now a dead holder on this host is known at once, named by status, and cleaned up."""

from __future__ import annotations

import signal
import subprocess
import sys

from conceptforge.commands.status import status_lines
from conceptforge.engine.assembly import LOCK_NAME, lock_holder
from conceptforge.engine.runner import assemble_run, run_stage
from conceptforge.engine.store import Location
from tests.engine import engine_stage

# A process that takes the assembly lock (and a staging folder) the way an assembly does, then dies.
_DIE_HOLDING = """
import os, sys
from conceptforge.engine.assembly import _take_lock
from conceptforge.staging import make_staging
from conceptforge.engine.store import Location
work = Location(sys.argv[1])
assert _take_lock(work, 300.0)[0] is not None
make_staging(sys.argv[1], "staging-")
os.kill(os.getpid(), 9)
"""


def _die_holding_the_lock(work) -> int:
    killed = subprocess.run([sys.executable, "-c", _DIE_HOLDING, str(work)], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    holder = lock_holder(Location(str(work)))
    assert holder and holder["pid"] != 0
    return holder["pid"]


def test_a_dead_holders_lock_is_named_and_taken_over_at_once(tmp_path):
    out = tmp_path / "out"
    report = run_stage(engine_stage.stage(12, chunk_size=4), out, assemble=False)
    assert report.complete and not (out / "README.md").exists()
    work = out / ".work"
    pid = _die_holding_the_lock(work)
    lines = status_lines(str(out))
    assert any(
        line.startswith(f"assembly lock: left by process {pid} on ")
        and f"`conceptforge assemble {out}` takes it over" in line
        for line in lines
    ), lines
    # wait=0: a lock that could not be taken at once would answer "busy"
    outcome = assemble_run(out, wait=0)
    assert outcome.status == "assembled", outcome.message
    assert not (work / LOCK_NAME).exists() and not list(work.glob("staging-*"))
    assert not any("assembly lock" in line for line in status_lines(str(out)))


def test_assemble_force_after_a_killed_assembly_assembles_again(tmp_path):
    out = tmp_path / "out"
    first = run_stage(engine_stage.stage(8, chunk_size=4), out)
    assert first.assembled
    (out / "data").rename(tmp_path / "moved")  # damage it: only a real assembly brings it back
    _die_holding_the_lock(out / ".work")
    outcome = assemble_run(out, force=True, wait=0)
    assert outcome.status == "assembled", outcome.message  # not "already assembled"
    assert (out / "data").is_dir() and (out / "README.md").exists()
