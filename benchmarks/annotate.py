"""Annotation server: 8 annotators at once vs the same 8 annotators one after another.

The server runs in its own process (``scripts/annotate.py``, what users run, SQLite WAL). Each
simulated annotator is a real HTTP client on 127.0.0.1 with its own keep-alive connection, doing
what the page does: ``GET /api/next`` once, then ``POST /api/answer`` per item (the reply carries
the next item) until the sample is done, so every loop is bounded by the sample size. Both sides
store the same number of answers (8 annotators x the whole sample, fresh annotator names each
round); the time ratio below 1 means 8 concurrent annotators get more answers per second than one.
"""

from __future__ import annotations

import http.client
import io
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from datasets import Features, Value
from datasets import Image as ImageFeature
from PIL import Image

from benchmarks._harness import Result, interleave
from conceptforge.testing.synthetic import write_dataset

FEATURES = Features(
    {name: Value("string") for name in ("item_id", "bird", "attribute", "group", "value", "removed_attribute")}
    | {"image": ImageFeature()}
)
ANNOTATORS = 8
REPO = Path(__file__).resolve().parents[1]  # scripts/annotate.py: the command a user runs


def build_dataset(root: Path, per_attribute: int) -> Path:
    attributes = ["has_crown_color::black", "has_bill_shape::needle", "has_wing_pattern::spotted"]
    rows = []
    for a, attribute in enumerate(attributes):
        group, value = attribute.split("::")
        for index in range(per_attribute):
            buffer = io.BytesIO()
            Image.new("RGB", (64, 64), (40 * a, 3 * index % 256, 120)).save(buffer, format="PNG")
            bird = ("Blue_Jay", "Cardinal")[index % 2]
            rows.append(
                {
                    "item_id": f"{bird}__{value}__{index:04d}",
                    "bird": bird,
                    "attribute": attribute,
                    "group": group,
                    "value": value,
                    "removed_attribute": f"{group}::brown",
                    "image": {"bytes": buffer.getvalue(), "path": None},
                }
            )
    rows.sort(key=lambda r: r["item_id"])
    return write_dataset(root, {"test": rows}, FEATURES)  # the server reads the rows, not the card


def annotate_all(port: int, annotator: str, latencies: list[float], limit: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", f"/api/next?annotator={annotator}")
    payload = json.loads(conn.getresponse().read())
    answered = 0
    while not payload["done"] and answered < limit:
        body = json.dumps(
            {
                "annotator": annotator,
                "item_id": payload["item"]["item_id"],
                "answers": {"attribute": "yes", "bird": "somewhat"},
                "elapsed_ms": 1000,
            }
        )
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


def run(quick: bool) -> list[Result]:
    per_attribute, repeats = (40, 11) if quick else (150, 11)
    items = 3 * per_attribute
    latencies = {"ours": [], "baseline": []}
    counts = {"ours": [], "baseline": []}

    with tempfile.TemporaryDirectory(prefix="annotate-bench-") as tmp:
        dataset = build_dataset(Path(tmp) / "sub", per_attribute)
        server = subprocess.Popen(
            [
                sys.executable,
                str(REPO / "scripts" / "annotate.py"),
                str(dataset),
                "--study",
                "sub-faithfulness",
                "--per-group",
                str(per_attribute),
                "--port",
                "0",
                "--db",
                str(Path(tmp) / "bench.sqlite"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            line = server.stdout.readline()
            if "http://127.0.0.1:" not in line:
                raise RuntimeError(f"annotation server did not start: {line!r}")
            port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
            annotate_all(port, "warmup", [], items)

            def sequential(round_: int) -> None:
                counts["baseline"].append(
                    sum(annotate_all(port, f"s{round_}-{i}", latencies["baseline"], items) for i in range(ANNOTATORS))
                )

            def concurrent(round_: int) -> None:
                done: list[int] = []
                threads = [
                    threading.Thread(
                        target=lambda i=i: done.append(annotate_all(port, f"c{round_}-{i}", latencies["ours"], items))
                    )
                    for i in range(ANNOTATORS)
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                counts["ours"].append(sum(done))

            ours_t, base_t = interleave(concurrent, sequential, repeats)
        finally:
            server.terminate()
            server.wait(timeout=30)
    expected = ANNOTATORS * items
    if any(c != expected for c in counts["ours"] + counts["baseline"]):
        raise RuntimeError(f"answers stored per round differ from {expected}: {counts}")

    def ms(values: list[float], q: int) -> str:
        return f"{1000 * statistics.quantiles(values, n=100)[q - 1]:.1f}"

    return [
        Result(
            "annotation server",
            f"ours: {ANNOTATORS} annotators at once",
            ours_t,
            f"{ANNOTATORS} annotators one after another",
            base_t,
            work=f"{expected} answers per round: {ANNOTATORS} annotators x {items} items, sub-faithfulness study",
            extra={
                "answers/s (median round) at once / one after another": (
                    f"{expected / statistics.median(ours_t):.0f} / {expected / statistics.median(base_t):.0f}"
                ),
                "latency per answer p50 / p95, at once": f"{ms(latencies['ours'], 50)} / {ms(latencies['ours'], 95)} ms",
                "latency per answer p50 / p95, one after another": f"{ms(latencies['baseline'], 50)} / {ms(latencies['baseline'], 95)} ms",
            },
        )
    ]
