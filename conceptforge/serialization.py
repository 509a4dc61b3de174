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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as error:
        raise _naming(error, path) from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise _naming(error, path) from None
        raise


def _naming(error: OSError, path: Path) -> OSError:
    """The same error with the file the caller asked for (a full disk fails on a hidden temp
    file, or on ``close`` with no file name at all: the one-line message must say where)."""
    if error.errno is None:
        return error
    return type(error)(error.errno, error.strerror or os.strerror(error.errno), str(path))


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys and fixed separators: identical values give identical bytes."""
    return (json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
