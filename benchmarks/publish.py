"""Rows -> release on the local Hub server: ours vs ``Dataset.from_generator`` + ``push_to_hub``.

Ours: ``cards.assemble_dataset_dir`` then ``cards.publish.publish_dataset`` (card validated
against the parquet footers, one commit, a version tag). Baseline, what a user would otherwise
write: ``Dataset.from_generator(rows, features=...)`` then ``push_to_hub`` with the same
``max_shard_size``. Both against the same local Hub-compatible server (real ``huggingface_hub``
client through ``HF_ENDPOINT``), same rows, each step in a fresh process.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from benchmarks._harness import Result, interleave
from benchmarks._rows import run_worker, worker_env
from conceptforge.testing.hub_server import HubServer

TOKEN = "hf_benchmarktoken0000"


def run(quick: bool) -> list[Result]:
    n, repeats = (1000, 5) if quick else (5000, 7)
    with tempfile.TemporaryDirectory(prefix="publish-bench-") as tmp:
        work = Path(tmp)
        server = HubServer(work / "hub", token=TOKEN).start()
        try:
            env = worker_env(work, HF_ENDPOINT=server.url, HF_TOKEN=TOKEN, HF_HUB_DISABLE_XET="1")
            runs: dict[str, list[dict]] = {"ours": [], "datasets": []}

            def side(name: str):
                def fn(round_: int) -> None:
                    runs[name].append(run_worker("publish", n, name, work / name, env, repo=f"bench/{name}-{round_}"))

                return fn

            interleave(side("ours"), side("datasets"), repeats)
        finally:
            server.stop()

    def peak(name: str) -> str:
        return f"{statistics.median(r['peak_mb'] for r in runs[name]):.0f} MB"

    return [
        Result(
            "rows -> release",
            "ours: assemble_dataset_dir + publish_dataset",
            [r["seconds"] for r in runs["ours"]],
            "Dataset.from_generator + push_to_hub",
            [r["seconds"] for r in runs["datasets"]],
            work=f"{n} rows of 64x64 PNG + label + id, shards of 8 MB, local Hub server, fresh process each",
            ours_cpu=[r["cpu"] for r in runs["ours"]],
            baseline_cpu=[r["cpu"] for r in runs["datasets"]],
            extra={"peak RSS ours / datasets": f"{peak('ours')} / {peak('datasets')}"},
        )
    ]
