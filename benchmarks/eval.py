"""Evaluation loaders: SUB VLM + binding zero-shot with a warm embedding cache vs without a cache.

Ours: ``loaders.embeddings.EmbeddingModel`` reading a warm cache directory (image bytes hashed,
vectors read from SQLite). Baseline, what a user would otherwise run: the same evaluation
encoding every image and prompt (a fresh, empty cache each round, i.e. no cache). A fresh model
object each time; model loading is outside the timed region. The model is a random CLIP built
from a config (quick: 2-layer 64-d; full: ViT-B/32 shapes, the cost of ``openai/clip-vit-base-patch32``).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks._harness import Result


def run(quick: bool) -> list[Result]:
    from conceptforge.cub import load_cub
    from conceptforge.loaders.binding import evaluate_binding, load_binding
    from conceptforge.loaders.harness.embeddings import EmbeddingModel
    from conceptforge.loaders.sub.protocol import evaluate_vlm, load_sub
    from conceptforge.testing import synthetic
    from conceptforge.testing.tiny_models import build_tiny_clip

    n_sub, n_binding, repeats = (64, 960, 7) if quick else (32, 96, 5)
    with tempfile.TemporaryDirectory(prefix="eval-bench-") as tmp:
        work = Path(tmp)
        if quick:
            clip_dir = build_tiny_clip(work / "clip", hidden=64, projection=32, image_size=64, max_length=32)
        else:
            clip_dir = build_tiny_clip(
                work / "clip",
                hidden=512,
                heads=8,
                layers=12,
                mlp_ratio=4,
                vision_hidden=768,
                vision_heads=12,
                image_size=224,
                patch_size=32,
                projection=512,
            )
        cub = load_cub(synthetic.write_fake_cub(work / "cub"), need="votes")
        sub_dir = synthetic.write_dataset(
            work / "sub", {"test": synthetic.sub_rows(max(1, n_sub // 4))}, synthetic.sub_features()
        )
        items = load_sub(str(sub_dir), cub=cub)
        splits = load_binding(
            str(synthetic.write_single_object(work / "single-object", n_per_label=max(1, n_binding // 24)))
        )
        n_images = len(items) + sum(len(s) for s in splits.values())
        models = {}

        def evaluate(round_: int) -> None:
            model = models.pop(round_)
            evaluate_vlm(model, items, cub=cub)
            evaluate_binding(splits, models=["clip"], embedding_model=model)
            model.close()

        def load(round_: int, cache: Path) -> None:
            models[round_] = EmbeddingModel.from_pretrained(str(clip_dir), cache_dir=cache, device="cpu")

        load(-1, work / "warm")
        evaluate(-1)  # fills the warm cache
        # Interleaved by hand (warm first, then cold first ...): each side needs its model loaded
        # outside the timing, the cold side with a fresh cache directory.
        # Models are loaded before each timed call (outside the timing), a fresh cache for the cold side.
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
            work=f"SUB VLM + binding zero-shot over {n_images} images, {'tiny' if quick else 'ViT-B/32-shaped'} random CLIP",
            ours_cpu=cpu["ours"],
            baseline_cpu=cpu["baseline"],
        )
    ]
