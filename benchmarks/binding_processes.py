"""Binding end to end: 2 Blender worker processes vs 1 process on the machine's cores.

What a user runs, timed from the shell: ``conceptforge generate binding --out DIR ...`` in a fresh
process (Blender import, scene layout, Cycles render, OIDN, store chunks, assembly, card and
grid), once with ``--num-workers 2`` (ours: two Blender processes, each pinned to half the cores)
and once with the default single process (the baseline: one Blender using every core through
Cycles' own threads). Repeats are interleaved; each run writes a fresh folder. Also printed:
images/min of each side and whether the two assembled datasets hold the same rows.

    python -m benchmarks binding_processes [--quick]

Full: the demo preset of all three configs (24 images at 320x240), 2 repeats; quick: the
single-object config (8 images) at 160x120, 2 repeats (each side is a cold start, so warm-up is
not done: the start-up cost is part of what a user pays).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._harness import Result, Skip, interleave


def _command(out: Path, *, workers: int, quick: bool) -> list[str]:
    command = [sys.executable, "-m", "conceptforge", "generate", "binding", "--preset", "demo", "--out", str(out)]
    command += ["--dataset", "single-object", "--resolution", "160x120"] if quick else ["--dataset", "all"]
    if workers > 1:
        command += ["--num-workers", str(workers)]
    return command


def _rows_digest(out: Path) -> str:
    """Hash of the assembled parquet files (names and bytes), to compare the two sides' datasets."""
    digest = hashlib.sha256()
    for path in sorted((out / "data").rglob("*.parquet")):
        digest.update(str(path.relative_to(out)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _images(out: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(path).metadata.num_rows for path in (out / "data").rglob("*.parquet"))


def run(quick: bool) -> list[Result]:
    try:
        import bpy  # noqa: F401  (Blender as a Python module: the generator's renderer)
    except ImportError as error:
        raise Skip(f"bpy is not installed ({error}); pip install -e '.[blender]'") from None
    repeats = 2
    workdir = Path(tempfile.mkdtemp(prefix="bench-binding-processes-"))
    digests: dict[int, set[str]] = {1: set(), 2: set()}
    images: dict[int, int] = {}
    env = {**os.environ, "CONCEPTFORGE_DISABLE_PROGRESS_BARS": "1"}

    def side(workers: int):
        def call(round_: int) -> None:
            out = workdir / f"w{workers}-r{round_}"
            subprocess.run(
                _command(out, workers=workers, quick=quick),
                check=True,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            digests[workers].add(_rows_digest(out))
            images[workers] = _images(out)
            shutil.rmtree(out)

        return call

    try:
        ours, baseline = interleave(side(2), side(1), repeats)
    except subprocess.CalledProcessError as error:
        raise RuntimeError(
            f"conceptforge generate binding failed: {error.stderr.decode(errors='replace')[-2000:]}"
        ) from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    count = images[1]
    same = digests[1] == digests[2] and len(digests[1]) == 1
    return [
        Result(
            name="binding end to end (processes)",
            ours_label="ours: --num-workers 2 (2 Blender processes, 1 render thread each)",
            ours=ours,
            baseline_label="one process (Cycles threads on every core)",
            baseline=baseline,
            work=(
                f"`conceptforge generate binding --preset demo` {'single-object, 160x120' if quick else 'all configs, 320x240'}: "
                f"{count} images, cold start, on {os.cpu_count()} CPUs"
            ),
            extra={
                "images/min (median), 2 processes | 1 process": (
                    f"{count * 60 / statistics.median(ours):.1f} | {count * 60 / statistics.median(baseline):.1f}"
                ),
                "assembled parquet bytes equal (every run, both sides)": "yes"
                if same
                else f"no ({len(digests[1] | digests[2])} distinct digests: a determinism regression, see docs/binding.md)",
            },
        )
    ]
