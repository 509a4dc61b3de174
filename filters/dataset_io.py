"""Stream rows of a local Hub-layout dataset directory (``data/<split>-*.parquet``).

Why not ``datasets.load_dataset``: a SUB candidates directory holds 500 images per pair for
~1,500 pairs; the filter streams it batch by batch (flat memory, no cache copy) and reads the
exact ``datasets`` features stored in the parquet schema, so the output keeps the input's types.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from datasets import Features
from PIL import Image

from conceptforge.cards.dataset_dir import DATA_DIR, split_files, split_names
from conceptforge.errors import ConceptforgeError, DataFormatError, DataNotFoundError, one_line


class _CountingFile(io.FileIO):
    """A file that counts the bytes read through it (what a filter shard really reads)."""

    def __init__(self, path: Path, counter: list[int]) -> None:
        super().__init__(path, "rb")
        self.counter = counter

    def read(self, size: int = -1) -> bytes:
        data = super().read(size)
        self.counter[0] += len(data)
        return data

    def readinto(self, buffer) -> int:
        count = super().readinto(buffer)
        self.counter[0] += count or 0
        return count


@contextlib.contextmanager
def _reading(path: Path, kind: str) -> Iterator[None]:
    """A damaged or unreadable parquet file of the input as one :class:`DataFormatError` line.

    Why here: these reads happen inside the engine's batches, where any other exception counts as
    a bad *item*, is retried three times per item and ends in a traceback; a damaged input file
    is the run's problem, and no retry can fix it.
    """
    try:
        yield
    except ConceptforgeError:
        raise
    except (OSError, ValueError) as error:  # pyarrow: ArrowInvalid (ValueError), ArrowIOError/OSError
        raise DataFormatError(
            f"{path} ({kind}) is damaged or unreadable ({type(error).__name__}: {one_line(error, limit=200)}); "
            "restore it or make the dataset again"
        ) from None


@dataclass
class LocalSplit:
    root: Path
    split: str
    files: list[Path]
    features: Features
    bytes_read: list[int] = field(default_factory=lambda: [0])
    kind: str = "dataset"

    def row_groups(self) -> list[tuple[int, int, int]]:
        """(file index, row group index in that file, rows) of every row group, in order."""
        groups = []
        for file_index, path in enumerate(self.files):
            with _reading(path, self.kind):
                metadata = pq.ParquetFile(path).metadata
            groups += [(file_index, rg, metadata.row_group(rg).num_rows) for rg in range(metadata.num_row_groups)]
        return groups

    def read_row_group(
        self, file_index: int, row_group: int, columns: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """The rows of one row group, reading only its bytes (counted in ``bytes_read``)."""
        path = self.files[file_index]
        with _reading(path, self.kind), _CountingFile(path, self.bytes_read) as handle:
            table = pq.ParquetFile(handle).read_row_group(row_group, columns=list(columns) if columns else None)
            return table.to_pylist()

    @property
    def columns(self) -> list[str]:
        return list(self.features)

    def num_rows(self) -> int:
        total = 0
        for path in self.files:
            with _reading(path, self.kind):
                total += pq.ParquetFile(path).metadata.num_rows
        return total

    def iter_rows(self, columns: Sequence[str] | None = None, *, batch_size: int = 64) -> Iterator[dict[str, Any]]:
        for path in self.files:
            with _reading(path, self.kind):
                parquet = pq.ParquetFile(path)
                batches = parquet.iter_batches(batch_size=batch_size, columns=list(columns) if columns else None)
                for batch in batches:
                    rows = batch.to_pylist()
                    yield from rows

    def column(self, name: str) -> list[Any]:
        return [row[name] for row in self.iter_rows([name], batch_size=4096)]


def open_split(root: str | Path, split: str, *, required: Sequence[str] = (), kind: str = "dataset") -> LocalSplit:
    """Open ``root/data/<split>-*.parquet``; a clear error names what is missing."""
    root = Path(root)
    if not root.is_dir():
        raise DataNotFoundError(f"{kind} directory {root} does not exist")
    files = split_files(root / DATA_DIR, split)
    if not files:
        found = split_names(root / DATA_DIR)
        hint = f" (it has split(s): {', '.join(found)})" if found else ""
        raise DataNotFoundError(f"{root} is not a {kind}: no data/{split}-*.parquet{hint}")
    try:
        schema = pq.read_schema(files[0])
    except Exception as error:  # pyarrow raises several types for a damaged file
        raise DataFormatError(f"cannot read {files[0]}: {error}") from None
    features = Features.from_arrow_schema(schema)
    missing = [name for name in required if name not in features]
    if missing:
        raise DataFormatError(f"{root} is not a {kind}: split {split!r} lacks column(s) {', '.join(missing)}")
    return LocalSplit(root, split, files, features, kind=kind)


def decode_image(value: Any) -> Image.Image:
    """A ``datasets`` Image cell (``{"bytes", "path"}``) as a loaded RGB PIL image.

    Raises ``ValueError`` for an unreadable image, so callers can count and skip it.
    """
    data = value.get("bytes") if isinstance(value, dict) else None
    if not data:
        raise ValueError("no image bytes")
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
        return image.convert("RGB")
    except Exception as error:  # PIL raises many types for damaged data
        # without object addresses ("<_io.BytesIO object at 0x7f…>"): the message is stored, and a
        # rerun must store the same bytes
        text = re.sub(r" (object )?at 0x[0-9a-fA-F]+", "", str(error))
        raise ValueError(f"unreadable image: {type(error).__name__}: {text}") from None
