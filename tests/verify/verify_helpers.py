"""Helpers of the verify/diff tests: scripts run like a user runs them, and edits of released rows."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"
SMALL = ["--resolution", "64x48", "--samples", "2"]


def script_env(**extra: str) -> dict[str, str]:
    """A user's shell: the checkout on PYTHONPATH, offline, CPU only, one thread."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(
        {
            "PYTHONPATH": str(REPO),
            "HF_HUB_OFFLINE": "1",
            "CUDA_VISIBLE_DEVICES": "",
            "TQDM_DISABLE": "1",
            "OMP_NUM_THREADS": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
        }
    )
    env.update(extra)
    return env


def run_script(name: str, *args, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPTS / name), *map(str, args)],
        env=env or script_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def check(done: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    assert done.returncode == 0, (
        f"{what} failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    )
    return done


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
