"""The response cache of the endpoint client: one SQLite file, safe to share between processes.

Why SQLite in WAL mode (as the sample cache, :mod:`conceptforge.loaders.harness.sample_cache`):
every answer is committed the moment it arrives, so a run killed with ``kill -9`` loses at most
the requests in flight and a rerun asks only for what is missing; two runs on one cache write
through SQLite's own locking instead of clobbering a shared file. Only successful chat
completions are ever stored: an error is not an answer, and caching it would make it permanent.

**Claims** (issue 45, EP42): two processes on one ``--cache-dir`` used to send the same missing
requests each (381 requests for 241 distinct bodies, billed twice by a paid API). Before a
request is sent, the process *claims* it: a row naming the owner (host, pid, a per-client token)
with a lease. Another process that finds a live claim waits for the answer to appear instead of
sending it; a claim whose owner died (its pid is gone on this host) or whose lease ran out (an
owner on another host that stopped renewing) is taken over. The owner renews its leases while it
waits on the server and drops a claim when the answer is committed (one transaction) or the
request failed.

``<cache-dir>/endpoint_responses.sqlite``, tables ``responses (key, response, created)`` and
``claims (key, owner, host, pid, expires)``.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conceptforge.sqlite_files import connect_wal

RESPONSES_FILE = "endpoint_responses.sqlite"
_CHUNK = 500  # SQLite's default limit on bound parameters is 999 (older builds)
#: How long a claim holds without renewal. The owner renews every ``LEASE_S / 4`` while it lives,
#: so only an owner that stopped (killed on another host, frozen) lets a lease run out.
LEASE_S = 60.0


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (signal 0 checks without touching it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


@dataclass
class Claimed:
    """What :meth:`ResponseCache.claim` found for each key: ``mine`` to send now, ``answered`` by
    then (read them back), ``others`` claimed by a live owner (wait for their answers)."""

    mine: list[str] = field(default_factory=list)
    answered: dict[str, dict[str, Any]] = field(default_factory=dict)
    others: list[str] = field(default_factory=list)


class ResponseCache:
    """Responses by key, and claims on the ones being asked. Used from one thread (the client's);
    every write commits at once."""

    def __init__(self, cache_dir: str | Path, *, flag: str = "--cache-dir") -> None:
        from conceptforge.output import claim_sqlite

        self.path = claim_sqlite(
            Path(cache_dir) / RESPONSES_FILE, tables=["responses"], flag=flag, what="endpoint cache"
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.owner = f"{self.host}:{self.pid}:{uuid.uuid4().hex[:12]}"
        # timeout: a second process holding the write lock makes us wait, never fail.
        # isolation_level=None: transactions are ours (BEGIN IMMEDIATE where a claim reads then writes).
        self._db = connect_wal(self.path, isolation_level=None)
        # NORMAL in WAL mode: a committed answer survives a killed process (not a power cut), and
        # a commit per answer stays cheap.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, response TEXT NOT NULL, created REAL NOT NULL)"
        )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT NOT NULL, "
            "pid INTEGER NOT NULL, expires REAL NOT NULL)"
        )

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
        """Store an answer and drop our claim on it, in one transaction (a waiting process sees
        the answer, never a released claim without one)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            # INSERT OR IGNORE: a second process that got the same answer first wins; both are the
            # answer to the same deterministic request.
            self._db.execute(
                "INSERT OR IGNORE INTO responses (key, response, created) VALUES (?, ?, ?)",
                (key, json.dumps(response, sort_keys=True), time.time()),
            )
            self._db.execute("DELETE FROM claims WHERE key = ? AND owner = ?", (key, self.owner))
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def claim(self, keys: Iterable[str], *, lease_s: float = LEASE_S) -> Claimed:
        """Claim each of ``keys`` not answered yet, unless a live owner holds it (one transaction:
        two processes never both get a key). A claim of a dead owner on this host, or one whose
        lease ran out, is taken over."""
        out = Claimed()
        keys = list(dict.fromkeys(keys))
        if not keys:
            return out
        now = time.time()
        self._db.execute("BEGIN IMMEDIATE")
        try:
            answered = self.get_many(keys)
            out.answered = answered
            for key in keys:
                if key in answered:
                    continue
                row = self._db.execute("SELECT owner, host, pid, expires FROM claims WHERE key = ?", (key,)).fetchone()
                if row is not None and row[0] != self.owner and self._holds(row, now):
                    out.others.append(key)
                    continue
                self._db.execute(
                    "INSERT OR REPLACE INTO claims (key, owner, host, pid, expires) VALUES (?, ?, ?, ?, ?)",
                    (key, self.owner, self.host, self.pid, now + lease_s),
                )
                out.mine.append(key)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        return out

    def _holds(self, row: tuple[str, str, int, float], now: float) -> bool:
        """Whether another owner's claim still stands: its lease runs and, on this host, its process lives."""
        _, host, pid, expires = row
        if expires < now:
            return False
        return not (host == self.host and not _alive(int(pid)))

    def renew(self, *, lease_s: float = LEASE_S) -> None:
        """Extend the lease of every claim we hold (we are alive and still asking)."""
        self._db.execute("UPDATE claims SET expires = ? WHERE owner = ?", (time.time() + lease_s, self.owner))

    def release(self, keys: Iterable[str] | None = None) -> None:
        """Drop our claims on ``keys`` (all of ours: ``None``) — a request that failed, or the end."""
        if keys is None:
            self._db.execute("DELETE FROM claims WHERE owner = ?", (self.owner,))
            return
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            self._db.execute(f"DELETE FROM claims WHERE owner = ? AND key IN ({marks})", [self.owner, *chunk])

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        try:
            self.release()
        finally:
            self._db.close()
