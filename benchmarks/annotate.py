#!/usr/bin/env python
"""Annotation server throughput: answers stored per second with several concurrent annotators vs one.

The server runs as a separate process (``scripts/annotate.py``, exactly what users run); each
simulated annotator is a thread with its own keep-alive connection doing what the page does:
``GET /api/next`` once, then ``POST /api/answer`` per item (the reply carries the next item).
Baseline: N annotators one after another, each answering the whole sample (one annotator at a
time). Then N other annotators at once, each answering the whole sample: the same number of
writes. Each round is repeated; printed: median answers/s, per-answer latency, and the ratio.

    python benchmarks/annotate.py [--annotators 8] [--per-attribute 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # scripts/annotate.py: the command a user runs

from datasets import Features, Image as ImageFeature, Value
from PIL import Image

from conceptforge.cards import DatasetMetadata, assemble_dataset_dir, render_card

FEATURES = Features({name: Value("string") for name in ("item_id", "bird", "attribute", "group", "value", "removed_attribute")}
                    | {"image": ImageFeature()})


def build_dataset(root: Path, per_attribute: int) -> Path:
    attributes = ["has_crown_color::black", "has_bill_shape::needle", "has_wing_pattern::spotted"]
    rows = []
    for a, attribute in enumerate(attributes):
        group, value = attribute.split("::")
        for index in range(per_attribute):
            buffer = io.BytesIO()
            Image.new("RGB", (256, 256), (40 * a, 3 * index % 256, 120)).save(buffer, format="PNG")
            bird = ("Blue_Jay", "Cardinal")[index % 2]
            rows.append({"item_id": f"{bird}__{value}__{index:04d}", "bird": bird, "attribute": attribute,
                         "group": group, "value": value, "removed_attribute": f"{group}::brown",
                         "image": {"bytes": buffer.getvalue(), "path": None}})
    metadata = DatasetMetadata(pretty_name="benchmark", license="cc-by-4.0", summary="synthetic")
    assemble_dataset_dir(root, splits={"test": lambda: iter(sorted(rows, key=lambda r: r["item_id"]))}, features=FEATURES,
                         render_card=lambda stats: render_card(metadata, FEATURES, stats, has_grid=False))
    return root


def annotate_all(port: int, annotator: str, latencies: list[float]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", f"/api/next?annotator={annotator}")
    payload = json.loads(conn.getresponse().read())
    answered = 0
    while not payload["done"]:
        body = json.dumps({"annotator": annotator, "item_id": payload["item"]["item_id"],
                           "answers": {"attribute": "yes", "bird": "somewhat"}, "elapsed_ms": 1000})
        start = time.perf_counter()
        conn.request("POST", "/api/answer", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = json.loads(response.read())
        latencies.append(time.perf_counter() - start)
        if response.status != 200:
            raise RuntimeError(f"{annotator}: {response.status} {payload}")
        answered += 1
    conn.close()
    return answered


def run_sequential(port: int, names: list[str]) -> tuple[int, float, list[float]]:
    latencies: list[float] = []
    start = time.perf_counter()
    count = sum(annotate_all(port, name, latencies) for name in names)
    return count, time.perf_counter() - start, latencies


def run_concurrent(port: int, names: list[str]) -> tuple[int, float, list[float]]:
    latencies: list[float] = []
    counts: list[int] = []
    threads = [threading.Thread(target=lambda n=n: counts.append(annotate_all(port, n, latencies))) for n in names]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts), time.perf_counter() - start, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=8)
    parser.add_argument("--per-attribute", type=int, default=100, help="images per attribute (3 attributes), all sampled")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="annotate-bench-") as tmp:
        dataset = build_dataset(Path(tmp) / "sub", args.per_attribute)
        server = subprocess.Popen(
            [sys.executable, str(REPO / "scripts" / "annotate.py"), str(dataset), "--study", "sub-faithfulness",
             "--per-group", str(args.per_attribute), "--port", "0", "--db", str(Path(tmp) / "bench.sqlite")],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = server.stdout.readline()
            port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
            annotate_all(port, "warmup", [])  # page cache, SQLite file, first-connection costs
            single, multi = [], []
            for repeat in range(args.repeats):
                single.append(run_sequential(port, [f"s{repeat}-{i}" for i in range(args.annotators)]))
                multi.append(run_concurrent(port, [f"c{repeat}-{i}" for i in range(args.annotators)]))
        finally:
            server.terminate()
            server.wait(timeout=30)
    single_n, single_s, single_lat = sorted(single, key=lambda r: r[0] / r[1])[len(single) // 2]
    multi_n, multi_s, multi_lat = sorted(multi, key=lambda r: r[0] / r[1])[len(multi) // 2]
    single_rate, multi_rate = single_n / single_s, multi_n / multi_s

    def ms(values: list[float], q: float) -> float:
        return 1000 * statistics.quantiles(values, n=100)[int(q) - 1]

    print(f"sample: {3 * args.per_attribute} items (sub-faithfulness, 3 attributes x {args.per_attribute}); "
          f"{args.annotators} annotators per round; median of {args.repeats} rounds; CPU cores: {os.cpu_count()}")
    print(f"{'annotators at once':>18} | {'answers':>7} | {'seconds':>7} | {'answers/s':>9} | {'p50 ms':>6} | {'p95 ms':>6}")
    for label, n, s, lat in ((1, single_n, single_s, single_lat), (args.annotators, multi_n, multi_s, multi_lat)):
        print(f"{label:>18} | {n:>7} | {s:>7.2f} | {n / s:>9.1f} | {ms(lat, 50):>6.1f} | {ms(lat, 95):>6.1f}")
    print(f"throughput ratio ({args.annotators} concurrent annotators / 1 at a time): {multi_rate / single_rate:.2f}x")


if __name__ == "__main__":
    main()
