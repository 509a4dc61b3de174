"""VQAScore as t2v_metrics computes it, per model family (docs/metrics.md), each checked against a
plain transformers forward written here: the teacher-forced answer for LLaVA-1.5 (the geometric
mean of P(Yes) and P(end of turn | Yes)) and one next-token id for the HF-native families."""

from __future__ import annotations

import math

import pytest

from conceptforge.loaders.harness.model_ref import resolve_model


def _image(seed: int, size: int = 40):
    import numpy as np
    from PIL import Image

    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (size, size, 3), dtype=np.uint8))


@pytest.fixture(scope="module")
def plain(tiny_llava_dir):
    """The tiny LLaVA and its processor, loaded the way a user would, for the hand computations."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    return (
        AutoModelForImageTextToText.from_pretrained(tiny_llava_dir).eval(),
        AutoProcessor.from_pretrained(tiny_llava_dir, backend="pil"),
    )


def _messages(text: str, answer: str | None = None) -> list[dict]:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    if answer is not None:
        messages.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
    return messages


def _log_probs(plain, image, text: str):
    import torch

    model, processor = plain
    with torch.no_grad():
        logits = model(**processor(images=image, text=text, return_tensors="pt")).logits[0].double()
    return torch.log_softmax(logits, dim=-1), processor(images=image, text=text, return_tensors="pt")["input_ids"][0]


def _adapter(tiny_llava_dir, tmp_path, vqascore=None):
    from conceptforge.loaders.harness.adapters.base import load_adapter
    from conceptforge.loaders.harness.adapters.generative_vlm import GenerativeVLMAdapter

    loaded = load_adapter(resolve_model(str(tiny_llava_dir)), device="cpu", dtype=None, cache_dir=str(tmp_path))
    if vqascore is None:
        return loaded
    return GenerativeVLMAdapter(loaded.scorer, revision="r", cache_dir=tmp_path / vqascore, vqascore=vqascore)


def test_llava_defaults_to_t2v_metrics_teacher_forced_answer(tiny_llava_dir, plain, tmp_path):
    adapter = _adapter(tiny_llava_dir, tmp_path)
    assert adapter.vqascore.name == "t2v-llava-1.5" and "teacher-forced" in adapter.protocol
    images, texts = [_image(1), _image(2, size=48)], [["a red cube", "a blue sphere"], ["a gray cylinder"]]
    got = adapter.match(images, texts, batch_size=2)  # right-padded batches of different lengths
    masses = adapter.match_allowed_mass(images, texts)
    _, processor = plain
    yes, no = (processor.tokenizer.convert_tokens_to_ids(w) for w in ("Yes", "No"))
    for image, row, values, mass_row in zip(images, texts, got, masses):
        for text, value, mass in zip(row, values, mass_row):
            question = f'Does this figure show "{text}"? Please answer yes or no.'
            # the reply as the chat template writes it, up to its end of turn: "Yes<|im_end|>"
            full = processor.apply_chat_template(_messages(question, "Yes"), tokenize=False).removesuffix("\n")
            assert full.endswith("assistant\nYes<|im_end|>")
            log_probs, ids = _log_probs(plain, image, full)
            n = len(ids)  # the answer tokens are the last two: "Yes" at n-2, "<|im_end|>" at n-1
            assert ids[n - 2] == yes
            answer = [float(log_probs[n - 3, ids[n - 2]]), float(log_probs[n - 2, ids[n - 1]])]
            assert value == pytest.approx(math.exp(sum(answer) / 2), rel=1e-4)  # exp(-mean CE)
            assert mass == pytest.approx(
                math.exp(float(log_probs[n - 3, yes])) + math.exp(float(log_probs[n - 3, no])), rel=1e-4
            )
    adapter.close()


@pytest.mark.parametrize(
    "variant,question",
    [
        ("t2v-qwen2-vl", 'Does this image show "{}"?'),
        ("t2v-llava-onevision", 'Does this image show "{}"? Answer the question with Yes or No'),
        ("next-token", 'Does this figure show "{}"? Please answer yes or no.'),
    ],
)
def test_next_token_variants_by_hand(variant, question, tiny_llava_dir, plain, tmp_path):
    adapter = _adapter(tiny_llava_dir, tmp_path, vqascore=variant)
    image, texts = _image(3), ["a red cube", "a green sphere"]
    (got,) = adapter.match([image], [texts])
    _, processor = plain
    token = processor.tokenizer.encode("Yes")[0]  # t2v_metrics' id: the first of encode("Yes")
    for text, value in zip(texts, got):
        prompt = processor.apply_chat_template(
            _messages(question.format(text)), add_generation_prompt=True, tokenize=False
        )
        log_probs, _ = _log_probs(plain, image, prompt)
        assert value == pytest.approx(math.exp(float(log_probs[-1, token])), rel=1e-4)
    adapter.close()


def test_a_variant_is_named_or_refused(tiny_llava_dir, tmp_path):
    from conceptforge.errors import ConceptforgeError
    from conceptforge.loaders.harness.adapters.vqascore import vqascore_variant

    assert vqascore_variant(None, model_type="qwen2_vl").name == "t2v-qwen2-vl"
    assert vqascore_variant(None, model_type="llava_onevision").name == "t2v-llava-onevision"
    assert vqascore_variant(None, model_type="idefics3").name == "next-token"  # no reference rule
    with pytest.raises(ConceptforgeError, match="one of t2v-llava-1.5"):
        vqascore_variant("t2v-blip", model_type=None)
