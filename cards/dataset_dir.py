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

import itertools
import logging
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features, LargeList, List, Value
from datasets import Image as ImageFeature
from datasets.features.features import encode_nested_example

from conceptforge.engine.store import DISK_ERRNOS, io_error
from conceptforge.errors import ConceptforgeError, DataFormatError, StoreError
from conceptforge.output import CARD_NAME, DATA_DIR, FOLDER_MARKER, SHARD_NAME, claim_folder, marker_bytes, owned_files
from conceptforge.serialization import atomic_write_bytes
from conceptforge.staging import make_staging, remove_stale

#: Every conceptforge dataset row's stable work-item id (what verify, diff and the row lists key on).
ID_COLUMN = "item_id"

logger = logging.getLogger(__name__)

ROW_GROUP_SIZE = 100  # what `datasets` uses for image datasets: cheap random access
DEFAULT_MAX_SHARD_SIZE = 500 * 1024 * 1024
GRID_NAME = "grid.png"
SCENES_DIR = "scenes"  # side files (CLEVR scene JSON); never matched by a config's data_files
STAGING_DIR = ".staging"
_SHARD_NAME = SHARD_NAME  # defined once, in the output guard (which tells a dataset folder by it)


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
    config: str = "default"  # the Hub config (subset) this split belongs to


def _parquet_writer_options() -> dict[str, object]:
    """Page indexes and content-defined chunking where the installed pyarrow has them.

    Content-defined chunking cuts data pages at content-determined boundaries, so a new version
    of a dataset changes only the pages around changed rows and the Hub's chunk-level
    deduplication re-uploads only those; the page index lets readers skip pages. Both keep the
    bytes a pure function of the rows (checked by the rerun tests).
    """
    options: dict[str, object] = {}
    schema = pa.schema([("x", pa.int64())])
    for name in ("write_page_index", "use_content_defined_chunking"):
        try:  # feature-detect on an in-memory file: older pyarrow raises TypeError on the keyword
            pq.ParquetWriter(pa.BufferOutputStream(), schema, **{name: True}).close()
        except TypeError:
            logger.debug("pyarrow %s has no %s; writing without it", pa.__version__, name)
            continue
        options[name] = True
    return options


PARQUET_OPTIONS = _parquet_writer_options()


def _value_size(value: object) -> int:
    """Bytes a value adds to a shard, for shard boundaries (image bytes and strings count fully)."""
    if isinstance(value, dict) and isinstance(value.get("bytes"), (bytes, bytearray)):
        return len(value["bytes"])
    if isinstance(value, (bytes, bytearray, str)):
        return len(value)
    return 8


def _encoded_size(row: Mapping[str, object]) -> int:
    return sum(_value_size(value) for value in row.values())


def _column_encoder(feature: object) -> Callable[[list], list] | None:
    """How one column's Python values become Arrow-ready values; None: pyarrow converts them as they are.

    Plain values (and lists or dicts of them) need no encoding: ``pa.Table.from_pydict`` converts
    and type-checks them in C. Images given as ``{"bytes": ..., "path": ...}`` (what every
    generator yields) are kept as they are, bytes embedded; anything else goes through the
    feature's own ``encode_example``, value by value.
    """
    if _is_plain(feature):
        return None
    if isinstance(feature, ImageFeature):

        def encode_images(values: list) -> list:
            return [
                {"bytes": v["bytes"], "path": v.get("path")}
                if isinstance(v, dict) and isinstance(v.get("bytes"), (bytes, bytearray))
                else feature.encode_example(v)
                for v in values
            ]

        return encode_images
    return lambda values: [encode_nested_example(feature, v) for v in values]


def _is_plain(feature: object) -> bool:
    if isinstance(feature, Value):
        return True
    if isinstance(feature, (List, LargeList)):
        return _is_plain(feature.feature)
    if isinstance(feature, dict):
        return all(_is_plain(f) for f in feature.values())
    return False


