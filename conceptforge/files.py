"""Writing results whole: one JSON writer for every report, and one atomic folder writer.

Why one: reports (evaluation tables, annotation exports, CompMap results) are read by people and
by later runs, so they must all be whole files (written atomically, never half-written by a
killed run), valid JSON (NaN, which ``json`` would write as a bare ``NaN``, becomes ``null``) and
laid out the same way. Bytes go through :func:`conceptforge.store.atomic_write_bytes`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from conceptforge.serialization import atomic_write_bytes


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def write_json(path: str | Path, payload: Any, *, sort_keys: bool = False) -> Path:
    """Atomically write ``payload`` as JSON indented by 2 (parents created, NaN as null).

    ``sort_keys=False`` keeps the order a report was built in (its tables' order); exports whose
    keys have no meaningful order pass ``sort_keys=True`` so reruns give identical files.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_json_safe(payload), indent=2, sort_keys=sort_keys) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))
    return path


def write_directory_atomically(directory: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmpdir)`` on a fresh folder beside ``directory``, then rename it into place.

    For saved models and artifacts (``save_pretrained`` writes many files): a killed run leaves
    either the previous folder or the complete new one, never a mix; a leftover is replaced.
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".tmp", dir=directory.parent))
    try:
        write(tmp)
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory
