"""The item store: finished work in chunk files, on a local disk or any fsspec URL.

Layout under the store root (``OUT/.work``)::

    owner.json                      "this folder is a conceptforge run" (written on creation)
    made_by.json                    the stage that made the run (:mod:`conceptforge.output`)
    run.json                        the run's settings and chunk plan; created (only if absent)
                                    with the first chunk
    chunks/c000042.parquet          the items of chunk 42 (id, split, seed, metadata, files)
    chunks/c000042.<size>.<sha>.done   completion marker: the chunk's byte size and sha256
    shards/<n>-<i>.json             what shard i of n did last (for ``conceptforge status``)
    assembly.lock / assembled.json  see :mod:`conceptforge.engine.assembly` (assembled.json: each
    published.json                  published file's size and sha256; published.json: ours to replace)

Why chunks: 526,000 SUB images as one file per item is a million files in one folder; object
stores charge per request. A chunk holds many items and is written once, whole; its marker goes
last, so a reader either sees a complete chunk or none. The marker's name carries the chunk's
size and hash, so one directory listing tells which chunks are complete *and intact* (a
truncated chunk file is found without reading it), and assembly checks the hash of every
chunk it reads. Two runs that make one chunk at once (two commands into one folder) each write it
whole with their own marker; when their bytes differ (item metadata that holds a time), the data
file is the later one's and the reader keeps it through its marker (:meth:`ItemStore.read_chunk`).
"""

from __future__ import annotations

import errno
import functools
import hashlib
import io
import json
import logging
import os
import re
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conceptforge.engine.workitems import WorkItem
from conceptforge.errors import ConceptforgeError, StoreError
from conceptforge.serialization import _umask, atomic_write_bytes, canonical_json

logger = logging.getLogger(__name__)

RUN_CONFIG_NAME = "run.json"
OWNER_NAME = "owner.json"
CHUNK_DIR = "chunks"
SHARD_DIR = "shards"
_MARKER = re.compile(r"^c(\d{6,})\.(\d+)\.([0-9a-f]{64})\.done$")


@functools.cache
def _chunk_schema():
    """The chunk files' Arrow schema. pyarrow is imported on first use, not with the package: code
    that never touches a store (the GPU device check, ``benchmarks/gpu.py``) runs without it."""
    import pyarrow as pa

    return pa.schema(
        [
            ("item_id", pa.string()),
            ("split", pa.string()),
            ("seed", pa.int64()),
            ("metadata", pa.string()),
            ("file_names", pa.list_(pa.string())),
            ("file_data", pa.list_(pa.large_binary())),
        ]
    )


#: Errors of the disk (full, over quota, a file too big, read-only), not of the program.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def io_error(error: OSError, action: str, where: str, *, flag: str = "--out") -> ConceptforgeError:
    """One line for an I/O failure (full disk, permissions, network), with what to do."""
    # pyarrow words a full disk as "Error writing bytes to file. Detail: [errno 28] …": the kernel's words are plainer
    reason = os.strerror(error.errno) if error.errno in DISK_ERRNOS else error.strerror
    reason = reason or str(error) or type(error).__name__
    if not flag.startswith("-"):  # a positional argument (assemble OUT): the place is fixed, it must be made fit
        hint = {
            errno.ENOSPC: "free some space, then rerun the same command to resume",
            errno.EDQUOT: "free some quota, then rerun the same command to resume",
            errno.EFBIG: "the file system refused the file size",
            errno.EACCES: "the run folder must be writable (the dataset is written inside it): fix its permissions, then rerun",
            errno.EROFS: "the run folder must be writable (the dataset is written inside it): mount it read-write, then rerun",
        }.get(error.errno or -1, "check the location, then rerun the same command to resume")
        return StoreError(f"cannot {action} {where}: {reason}; {hint}")
    hint = {
        errno.ENOSPC: f"free some space or choose another {flag}, then rerun the same command to resume",
        errno.EDQUOT: f"free some quota or choose another {flag}, then rerun the same command to resume",
        errno.EFBIG: f"the file system refused the file size; choose another {flag}",
        errno.EACCES: f"choose a writable {flag}",
        errno.EROFS: f"choose a writable {flag}",
    }.get(error.errno or -1, "check the output location, then rerun the same command to resume")
    return StoreError(f"cannot {action} {where}: {reason}; {hint}")


