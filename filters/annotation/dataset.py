"""Read a Hub-layout dataset directory for annotation: row metadata up front, images on demand.

Why not ``datasets.load_dataset``: the server must start in a second on a 38,400-image SUB split
and serve only the few hundred sampled images. Reading parquet row groups directly keeps the
metadata small (no image bytes) and an image request costs one row-group column read, cached.
Images are addressed by (item, slot), never by path, so nothing outside the dataset is reachable.

Once a study's sample is known, :meth:`AnnotationDataset.materialise_images` copies just the
sampled images out of the shards in one pass (beside the study database), so serving an image is
one small file read instead of decoding a 100-image row group: a SUB split holds ~38,400 images
of ~1 MB, and the sample is spread over nearly every row group.
"""

from __future__ import annotations

import io
import json
import logging
import re
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from conceptforge.argtypes import dataset_name_problem
from conceptforge.cards import dataset_dir
from conceptforge.cards.grid import png_bytes
from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError
from conceptforge.serialization import atomic_write_bytes

logger = logging.getLogger(__name__)

IMAGE_COLUMNS = ("image", "reference_images")
SLOT_PATTERN = re.compile(r"^(image|ref[0-9]{1,2})$")
CACHE_MARKER = "complete.json"
_MAGIC = [
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
]


def image_mime(data: bytes) -> str | None:
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def split_files(root: Path, split: str) -> list[Path]:
    return dataset_dir.split_files(Path(root) / dataset_dir.DATA_DIR, split)


def available_splits(root: Path) -> list[str]:
    return dataset_dir.split_names(Path(root) / dataset_dir.DATA_DIR)


def split_tables(root: Path, split: str) -> Iterator[Any]:
    """Pyarrow tables (one per row group) of a split with all columns, in file order: one row
    group in memory at a time, however large the split."""
    for path in split_files(root, split):
        parquet = pq.ParquetFile(path)
        for group in range(parquet.num_row_groups):
            yield parquet.read_row_group(group)


@dataclass(frozen=True)
class RowLocation:
    file_index: int
    row_group: int
    offset: int


