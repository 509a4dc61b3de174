"""Write a dataset directory in Hugging Face Hub layout, deterministically and atomically.

Layout (what ``datasets.load_dataset(DIR)`` and, once published, ``load_dataset("org/name")``
read identically)::

    README.md                                  card with YAML ``configs`` + ``dataset_info``
    grid.png                                   sample grid shown by the card
    data/<split>-NNNNN-of-NNNNN.parquet        rows, images embedded as bytes (Image feature)

Why write parquet ourselves instead of ``Dataset.to_parquet``: rows are streamed from the item
store in id order, so memory stays flat in the dataset size, and the bytes depend only on the
rows (no cache paths, no fingerprints), so a resumed run ends byte-identical to a clean one.
The README is written last: a directory without it never looks complete.
"""

from __future__ import annotations

import logging
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features

from conceptforge.errors import ConceptforgeError
from conceptforge.store import atomic_write_bytes

logger = logging.getLogger(__name__)

ROW_GROUP_SIZE = 100  # what `datasets` uses for image datasets: cheap random access
DEFAULT_MAX_SHARD_SIZE = 500 * 1024 * 1024
CARD_NAME = "README.md"
GRID_NAME = "grid.png"
DATA_DIR = "data"
STAGING_DIR = ".staging"
_SHARD_NAME = re.compile(r"(?P<split>.+)-(?P<index>\d{5})-of-(?P<total>\d{5})\.parquet")


def shard_name(split: str, index: int, total: int) -> str:
    """``<split>-NNNNN-of-NNNNN.parquet``: the Hub's data-file name, which ``load_dataset`` maps to a split."""
    return f"{split}-{index:05d}-of-{total:05d}.parquet"


def shard_split(name: str) -> str | None:
    """The split a data file's name says it holds (split names may contain dashes); None if not a shard."""
    match = _SHARD_NAME.fullmatch(name)
    return match["split"] if match else None


def split_files(data_dir: str | Path, split: str) -> list[Path]:
    """The shards of ``split`` in ``data_dir``, in order (not those of a split whose name starts alike)."""
    return sorted(p for p in Path(data_dir).glob("*.parquet") if shard_split(p.name) == split)


def split_names(data_dir: str | Path) -> list[str]:
    """The splits that ``data_dir`` holds shards of, sorted."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        return []
    return sorted({split for p in data_dir.glob("*.parquet") if (split := shard_split(p.name)) is not None})


def parse_size(size: int | str) -> int:
    """'500MB' -> bytes (powers of 1024 for KiB/MiB/GiB, 1000 for KB/MB/GB, like the Hub)."""
    if isinstance(size, int):
        return size
    text = size.strip().upper()
    units = {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "KB": 10**3, "MB": 10**6, "GB": 10**9, "B": 1}
    for unit, factor in units.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


@dataclass
class SplitStats:
    name: str
    num_examples: int = 0
    num_bytes: int = 0
    files: list[str] = field(default_factory=list)


def _encoded_size(row: Mapping[str, object]) -> int:
    size = 0
    for value in row.values():
        if isinstance(value, dict) and isinstance(value.get("bytes"), (bytes, bytearray)):
            size += len(value["bytes"])
        elif isinstance(value, (bytes, bytearray, str)):
            size += len(value)
        else:
            size += 8
    return size


def write_parquet_split(
    data_dir: Path,
    split: str,
    rows: Iterable[Mapping[str, object]],
    features: Features,
    *,
    max_shard_size: int | str = DEFAULT_MAX_SHARD_SIZE,
) -> SplitStats:
    """Stream ``rows`` into ``data_dir/<split>-NNNNN-of-NNNNN.parquet`` shards.

    A new shard starts once the current one holds ``max_shard_size`` bytes of encoded rows, so
    shard boundaries depend on the data alone.
    """
    limit = parse_size(max_shard_size)
    schema = features.arrow_schema  # carries the `huggingface` features metadata
    data_dir.mkdir(parents=True, exist_ok=True)
    stats = SplitStats(split)
    temp_paths: list[Path] = []
    writer: pq.ParquetWriter | None = None
    shard_bytes = 0
    batch: list[dict] = []

    def flush() -> None:
        nonlocal batch
        if batch and writer is not None:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema), row_group_size=ROW_GROUP_SIZE)
        batch = []

    try:
        for row in rows:
            encoded = features.encode_example(dict(row))
            if writer is None or shard_bytes >= limit:
                flush()
                if writer is not None:
                    writer.close()
                temp_paths.append(data_dir / f".{split}-{len(temp_paths):05d}.parquet.tmp")
                writer = pq.ParquetWriter(temp_paths[-1], schema)
                shard_bytes = 0
            batch.append(encoded)
            size = _encoded_size(encoded)
            shard_bytes += size
            stats.num_bytes += size
            stats.num_examples += 1
            if len(batch) >= ROW_GROUP_SIZE:
                flush()
        if writer is None:  # an empty split still gets one (empty) shard with the schema
            temp_paths.append(data_dir / f".{split}-00000.parquet.tmp")
            writer = pq.ParquetWriter(temp_paths[-1], schema)
        flush()
        writer.close()
    except BaseException:
        if writer is not None:
            writer.close()
        for path in temp_paths:
            path.unlink(missing_ok=True)
        raise
    total = len(temp_paths)
    for index, path in enumerate(temp_paths):
        final = data_dir / shard_name(split, index, total)
        path.replace(final)
        stats.files.append(f"{DATA_DIR}/{final.name}")
    return stats


def assemble_dataset_dir(
    out_dir: str | Path,
    *,
    splits: Mapping[str, Callable[[], Iterable[Mapping[str, object]]]],
    features: Features,
    render_card: Callable[[list[SplitStats]], str],
    grid_png: bytes | None = None,
    max_shard_size: int | str = DEFAULT_MAX_SHARD_SIZE,
) -> list[SplitStats]:
    """Write ``out_dir`` as a complete dataset directory.

    ``splits`` maps split names (in card order) to callables yielding rows; ``render_card``
    receives the split statistics and returns the README text. Data is staged in
    ``out_dir/.staging`` and swapped in; the README goes last.
    """
    out_dir = Path(out_dir)
    staging = out_dir / STAGING_DIR
    try:
        if staging.exists():
            shutil.rmtree(staging)
        (staging / DATA_DIR).mkdir(parents=True)
    except OSError as error:
        raise ConceptforgeError(f"cannot write dataset to {out_dir}: {error.strerror or error}") from None
    all_stats = []
    for split, make_rows in splits.items():
        stats = write_parquet_split(staging / DATA_DIR, split, make_rows(), features, max_shard_size=max_shard_size)
        logger.info("split %s: %d rows in %d shard(s)", split, stats.num_examples, len(stats.files))
        all_stats.append(stats)
    card_text = render_card(all_stats)
    # Swap in: first make the directory look incomplete, then replace the data, then finish.
    (out_dir / CARD_NAME).unlink(missing_ok=True)
    if (out_dir / DATA_DIR).exists():
        shutil.rmtree(out_dir / DATA_DIR)
    (staging / DATA_DIR).replace(out_dir / DATA_DIR)
    shutil.rmtree(staging, ignore_errors=True)
    if grid_png is not None:
        atomic_write_bytes(out_dir / GRID_NAME, grid_png)
    atomic_write_bytes(out_dir / CARD_NAME, card_text.encode("utf-8"))
    return all_stats


def is_complete_dataset_dir(path: str | Path) -> bool:
    path = Path(path)
    return (path / CARD_NAME).exists() and any((path / DATA_DIR).glob("*.parquet"))
