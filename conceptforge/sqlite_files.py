"""Opening the SQLite files several processes share (caches, the annotation database) in WAL mode.

Why a helper: switching a database to WAL needs an exclusive lock, and SQLite answers "database is
locked" at once, without waiting out the busy timeout, to a process whose lock upgrade could
deadlock with another's. Two ranks of ``accelerate launch`` (or two sweeps, or two annotation
server threads) opening a new cache together hit it: with four processes opening one fresh file
at once, 5 of 40 trials failed (tests/core/test_sqlite_files.py). :func:`connect_wal` switches
only a database not yet in WAL mode, and retries a busy switch until the timeout.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any


def connect_wal(path: str | os.PathLike[str], *, timeout: float = 60.0, **options: Any) -> sqlite3.Connection:
    """``sqlite3.connect(path, timeout=timeout, **options)`` with the database in WAL mode."""
    connection = sqlite3.connect(str(path), timeout=timeout, **options)
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            if str(connection.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                connection.execute("PRAGMA journal_mode=WAL")
            return connection
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                connection.close()
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.25)
