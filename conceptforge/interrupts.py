"""Stop on SIGINT/SIGTERM within seconds, with one line and exit status 128 + signal.

Python turns SIGINT into ``KeyboardInterrupt`` but leaves SIGTERM (what ``kill``, batch schedulers
and ``timeout`` send) to kill the process without a word. :func:`handle_stop_signals` makes both
raise :class:`Interrupted` in the main thread, so every stage unwinds the same way: the item store
keeps what is complete (writes are atomic), worker pools are stopped, and the command line prints
one line and exits 130 (SIGINT) or 143 (SIGTERM).

Some C code runs Python callbacks and swallows any exception they raise: Blender's Cycles prints
the ``KeyboardInterrupt`` traceback and carries on rendering. Code that calls into such a library
wraps the call in :func:`deferred_interrupts`: a stop signal that arrives inside is held and
delivered as soon as the call returns.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A stop signal arrived. A ``KeyboardInterrupt`` so code that cleans up on Ctrl+C also runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum


def _raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted(signum)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def handle_stop_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`Interrupted` in the main thread."""
    if not _in_main_thread():  # signal handlers can only be set from the main thread
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum in STOP_SIGNALS:
        signal.signal(signum, _raise_interrupted)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if handler is not None:  # None: installed from C, cannot be restored from Python
                signal.signal(signum, handler)


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold SIGINT/SIGTERM until the block ends, then deliver them to the previous handlers.

    For calls into C code that swallows exceptions raised by Python callbacks (Blender): without
    this, Ctrl+C during a render prints a traceback and the run goes on. The block should take
    seconds at most, since that is how long a stop request waits.
    """
    if not _in_main_thread():
        yield
        return
    received: list[int] = []

    def record(signum: int, frame: object) -> None:
        received.append(signum)

    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    deferred = [signum for signum, handler in previous.items() if handler is not None]
    for signum in deferred:
        signal.signal(signum, record)
    try:
        yield
    finally:
        for signum in deferred:
            signal.signal(signum, previous[signum])
    if received:
        # Delivered to whatever handler the caller had: Interrupted under handle_stop_signals,
        # KeyboardInterrupt for Python's default SIGINT handler, termination for default SIGTERM.
        signal.raise_signal(received[0])