class AnnotationDataset:
    """One split of a dataset directory: metadata rows by item id, images by (item id, slot)."""

    def __init__(
        self,
        root: str | Path,
        *,
        splits: tuple[str, ...],
        required_columns: tuple[str, ...],
        split: str | None = None,
        extra_columns: tuple[str, ...] = (),
        study_name: str = "",
    ) -> None:
        self.root = Path(root)
        problem = dataset_name_problem(self.root)
        if problem:
            raise DataFormatError(problem)
        if not (self.root / "data").is_dir():
            raise DataNotFoundError(f"{self.root} is not a dataset directory (no data/ folder with parquet shards)")
        present = available_splits(self.root)
        if split is None:
            split = next((s for s in splits if s in present), None)
            if split is None:
                raise InvalidArgumentError(
                    f"{self.root} has splits {present or 'none'}; study {study_name} needs one of {list(splits)} (or pass --split)"
                )
        elif split not in present:
            raise DataNotFoundError(f"{self.root} has no split {split!r} (it has {present or 'none'})")
        self.split = split
        self.files = split_files(self.root, split)
        self._parquet = [pq.ParquetFile(path) for path in self.files]
        schema_names = set(self._parquet[0].schema_arrow.names)
        missing = [c for c in required_columns if c not in schema_names]
        if missing:
            raise DataFormatError(
                f"{self.root} split {split} lacks the columns {', '.join(missing)} that study {study_name} needs (see docs/schemas.md)"
            )
        self.columns = list(schema_names)
        meta_columns = [
            c
            for c in dict.fromkeys((*required_columns, *extra_columns))
            if c in schema_names and c not in IMAGE_COLUMNS
        ]
        self.rows: dict[str, dict[str, Any]] = {}
        self.locations: dict[str, RowLocation] = {}
        self.ref_counts: dict[str, int] = {}
        for file_index, parquet in enumerate(self._parquet):
            for group in range(parquet.num_row_groups):
                table = parquet.read_row_group(group, columns=meta_columns)
                refs = None
                if "reference_images" in schema_names:
                    column = parquet.read_row_group(group, columns=["reference_images"]).column(0)
                    refs = [n or 0 for n in pc.list_value_length(column).to_pylist()]
                for offset, row in enumerate(table.to_pylist()):
                    item_id = str(row["item_id"])
                    if item_id in self.rows:
                        raise DataFormatError(f"{self.root} split {split}: item_id {item_id!r} occurs twice")
                    self.rows[item_id] = row
                    self.locations[item_id] = RowLocation(file_index, group, offset)
                    if refs is not None:
                        self.ref_counts[item_id] = refs[offset]
                        row["reference_images"] = [None] * refs[offset]  # count only; bytes on demand
        if not self.rows:
            raise DataFormatError(f"{self.root} split {split} is empty")
        # ConceptBed embeds reference thumbnails once per concept (--embed-references): the other
        # rows of the concept show that row's references.
        self.ref_source: dict[str, str] = {}
        if self.ref_counts and all("concept" in row for row in self.rows.values()):
            carriers: dict[str, str] = {}
            for item_id, count in self.ref_counts.items():
                if count:
                    carriers.setdefault(str(self.rows[item_id]["concept"]), item_id)
            for item_id, row in self.rows.items():
                source = carriers.get(str(row["concept"]))
                if not self.ref_counts[item_id] and source is not None:
                    self.ref_source[item_id] = source
                    row["reference_images"] = [None] * self.ref_counts[source]
        self._cache: OrderedDict[tuple[int, int, str], list[Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._image_dir: Path | None = None
        self._image_names: dict[str, int] = {}
        logger.info("dataset %s split %s: %d rows", self.root, split, len(self.rows))

    def materialise_images(self, item_ids: list[str], cache_dir: str | Path) -> None:
        """Copy the images of ``item_ids`` into ``cache_dir`` (``<index>-<slot>`` files), once.

        A marker naming the items is written last, so an interrupted copy is redone, and a cache
        made for another sample is never used.
        """
        cache_dir = Path(cache_dir)
        marker = cache_dir / CACHE_MARKER
        expected = {"split": self.split, "items": list(item_ids)}
        try:
            done = json.loads(marker.read_text(encoding="utf-8")) == expected
        except (OSError, ValueError):
            done = False
        if not done:
            from conceptforge.progress import tqdm

            marker.unlink(missing_ok=True)
            members: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
            for index, item_id in enumerate(item_ids):
                location = self.locations[item_id]
                members[(location.file_index, location.row_group)].append((location.offset, index))
            columns = [c for c in IMAGE_COLUMNS if c in self.columns]
            for (file_index, group), rows in tqdm(
                sorted(members.items()), desc="copying sampled images", unit="row group", disable=len(members) < 20
            ):
                table = self._parquet[file_index].read_row_group(group, columns=columns)
                for offset, index in rows:
                    image = table.column("image")[offset].as_py() or {}
                    if image.get("bytes"):
                        atomic_write_bytes(cache_dir / f"{index}-image", image["bytes"])
                    if "reference_images" in columns:
                        source = self.ref_source.get(item_ids[index])
                        if source is None:
                            refs = table.column("reference_images")[offset].as_py() or []
                        else:
                            at = self.locations[source]
                            refs = self._column(at, "reference_images")[at.offset] or []
                        for k, ref in enumerate(refs):
                            if (ref or {}).get("bytes"):
                                atomic_write_bytes(cache_dir / f"{index}-ref{k}", ref["bytes"])
            atomic_write_bytes(marker, json.dumps(expected).encode("utf-8"))
            logger.info("copied the images of %d sampled items to %s", len(item_ids), cache_dir)
        self._image_dir = cache_dir
        self._image_names = {item_id: index for index, item_id in enumerate(item_ids)}

    def _column(self, location: RowLocation, column: str) -> list[Any]:
        key = (location.file_index, location.row_group, column)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        values = (
            self._parquet[location.file_index]
            .read_row_group(location.row_group, columns=[column])
            .column(0)
            .to_pylist()
        )
        with self._lock:
            self._cache[key] = values
            while len(self._cache) > 8:
                self._cache.popitem(last=False)
        return values

    def image_bytes(self, item_id: str, slot: str) -> tuple[bytes, str]:
        """Return (bytes, mime type) of ``image`` or ``ref<k>``; KeyError if there is none."""
        if not SLOT_PATTERN.match(slot):
            raise KeyError(slot)
        if self._image_dir is not None and item_id in self._image_names:
            try:
                data = (self._image_dir / f"{self._image_names[item_id]}-{slot}").read_bytes()
            except FileNotFoundError:
                raise KeyError(slot) from None
            return self._browser_image(data)
        location = self.locations[item_id]
        if slot == "image":
            value = self._column(location, "image")[location.offset]
        elif slot.startswith("ref") and slot[3:].isdigit() and "reference_images" in self.columns:
            location = self.locations[self.ref_source.get(item_id, item_id)]
            refs = self._column(location, "reference_images")[location.offset] or []
            index = int(slot[3:])
            if index >= len(refs):
                raise KeyError(slot)
            value = refs[index]
        else:
            raise KeyError(slot)
        data = (value or {}).get("bytes")
        if not data:  # path-only images are never followed: only embedded bytes are served
            raise KeyError(slot)
        return self._browser_image(data)

    @staticmethod
    def _browser_image(data: bytes) -> tuple[bytes, str]:
        mime = image_mime(data)
        if mime is None:  # e.g. TIFF or BMP: re-encode for the browser
            from PIL import Image

            data, mime = png_bytes(Image.open(io.BytesIO(data)).convert("RGB")), "image/png"
        return data, mime

    def iter_split_tables(self, split: str | None = None) -> Iterator[Any]:
        """Yield pyarrow tables (one per row group) of a split with all columns, in file order."""
        yield from split_tables(self.root, split or self.split)
