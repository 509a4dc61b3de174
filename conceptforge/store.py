"""The item store: per-item outputs written atomically, so a killed run resumes cleanly.

Layout under the store root::

    run.json                      the run's settings; a resume with other settings is refused
    items/<split>/<id>.<name>     the item's files (image.png, ...)
    items/<split>/<id>.json       its metadata, written LAST: its presence means "complete"

Every file goes through temp file + ``os.replace``, so a reader never sees half a file, and an
item whose ``.json`` is missing is simply made again (its seed makes it identical).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from conceptforge.errors import StoreError
from conceptforge.workitems import WorkItem

logger = logging.getLogger(__name__)

RUN_CONFIG_NAME = "run.json"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys and fixed separators: identical values give identical bytes."""
    return (json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


@dataclass
class ItemResult:
    """What a generator returns for one item: named files and JSON-serialisable metadata."""

    files: dict[str, bytes] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StoredItem:
    item_id: str
    split: str
    metadata: dict[str, Any]
    directory: Path

    def file_path(self, name: str) -> Path:
        return self.directory / f"{self.item_id}.{name}"

    def read_file(self, name: str) -> bytes:
        return self.file_path(name).read_bytes()


class ItemStore:
    """A folder of completed work items (see module docstring for the layout)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / ".write-probe"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as error:
            raise StoreError(
                f"cannot write to output directory {self.root}: {error.strerror or error}; "
                "choose a writable --out"
            ) from None

    # -- run settings -------------------------------------------------------------------------
    def bind_config(self, config: Mapping[str, Any]) -> None:
        """Record the run's settings, or check that a resumed run uses the same ones.

        Resuming with different settings would silently mix two datasets in one folder.
        """
        path = self.root / RUN_CONFIG_NAME
        wanted = json.loads(canonical_json(dict(config)))
        if path.exists():
            existing = json.loads(path.read_text(encoding="utf-8"))
            if existing != wanted:
                keys = sorted(
                    key
                    for key in set(existing) | set(wanted)
                    if existing.get(key) != wanted.get(key)
                )
                raise StoreError(
                    f"{self.root} holds a run made with other settings (differs in: "
                    f"{', '.join(keys)}); resume with the same settings or use a new --out"
                )
            return
        atomic_write_bytes(path, canonical_json(wanted))

    def read_config(self) -> dict[str, Any]:
        path = self.root / RUN_CONFIG_NAME
        if not path.exists():
            raise StoreError(f"{self.root} is not an item store (no {RUN_CONFIG_NAME})")
        return json.loads(path.read_text(encoding="utf-8"))

    # -- items --------------------------------------------------------------------------------
    def _split_dir(self, split: str) -> Path:
        return self.root / "items" / split

    def is_complete(self, item: WorkItem) -> bool:
        return (self._split_dir(item.split) / f"{item.item_id}.json").exists()

    def write(self, item: WorkItem, result: ItemResult) -> None:
        directory = self._split_dir(item.split)
        for name, data in sorted(result.files.items()):
            atomic_write_bytes(directory / f"{item.item_id}.{name}", data)
        metadata = {
            "item_id": item.item_id,
            "split": item.split,
            "seed": item.seed,
            "files": sorted(result.files),
            **result.metadata,
        }
        # The metadata file is the completion marker, so it is written last.
        atomic_write_bytes(directory / f"{item.item_id}.json", canonical_json(metadata))

    def splits(self) -> list[str]:
        base = self.root / "items"
        if not base.exists():
            return []
        return sorted(p.name for p in base.iterdir() if p.is_dir())

    def records(self, split: str) -> Iterator[StoredItem]:
        """Completed items of ``split`` sorted by id: the order never depends on who made them."""
        directory = self._split_dir(split)
        if not directory.exists():
            return
        for meta_path in sorted(directory.glob("*.json"), key=lambda p: p.stem):
            metadata = json.loads(meta_path.read_text(encoding="utf-8"))
            yield StoredItem(meta_path.stem, split, metadata, directory)

    def count(self, split: str) -> int:
        directory = self._split_dir(split)
        return len(list(directory.glob("*.json"))) if directory.exists() else 0
