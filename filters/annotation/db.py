"""SQLite storage of a study: its sample, its configuration and every answer.

Why SQLite in WAL mode: several annotators (threads of one server, or several servers on the
same file) write at once; WAL lets readers proceed while one writer commits, ``busy_timeout``
makes writers queue instead of failing, and a committed answer survives a crash or a browser that
disconnects. ``(annotator, item_id)`` is the primary key, so an annotator can never answer the
same item twice, even from two tabs; a resubmission of the identical answer (a retried request)
is accepted as a no-op.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conceptforge.errors import StoreError
from conceptforge.sqlite_files import connect_wal

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    position INTEGER PRIMARY KEY,
    item_id TEXT NOT NULL UNIQUE,
    group_key TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS annotations (
    annotator TEXT NOT NULL,
    item_id TEXT NOT NULL REFERENCES items(item_id),
    answers TEXT NOT NULL,
    answered_at REAL NOT NULL,
    elapsed_ms INTEGER,
    PRIMARY KEY (annotator, item_id)
);
"""


@dataclass(frozen=True)
class Annotation:
    annotator: str
    item_id: str
    answers: dict[str, Any]
    answered_at: float
    elapsed_ms: int | None


#: The tables of an annotation database (:data:`SCHEMA`).
TABLES = ("meta", "items", "annotations")

_INSERT = (
    "INSERT INTO annotations (annotator, item_id, answers, answered_at, elapsed_ms) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (annotator, item_id) DO NOTHING"
)


@dataclass
class _Write:
    """One answer waiting for a group commit, and what came of it."""

    row: tuple[Any, ...]
    done: bool = False
    inserted: bool = False
    error: StoreError | None = None


class AlreadyAnswered(StoreError):
    """The annotator already gave a different answer to this item (stored answers never change)."""


def default_db_path(dataset_dir: str | Path, study: str) -> Path:
    """``<parent>/<dataset>.annotations/<study>.sqlite``: beside the dataset, never inside it,
    so the dataset directory stays exactly what will be published."""
    dataset_dir = Path(dataset_dir).resolve()
    return dataset_dir.parent / f"{dataset_dir.name}.annotations" / f"{study}.sqlite"


