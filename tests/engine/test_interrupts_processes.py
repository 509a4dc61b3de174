"""Stop signals and worker lifetimes, with real processes (conceptforge.interrupts, .processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conceptforge.interrupts import Interrupted, deferred_interrupts, handle_stop_signals
from tests.proc import alive

SLEEPER = textwrap.dedent("""
    import sys, time
    from conceptforge.cli import run_cli

    def main(argv):
        print("ready", flush=True)
        time.sleep(60)
        return 0

    sys.exit(run_cli(main))
""")


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_command_stops_at_once_with_one_line(signum, code):
    process = subprocess.Popen(
        [sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().strip() == "ready"
    sent = time.monotonic()
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    assert time.monotonic() - sent < 5
    assert process.returncode == code
    name = signal.Signals(signum).name
    assert stderr.strip().splitlines() == [
        f"interrupted by {name}: finished work is kept; rerun the same command to resume"
    ]


def test_a_deferred_signal_is_delivered_when_the_block_ends():
    finished_block = False
    with pytest.raises(Interrupted) as caught:
        with handle_stop_signals():
            with deferred_interrupts():
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(1000):  # Python runs signal handlers between bytecodes
                    pass
                finished_block = True
    assert finished_block and caught.value.signum == signal.SIGTERM and caught.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # restored


def test_deferred_ctrl_c_reaches_pythons_default_handler():
    with pytest.raises(KeyboardInterrupt) as caught:
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
    assert not isinstance(caught.value, Interrupted)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


PARENT = textwrap.dedent("""
    import subprocess, sys, time, os
    child = subprocess.Popen([sys.executable, "-c",
        "import os, sys, time; from conceptforge.engine.processes import die_with_parent; "
        "die_with_parent(int(sys.argv[1])); print('armed', flush=True); time.sleep(60)", str(os.getpid())],
        stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "armed"
    print(child.pid, flush=True)
    time.sleep(60)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_dies_with_its_parent_killed_by_sigkill():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    try:
        assert alive(child)
        parent.kill()
        parent.wait(timeout=10)
        deadline = time.monotonic() + 5
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(child)
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_worker_whose_parent_is_already_gone_exits():
    code = (
        "from conceptforge.engine.processes import die_with_parent; "
        "die_with_parent(1 if __import__('os').getppid() != 1 else 2); print('survived')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert result.returncode == 1 and "survived" not in result.stdout
