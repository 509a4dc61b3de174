#!/usr/bin/env python
"""Benchmark: publish + re-load a dataset of a few thousand small images against the local Hub.

Compares ``cards.publish.publish_dataset`` (validated, one commit + tag) with a plain
``DatasetDict.push_to_hub`` of the same rows and shard size, measured in the same run against the
same local Hub-compatible server (:mod:`conceptforge.testing.hub_server`). Every measured step runs in its
own fresh process (the Hub client reads ``HF_ENDPOINT`` at import) that reports wall time and its
peak resident memory; runs are interleaved and the median is reported, since the machine is shared.

    python benchmarks/publish.py [--images 3000] [--repeats 3]

Prints MB/s, peak RSS (and its growth over the process's RSS after imports) and the time ratio
ours / push_to_hub (target: <= 1.2). With ``--flat-check`` it also publishes a dataset twice as
large to show that peak memory does not grow with dataset size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from datasets import ClassLabel, Features, Image as ImageFeature, Value
from PIL import Image

from conceptforge.cards import DatasetMetadata, assemble_dataset_dir, render_card
from conceptforge.cards.grid import make_sample_grid, png_bytes
from conceptforge.testing.hub_server import HubServer

FEATURES = Features({"image": ImageFeature(), "label": ClassLabel(names=[f"class{i}" for i in range(10)]), "idx": Value("int32")})

WORKER = r"""
import json, os, resource, sys, time
mode, directory, repo, version, shard = sys.argv[1:6]
def rss_mb():
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
if mode == "ours":
    from conceptforge.cards.publish import publish_dataset
elif mode == "push":
    from datasets import load_dataset
    ds = load_dataset(directory)  # builds the Arrow cache: not timed, push_to_hub starts from a Dataset
else:
    from datasets import load_dataset
import huggingface_hub  # noqa
base = rss_mb()
start = time.perf_counter()
if mode == "ours":
    result = publish_dataset(directory, repo_id=repo, version=version)
    assert result.action == "published", result
elif mode == "push":
    ds.push_to_hub(repo, max_shard_size=shard)
