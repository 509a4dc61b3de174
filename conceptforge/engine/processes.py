"""Worker processes that die with their parent, and pools that stop at once when asked.

A spawned worker outlives a parent killed with ``kill -9`` (or one that died of a bug): it keeps
its memory (a Blender worker holds ~400 MB), keeps writing into the store, and keeps
multiprocessing's resource tracker alive through the pipe it inherited. Two mechanisms prevent
that:

* :func:`die_with_parent`, called first in every worker (:func:`init_worker` is a ready pool
  initializer): on Linux the kernel sends SIGKILL to the worker when its parent exits
  (``prctl(PR_SET_PDEATHSIG)``), and the worker checks that its parent is still the one that
  started it, closing the race where the parent died before the ``prctl`` call. Elsewhere a
  daemon thread polls the parent id.
* :func:`stop_pool`, called by the parent when it is interrupted or fails: queued work is
  cancelled and running workers are killed, instead of ``ProcessPoolExecutor.__exit__`` waiting
  for every queued item to finish.

Killing a worker mid-item is safe: the item store writes through temp file + rename, so an item is
either complete or made again by the next run.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import logging
import os
import signal
import sys
import threading
import time

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def _set_parent_death_signal(signum: int) -> bool:
    """Ask the Linux kernel to send ``signum`` to this process when its parent exits."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
            logger.debug("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
            return False
    except (OSError, AttributeError):
        return False
    return True


def _watch_parent(parent_pid: int, interval: float) -> None:
    while os.getppid() == parent_pid:
        time.sleep(interval)
    os._exit(1)


def die_with_parent(parent_pid: int, *, poll_interval: float = 1.0) -> None:
    """Make this (worker) process end as soon as ``parent_pid``, the process that started it, exits.

    ``parent_pid`` must be read in the parent (``os.getpid()``) and passed to the worker: a worker
    whose parent is already gone has been re-parented and could not tell otherwise.
    """
    if not _set_parent_death_signal(signal.SIGKILL):
        threading.Thread(
            target=_watch_parent, args=(parent_pid, poll_interval), daemon=True, name="parent-watch"
        ).start()
    if os.getppid() != parent_pid:  # the parent died before the death signal was armed
        os._exit(1)


def init_worker(parent_pid: int) -> None:
    """Pool initializer: die with the parent, and leave Ctrl+C to it.

    Ctrl+C signals the whole process group; the parent stops the pool (:func:`stop_pool`), so a
    worker that also raised ``KeyboardInterrupt`` would only add a traceback per worker.
    """
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def stop_pool(pool: concurrent.futures.ProcessPoolExecutor, *, timeout: float = 5.0) -> None:
    """Cancel queued work and kill the running workers now (the parent was interrupted or failed).

    Python 3.14 has ``ProcessPoolExecutor.kill_workers``; before it the executor's worker table
    (``_processes``, unchanged since 3.2) is the only handle on its processes.
    """
    if callable(getattr(pool, "kill_workers", None)):
        pool.kill_workers()
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.kill()
    deadline = time.monotonic() + timeout
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    logger.debug("stopped %d worker process(es)", len(processes))


# -- who holds a lock or a staging folder ----------------------------------------------------------
def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def this_process() -> dict[str, object]:
    """Host, pid and start time of this process: what a lock or a staging folder records."""
    import socket

    return {"host": socket.gethostname(), "pid": os.getpid(), "start": _start_time(os.getpid())}


def holder_alive(record: dict) -> bool | None:
    """Whether the process a record names (:func:`this_process`) still runs.

    True or False for a process of this host (a reused pid with another start time counts as
    gone); None when it ran on another host, or the record says too little: nobody here can tell.
    """
    import socket

    host, pid = record.get("host"), record.get("pid")
    if host not in {socket.gethostname(), os.uname().nodename} or not isinstance(pid, int) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    recorded, current = record.get("start"), _start_time(pid)
    if isinstance(recorded, int) and current is not None and current != recorded:
        return False
    if current is None and sys.platform.startswith("linux"):  # a zombie or gone between the two calls
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            if handle.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                return False
    except OSError:
        pass
    return True
