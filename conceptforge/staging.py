"""Staging folders: where a write is prepared before it is swapped into place, recognised as ours.

Why: a run killed with ``kill -9``, by the OOM killer or by a full disk leaves its staging folder
behind. Without a record the output guard could not tell it from a user's folder
(``annotate --apply`` refused its own rerun), and nothing removed it (``.work/staging-*`` piled
up). Each staging folder now holds a small record of the process that made it (host, pid, start
time, see :func:`conceptforge.engine.processes.this_process`): a folder whose process is gone from this
host is stale, and the next run of the same step removes it; the guard never counts a staging
folder of ours as a foreign file.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from conceptforge.engine.processes import holder_alive, this_process

logger = logging.getLogger(__name__)

#: The record inside every staging folder.
RECORD = ".conceptforge-staging.json"


def make_staging(parent: str | os.PathLike[str] | None, prefix: str, suffix: str = "") -> Path:
    """A new folder ``parent/<prefix>XXXX<suffix>`` (the system temp folder when ``parent`` is
    None) holding our record; the caller removes it when done."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent))
    try:
        (folder / RECORD).write_text(json.dumps(this_process()), encoding="utf-8")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def staging_record(path: str | os.PathLike[str]) -> dict | None:
    """The record of a staging folder of ours, or None for anything else."""
    try:
        record = json.loads((Path(path) / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def is_staging(path: str | os.PathLike[str]) -> bool:
    return Path(path).is_dir() and staging_record(path) is not None


def remove_stale(parent: str | os.PathLike[str], prefix: str) -> list[Path]:
    """Remove the staging folders ``parent/<prefix>*`` whose process is gone from this host.

    A folder of a live process, or of another host (a shared disk: nobody here can tell), stays.
    Returns what was removed.
    """
    removed = []
    try:
        entries = [entry for entry in Path(parent).iterdir() if entry.name.startswith(prefix)]
    except OSError:
        return removed
    for entry in entries:
        record = staging_record(entry) if entry.is_dir() else None
        if record is not None and holder_alive(record) is False:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    if removed:
        logger.info("removed %d staging folder(s) left by stopped runs in %s", len(removed), parent)
    return removed
