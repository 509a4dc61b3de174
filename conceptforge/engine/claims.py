"""Chunk claims: two processes on one ``--out`` do not both make the same chunk.

Why: two sweeps started into one folder (two terminals, a job resubmitted while the first still
ran) each computed every (model, task) item, hours of GPU time twice (issue 45.8). A process
about to make a chunk first creates ``claims/cNNNNNN.json`` (create-if-absent: one of two racing
processes gets it); another process skips a chunk with a live claim and goes on to the next. The
holder refreshes its claim while it works and removes it when the chunk is written.

A claim whose process is gone is taken over: at once when the holder ran on this host (its pid
is gone or reused) or its Slurm job is no longer queued, else when it was not refreshed for
:data:`STALE_AFTER` seconds (a node that died). Results never depend on claims: two processes
that make one chunk anyway (a takeover race) write identical chunks, as before claims existed.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import threading
import time
import uuid
from typing import Any

from conceptforge.engine.assembly import DEFAULT_STALE_AFTER, HEARTBEAT
from conceptforge.engine.launchers import scheduler_record
from conceptforge.engine.processes import holder_alive, this_process
from conceptforge.engine.store import ItemStore, chunk_name
from conceptforge.serialization import canonical_json

logger = logging.getLogger(__name__)

CLAIM_DIR = "claims"
#: A claim not refreshed for this long (its holder on another host) is taken over; refreshed every
#: HEARTBEAT seconds. The assembly lock's numbers: a claim is a lock on one chunk.
STALE_AFTER = DEFAULT_STALE_AFTER


def claim_name(index: int) -> str:
    return f"{CLAIM_DIR}/{chunk_name(index)}.json"


def claim_holder(store: ItemStore, index: int) -> dict[str, Any] | None:
    """The record of chunk ``index``'s claim (host, pid, start, token, slurm), or None."""
    try:
        record = json.loads(store.location.read(claim_name(index)))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _slurm_job_gone(record: dict[str, Any]) -> bool:
    """True when the record's Slurm job is known to squeue no more (killed, cancelled, failed)."""
    job = (record.get("slurm") or {}).get("job")
    if not job or not shutil.which("squeue"):
        return False
    try:
        result = subprocess.run(
            ["squeue", "-h", "-o", "%i", "-j", str(job)], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return False
    if result.returncode != 0 and "Invalid job id" not in result.stderr:
        return False
    return str(job) not in {line.strip() for line in result.stdout.splitlines()}


def holder_gone(store: ItemStore, index: int, record: dict[str, Any], *, stale_after: float = STALE_AFTER) -> bool:
    """Whether the process that claimed chunk ``index`` is gone (its claim may be taken over)."""
    mine = this_process()
    if record.get("pid") == mine["pid"] and record.get("host") == mine["host"]:
        return True  # left by this very process (an earlier run_stage here that raised)
    alive = holder_alive(record)
    if alive is not None:
        return not alive
    if _slurm_job_gone(record):
        return True
    modified = store.location.mtime(claim_name(index))
    return modified is not None and time.time() - modified > stale_after


class ChunkClaim:
    """This process's claim on one chunk: refreshed every :data:`~conceptforge.engine.assembly.HEARTBEAT` s until released."""

    def __init__(self, store: ItemStore, index: int, payload: bytes, token: str) -> None:
        self.store, self.index, self.payload, self.token = store, index, payload, token
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._refresh, daemon=True, name=f"claim-{index}")
        self._beat.start()

    def _refresh(self) -> None:
        while not self._stop.wait(HEARTBEAT):
            try:
                self.store.location.write(claim_name(self.index), self.payload)
            except OSError:  # the next beat tries again
                logger.debug("could not refresh the claim of chunk %d", self.index, exc_info=True)

    def release(self) -> None:
        """Stop refreshing and remove the claim (only if it is still ours)."""
        self._stop.set()
        self._beat.join(timeout=5)
        record = claim_holder(self.store, self.index) or {}
        if record.get("token") == self.token:
            try:
                self.store.location.remove(claim_name(self.index))
            except OSError:  # a claim left behind is taken over: its holder is gone
                logger.debug("could not remove the claim of chunk %d", self.index, exc_info=True)


def claim_chunk(store: ItemStore, index: int, *, stale_after: float = STALE_AFTER) -> ChunkClaim | None:
    """Claim chunk ``index`` for this process; None when a live process holds it."""
    token = uuid.uuid4().hex
    payload = canonical_json({"token": token, **this_process(), **scheduler_record(), "time": time.time()})
    for _ in range(2):
        if store.location.create(claim_name(index), payload):
            record = claim_holder(store, index) or {}
            if record.get("token") == token:  # a concurrent takeover may have replaced ours
                return ChunkClaim(store, index, payload, token)
            return None
        record = claim_holder(store, index)
        if record is None:  # released between our create and our read: try again
            continue
        if not holder_gone(store, index, record, stale_after=stale_after):
            return None
        logger.info(
            "taking over chunk %d from process %s on %s, which is gone", index, record.get("pid"), record.get("host")
        )
        store.location.remove(claim_name(index))
    return None


def claims_held_elsewhere(store: ItemStore, indices: list[int]) -> dict[int, dict[str, Any]]:
    """Of ``indices``, the chunks a live other process holds (for the report and ``status``)."""
    held = {}
    for index in indices:
        record = claim_holder(store, index)
        if record is not None and not holder_gone(store, index, record):
            held[index] = record
    return held
