"""What the conceptbed-ccd tests with a VLM oracle share: one textual-inversion learner's images to
score, and the by-hand P("Yes") of one sample row that their assertions compare with.

Why here: the local-VLM test (test_conceptbed_oracles.py) and the served-VLM test
(test_conceptbed_endpoint.py) must build the same data and read the same number by hand, or their
agreement would prove nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def generate_textual_inversion(tmp_path: Path, tiny_sd: Path, datasets_root: Path, captions_file: Path, write_spec):
    """The spec file and the output folder of a one-step textual-inversion run on beagle and tabby."""
    from conceptforge.generators.conceptbed.learners import LearnerConfig
    from conceptforge.generators.conceptbed.spec import load_spec
    from conceptforge.generators.conceptbed.stage import ConceptBedGenerator, GenerateOptions

    spec_path = write_spec(tmp_path, datasets_root, ["beagle", "tabby"], captions_file)
    out = tmp_path / "ti"
    config = LearnerConfig(
        learner="textual-inversion", model_id=str(tiny_sd), steps=1, num_inference_steps=2, resolution=32
    )
    ConceptBedGenerator(load_spec(spec_path), GenerateOptions(config=config, out=out, num_images=1)).run()
    return spec_path, out


def yes_probability_by_hand(llava: Path, dataset: Path, row: dict[str, Any]) -> tuple[float, float]:
    """P("Yes") and the largest next-token probability after the chat prompt of ``row``'s question
    about its composition image, from the local model's own logits (not through the adapter)."""
    import torch
    from datasets import load_dataset
    from transformers import AutoModelForImageTextToText, AutoProcessor

    composition = load_dataset(str(dataset))["composition"]
    image = composition[[str(i) for i in composition["item_id"]].index(row["record_id"])]["image"]
    processor = AutoProcessor.from_pretrained(llava, backend="pil")
    model = AutoModelForImageTextToText.from_pretrained(llava).eval()
    text = row["question"][:1].upper() + row["question"][1:] + " Please answer yes or no."
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    with torch.no_grad():
        logits = model(**processor(images=image.convert("RGB"), text=prompt, return_tensors="pt")).logits[0, -1]
    probs = torch.softmax(logits.double(), dim=-1)
    return float(probs[processor.tokenizer.convert_tokens_to_ids("Yes")]), float(probs.max())


def check_vqa_answers(
    results: Path, samples: Path, *, adapter: str, llava: Path, dataset: Path, rel: float
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The one conceptbed-ccd task of ``results`` ran the VQA oracle through ``adapter``, and one
    generated image's stored P("Yes") and top probability match the by-hand ones within ``rel``.
    Returns the task and the sample rows for the caller's own checks."""
    import json

    import pyarrow.parquet as pq
    import pytest

    (task,) = json.loads(results.read_text())["tasks"]
    assert (task["protocol"], task["adapter"]) == ("conceptbed/ccd-vqascore", adapter)
    assert {"vqa.ccd", "object.ccd"} <= set(task["metrics"])
    rows = pq.read_table(samples / "conceptbed-ccd.parquet").to_pylist()
    vqa = [r for r in rows if r["oracle_task"] == "vqa"]
    assert {r["source"] for r in vqa} == {"textual-inversion", "original"}
    # one generated image's answer by hand: P("Yes") after the chat prompt, from the logits
    row = next(r for r in vqa if r["source"] == "textual-inversion")
    yes, top = yes_probability_by_hand(llava, dataset, row)
    assert row["scores"][0] == pytest.approx(yes, rel=rel)
    assert row["max_prob"] == pytest.approx(top, rel=rel)
    return task, rows
