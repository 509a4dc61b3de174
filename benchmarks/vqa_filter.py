#!/usr/bin/env python
"""VQA filter scorer: images/s batched vs one image at a time, and time outside the model forward.

Builds a random LLaVA (CLIP vision + Llama) from configs — no download — in two sizes: ``tiny``
(the test model, 32 px) and ``small`` (224 px / 196 image tokens, 4+4 layers of width 256: the
token layout of a real VLM at a size a CPU can run). Both runs score the same images with the
same questions in the same process; the ratio is the speed-up of batching.

    python benchmarks/vqa_filter.py [--size small] [--images 48] [--batch-size 16] [--device cpu]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

import torch
from PIL import Image

from conceptforge.cub import CubAttributes
from conceptforge.filters.questions import QuestionBuilder
from conceptforge.filters.vqa import VQAScorer
from conceptforge.testing.sub_inputs import MINI_ATTRIBUTES, image_png
from conceptforge.testing.tiny_vlms import build_tiny_llava

SIZES = {
    "tiny": {},
    "small": {"image_size": 224, "patch": 16, "hidden": 256, "layers": 4, "heads": 4},
}


def run(scorer: VQAScorer, images, questions, batch_size: int) -> tuple[float, float]:
    scorer.forward_seconds = 0.0
    start = time.perf_counter()
    scorer.score(images, questions, batch_size=batch_size)
    total = time.perf_counter() - start
    return total, scorer.forward_seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--images", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_llava(Path(tmp) / "vlm", **SIZES[args.size])
        scorer = VQAScorer.from_pretrained(str(path), device=args.device)
    builder = QuestionBuilder(CubAttributes.from_names(MINI_ATTRIBUTES).groups)
    groups = sorted(builder.groups)
    images = [Image.open(io.BytesIO(image_png(i, size=(320, 240)))).convert("RGB") for i in range(args.images)]
    questions = [builder(groups[i % len(groups)]) for i in range(args.images)]
    run(scorer, images[:4], questions[:4], 4)  # warm-up
    single_total, single_fwd = run(scorer, images, questions, 1)
    batch_total, batch_fwd = run(scorer, images, questions, args.batch_size)
    n = args.images
    print(f"device {scorer.device}, dtype {str(scorer.dtype).replace('torch.', '')}, model size {args.size}, "
          f"{n} images, torch threads {torch.get_num_threads()}")
    print(f"{'mode':>16s} {'images/s':>9s} {'forward share':>14s} {'outside forward':>16s}")
    for name, total, fwd in [("one at a time", single_total, single_fwd), (f"batch {args.batch_size}", batch_total, batch_fwd)]:
        print(f"{name:>16s} {n / total:9.2f} {fwd / total:14.1%} {1 - fwd / total:16.1%}")
    print(f"speed-up batched / one at a time: {single_total / batch_total:.2f}x (target >= 3x)")
    print(f"time outside the model forward (batched): {1 - batch_fwd / batch_total:.1%} (target < 10%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