def _encode_batch(
    rows: list[Mapping[str, object]], features: Features, encoders: dict, schema: pa.Schema
) -> tuple[pa.Table, list[int]]:
    """Encode a batch of rows column by column; returns the Arrow table and each row's size.

    Why by column: ``Features.encode_example`` walks every value of every row through Python
    (casts, recursion, a file-system check per image path) and dominated assembly time. A batch
    that pyarrow refuses (a value of the wrong type) is encoded row by row the ``datasets`` way,
    so its errors and conversions are exactly those of ``datasets``.
    """
    try:
        columns = {}
        for name in features:
            values = [row[name] for row in rows]
            encoder = encoders[name]
            columns[name] = values if encoder is None else encoder(values)
        table = pa.Table.from_pydict(columns, schema=schema)
        sizes = [sum(parts) for parts in zip(*([_value_size(v) for v in column] for column in columns.values()))]
    except (KeyError, TypeError, ValueError, OverflowError, pa.ArrowException):
        encoded = [features.encode_example(dict(row)) for row in rows]
        table = pa.Table.from_pylist(encoded, schema=schema)
        sizes = [_encoded_size(row) for row in encoded]
    return table, sizes


def _batches(rows: Iterable[Mapping[str, object]], size: int) -> Iterator[list[Mapping[str, object]]]:
    iterator = iter(rows)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def write_parquet_split(
    data_dir: Path,
    split: str,
    rows: Iterable[Mapping[str, object]],
    features: Features,
    *,
    max_shard_size: int | str = DEFAULT_MAX_SHARD_SIZE,
    config: str = "default",
    path_prefix: str = DATA_DIR,
) -> SplitStats:
    """Stream ``rows`` into ``data_dir/<split>-NNNNN-of-NNNNN.parquet`` shards.

    A new shard starts once the current one holds ``max_shard_size`` bytes of encoded rows, so
    shard boundaries depend on the data alone. Rows are read and encoded ``ROW_GROUP_SIZE`` at a
    time, so memory stays flat in the number of rows.
    """
    limit = parse_size(max_shard_size)
    schema = features.arrow_schema  # carries the `huggingface` features metadata
    encoders = {name: _column_encoder(feature) for name, feature in features.items()}
    data_dir.mkdir(parents=True, exist_ok=True)
    stats = SplitStats(split, config=config)
    temp_paths: list[Path] = []
    writer: pq.ParquetWriter | None = None
    shard_bytes = 0

    def new_shard() -> pq.ParquetWriter:
        temp_paths.append(data_dir / f".{split}-{len(temp_paths):05d}.parquet.tmp")
        return pq.ParquetWriter(temp_paths[-1], schema, **PARQUET_OPTIONS)

    try:
        for batch in _batches(rows, ROW_GROUP_SIZE):
            table, sizes = _encode_batch(batch, features, encoders, schema)
            start = 0
            for index, size in enumerate(sizes):
                if writer is None or shard_bytes >= limit:
                    if writer is not None:
                        if index > start:
                            writer.write_table(table.slice(start, index - start), row_group_size=ROW_GROUP_SIZE)
                        writer.close()
                    start = index
                    writer = new_shard()
                    shard_bytes = 0
                shard_bytes += size
                stats.num_bytes += size
                stats.num_examples += 1
            writer.write_table(table.slice(start), row_group_size=ROW_GROUP_SIZE)
        if writer is None:  # an empty split still gets one (empty) shard with the schema
            writer = new_shard()
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
        stats.files.append(f"{path_prefix}/{final.name}")
    return stats


