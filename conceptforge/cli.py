"""Shared command-line plumbing: logging set-up and one-line errors with a non-zero exit."""

from __future__ import annotations

import logging
import os
import sys
from typing import Callable, Sequence

from conceptforge.errors import ConceptforgeError
from conceptforge.interrupts import Interrupted, handle_stop_signals

logger = logging.getLogger("conceptforge")


# Libraries with their own log handlers. Without -v only their errors show: otherwise every torch
# command starts with "requires torchvision (not installed)" warnings and a failed model load with
# "Couldn't connect to the Hub ... Will try to load from local cache" before our one-line error.
_QUIET_LIBRARIES = ("transformers", "diffusers")


def _quiet_libraries() -> None:
    for name in _QUIET_LIBRARIES:
        os.environ.setdefault(f"{name.upper()}_VERBOSITY", "error")  # read when the library loads
        module = sys.modules.get(f"{name}.utils.logging")
        if module is not None and hasattr(module, "set_verbosity_error"):
            if os.environ[f"{name.upper()}_VERBOSITY"] == "error":
                module.set_verbosity_error()  # already imported: its level was set from the env then


def setup_logging(verbose: bool = False) -> None:
    if not verbose:
        _quiet_libraries()
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("httpx", "httpx2", "urllib3", "filelock", "fsspec"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


INTERRUPTED_MESSAGE = "interrupted by {signal}: finished work is kept; rerun the same command to resume"


def run_cli(main: Callable[[Sequence[str] | None], int | None], argv: Sequence[str] | None = None) -> int:
    """Run ``main``; a :class:`ConceptforgeError` prints ``error: <one line>`` and exits 2.

    SIGINT and SIGTERM stop the run (see :mod:`conceptforge.interrupts`): one line, exit 130/143.
    """
    try:
        with handle_stop_signals():
            try:
                return int(main(argv) or 0)
            except ConceptforgeError as error:
                print(f"error: {error}", file=sys.stderr)
                return error.exit_code
    except Interrupted as stop:
        print(INTERRUPTED_MESSAGE.format(signal=stop.signal_name), file=sys.stderr)
        return stop.exit_code
    except KeyboardInterrupt:
        print(INTERRUPTED_MESSAGE.format(signal="SIGINT"), file=sys.stderr)
        return 130
