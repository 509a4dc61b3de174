"""VQA filter scorer: batches of 16 vs one image at a time, and time outside the model forward.

Ours: ``filters.vqa.VQAScorer.score(batch_size=16)``; baseline: the same scorer one image at a
time (``batch_size=1``), what a plain ``model(**processor(...))`` loop does. Same images (320x240)
and CUB multiple-choice questions. Model: a random LLaVA (CLIP vision + Llama) built from a
config with a real VLM's token layout (224 px, 196 image tokens; 4+4 layers of width 256).
"Outside forward" is the share of each ``score`` call's wall time not spent in the model forward
call (the first batch's preprocessing, which nothing can overlap, preprocessing the prefetch
thread does not hide, softmax, letter sums, thread start/stop), from the scorer's own forward timer.
The warm-up call has already seen the question texts and image size, as a filter run has after
its first batch, so the timed calls use the checked fast input path (``filters/vqa/inputs.py``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from benchmarks._harness import Result, compare
from conceptforge.cub import CubAttributes
from conceptforge.filters.vqa.questions import QuestionBuilder
from conceptforge.filters.vqa.scorer import VQAScorer
from conceptforge.testing.tiny_vlms import build_tiny_llava

ATTRIBUTES = [
    "has_bill_shape::dagger",
    "has_bill_shape::needle",
    "has_bill_shape::cone",
    "has_crown_color::blue",
    "has_crown_color::brown",
    "has_crown_color::grey",
    "has_crown_color::black",
    "has_tail_pattern::solid",
    "has_tail_pattern::spotted",
    "has_tail_pattern::multi-colored",
]
SMALL = {"image_size": 224, "patch": 16, "hidden": 256, "layers": 4, "heads": 4}


def run(quick: bool) -> list[Result]:
    # Scoped: benchmarks share one process, and a later one trains (learners needs autograd;
    # set_grad_enabled(False) here made it fail with "element 0 of tensors does not require grad").
    with torch.inference_mode():
        return _run(quick)


def _run(quick: bool) -> list[Result]:
    n, batch, repeats = (16, 16, 9) if quick else (48, 16, 9)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_llava(Path(tmp) / "vlm", **SMALL)
        scorer = VQAScorer.from_pretrained(str(path), device="cpu")
    builder = QuestionBuilder(CubAttributes.from_names(ATTRIBUTES).groups)
    groups = sorted(builder.groups)
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)) for _ in range(n)]
    questions = [builder(groups[i % len(groups)]) for i in range(n)]
    shares: dict[str, list[float]] = {"ours": [], "baseline": []}
    scores = {}

    def timed(name: str, batch_size: int):
        def fn(_round: int) -> None:
            import time

            scorer.forward_seconds = 0.0
            start = time.perf_counter()
            scores[name] = scorer.score(images, questions, batch_size=batch_size)
            shares[name].append(1 - scorer.forward_seconds / (time.perf_counter() - start))

        return fn

    ours, one = timed("ours", batch), timed("baseline", 1)
    scorer.score(images[:4], questions[:4], batch_size=4)  # warm-up
    work = f"{n} images 320x240, random LLaVA 224 px / 196 image tokens, 4+4 layers of width 256"
    result = compare("VQA scorer", (f"ours: batches of {batch}", ours), ("one image at a time", one), repeats, work)
    diff = max(abs(a - b) for x, y in zip(scores["ours"], scores["baseline"]) for a, b in zip(x.probs, y.probs))
    result.extra = {
        f"time outside the model forward, batches of {batch} (median)": f"{100 * float(np.median(shares['ours'])):.1f}%",
        "time outside the model forward, one at a time (median)": f"{100 * float(np.median(shares['baseline'])):.1f}%",
        "largest difference in option probabilities, batched vs one at a time": f"{diff:.1e}",
    }
    return [result]
