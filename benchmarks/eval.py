"""Evaluation loaders: SUB VLM + binding zero-shot with a warm embedding cache vs without a cache.

Both sides run the tasks ``sub-vlm`` and ``binding-clip`` through ``run_task`` (the command
line's own runner: dataset resolution, the task code, the metric check), without the per-sample
cache so every item is scored. Ours: the embedding cache (``loaders/harness/embeddings.py``)
warm (image bytes hashed, vectors read from SQLite). Baseline, what a user would otherwise run:
the same evaluation encoding every image and prompt (a fresh, empty cache each round, i.e. no
cache). A fresh model session each time; loading the model is outside the timed region, reading
the datasets inside it. The model is a random CLIP built from a config (quick: 2-layer 64-d;
full: ViT-B/32 shapes, the cost of ``openai/clip-vit-base-patch32``).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks._clip import random_clip
from benchmarks._harness import Result


def run(quick: bool) -> list[Result]:
    from conceptforge.loaders.harness.runner import ModelSession, run_task
    from conceptforge.testing import synthetic

    n_sub, n_binding, repeats = (64, 960, 7) if quick else (32, 96, 5)
    with tempfile.TemporaryDirectory(prefix="eval-bench-") as tmp:
        work = Path(tmp)
        clip_dir = random_clip(work / "clip", quick)
        cub_dir = synthetic.write_fake_cub(work / "cub")
        sub_dir = synthetic.write_dataset(
            work / "sub", {"test": synthetic.sub_rows(max(1, n_sub // 4))}, synthetic.sub_features()
        )
        binding_dir = synthetic.write_single_object(work / "single-object", n_per_label=max(1, n_binding // 24))
        sessions = {}
        n_images = {}

        def evaluate(round_: int) -> None:
            session = sessions.pop(round_)
            sub = run_task("sub-vlm", model=session, dataset=sub_dir, cub_dir=cub_dir, sample_cache=False)
            binding = run_task("binding-clip", model=session, dataset=binding_dir, sample_cache=False)
            session.close()
            n_images["sub"] = sub.metrics["s_plus"].n
            n_images["binding"] = len(binding.samples)

        def load(round_: int, cache: Path) -> None:
            sessions[round_] = ModelSession.open(clip_dir, device="cpu", cache_dir=cache)
            sessions[round_].embedder()  # the model loads here, outside the timing

        load(-1, work / "warm")
        evaluate(-1)  # fills the warm cache
        # Interleaved by hand (warm first, then cold first ...): each side needs its model loaded
        # outside the timing, the cold side with a fresh cache directory.
        times: dict[str, list[float]] = {"ours": [], "baseline": []}
        cpu: dict[str, list[float]] = {"ours": [], "baseline": []}

        for round_ in range(repeats):
            order = (("ours", work / "warm"), ("baseline", work / f"cold-{round_}"))
            for name, cache in order if round_ % 2 == 0 else order[::-1]:
                load(round_, cache)
                cpu_start, start = time.process_time(), time.perf_counter()
                evaluate(round_)
                times[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - cpu_start)
    return [
        Result(
            "embedding cache",
            "ours: warm cache",
            times["ours"],
            "no cache (encode everything)",
            times["baseline"],
            work=f"tasks sub-vlm + binding-clip over {n_images['sub'] + n_images['binding']} images, "
            f"{'tiny' if quick else 'ViT-B/32-shaped'} random CLIP",
            ours_cpu=cpu["ours"],
            baseline_cpu=cpu["baseline"],
        )
    ]
