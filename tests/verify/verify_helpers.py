"""Helpers of the verify/diff tests: edits of released rows (scripts run like a user runs them:
tests/user_shell.py)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SMALL = ["--resolution", "64x48", "--samples", "2"]


def edit_rows(path: Path, edit) -> None:
    """Rewrite one parquet shard after ``edit(rows)`` changed its rows in place (schema and features kept)."""
    table = pq.read_table(path)
    rows = table.to_pylist()
    edit(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)


def change_pixel(image: dict, *, xy=(5, 5), delta: int = 1) -> dict:
    """The same PNG with one channel of one pixel moved by ``delta``."""
    from PIL import Image

    with Image.open(io.BytesIO(image["bytes"])) as opened:
        picture = opened.convert("RGB")
    r, g, b = picture.getpixel(xy)
    picture.putpixel(xy, ((r + delta) % 256, g, b))
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return {**image, "bytes": buffer.getvalue()}


def copy_release(source: Path, target: Path) -> Path:
    """A copy of a dataset directory without its run store (what a release holds)."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".work"))
    return target


def rerender_card(directory: Path) -> None:
    """Re-render the card of an edited dataset directory with the row counts its shards now hold."""
    from dataclasses import replace

    from conceptforge.cards.card import render_card
    from conceptforge.cards.publish import read_dataset_dir

    local = read_dataset_dir(directory)
    splits = [
        replace(s, num_examples=sum(pq.ParquetFile(directory / f).metadata.num_rows for f in s.files))
        for s in local.splits
    ]
    (directory / "README.md").write_text(
        render_card(local.metadata, local.features, splits, has_grid=local.has_grid), encoding="utf-8"
    )


def differing_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("differs: ")]