else:
    ds = load_dataset(repo, revision=version)
    n = sum(len(split.with_format("arrow")["image"]) for split in ds.values())
    assert n > 0
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak, "base_mb": base}))
"""


def _rows(n: int, size: int, seed: int):
    rng = np.random.default_rng(seed)
    for i in range(n):
        pixels = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
        yield {"image": {"bytes": png_bytes(Image.fromarray(pixels)), "path": None}, "label": i % 10, "idx": i}


def make_dataset(out: Path, n: int, size: int, shard: str) -> int:
    metadata = DatasetMetadata(pretty_name="Publish benchmark", license="cc-by-4.0", summary="Random small images.",
                               task_categories=["image-classification"])
    grid = make_sample_grid([(Image.open(__import__("io").BytesIO(r["image"]["bytes"])), str(r["label"])) for r in _rows(8, size, 1)], thumb_width=64)
    assemble_dataset_dir(out, splits={"train": lambda: _rows(n, size, 0)}, features=FEATURES,
                         render_card=lambda stats: render_card(metadata, FEATURES, stats),
                         grid_png=png_bytes(grid), max_shard_size=shard)
    return sum(p.stat().st_size for p in (out / "data").glob("*.parquet"))


def run_worker(env: dict, mode: str, directory: Path, repo: str, version: str, shard: str) -> dict:
    result = subprocess.run([sys.executable, "-c", WORKER, mode, str(directory), repo, version, shard],
                            env=env, capture_output=True, text=True, timeout=1200)
    if result.returncode != 0:
        raise SystemExit(f"{mode} worker failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--size", type=int, default=64, help="image side in pixels (random RGB, ~12 KB PNG at 64)")
    parser.add_argument("--shard", default="8MB", help="max_shard_size for both sides")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--flat-check", action="store_true", help="also publish a 2x larger dataset and compare peak memory")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)

    work = Path(args.workdir or tempfile.mkdtemp(prefix="publish-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    data_dir = work / "dataset"
    t0 = time.perf_counter()
    total_bytes = make_dataset(data_dir, args.images, args.size, args.shard)
    print(f"dataset: {args.images} images {args.size}x{args.size}, {total_bytes / 1e6:.1f} MB parquet in "
          f"{len(list((data_dir / 'data').glob('*.parquet')))} shards (made in {time.perf_counter() - t0:.1f} s)")

    server = HubServer(work / "hub", token="hf_benchmarktoken0000").start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update({"HF_ENDPOINT": server.url, "HF_TOKEN": "hf_benchmarktoken0000", "HF_HUB_DISABLE_XET": "1",
                "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HOME": str(work / "hf-home"),
                "TQDM_DISABLE": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"})
    runs: dict[str, list[dict]] = {"ours": [], "push": [], "reload-ours": [], "reload-push": []}
    try:
        for repeat in range(args.repeats):
            ours_repo, push_repo = f"bench/ours-{repeat}", f"bench/push-{repeat}"
            runs["ours"].append(run_worker(env, "ours", data_dir, ours_repo, "v1.0.0", args.shard))
            runs["push"].append(run_worker(env, "push", data_dir, push_repo, "main", args.shard))
            shutil.rmtree(work / "hf-home", ignore_errors=True)  # re-load from the server, not the cache
            runs["reload-ours"].append(run_worker(env, "reload", data_dir, ours_repo, "v1.0.0", args.shard))
            shutil.rmtree(work / "hf-home", ignore_errors=True)
            runs["reload-push"].append(run_worker(env, "reload", data_dir, push_repo, "main", args.shard))
            shutil.rmtree(work / "hf-home", ignore_errors=True)
            print(f"repeat {repeat + 1}: " + ", ".join(f"{k} {v[-1]['seconds']:.2f} s" for k, v in runs.items()), flush=True)
        flat = None
        if args.flat_check:
            big = work / "dataset-2x"
            big_bytes = make_dataset(big, 2 * args.images, args.size, args.shard)
            flat = (big_bytes, run_worker(env, "ours", big, "bench/ours-2x", "v1.0.0", args.shard))
    finally:
        server.stop()

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    print()
    print(f"| step | median s | MB/s | peak RSS MB | RSS growth over imports MB |")
    print(f"| --- | ---: | ---: | ---: | ---: |")
    for name, label in (("ours", "publish_dataset (ours)"), ("push", "Dataset.push_to_hub"),
                        ("reload-ours", "load_dataset(revision=v1.0.0) of ours"), ("reload-push", "load_dataset of push_to_hub")):
        seconds = med(name, "seconds")
        growth = statistics.median(r["peak_mb"] - r["base_mb"] for r in runs[name])
        print(f"| {label} | {seconds:.2f} | {total_bytes / 1e6 / seconds:.1f} | {med(name, 'peak_mb'):.0f} | {growth:.0f} |")
    ratio = med("ours", "seconds") / med("push", "seconds")
    reload_ratio = med("reload-ours", "seconds") / med("reload-push", "seconds")
    print()
    print(f"publish time ratio ours / push_to_hub = {ratio:.2f}x (target <= 1.2x)")
    print(f"re-load time ratio ours / push_to_hub = {reload_ratio:.2f}x")
    if flat is not None:
        big_bytes, big_run = flat
        print(f"flat memory: {total_bytes / 1e6:.0f} MB -> peak {med('ours', 'peak_mb'):.0f} MB; "
              f"{big_bytes / 1e6:.0f} MB -> peak {big_run['peak_mb']:.0f} MB "
              f"(growth over imports {statistics.median(r['peak_mb'] - r['base_mb'] for r in runs['ours']):.0f} -> "
              f"{big_run['peak_mb'] - big_run['base_mb']:.0f} MB)")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
