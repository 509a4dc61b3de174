"""By-answer generation (issue 40): the generative-VLM adapter's batched ``answer_text`` vs a one-at-a-time ``generate`` loop.

Ours: ``GenerativeVLMAdapter.answer_text`` — the by-answer protocols' greedy answers
(``do_sample=False``, 16 new tokens), 16 (image, prompt) pairs per ``generate`` call, left-padded
from the probability path's batch. Baseline: what a user writes without the harness — for each
image, ``processor(images=…, text=chat prompt)``, ``model.generate(do_sample=False)``, decode.
Same model, images and prompts (``by_answer.render_choice_prompt`` of SUB-like questions of two
lengths, so batches are padded); the number of answers that differ between the two is reported.
Model: a random LLaVA (CLIP vision + Llama) with a real VLM's token layout (224 px, 196 image
tokens; 4+4 layers of width 256); random weights rarely stop early, so every answer is 16 tokens.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from benchmarks._harness import Result, interleave
from conceptforge.filters.vqa.scorer import VQAScorer
from conceptforge.loaders.harness.adapters.generative_vlm import GenerativeVLMAdapter
from conceptforge.loaders.harness.by_answer import DEFAULT_MAX_NEW_TOKENS, ChoiceItem, render_choice_prompt
from conceptforge.testing.tiny_vlms import build_tiny_llava

SMALL = {"image_size": 224, "patch": 16, "hidden": 256, "layers": 4, "heads": 4}
QUESTIONS = (
    ("What type of bill shape does this bird have?", ("dagger", "needle", "cone", "hooked", "Other")),
    ("What type of crown color does this bird have?", ("blue", "brown", "grey", "black", "white", "Other")),
)


def _loop(model, processor, images, prompts, max_new_tokens: int) -> list[str]:
    """The one-at-a-time loop: one processor call and one greedy ``generate`` per (image, prompt)."""
    out = []
    for image, text in zip(images, prompts):
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
        prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        inputs = processor(images=image, text=prompt, return_tensors="pt")
        ids = model.generate(**inputs, do_sample=False, max_new_tokens=max_new_tokens)
        out.append(processor.tokenizer.decode(ids[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True).strip())
    return out


def run(quick: bool) -> list[Result]:
    n, batch, repeats = (8, 16, 3) if quick else (32, 16, 5)
    torch.set_grad_enabled(False)
    tmp = Path(tempfile.mkdtemp(prefix="answer-text-"))
    path = build_tiny_llava(tmp / "vlm", **SMALL)
    scorer = VQAScorer.from_pretrained(str(path), device="cpu")
    model, processor = scorer.model, scorer.processor
    adapter = GenerativeVLMAdapter(scorer, revision="bench", cache_dir=tmp / "cache")
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)) for _ in range(n)]
    items = [ChoiceItem(str(i), None, *QUESTIONS[i % 2], 0, "c") for i in range(n)]
    prompts = [render_choice_prompt(item) for item in items]
    tokens = DEFAULT_MAX_NEW_TOKENS
    values: dict[str, list[str]] = {}

    def ours(_round: int) -> None:
        values["ours"] = adapter.answer_text(images, prompts, max_new_tokens=tokens, batch_size=batch)

    def loop(_round: int) -> None:
        values["loop"] = _loop(model, processor, images, prompts, tokens)

    adapter.answer_text(images[:2], prompts[:2], max_new_tokens=tokens, batch_size=batch)  # warm-up
    _loop(model, processor, images[:2], prompts[:2], tokens)
    cpu: dict[str, list[float]] = {}
    ours_t, loop_t = interleave(ours, loop, repeats, cpu)
    differ = sum(a != b for a, b in zip(values["ours"], values["loop"]))
    return [
        Result(
            "by-answer generation (answer_text, greedy, 16 new tokens)",
            f"ours: adapter, batches of {batch}",
            ours_t,
            "one generate per image",
            loop_t,
            work=f"{n} images 320x240, random LLaVA 224 px / 196 image tokens, 4+4 layers of width 256",
            ours_cpu=cpu["ours"],
            baseline_cpu=cpu["baseline"],
            extra={"answers that differ, adapter vs loop": f"{differ} of {n}"},
        )
    ]
