"""Several processes opening one new SQLite cache at once (conceptforge/sqlite_files.py).

Two ranks of ``accelerate launch`` open the shared caches together; a raw ``PRAGMA
journal_mode=WAL`` then failed in one of them with "database is locked" without waiting (SQLite's
deadlock rule for lock upgrades): 5 of 40 trials of four processes, measured with the raw
statements before the helper existed. Each trial here starts four processes at one barrier.
"""

from __future__ import annotations

import multiprocessing
import sqlite3

from conceptforge.sqlite_files import connect_wal

PROCESSES = 4
TRIALS = 40


def _open_and_write(path: str, barrier, results) -> None:
    barrier.wait()
    try:
        db = connect_wal(path)
        db.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        db.commit()
        db.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?)", [(str(i), b"v") for i in range(10)])
        db.commit()
        results.put(str(db.execute("PRAGMA journal_mode").fetchone()[0]))
        db.close()
    except Exception as error:  # reported to the test, which names it
        results.put(repr(error))


def test_processes_opening_a_new_cache_together_all_get_it_in_wal_mode(tmp_path):
    context = multiprocessing.get_context("fork")
    outcomes = []
    for trial in range(TRIALS):
        path = str(tmp_path / f"{trial}.sqlite")
        barrier, results = context.Barrier(PROCESSES), context.Queue()
        processes = [context.Process(target=_open_and_write, args=(path, barrier, results)) for _ in range(PROCESSES)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=120)
        outcomes += [results.get(timeout=10) for _ in processes]
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 10
    assert set(outcomes) == {"wal"}, [o for o in outcomes if o != "wal"][:3]
