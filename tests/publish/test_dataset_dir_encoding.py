"""The column-wise encoder of write_parquet_split writes what ``datasets``' own encoder would."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import ClassLabel, Features, List, Value
from datasets import Image as ImageFeature
from PIL import Image

from conceptforge.cards.dataset_dir import write_parquet_split

FEATURES = Features(
    {
        "image": ImageFeature(),
        "item_id": Value("string"),
        "label": ClassLabel(names=["a", "b", "c"]),
        "tags": List(Value("string")),
        "score": Value("float32"),
        "meta": {"seed": Value("int64")},
    }
)


def _png(i: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (i, 0, 0)).save(buffer, format="PNG")
    return buffer.getvalue()


def _rows(n: int, label=lambda i: i % 3):
    return [
        {
            "image": {"bytes": _png(i), "path": f"{i}.png"},
            "item_id": f"id{i:04d}",
            "label": label(i),
            "tags": ["x"] * (i % 3),
            "score": i / 7,
            "meta": {"seed": i},
        }
        for i in range(n)
    ]


def _read(tmp_path, stats) -> pa.Table:
    return pa.concat_tables(pq.read_table(tmp_path / f.split("/")[1]) for f in stats.files)


@pytest.mark.parametrize("label", [lambda i: i % 3, lambda i: "abc"[i % 3]], ids=["int-labels", "name-labels"])
def test_same_table_as_datasets_encoder(tmp_path, label):
    rows = _rows(250, label)
    stats = write_parquet_split(tmp_path, "train", iter(rows), FEATURES)
    expected = pa.Table.from_pylist([FEATURES.encode_example(dict(r)) for r in rows], schema=FEATURES.arrow_schema)
    assert _read(tmp_path, stats).equals(expected)
    assert stats.num_examples == 250


def test_shard_boundaries_follow_row_sizes(tmp_path):
    rows = _rows(230)
    sizes = [
        len(r["image"]["bytes"]) + len(r["item_id"]) + 8 + 8 + 8 + 8 for r in rows
    ]  # tags list, score, label, meta: 8 each
    limit = sum(sizes[:70])  # a shard closes once it holds >= limit bytes: rows 0-69, 70-139, ...
    stats = write_parquet_split(tmp_path, "train", iter(rows), FEATURES, max_shard_size=limit)
    counts = [pq.read_metadata(tmp_path / f.split("/")[1]).num_rows for f in stats.files]
    expected, current, shard = [], 0, 0
    for size in sizes:
        if current and shard >= limit:
            expected.append(current)
            current, shard = 0, 0
        current += 1
        shard += size
    expected.append(current)
    assert counts == expected and len(counts) > 2
    assert stats.num_bytes == sum(sizes)


def test_bad_value_fails_like_datasets(tmp_path):
    rows = _rows(5)
    rows[3]["label"] = 7  # out of range for 3 names
    with pytest.raises(ValueError):
        write_parquet_split(tmp_path, "train", iter(rows), FEATURES)
    assert not list(tmp_path.glob("*.parquet*"))