class AnnotationDB:
    def __init__(self, path: str | Path) -> None:
        from conceptforge.output import claim_sqlite

        # Checked read-only before the first connection: opening it in WAL mode already rewrites
        # a SQLite file's header, so someone else's database must be refused before that.
        self.path = claim_sqlite(path, tables=TABLES, flag="--db", what="annotation database", rebuilt=False)
        self._local = threading.local()
        # Writers of one process queue here, not in SQLite: a thread that finds the database
        # locked sleeps in SQLite's busy handler (1, 2, 5, 10 ... ms), far longer than a commit.
        # Held only around one INSERT, never across a request; other processes on the same file
        # still wait through busy_timeout.
        self._write_lock = threading.Lock()
        # Every request asks which items an annotator answered. Answers are only ever added, and
        # this process adds an id here only after its INSERT committed, so a cached set is a
        # subset of the stored one: equal sizes mean equal sets. A COUNT(*) on the primary-key
        # index checks that (answers written by another server on the same file are seen).
        self._answered: dict[str, set[str]] = {}
        self._queue: list[_Write] = []  # answers waiting for the next group commit
        self._queue_lock = threading.Lock()
        self._cache_lock = threading.Lock()

    def connect(self) -> sqlite3.Connection:
        """One connection per thread (sqlite3 connections must not be shared across threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect_wal(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- creation / resumption ------------------------------------------------------------------
    def initialise(self, config: Mapping[str, Any], sample: Sequence[tuple[str, str]]) -> bool:
        """Create the study, or check that an existing one was made with the same ``config``.

        Returns True when the study was created now, False when it is resumed.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self.connect()
            conn.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as error:
            raise StoreError(f"cannot open annotation database {self.path}: {error}") from None
        conn.execute("BEGIN IMMEDIATE")
        try:
            stored = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if stored:
                old = json.loads(stored["config"])
                if old != dict(config):
                    diff = ", ".join(
                        f"{k}: {old.get(k)!r} -> {config.get(k)!r}"
                        for k in sorted(set(old) | set(config))
                        if old.get(k) != config.get(k)
                    )
                    raise StoreError(
                        f"{self.path} belongs to a study with other settings ({diff}); rerun with the original "
                        "settings to resume, or pass --db NEW_PATH to start another study"
                    )
                conn.execute("COMMIT")
                return False
            conn.execute("INSERT INTO meta VALUES ('config', ?)", (json.dumps(dict(config), sort_keys=True),))
            conn.execute("INSERT INTO meta VALUES ('created_at', ?)", (repr(time.time()),))
            conn.executemany(
                "INSERT INTO items (position, item_id, group_key) VALUES (?, ?, ?)",
                [(i, item_id, key) for i, (item_id, key) in enumerate(sample)],
            )
            conn.execute("COMMIT")
            return True
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def config(self) -> dict[str, Any]:
        row = self.connect().execute("SELECT value FROM meta WHERE key = 'config'").fetchone()
        if row is None:
            raise StoreError(f"{self.path} holds no study (start one by serving it first)")
        return json.loads(row[0])

    def sample(self) -> list[tuple[str, str]]:
        return [(r[0], r[1]) for r in self.connect().execute("SELECT item_id, group_key FROM items ORDER BY position")]

    # -- answers --------------------------------------------------------------------------------
    def add(self, annotator: str, item_id: str, answers: Mapping[str, Any], *, elapsed_ms: int | None = None) -> bool:
        """Store an answer. True if new, False if the same answer was already stored.

        Raises :class:`AlreadyAnswered` if a different answer is stored.
        """
        blob = json.dumps(dict(answers), sort_keys=True)
        conn = self.connect()
        write = _Write((annotator, item_id, blob, time.time(), elapsed_ms))
        with self._queue_lock:
            self._queue.append(write)
        with self._write_lock:
            if not write.done:  # nobody committed it while we waited: commit everything queued
                self._commit_queued(conn)
        if write.error is not None:
            raise write.error
        if write.inserted:
            with self._cache_lock:
                if annotator in self._answered:
                    self._answered[annotator].add(item_id)
            return True
        row = conn.execute(
            "SELECT answers FROM annotations WHERE annotator = ? AND item_id = ?", (annotator, item_id)
        ).fetchone()
        if row is not None and row[0] == blob:
            return False
        raise AlreadyAnswered(item_id)

    def _commit_queued(self, conn: sqlite3.Connection) -> None:
        """Group commit: every queued answer in one transaction (called with the write lock).

        Each answer's request waits for this commit before it is acknowledged, so nothing
        acknowledged is lost; one transaction per batch instead of one per answer is what lets
        concurrent annotators store more answers per second than one. A batch that fails (it
        should not: answers are validated first) is retried one answer per transaction, so one
        bad answer cannot fail the others.
        """
        with self._queue_lock:
            batch, self._queue = self._queue, []
        if not batch:
            return
        try:
            if len(batch) == 1:
                batch[0].inserted = conn.execute(_INSERT, batch[0].row).rowcount == 1
            else:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for write in batch:
                        write.inserted = conn.execute(_INSERT, write.row).rowcount == 1
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
        except sqlite3.Error as error:
            if len(batch) == 1:
                batch[0].error = StoreError(f"cannot store the answer in {self.path}: {error}")
            else:
                for write in batch:
                    try:
                        write.inserted = conn.execute(_INSERT, write.row).rowcount == 1
                    except sqlite3.Error as single:
                        write.error = StoreError(f"cannot store the answer in {self.path}: {single}")
        except BaseException:  # interrupted: the transaction was rolled back, nothing of the batch is stored
            for write in batch:
                write.inserted, write.error = False, StoreError("interrupted before the answer was stored")
            raise
        finally:
            for write in batch:
                write.done = True

    def answered_by(self, annotator: str) -> set[str]:
        """The item ids ``annotator`` answered (a new set; see ``__init__`` for the cache)."""
        return set(self.answered_live(annotator))

    def answered_live(self, annotator: str) -> set[str]:
        """Like :meth:`answered_by` without the copy (O(1) per request): a set this object keeps
        up to date; callers only test membership and must not change it."""
        conn = self.connect()
        (count,) = conn.execute("SELECT COUNT(*) FROM annotations WHERE annotator = ?", (annotator,)).fetchone()
        with self._cache_lock:
            cached = self._answered.get(annotator)
            if cached is not None and len(cached) == count:
                return cached
        stored = {r[0] for r in conn.execute("SELECT item_id FROM annotations WHERE annotator = ?", (annotator,))}
        with self._cache_lock:
            known = self._answered.setdefault(annotator, set())
            known |= stored
            return known

    def annotations(self) -> Iterator[Annotation]:
        query = (
            "SELECT annotator, item_id, answers, answered_at, elapsed_ms FROM annotations ORDER BY item_id, annotator"
        )
        for annotator, item_id, answers, answered_at, elapsed in self.connect().execute(query):
            yield Annotation(annotator, item_id, json.loads(answers), answered_at, elapsed)

    def annotators(self) -> dict[str, int]:
        return dict(
            self.connect().execute("SELECT annotator, COUNT(*) FROM annotations GROUP BY annotator ORDER BY annotator")
        )