# -- where the store lives ----------------------------------------------------------------------
def is_url(location: str | os.PathLike[str]) -> bool:
    return "://" in str(location)


def join(location: str | os.PathLike[str], *parts: str) -> str:
    """Join path parts onto a local path or a URL (``s3://bucket/x`` + ``.work``)."""
    text = str(location)
    if is_url(text):
        return "/".join([text.rstrip("/"), *parts])
    return str(Path(text, *parts))


#: botocore settings for ``s3://`` unless the user configured their own (fsspec's ``s3`` config,
#: e.g. ``FSSPEC_S3_CONFIG_KWARGS``): botocore's defaults (60 s per read, 5 attempts) inside
#: s3fs's own 5 retries made an endpoint that accepts and never answers hang a command for many
#: minutes. With these a mute endpoint fails in about 30 s; s3fs still retries transient errors.
S3_CONFIG = {"connect_timeout": 5, "read_timeout": 5, "retries": {"total_max_attempts": 1}}


def bound_object_store_timeouts() -> None:
    """Fill fsspec's ``s3`` defaults with :data:`S3_CONFIG` where the user set nothing."""
    import fsspec.config

    config = fsspec.config.conf.setdefault("s3", {})
    kwargs = config.get("config_kwargs")
    if kwargs is None:
        config["config_kwargs"] = {key: (dict(v) if isinstance(v, dict) else v) for key, v in S3_CONFIG.items()}
    elif isinstance(kwargs, dict):
        for key, value in S3_CONFIG.items():
            kwargs.setdefault(key, value)


class Location:
    """A folder on some fsspec file system, with the few operations the engine needs.

    Local folders go through :mod:`os` (atomic rename, ``O_EXCL`` create); other file systems
    through fsspec, whose writes of a whole object are atomic on object stores.
    """

    def __init__(self, location: str | os.PathLike[str]) -> None:
        self.url = str(location)
        self.local = not is_url(self.url) or self.url.startswith("file://")
        if self.local:
            self.root = self.url.removeprefix("file://")
            self.fs = None
        else:
            import fsspec

            bound_object_store_timeouts()
            try:
                self.fs, self.root = fsspec.core.url_to_fs(self.url)
            except (ImportError, ValueError) as error:
                raise StoreError(f"cannot open {self.url}: {error}") from None
            self.root = self.root.rstrip("/")

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts]) if not self.local else str(Path(self.root, *parts))

    def __str__(self) -> str:
        return self.url

    def refresh(self) -> None:
        """Forget cached listings: other processes write here too."""
        if self.fs is not None:
            self.fs.invalidate_cache()

    def write(self, name: str, data: bytes) -> None:
        if self.local:
            atomic_write_bytes(self.path(name), data)
        else:
            self.fs.pipe_file(self.path(name), data)

    def create(self, name: str, data: bytes) -> bool:
        """Write ``name`` only if it does not exist yet; True if this call created it."""
        if self.local:
            # Whole, then linked: a reader never sees the file half-written, and link() fails if
            # the name exists (atomic create-if-absent); O_EXCL where hard links are not supported.
            target = Path(self.path(name))
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            try:
                os.fchmod(fd, 0o666 & ~_umask())
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                try:
                    os.link(tmp, target)
                except FileExistsError:
                    return False
                except OSError as error:
                    if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                        raise
                    try:
                        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                    except FileExistsError:
                        return False
                    with os.fdopen(fd, "wb") as handle:
                        handle.write(data)
                return True
            finally:
                Path(tmp).unlink(missing_ok=True)
        try:
            self.fs.pipe_file(self.path(name), data, mode="create")
        except FileExistsError:
            return False
        return True

    def read(self, name: str) -> bytes:
        if self.local:
            return Path(self.path(name)).read_bytes()
        return self.fs.cat_file(self.path(name))

    def exists(self, name: str) -> bool:
        if self.local:
            return Path(self.path(name)).exists()
        self.refresh()
        return self.fs.exists(self.path(name))

    def remove(self, name: str) -> None:
        if self.local:
            Path(self.path(name)).unlink(missing_ok=True)
        else:
            try:
                self.fs.rm_file(self.path(name))
            except FileNotFoundError:
                pass

    def listdir(self, name: str) -> dict[str, int]:
        """File names (not paths) in the folder ``name`` with their sizes; {} if it is absent."""
        if self.local:
            folder = Path(self.path(name))
            if not folder.is_dir():
                return {}
            return dict(_local_sizes(folder))
        self.refresh()
        try:
            entries = self.fs.ls(self.path(name), detail=True)
        except FileNotFoundError:
            return {}
        return {
            entry["name"].rstrip("/").rsplit("/", 1)[-1]: int(entry.get("size") or 0)
            for entry in entries
            if entry.get("type") == "file"
        }

    def mtime(self, name: str) -> float | None:
        try:
            if self.local:
                return os.stat(self.path(name)).st_mtime
            self.refresh()
            modified = self.fs.modified(self.path(name))
            return modified.timestamp()
        except (FileNotFoundError, NotImplementedError):
            return None


