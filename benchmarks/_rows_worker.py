"""One measured step in a fresh process: ``python -m benchmarks._rows_worker MODE ROWS SIDE OUT [REPO]``.

Fresh processes because the Hub client reads ``HF_ENDPOINT`` at import and peak memory must be
the step's own. Prints one JSON line: seconds (after imports), peak RSS and RSS after imports.
Rows are the same on both sides: ``ROWS`` rows cycling through 64 random 64x64 PNGs, a label
and an id, so row generation costs little and equally.
"""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

import numpy as np
from datasets import ClassLabel, Dataset, Features, Value
from datasets import Image as ImageFeature
from PIL import Image

FEATURES = Features(
    {
        "image": ImageFeature(),
        "label": ClassLabel(names=[f"class{i}" for i in range(10)]),
        "item_id": Value("string"),
        "seed": Value("int64"),
    }
)
SHARD = "8MB"


def rows(n: int):
    rng = np.random.default_rng(0)
    pool = []
    for _ in range(64):
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(buffer, format="PNG")
        pool.append(buffer.getvalue())
    for i in range(n):
        yield {
            "image": {"bytes": pool[i % 64], "path": f"{i:06d}.png"},
            "label": i % 10,
            "item_id": f"item{i:06d}",
            "seed": i,
        }


def status_mb(key: str) -> float:
    """VmRSS (now) or VmHWM (peak) of this process; unlike ru_maxrss, VmHWM is not inherited from
    the parent that forked us, so it is this step's own peak."""
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) / 1024 for line in handle if line.startswith(key + ":"))


def main() -> None:
    mode, n, side, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
    repo = sys.argv[5] if len(sys.argv) > 5 else None
    from conceptforge.cards import DatasetMetadata, assemble_dataset_dir, render_card
    from conceptforge.cards.publish import publish_dataset
    from conceptforge.loaders.exports import release_exports

    base = status_mb("VmRSS")
    cpu_start = time.process_time()
    start = time.perf_counter()
    if side == "ours":
        metadata = DatasetMetadata(pretty_name="Rows benchmark", license="cc-by-4.0", summary="Random small images.")
        assemble_dataset_dir(
            out,
            splits={"train": lambda: rows(n)},
            features=FEATURES,
            render_card=lambda stats: render_card(metadata, FEATURES, stats, has_grid=False),
            max_shard_size=SHARD,
        )
        if mode == "publish":
            assert publish_dataset(out, repo_id=repo, version="v1.0.0", exports=release_exports).action == "published"
    else:
        dataset = Dataset.from_generator(rows, gen_kwargs={"n": n}, features=FEATURES, cache_dir=str(out / "cache"))
        if mode == "publish":
            dataset.push_to_hub(repo, max_shard_size=SHARD)
        else:
            dataset.to_parquet(str(out / "train.parquet"))
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {"seconds": seconds, "cpu": time.process_time() - cpu_start, "peak_mb": status_mb("VmHWM"), "base_mb": base}
        )
    )


if __name__ == "__main__":
    main()
