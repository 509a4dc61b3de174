#!/usr/bin/env python
"""Evaluation benchmark: embedding cache warm vs cold, and CDSM training throughput.

1. SUB VLM evaluation and binding zero-shot on synthetic datasets, run twice in one process with
   one embedding-cache directory: the first run (cold) encodes every image and prompt, the second
   (warm) reads them back. Printed: seconds for each and the speed-up (target ≥ 10×). The model is
   a randomly initialised CLIP built from a config (``--size base`` = ViT-B/32 shapes, the cost of
   the real ``openai/clip-vit-base-patch32``; ``tiny`` for a smoke run) — no downloads.
2. Algorithm 1 training throughput (examples/s) of each CDSM on random 768-d "CLIP" embeddings
   (ViT-L/14 width, as in the paper), and the FFT circular convolution against the direct O(n²)
   sum it replaces (baseline measured in the same run).

Run: ``python benchmarks/eval.py`` (CPU; ``--threads`` sets torch's intra-op threads).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def build_clip(out_dir: Path, size: str) -> Path:
    from conceptforge.testing.tiny_models import build_tiny_clip

    if size == "tiny":
        return build_tiny_clip(out_dir, hidden=64, projection=32, image_size=64, max_length=32)
    # ViT-B/32 shapes (random weights): 12-layer towers, text 512 wide, vision 768 wide.
    return build_tiny_clip(out_dir, hidden=512, heads=8, layers=12, mlp_ratio=4, vision_hidden=768, vision_heads=12,
                           image_size=224, patch_size=32, projection=512)


def cache_benchmark(work: Path, size: str, n_sub: int, n_binding: int) -> dict[str, float]:
    from conceptforge.loaders.binding import evaluate_binding
    from conceptforge.cub import load_cub
    from conceptforge.loaders.embeddings import EmbeddingModel
    from conceptforge.loaders.sub import evaluate_vlm, load_sub
    from conceptforge.testing import synthetic

    clip_dir = build_clip(work / f"clip-{size}", size)
    cub_dir = synthetic.write_fake_cub(work / "cub")
    per_pair = max(1, n_sub // 4)
    sub_dir = synthetic.write_dataset(work / "sub", {"test": synthetic.sub_rows(per_pair)}, synthetic.sub_features())
    binding_dir = synthetic.write_single_object(work / "single-object", n_per_label=max(1, n_binding // 24))
    cub = load_cub(cub_dir, need="votes")
    items = load_sub(str(sub_dir), cub=cub)
    from conceptforge.loaders.binding import load_binding

    splits = load_binding(str(binding_dir))
    n_images = len(items) + sum(len(s) for s in splits.values())
    timings = {}
    for phase in ("cold", "warm"):
        model = EmbeddingModel.from_pretrained(str(clip_dir), cache_dir=work / "cache", device="cpu")  # fresh object each time
        start = time.perf_counter()
        evaluate_vlm(model, items, cub=cub)
        evaluate_binding(splits, models=["clip"], embedding_model=model)
        timings[phase] = time.perf_counter() - start
        model.close()
    timings["images"] = n_images
    return timings


def cdsm_benchmark(n: int, dim: int, epochs: int) -> dict[str, float]:
    import torch

    from conceptforge.loaders.binding.data import ADJ_NOUN, BindingSplit
    from conceptforge.loaders.binding.models import CDSM_KINDS, Vocabulary, circular_convolution, circular_convolution_direct
    from conceptforge.loaders.binding.train import TrainConfig, train_run

    g = torch.Generator().manual_seed(0)
    colours = ["blue", "gray", "yellow", "brown", "green", "purple", "red", "cyan"]
    shapes = ["cube", "sphere", "cylinder"]
    labels = [f"{c} {s}" for c in colours for s in shapes]

    def split(name: str, count: int) -> tuple[BindingSplit, torch.Tensor]:
        rows, cands, idx = [], [], []
        for _ in range(count):
            picks = torch.randperm(len(labels), generator=g)[:5].tolist()
            cands.append([labels[p] for p in picks])
            idx.append(0)
            rows.append(labels[picks[0]])
        return BindingSplit(name, [], rows, cands, idx, [["true"] + ["random"] * 4] * count), torch.randn(count, dim, generator=g)

    parts = {"train": split("train", n), "val": split("val", n // 10), "gen": split("gen", n // 10)}
    splits = {k: v[0] for k, v in parts.items()}
    images = {k: v[1] for k, v in parts.items()}
    vocab = Vocabulary(ADJ_NOUN, nouns=shapes, adjectives=colours, relations=[])
    results = {}
    threads = torch.get_num_threads()
    for kind in CDSM_KINDS:
        run = train_run(kind, splits, images, vocab=vocab, embedder=None, dim=dim, logit_scale=100.0, seed=0,
                        config=TrainConfig(epochs=epochs))
        results[kind] = run.examples_per_second
    # baseline: torch's default intra-op threads instead of the trainer's single thread
    run = train_run("add", splits, images, vocab=vocab, embedder=None, dim=dim, logit_scale=100.0, seed=0,
                    config=TrainConfig(epochs=epochs, cdsm_cpu_threads=None))
    results["add_default_threads"] = run.examples_per_second
    torch.set_num_threads(1)
    a, b = torch.randn(32, dim, generator=g), torch.randn(32, dim, generator=g)
    timings = {}
    for name, fn in (("fft", circular_convolution), ("direct", circular_convolution_direct)):
        fn(a, b)
        start = time.perf_counter()
        for _ in range(5):
            fn(a, b)
        timings[name] = (time.perf_counter() - start) / 5
    results["conv_fft_s"], results["conv_direct_s"] = timings["fft"], timings["direct"]
    torch.set_num_threads(threads)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=["base", "tiny"], default="base")
    parser.add_argument("--sub-images", type=int, default=32)
    parser.add_argument("--binding-images", type=int, default=96)
    parser.add_argument("--cdsm-examples", type=int, default=2000)
    parser.add_argument("--cdsm-dim", type=int, default=768)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    import logging

    import torch

    logging.basicConfig(level=logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="conceptforge-eval-bench-") as tmp:
        cache = cache_benchmark(Path(tmp), args.size, args.sub_images, args.binding_images)
    print(f"## Embedding cache ({args.size} CLIP, CPU, {torch.get_num_threads()} thread(s))")
    print(f"SUB VLM + binding zero-shot over {cache['images']} images")
    print(f"cold (encode + store): {cache['cold']:.2f} s")
    print(f"warm (cache hits):     {cache['warm']:.2f} s")
    print(f"speed-up warm vs cold: {cache['cold'] / cache['warm']:.1f}x (target >= 10x)")
    cdsm = cdsm_benchmark(args.cdsm_examples, args.cdsm_dim, args.epochs)
    print(f"\n## CDSM training throughput (Algorithm 1, batch 32, dim {args.cdsm_dim}, {args.cdsm_examples} train examples,"
          f" incl. per-epoch evaluation of all splits)")
    for kind in ("add", "mult", "conv", "tl", "rf"):
        print(f"{kind:>5}: {cdsm[kind]:,.0f} examples/s")
    print(f"add with torch's default {torch.get_num_threads()} threads (baseline): {cdsm['add_default_threads']:,.0f} examples/s"
          f" -> single-thread trainer {cdsm['add'] / cdsm['add_default_threads']:.1f}x")
    print(f"circular convolution (1 thread), 32 x {args.cdsm_dim}: FFT {1e3 * cdsm['conv_fft_s']:.2f} ms vs direct "
          f"{1e3 * cdsm['conv_direct_s']:.2f} ms -> {cdsm['conv_direct_s'] / cdsm['conv_fft_s']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