def assemble_dataset_dir(
    out_dir: str | Path,
    *,
    splits: Mapping[str, Callable[[], Iterable[Mapping[str, object]]]],
    features: Features,
    render_card: Callable[[list[SplitStats]], str],
    grid_png: bytes | None = None,
    max_shard_size: int | str = DEFAULT_MAX_SHARD_SIZE,
    made_by: str | None = None,
    flag: str = "--out",
) -> list[SplitStats]:
    """Write ``out_dir`` as a complete dataset directory.

    ``splits`` maps split names (in card order) to callables yielding rows; ``render_card``
    receives the split statistics and returns the README text. Data is staged in a hidden
    folder beside the data and swapped in; the README goes last.

    ``made_by`` (a user's folder, e.g. ``annotate --apply``): the folder must be absent, empty or
    marked as written by ``made_by`` (:func:`conceptforge.output.claim_folder`); only the files its
    marker lists are replaced or removed, and the marker is rewritten last. Without it the folder
    is a fresh staging folder of the engine (which publishes it with the same rule).
    """
    out_dir = Path(out_dir)
    owned = None
    if made_by is not None:
        claim_folder(out_dir, made_by=made_by, flag=flag)
        owned = set(owned_files(out_dir))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        remove_stale(out_dir, STAGING_DIR + "-")  # left by a killed run (kill -9, a full disk)
        staging = make_staging(out_dir, STAGING_DIR + "-")
        (staging / DATA_DIR).mkdir(parents=True)
    except OSError as error:
        raise StoreError(f"cannot write dataset to {out_dir}: {error.strerror or error}") from None
    try:
        return _stage_and_swap(
            out_dir, staging, splits, features, render_card, grid_png, max_shard_size, owned, made_by
        )
    except OSError as error:
        if error.errno in DISK_ERRNOS:  # a full disk while writing parquet: one line naming the folder
            raise io_error(error, "write the dataset to", str(out_dir), flag=flag) from None
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _stage_and_swap(
    out_dir: Path,
    staging: Path,
    splits,
    features,
    render_card,
    grid_png,
    max_shard_size,
    owned: set[str] | None,
    made_by: str | None,
) -> list[SplitStats]:
    all_stats = []
    for split, make_rows in splits.items():
        stats = write_parquet_split(staging / DATA_DIR, split, make_rows(), features, max_shard_size=max_shard_size)
        logger.info("split %s: %d rows in %d shard(s)", split, stats.num_examples, len(stats.files))
        all_stats.append(stats)
    all_stats = drop_empty_splits(all_stats, staging / DATA_DIR)
    card_text = render_card(all_stats)
    new_files = [f"{DATA_DIR}/{p.name}" for p in sorted((staging / DATA_DIR).iterdir())] + [CARD_NAME]
    new_files += [GRID_NAME] if grid_png is not None else []
    if owned is not None:
        foreign = [name for name in new_files if name not in owned and (out_dir / name).exists()]
        if foreign:
            raise StoreError(
                f"{out_dir} holds {', '.join(foreign[:3])}, which conceptforge did not write; move it away "
                "and rerun (nothing was replaced)"
            )
    # Swap in: first make the directory look incomplete, then replace the data, then finish.
    (out_dir / CARD_NAME).unlink(missing_ok=True)
    if made_by is not None:
        # Claimed before the first file moves in: a run killed (or out of disk) half-way leaves a
        # folder the rerun recognises as its own, with every file it may have placed listed.
        atomic_write_bytes(out_dir / FOLDER_MARKER, marker_bytes(made_by, set(new_files) | (owned or set())))
    if owned is None:
        if (out_dir / DATA_DIR).exists():
            shutil.rmtree(out_dir / DATA_DIR)
        (staging / DATA_DIR).replace(out_dir / DATA_DIR)
    else:  # only our own files go; a user's file beside them stays
        for name in sorted(owned - set(new_files)):
            (out_dir / name).unlink(missing_ok=True)
        (out_dir / DATA_DIR).mkdir(exist_ok=True)
        for path in sorted((staging / DATA_DIR).iterdir()):
            path.replace(out_dir / DATA_DIR / path.name)
    if grid_png is not None:
        atomic_write_bytes(out_dir / GRID_NAME, grid_png)
    atomic_write_bytes(out_dir / CARD_NAME, card_text.encode("utf-8"))
    if made_by is not None:
        atomic_write_bytes(out_dir / FOLDER_MARKER, marker_bytes(made_by, new_files))
    return all_stats


