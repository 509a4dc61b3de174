"""Generative-VLM scoring in ``conceptforge evaluate``: the adapter's batches vs the one-at-a-time loop.

Ours: ``loaders/harness/adapters/generative_vlm.GenerativeVLMAdapter`` — ``match`` (VQAScore:
P("Yes") to 'Does this figure show "{text}"?', binding-clip's 5 candidates per image, every
(image, text) pair of the run batched 16 at a time) and ``choose`` (SUB's multiple-choice question,
option-letter probabilities, 16 images per forward), each round with an empty score cache.
Baseline: what a user writes without the harness — for each pair, ``processor(images=…,
text=chat prompt)``, ``model(**inputs)``, softmax of the last position's logits, read the token(s).
Same model, images and prompts; the largest difference between the two's numbers is reported.
Model: a random LLaVA (CLIP vision + Llama) built from a config with a real VLM's token layout
(224 px, 196 image tokens; 4+4 layers of width 256), "Yes"/"No" single tokens.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from benchmarks._harness import Result, interleave
from conceptforge.filters.vqa.questions import build_question
from conceptforge.filters.vqa.scorer import VQAScorer
from conceptforge.loaders.harness.adapters.generative_vlm import VQASCORE_QUESTION, GenerativeVLMAdapter
from conceptforge.testing.tiny_vlms import build_tiny_llava

SMALL = {"image_size": 224, "patch": 16, "hidden": 256, "layers": 4, "heads": 4}
CANDIDATES = ["red cube", "blue sphere", "gray cylinder", "red sphere", "blue cube"]
GROUPS = {
    "has_bill_shape": ["dagger", "needle", "cone", "hooked"],
    "has_crown_color": ["blue", "brown", "grey", "black", "white"],
}


def _loop(model, processor, images, texts, token_ids) -> list[list[float]]:
    """The one-at-a-time loop: one processor call and one forward per (image, text)."""
    out = []
    for image, text in zip(images, texts):
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
        prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        inputs = processor(images=image, text=prompt, return_tensors="pt")
        probs = torch.softmax(model(**inputs).logits[0, -1].float(), dim=-1)
        out.append([float(probs[i]) for i in token_ids])
    return out


def run(quick: bool) -> list[Result]:
    n, batch, repeats = (8, 16, 5) if quick else (32, 16, 7)
    torch.set_grad_enabled(False)
    tmp = Path(tempfile.mkdtemp(prefix="vlm-scoring-"))
    path = build_tiny_llava(tmp / "vlm", words=("Yes", "No"), **SMALL)
    scorer = VQAScorer.from_pretrained(str(path), device="cpu")
    model, processor = scorer.model, scorer.processor
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)) for _ in range(n)]
    texts = [[f"a photo of {c}" for c in np.roll(CANDIDATES, i)] for i in range(n)]
    pairs_images = [image for image in images for _ in CANDIDATES]
    pairs_texts = [VQASCORE_QUESTION.format(text=t) for row in texts for t in row]
    names = sorted(GROUPS)
    questions = [build_question(names[i % 2], GROUPS[names[i % 2]]) for i in range(n)]
    yes = [processor.tokenizer.convert_tokens_to_ids("Yes")]
    rounds = {"n": 0}
    values: dict[str, object] = {}

    def fresh_adapter() -> GenerativeVLMAdapter:
        rounds["n"] += 1  # an empty score cache each round: the numbers are computed, not read back
        return GenerativeVLMAdapter(scorer, revision="bench", cache_dir=tmp / f"cache-{rounds['n']}")

    def ours_match(_round: int) -> None:
        values["ours_match"] = fresh_adapter().match(images, texts, batch_size=batch)

    def loop_match(_round: int) -> None:
        values["loop_match"] = _loop(model, processor, pairs_images, pairs_texts, yes)

    def ours_choose(_round: int) -> None:
        values["ours_choose"] = fresh_adapter().choose(images, questions, batch_size=batch)

    def loop_choose(_round: int) -> None:
        rows = []
        for image, question in zip(images, questions):
            letters = [processor.tokenizer.convert_tokens_to_ids(chr(65 + i)) for i in range(len(question.options))]
            (mass,) = _loop(model, processor, [image], [question.text], letters)
            rows.append([m / sum(mass) for m in mass])
        values["loop_choose"] = rows

    fresh_adapter().match(images[:2], texts[:2], batch_size=batch)  # warm-up (first-call costs)
    _loop(model, processor, pairs_images[:2], pairs_texts[:2], yes)
    cpu_match: dict[str, list[float]] = {}
    match_t, match_base = interleave(ours_match, loop_match, repeats, cpu_match)
    cpu_choose: dict[str, list[float]] = {}
    choose_t, choose_base = interleave(ours_choose, loop_choose, repeats, cpu_choose)
    match_diff = max(
        abs(a - b[0])
        for row, loop in zip(values["ours_match"], np.array_split(values["loop_match"], n))
        for a, b in zip(row, loop)
    )
    choose_diff = max(
        abs(a - b) for s, row in zip(values["ours_choose"], values["loop_choose"]) for a, b in zip(s.probs, row)
    )
    cached = GenerativeVLMAdapter(scorer, revision="bench", cache_dir=tmp / f"cache-{rounds['n']}")
    cached.match(images, texts)  # fills the cache (the last round's cache held its choose answers only)
    start = time.perf_counter()
    cached.match(images, texts)
    again = time.perf_counter() - start
    work = f"{n} images 320x240, random LLaVA 224 px / 196 image tokens, 4+4 layers of width 256"
    return [
        Result(
            "VQAScore match (binding-clip: 5 candidates per image)",
            f"ours: adapter, batches of {batch}",
            match_t,
            "one (image, text) at a time",
            match_base,
            work=f"{n * len(CANDIDATES)} pairs; " + work,
            ours_cpu=cpu_match["ours"],
            baseline_cpu=cpu_match["baseline"],
            extra={
                "largest difference in P(Yes), adapter vs loop": f"{match_diff:.1e}",
                "the same match again, every pair from the score cache": f"{again:.3f} s",
            },
        ),
        Result(
            "option-letter choose (sub-vlm: the paper's question)",
            f"ours: adapter, batches of {batch}",
            choose_t,
            "one image at a time",
            choose_base,
            work=work,
            ours_cpu=cpu_choose["ours"],
            baseline_cpu=cpu_choose["baseline"],
            extra={"largest difference in option probabilities, adapter vs loop": f"{choose_diff:.1e}"},
        ),
    ]
