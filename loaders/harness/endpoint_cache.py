"""The response cache of the endpoint client: one SQLite file, safe to share between processes.

Why SQLite in WAL mode (as the sample cache, :mod:`conceptforge.loaders.harness.sample_cache`):
every answer is committed the moment it arrives, so a run killed with ``kill -9`` loses at most
the requests in flight and a rerun asks only for what is missing; two runs on one cache write
through SQLite's own locking instead of clobbering a shared file. Only successful chat
completions are ever stored: an error is not an answer, and caching it would make it permanent.

``<cache-dir>/endpoint_responses.sqlite``, table ``responses (key, response, created)``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESPONSES_FILE = "endpoint_responses.sqlite"
_CHUNK = 500  # SQLite's default limit on bound parameters is 999 (older builds)


class ResponseCache:
    """Responses by key. Used from one thread (the client's); ``put`` commits at once."""

    def __init__(self, cache_dir: str | Path, *, flag: str = "--cache-dir") -> None:
        from conceptforge.output import claim_sqlite

        self.path = claim_sqlite(
            Path(cache_dir) / RESPONSES_FILE, tables=["responses"], flag=flag, what="endpoint cache"
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # timeout: a second process holding the write lock makes us wait, never fail.
        self._db = sqlite3.connect(str(self.path), timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a committed answer survives a killed process (not a power cut), and
        # a commit per answer stays cheap.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, response TEXT NOT NULL, created REAL NOT NULL)"
        )
        self._db.commit()

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for key, text in self._db.execute(f"SELECT key, response FROM responses WHERE key IN ({marks})", chunk):
                found[key] = json.loads(text)
        return found

    def put(self, key: str, response: dict[str, Any]) -> None:
        # INSERT OR IGNORE: a second process that got the same answer first wins; both are the
        # answer to the same deterministic request.
        self._db.execute(
            "INSERT OR IGNORE INTO responses (key, response, created) VALUES (?, ?, ?)",
            (key, json.dumps(response, sort_keys=True), time.time()),
        )
        self._db.commit()

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        self._db.close()