def drop_empty_splits(stats: list[SplitStats], data_dir: Path, *, config: str | None = None) -> list[SplitStats]:
    """Leave out splits without rows: ``load_dataset`` refuses a dataset with an empty split (a
    ConceptBed spec without captions has no compositions), so such a split is neither written nor
    named by the card. Nothing at all to write is refused in one line.
    """
    where = f"config {config}: " if config else ""
    kept = [split for split in stats if split.num_examples > 0]
    for split in stats:
        if split.num_examples == 0:
            for name in split.files:
                (data_dir / Path(name).name).unlink(missing_ok=True)
            logger.warning(
                "%ssplit %s has no rows: left out of the dataset (load_dataset refuses an empty split)",
                where,
                split.name,
            )
    if not kept:
        raise DataFormatError(
            f"{where}every split is empty ({', '.join(s.name for s in stats) or 'none'}): there is no dataset to write"
        )
    return kept


def is_complete_dataset_dir(path: str | Path) -> bool:
    path = Path(path)
    return (path / CARD_NAME).exists() and any((path / DATA_DIR).glob("*.parquet"))


def assemble_config_dir(
    out_dir: str | Path,
    *,
    config: str,
    splits: Mapping[str, Callable[[], Iterable[Mapping[str, object]]]],
    features: Features,
    side_files: Mapping[str, bytes] | None = None,
    max_shard_size: int | str = DEFAULT_MAX_SHARD_SIZE,
) -> list[SplitStats]:
    """Write one config of a multi-config repo: ``data/<config>/`` shards and, if given,
    ``scenes/<config>/<name>`` side files. Staged and swapped in like :func:`assemble_dataset_dir`;
    the caller writes the repo card afterwards (:func:`write_card_and_grid`)."""
    out_dir = Path(out_dir)
    staging = out_dir / STAGING_DIR / config
    try:
        if staging.exists():
            shutil.rmtree(staging)
        (staging / DATA_DIR).mkdir(parents=True)
    except OSError as error:
        raise ConceptforgeError(f"cannot write dataset to {out_dir}: {error.strerror or error}") from None
    prefix = f"{DATA_DIR}/{config}"
    all_stats = []
    for split, make_rows in splits.items():
        stats = write_parquet_split(
            staging / DATA_DIR,
            split,
            make_rows(),
            features,
            max_shard_size=max_shard_size,
            config=config,
            path_prefix=prefix,
        )
        logger.info("config %s split %s: %d rows in %d shard(s)", config, split, stats.num_examples, len(stats.files))
        all_stats.append(stats)
    all_stats = drop_empty_splits(all_stats, staging / DATA_DIR, config=config)
    (out_dir / CARD_NAME).unlink(missing_ok=True)  # the repo looks incomplete until the card is rewritten
    for folder, staged in ((out_dir / DATA_DIR / config, staging / DATA_DIR), (out_dir / SCENES_DIR / config, None)):
        if folder.exists():
            shutil.rmtree(folder)
        if staged is not None:
            folder.parent.mkdir(parents=True, exist_ok=True)
            staged.replace(folder)
    for name, content in (side_files or {}).items():
        atomic_write_bytes(out_dir / SCENES_DIR / config / name, content)
    shutil.rmtree(out_dir / STAGING_DIR, ignore_errors=True)
    return all_stats


def write_card_and_grid(out_dir: str | Path, card_text: str, grid_png: bytes | None) -> None:
    """Grid first, README last: a folder without README never looks complete."""
    out_dir = Path(out_dir)
    if grid_png is not None:
        atomic_write_bytes(out_dir / GRID_NAME, grid_png)
    atomic_write_bytes(out_dir / CARD_NAME, card_text.encode("utf-8"))
