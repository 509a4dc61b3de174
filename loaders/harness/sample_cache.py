"""The per-sample cache that makes ``conceptforge evaluate`` resumable.

Why keyed this way: a row is the model's verdict on one item, so it depends on the model's
resolved revision, the dataset's resolved revision, the task, its options and the item — and on
nothing else. Batch size, device count and the order items were scored in are not in the key, so
a run that crashed half way (or ran on another machine with other batches) is resumed by a rerun
that scores only the items the cache lacks. Rows are committed chunk by chunk as they are scored.

One SQLite file (WAL, safe to share between processes) beside the embedding cache:
``<cache-dir>/samples.sqlite``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from conceptforge.sqlite_files import connect_wal

logger = logging.getLogger(__name__)

CACHE_FILE = "samples.sqlite"
#: Part of every key: rows cached by an earlier format are not read back. "2": a generative VLM's
#: scores are float64 log-probabilities (earlier rows held float32-rounded probabilities, some
#: underflowed to 0.0, and ties split within a tolerance).
ROW_FORMAT = "2"


class SampleCache:
    """Rows by key; ``put`` commits, so what was scored before a crash survives it."""

    def __init__(self, path: str | Path, *, flag: str = "--cache-dir") -> None:
        from conceptforge.output import claim_sqlite

        self.path = claim_sqlite(path, tables=["samples"], flag=flag, what="sample cache")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = connect_wal(self.path)
        self._db.execute("CREATE TABLE IF NOT EXISTS samples (key TEXT PRIMARY KEY, row TEXT NOT NULL)")
        self._db.commit()

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(keys), 500):
            chunk = list(keys[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for key, row in self._db.execute(f"SELECT key, row FROM samples WHERE key IN ({marks})", chunk):
                found[key] = json.loads(row)
        return found

    def put_many(self, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO samples (key, row) VALUES (?, ?)",
            [(key, json.dumps(row, allow_nan=True)) for key, row in items],
        )
        self._db.commit()

    def close(self) -> None:
        self._db.close()


class TaskSamples:
    """The cache as one task of one run sees it: keys are (version, task, options, model
    revision, dataset revision, item id). ``scored`` counts the items this run had to score."""

    def __init__(
        self,
        cache: SampleCache | None,
        *,
        task: str,
        options_digest: str,
        model_revision: str,
        dataset_revision: str,
        group: Any = None,
    ) -> None:
        import conceptforge
        from conceptforge.loaders.harness.distributed import SINGLE

        self.cache = cache
        self.group = group or SINGLE  # the launcher's processes (loaders/harness/distributed.py)
        self.task = task
        self.prefix = "\0".join(
            [conceptforge.__version__, ROW_FORMAT, task, options_digest, model_revision or "", dataset_revision or ""]
        )
        self.scored = 0
        self.reused = 0

    def extend_key(self, extra: str | None) -> None:
        """Key the rows on something else they depend on (e.g. the oracles' fingerprints);
        ``None``: that dependency has no revision to key on, so this task is not cached."""
        if extra is None:
            self.cache = None
        else:
            self.prefix += "\0" + extra

    def _key(self, item_id: str) -> str:
        return hashlib.sha256(f"{self.prefix}\0{item_id}".encode()).hexdigest()

    def collect(
        self, item_ids: Sequence[str], score: Callable[[list[int]], list[dict[str, Any]]], *, chunk: int = 256
    ) -> list[dict[str, Any]]:
        """The rows of ``item_ids`` (in that order): cached ones read back, the others scored by
        ``score(positions)`` ``chunk`` at a time and committed after each chunk.

        Under a launcher's processes the chunks are dealt round-robin and each rank scores its
        own, then the rows are gathered on every rank. Whole chunks, not items: a model's batch
        then holds the items it holds in one process, and kernels that block by batch size give
        the same bits. The barrier after the cache read makes every rank see the same missing
        items (no rank has put this call's rows yet)."""
        keys = [self._key(i) for i in item_ids]
        found = self.cache.get_many(keys) if self.cache else {}
        missing = [p for p, key in enumerate(keys) if key not in found]
        self.reused += len(item_ids) - len(missing)
        group = self.group
        group.barrier(f"reading the sample cache of {self.task}")
        chunks = [missing[start : start + chunk] for start in range(0, len(missing), max(1, chunk))]
        own: dict[int, dict[str, Any]] = {}
        for positions in group.share(chunks):  # whole chunks: each batch is the one one process scores
            rows = score(positions)
            if len(rows) != len(positions):
                raise RuntimeError(f"scored {len(rows)} rows for {len(positions)} items")
            own.update(zip(positions, rows))
            if self.cache:
                self.cache.put_many([(keys[p], row) for p, row in zip(positions, rows)])
            self.scored += len(positions)
        if group.size > 1:
            logger.info(
                "%s: process %d of %d scored %d of the %d items to score",
                self.task,
                group.rank,
                group.size,
                len(own),
                len(missing),
            )
        for part in group.gather(own, f"gathering the rows of {self.task}"):
            for position, row in part.items():
                found[keys[position]] = row
        if self.reused:
            logger.info("%d of %d samples from the sample cache", self.reused, len(item_ids))
        return [found[key] for key in keys]


def open_cache(cache_dir: str | Path | None) -> SampleCache:
    from conceptforge.loaders.harness.embeddings import default_cache_dir

    return SampleCache((Path(cache_dir) if cache_dir else default_cache_dir()) / CACHE_FILE)
