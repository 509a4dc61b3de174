"""Shared command-line plumbing: logging set-up and one-line errors with a non-zero exit."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Sequence

from conceptforge.errors import ConceptforgeError
from conceptforge.interrupts import Interrupted, handle_stop_signals
from conceptforge.progress import are_progress_bars_disabled, quiet_model_library_bars

logger = logging.getLogger("conceptforge")

#: The libraries' own switches, set (unless the user set them) when conceptforge's bars are off,
#: so downloads and ``datasets`` maps do not fill a log file with carriage returns either.
LIBRARY_PROGRESS_SWITCHES = ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS")


# Libraries with their own log handlers. Without -v only their errors show: otherwise every torch
# command starts with "requires torchvision (not installed)" warnings and a failed model load with
# "Couldn't connect to the Hub ... Will try to load from local cache" before our one-line error.
_QUIET_LIBRARIES = ("transformers", "diffusers")


def _quiet_libraries() -> None:
    # torchao (``--quantize``; diffusers imports it whenever it is installed) registers enums that
    # torch deprecates registering: one "W... _pytree.py" line per enum at import, not ours to fix.
    logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)
    for name in _QUIET_LIBRARIES:
        os.environ.setdefault(f"{name.upper()}_VERBOSITY", "error")  # read when the library loads
        module = sys.modules.get(f"{name}.utils.logging")
        if module is not None and hasattr(module, "set_verbosity_error"):
            if os.environ[f"{name.upper()}_VERBOSITY"] == "error":
                module.set_verbosity_error()  # already imported: its level was set from the env then


class OnceFilter(logging.Filter):
    """Let each distinct warning through once per process.

    Why: retrying clients (the Hub, s3fs) and libraries loaded twice (a model, then its processor)
    repeat the same warning many times, which buries the one error line that follows.
    """

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, int, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or record.levelno >= logging.ERROR:
            return True
        key = (record.name, record.levelno, record.getMessage())
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


def setup_logging(verbose: bool = False) -> None:
    """Log to stderr under the one root ``conceptforge`` (``-v``: debug); quiet chatty clients."""
    if not verbose:
        _quiet_libraries()
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("httpx", "httpx2", "urllib3", "filelock", "fsspec", "botocore", "aiobotocore", "s3fs"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    _one_hub_handler(verbose)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, OnceFilter) for f in handler.filters):
            handler.addFilter(OnceFilter())
    quiet_library_progress()


def _one_hub_handler(verbose: bool) -> None:
    """The Hub client adds a stream handler of its own at import and also propagates to ours:
    each of its warnings (every retry) came out twice. Ours alone prints them, once; without
    ``-v`` only its errors (a failure is reported by our one error line)."""
    if "huggingface_hub" not in sys.modules:
        return
    hub = logging.getLogger("huggingface_hub")
    for handler in list(hub.handlers):
        if type(handler) is logging.StreamHandler:
            hub.removeHandler(handler)
    if not verbose:
        hub.setLevel(logging.ERROR)


def quiet_library_progress() -> None:
    """When conceptforge's bars are off, turn off the Hub's and ``datasets``' bars too.

    Their environment switches are read at import; a library imported already is told directly.
    A switch the user set explicitly is left alone.
    """
    if not are_progress_bars_disabled():
        return
    for name in LIBRARY_PROGRESS_SWITCHES:
        if name in os.environ:
            return
    for name in LIBRARY_PROGRESS_SWITCHES:
        os.environ[name] = "1"
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "datasets" in sys.modules:
        import datasets

        datasets.disable_progress_bars()
    quiet_model_library_bars()  # diffusers' and transformers' own loading bars, when imported


INTERRUPTED_MESSAGE = "interrupted by {signal}: finished work is kept; rerun the same command to resume"
#: In a Slurm array task "the same command" would be the whole array: name this task alone.
INTERRUPTED_ARRAY_MESSAGE = (
    "interrupted by {signal}: finished work is kept; to resume this array task alone (unless Slurm requeues it): "
    "{hint}  (`conceptforge status OUT` lists every task still missing)"
)


def interrupted_message(signal_name: str) -> str:
    """The one line a stopped command prints: how to resume, for a Slurm array task that task only."""
    from conceptforge.engine.launchers import resubmit_hint

    try:
        hint = resubmit_hint()
    except ConceptforgeError:
        hint = None
    if hint:
        return INTERRUPTED_ARRAY_MESSAGE.format(signal=signal_name, hint=hint)
    return INTERRUPTED_MESSAGE.format(signal=signal_name)


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
            except Exception as error:
                from conceptforge.external_errors import translate

                known = translate(error)  # no network, no credentials, a damaged file: one line, not a traceback
                if known is None:
                    raise  # a bug: keep the traceback
                logger.debug("%s", error, exc_info=error)
                print(f"error: {known}", file=sys.stderr)
                return known.exit_code
    except Interrupted as stop:
        print(interrupted_message(stop.signal_name), file=sys.stderr)
        return stop.exit_code
    except KeyboardInterrupt:
        print(interrupted_message("SIGINT"), file=sys.stderr)
        return 130
