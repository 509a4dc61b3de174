"""Bytes that every stage writes the same way: atomic local files and canonical JSON.

Why a module of its own: the store, the assembly step, the card and dataset writers, the
annotation exports and the evaluation runs all need these two, and none of them should have to
import the item store (and pyarrow) to get them.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to a local ``path`` via a temp file in the same folder and ``os.replace``.

    The file gets the mode a plain ``open()`` would give (0666 minus the umask), not
    ``mkstemp``'s 0600: collaborators on shared storage must be able to read and resume a run.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys and fixed separators: identical values give identical bytes."""
    return (json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