# -- results and stored items -------------------------------------------------------------------
@dataclass
class ItemResult:
    """What a stage returns for one item: named files and JSON-serialisable metadata."""

    files: dict[str, bytes] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StoredItem:
    """One completed item read back from its chunk."""

    item_id: str
    split: str
    metadata: dict[str, Any]
    files: Mapping[str, bytes]

    def read_file(self, name: str) -> bytes:
        return self.files[name]


@dataclass(frozen=True)
class ChunkState:
    index: int
    size: int
    sha256: str


def chunk_name(index: int) -> str:
    return f"c{index:06d}"


def encode_chunk(pairs: Sequence[tuple[WorkItem, ItemResult]]) -> bytes:
    """The parquet bytes of one chunk: a pure function of the items and their results."""
    rows = {name: [] for name in _chunk_schema().names}
    for item, result in pairs:
        metadata = {
            "item_id": item.item_id,
            "split": item.split,
            "seed": item.seed,
            "files": sorted(result.files),
            **result.metadata,
        }
        rows["item_id"].append(item.item_id)
        rows["split"].append(item.split)
        rows["seed"].append(int(item.seed))
        rows["metadata"].append(canonical_json(metadata).decode("utf-8"))
        names = sorted(result.files)
        rows["file_names"].append(names)
        rows["file_data"].append([bytes(result.files[name]) for name in names])
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(rows, schema=_chunk_schema())
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="none", write_statistics=False)
    return buffer.getvalue()


def decode_chunk(data: bytes) -> Iterator[StoredItem]:
    # An Arrow buffer, not io.BytesIO: pyarrow 25 reading a Python file object through its dataset
    # API leaves a thread that aborts the process at exit ("terminate called without an active
    # exception", seen in 5 of 8 runs of a plain script).
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(pa.BufferReader(data))
    for row in table.to_pylist():
        yield StoredItem(
            row["item_id"], row["split"], json.loads(row["metadata"]), dict(zip(row["file_names"], row["file_data"]))
        )


