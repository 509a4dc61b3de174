"""One progress switch for every loop, as ``huggingface_hub`` has one.

Every loop that shows progress uses :class:`tqdm` from this module; whether bars show is decided
here, once:

1. ``CONCEPTFORGE_DISABLE_PROGRESS_BARS=1`` (or ``true``/``yes``) disables them and ``=0`` forces
   them on, whatever the code says: the user has the last word.
2. Otherwise :func:`disable_progress_bars` / :func:`enable_progress_bars` decide, when called.
3. Otherwise bars show only when stderr is a terminal. A bar redraws itself with carriage
   returns; in a log file (``2> run.log``, a batch job) that is one unreadable line per update.

While bars are off, a loop that runs longer than ``log_interval`` seconds logs one plain line per
interval instead (``VQA scoring: 1200/5000 img (24%), 3.1 img/s``), so a long job still shows
that it moves.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from tqdm.auto import tqdm as _tqdm

__all__ = [
    "ENV_VAR",
    "are_progress_bars_disabled",
    "disable_progress_bars",
    "enable_progress_bars",
    "quiet_model_library_bars",
    "tqdm",
]

logger = logging.getLogger(__name__)

ENV_VAR = "CONCEPTFORGE_DISABLE_PROGRESS_BARS"
#: Seconds between the plain progress lines logged while bars are off.
LOG_INTERVAL_S = 30.0

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_switch: bool | None = None  # None: not set by code; True: disabled; False: enabled


def disable_progress_bars() -> None:
    """Turn every conceptforge progress bar off (an environment variable still wins)."""
    global _switch
    _switch = True


def enable_progress_bars() -> None:
    """Turn progress bars on, even when stderr is not a terminal (an environment variable still wins)."""
    global _switch
    _switch = False


def are_progress_bars_disabled() -> bool:
    """Whether conceptforge's bars are off now (environment, then code, then "is stderr a TTY")."""
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    if _switch is not None:
        return _switch
    stream = sys.stderr
    try:
        return stream is None or not stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return True


class tqdm(_tqdm):  # noqa: N801 - the name users know
    """``tqdm.auto.tqdm`` that obeys the switch; while off, it logs a line every ``log_interval`` s.

    ``disable=True`` from the caller still hides both (a loop that must stay quiet).
    """

    def __init__(self, *args: Any, disable: bool = False, log_interval: float | None = None, **kwargs: Any) -> None:
        switched_off = are_progress_bars_disabled()
        self._log_lines = not disable and switched_off
        self._log_interval = LOG_INTERVAL_S if log_interval is None else log_interval
        self._log_desc = kwargs.get("desc") or (args[1] if len(args) > 1 else None) or "progress"
        self._log_unit = kwargs.get("unit", "it")
        self._log_start = self._log_last = time.monotonic()
        self._log_count = 0
        self._log_emitted = False
        kwargs.setdefault("dynamic_ncols", True)
        super().__init__(*args, disable=disable or switched_off, **kwargs)

    def __iter__(self):
        if not self._log_lines:
            yield from super().__iter__()
            return
        for item in self.iterable:
            yield item
            self._tick(1)

    def update(self, n: float = 1) -> bool | None:
        if self._log_lines:
            self._tick(n)
        return super().update(n)

    def close(self) -> None:
        if getattr(self, "_log_emitted", False):
            self._emit(done=True)
            self._log_emitted = False
        super().close()

    def _tick(self, n: float) -> None:
        self._log_count += n
        now = time.monotonic()
        if now - self._log_last >= self._log_interval:
            self._log_last = now
            self._emit()

    def _emit(self, *, done: bool = False) -> None:
        elapsed = max(time.monotonic() - self._log_start, 1e-9)
        count = self._log_count
        total = self.total
        share = f" ({100 * count / total:.0f}%)" if total else ""
        of_total = f"/{total:g}" if total else ""
        logger.info(
            "%s: %s%g%s %s%s, %.1f %s/s",
            self._log_desc,
            "done, " if done else "",
            count,
            of_total,
            self._log_unit,
            share,
            count / elapsed,
            self._log_unit,
        )
        self._log_emitted = True


def quiet_model_library_bars(pipeline: Any = None) -> None:
    """Route diffusers' and transformers' own bars through this switch.

    Why: diffusers draws "Loading pipeline components..." and transformers "Loading checkpoint
    shards" with their own tqdm, which ignores ``HF_HUB_DISABLE_PROGRESS_BARS``; with bars off
    their carriage-return frames still filled log files. Call it before loading a model (the
    libraries must be imported by then) and pass a diffusers ``pipeline`` to switch its sampling
    bar too. Bars that are on stay as the libraries have them.
    """
    if not are_progress_bars_disabled():
        return
    for name in ("diffusers.utils.logging", "transformers.utils.logging"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "disable_progress_bar"):
            module.disable_progress_bar()
    if pipeline is not None and hasattr(pipeline, "set_progress_bar_config"):
        pipeline.set_progress_bar_config(disable=True)
