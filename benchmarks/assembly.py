"""Assembly: rows -> parquet dataset directory, ours vs ``datasets`` (``Dataset.from_generator`` + ``to_parquet``).

Ours: ``cards.assemble_dataset_dir`` (Hub layout, sharded parquet, card). Baseline, what a user
would otherwise write: ``Dataset.from_generator(rows, features=...)`` then ``to_parquet``. Same
rows (64x64 PNG images, a class label, an id, a seed), each step in a fresh process; peak
resident memory is reported for each, and for ours at half the rows (flat memory: no growth).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from benchmarks._harness import Result, interleave
from benchmarks._rows import run_worker, worker_env


def run(quick: bool) -> list[Result]:
    n, repeats = (8000, 21) if quick else (20000, 9)  # quick rounds are short: more of them steady the median
    with tempfile.TemporaryDirectory(prefix="assembly-bench-") as tmp:
        work = Path(tmp)
        env = worker_env(work)
        runs: dict[str, list[dict]] = {"ours": [], "datasets": []}

        def side(name: str):
            def fn(_round: int) -> None:
                runs[name].append(run_worker("assemble", n, name, work / name, env))

            return fn

        ours_t, base_t = interleave(side("ours"), side("datasets"), repeats)
        half = run_worker("assemble", n // 2, "ours", work / "half", env)

    def peak(name: str) -> str:
        peak = statistics.median(r["peak_mb"] for r in runs[name])
        return f"{peak:.0f} MB (after imports {statistics.median(r['base_mb'] for r in runs[name]):.0f} MB)"

    ours_t = [r["seconds"] for r in runs["ours"]]
    base_t = [r["seconds"] for r in runs["datasets"]]
    return [
        Result(
            "assembly",
            "ours: assemble_dataset_dir",
            ours_t,
            "Dataset.from_generator + to_parquet",
            base_t,
            work=f"{n} rows of 64x64 PNG + label + id, fresh process each",
            ours_cpu=[r["cpu"] for r in runs["ours"]],
            baseline_cpu=[r["cpu"] for r in runs["datasets"]],
            extra={
                "peak RSS ours": peak("ours"),
                "peak RSS datasets": peak("datasets"),
                f"peak RSS ours at {n // 2} rows (flat memory check)": f"{half['peak_mb']:.0f} MB",
            },
        )
    ]