class ItemStore:
    """Chunks of completed work items under one root (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True, flag: str = "--out") -> None:
        """``create=False`` opens an existing store read only (``conceptforge status``): nothing
        is created or probed, so a read-only folder or bucket can be inspected."""
        self.location = Location(root)
        self.root = Path(self.location.root) if self.location.local else self.location.url
        self._pending_config: dict[str, Any] | None = None
        self._config_written = False
        self.flag = flag  # the option that named this location, for messages (--out, --work)
        if not create:
            return
        try:
            if self.location.local:
                Path(self.location.root).mkdir(parents=True, exist_ok=True)
                # one probe per process: concurrent openers (three assemblers) must not unlink each other's
                probe = Path(self.location.path(f".write-probe-{os.getpid()}-{threading.get_ident()}"))
                probe.write_bytes(b"")
                probe.unlink(missing_ok=True)
            if not self.location.exists(OWNER_NAME):
                self.location.write(OWNER_NAME, canonical_json({"kind": "conceptforge item store", "format": 2}))
        except OSError as error:
            raise io_error(error, "write to output location", str(root), flag=flag) from None

    def __str__(self) -> str:
        return self.location.url

    # -- run settings -------------------------------------------------------------------------
    def bind_config(self, config: Mapping[str, Any]) -> None:
        """Check the run's settings against a resumed run's; record them with the first chunk.

        Settings are fixed only once work exists: a run that fails before its first item (a
        model that does not load, a bad device) leaves nothing that blocks the corrected rerun.
        """
        wanted = json.loads(canonical_json(dict(config)))
        existing = self.stored_config()
        if existing is not None and existing != wanted:
            differences = _readable(_differences(existing, wanted))
            raise StoreError(
                f"{self.location} holds a run made with other settings (differs in: {', '.join(differences)}); "
                f"resume with the same settings or use a new {self.flag}"
            )
        self._pending_config = wanted
        self._config_written = existing is not None

    @property
    def settings_fixed(self) -> bool:
        """Whether this run's settings are recorded (by this process or an earlier one)."""
        return self._config_written

    def stored_config(self) -> dict[str, Any] | None:
        try:
            data = self.location.read(RUN_CONFIG_NAME)
        except FileNotFoundError:
            return None
        try:
            return json.loads(data)
        except ValueError:
            raise StoreError(f"{self.location}/{RUN_CONFIG_NAME} is damaged; use a new {self.flag}") from None

    def read_config(self) -> dict[str, Any]:
        config = self.stored_config()
        if config is None:
            raise StoreError(f"{self.location} holds no finished work yet (no {RUN_CONFIG_NAME})")
        return config

    def _ensure_config_written(self) -> None:
        """Fix the settings: create ``run.json`` only if absent (``O_EXCL`` locally, a conditional
        put on object stores), so of two runs started together with different settings exactly
        one proceeds; the other finds the winner's record here and stops before writing a chunk."""
        if self._config_written or self._pending_config is None:
            return
        if not self.location.create(RUN_CONFIG_NAME, canonical_json(self._pending_config)):
            self.bind_config(self._pending_config)  # another run fixed them first: same settings, or refused
        self._config_written = True

    # -- chunks -------------------------------------------------------------------------------
    def chunk_states(self) -> dict[int, ChunkState]:
        """Complete, intact chunks by index: one listing, sizes checked against the markers."""
        listing = self.location.listdir(CHUNK_DIR)
        states: dict[int, ChunkState] = {}
        for name in listing:
            match = _MARKER.match(name)
            if not match:
                continue
            index, size, digest = int(match.group(1)), int(match.group(2)), match.group(3)
            if listing.get(f"{chunk_name(index)}.parquet") == size:
                states[index] = ChunkState(index, size, digest)
        return states

    def damaged_chunks(self) -> list[int]:
        """Chunks with a marker whose data file is missing or of another size (e.g. truncated)."""
        listing = self.location.listdir(CHUNK_DIR)
        bad, intact = set(), set()
        for name in listing:
            match = _MARKER.match(name)
            if match:
                index = int(match.group(1))
                same = listing.get(f"{chunk_name(index)}.parquet") == int(match.group(2))
                (intact if same else bad).add(index)
        # a chunk two runs made at once has one marker per writer: the data file matches one of them
        return sorted(bad - intact)

    def drop_chunk(self, index: int) -> None:
        """Remove a chunk's marker(s) so that the chunk is made again."""
        for name in self.location.listdir(CHUNK_DIR):
            match = _MARKER.match(name)
            if match and int(match.group(1)) == index:
                self.location.remove(f"{CHUNK_DIR}/{name}")

    def _marked(self, index: int, size: int, digest: str) -> bool:
        """Whether a completion marker names exactly these bytes of chunk ``index``."""
        return f"{chunk_name(index)}.{size}.{digest}.done" in self.location.listdir(CHUNK_DIR)

    def _forget_marker(self, state: ChunkState) -> None:
        """Remove one stale marker (another run replaced the chunk's bytes with its own, whole)."""
        self.location.remove(f"{CHUNK_DIR}/{chunk_name(state.index)}.{state.size}.{state.sha256}.done")

    def write_chunk(self, index: int, pairs: Sequence[tuple[WorkItem, ItemResult]]) -> ChunkState:
        """Write one chunk whole, then its marker; the first chunk also fixes the settings."""
        data = encode_chunk(pairs)
        digest = hashlib.sha256(data).hexdigest()
        name = chunk_name(index)
        try:
            self._ensure_config_written()
            self.location.write(f"{CHUNK_DIR}/{name}.parquet", data)
            self.location.write(f"{CHUNK_DIR}/{name}.{len(data)}.{digest}.done", b"")
        except OSError as error:
            raise io_error(error, "write a chunk to", str(self.location), flag=self.flag) from None
        return ChunkState(index, len(data), digest)

    def read_chunk(self, state: ChunkState) -> list[StoredItem]:
        """The items of a chunk; a chunk whose bytes no longer match its marker is dropped."""
        try:
            data = self.location.read(f"{CHUNK_DIR}/{chunk_name(state.index)}.parquet")
        except OSError as error:
            raise io_error(error, "read a chunk from", str(self.location)) from None
        digest = hashlib.sha256(data).hexdigest()
        if digest != state.sha256 and self._marked(state.index, len(data), digest):
            # Two runs made this chunk at once (two sweeps into one --out): each wrote whole bytes and
            # its own marker, and items whose metadata holds times differ in bytes. The data file is
            # the later writer's, complete and named by its marker: keep it, forget the other marker.
            self._forget_marker(state)
        elif digest != state.sha256:
            self.drop_chunk(state.index)
            raise StoreError(
                f"chunk {state.index} in {self.location} is damaged (its bytes changed after it was written); "
                "it was marked to be made again: rerun the same command"
            )
        return list(decode_chunk(data))

    def records(self, split: str | None = None) -> Iterator[StoredItem]:
        """Completed items in chunk order (= spec order), optionally of one split only.

        The order never depends on which process made a chunk or when.
        """
        states = self.chunk_states()
        for index in sorted(states):
            for record in self.read_chunk(states[index]):
                if split is None or record.split == split:
                    yield record

    def splits(self) -> list[str]:
        return sorted({record.split for record in self.records()})

    def count(self, split: str | None = None) -> int:
        return sum(1 for _ in self.records(split))

    # -- shard reports (for `conceptforge status`) ---------------------------------------------
    def write_shard_report(self, num_shards: int, shard_index: int, report: Mapping[str, Any]) -> None:
        try:
            self.location.write(f"{SHARD_DIR}/{num_shards}-{shard_index}.json", canonical_json(dict(report)))
        except OSError as error:
            raise io_error(error, "write to", str(self.location), flag=self.flag) from None

    def shard_reports(self) -> dict[tuple[int, int], dict[str, Any]]:
        reports = {}
        for name in self.location.listdir(SHARD_DIR):
            match = re.match(r"^(\d+)-(\d+)\.json$", name)
            if match:
                try:
                    reports[(int(match.group(1)), int(match.group(2)))] = json.loads(
                        self.location.read(f"{SHARD_DIR}/{name}")
                    )
                except (OSError, ValueError):
                    continue
        return reports


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the settings that differ (``learner.model_id``, not just ``learner``)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            path = f"{prefix}{key}"
            if key not in old or key not in new:
                out.append(path)
            elif old[key] != new[key]:
                out.extend(_differences(old[key], new[key], path + "."))
        return out
    return [prefix.rstrip(".") or "settings"]


def _readable(paths: list[str]) -> list[str]:
    """Name settings as the user knows them: ``steps``, ``learner.model_id``, ``--chunk-size``."""
    out: list[str] = []
    if any(not path.startswith("assembly.") for path in paths):
        # the settings say it; the assembly arguments derived from them would only repeat it
        paths = [path for path in paths if not path.startswith("assembly.")]
    for path in paths:
        if path in {"plan.chunks", "plan.chunk_items"} and "plan.chunk_size" in paths:
            continue
        if path in {"plan.chunks", "plan.chunk_items", "plan.items", "plan.fingerprint"}:
            name = "the items (the spec selects other work)"
        elif path == "plan.chunk_size":
            name = "--chunk-size"
        else:
            name = path.removeprefix("settings.").removeprefix("assembly.")
        if name not in out:
            out.append(name)
    return out


def is_store(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` is (the root of) an item store made by this project.

    An object store that cannot be reached (no answer, no credentials) raises: "not a run" would
    send the user looking for the wrong mistake.
    """
    where = Location(location)
    try:
        return where.exists(OWNER_NAME)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return False
    except OSError:
        if where.local:
            return False
        raise


def _local_sizes(folder: Path) -> Iterator[tuple[str, int]]:
    """(name, size) of the files in ``folder``. Other processes write temp files here and rename
    them meanwhile: a name ``scandir`` listed may be gone by its ``stat``, and is skipped (two
    shards resumed together failed on that race)."""
    for entry in os.scandir(folder):
        try:
            if entry.is_file():
                yield entry.name, entry.stat().st_size
        except FileNotFoundError:
            continue
