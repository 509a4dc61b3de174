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


# t2v_metrics' strings, written out here from its source (t2v_metrics/constants.py SYSTEM_MSG;
# models/vqascore_models/llava_model.py format_question/format_answer, conversation "chat":
# SYSTEM_MSG + " USER: " + "<image>" + "\n" + question + " ASSISTANT: ", answer + "</s>";
# instructblip_model.py: 'Question: Does this figure show "{}"? Please answer yes or no.', answer "yes").
T2V_SYSTEM = (
    "A chat between a curious user and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the user's questions."
)


def _teacher_forced(plain, image, full: str, answer_tokens: int) -> tuple[float, list[int]]:
    """ln exp(-mean CE) of the last ``answer_tokens`` tokens of ``full``, by a plain forward."""
    log_probs, ids = _log_probs(plain, image, full)
    n = len(ids)
    logs = [float(log_probs[n - 1 - k - 1, ids[n - 1 - k]]) for k in range(answer_tokens)]
    return sum(logs) / answer_tokens, ids[n - answer_tokens :].tolist()


def test_llava_defaults_to_t2v_metrics_own_conversation_string(tiny_llava_dir, plain, tmp_path):
    """The LLaVA default is t2v_metrics' Vicuna conversation, not the checkpoint's (ChatML) chat
    template: the prompt bytes are t2v's, and the score is exp(-mean CE) of the answer "Yes" and
    the end of sequence after them, read by a plain forward of that string."""
    adapter = _adapter(tiny_llava_dir, tmp_path)
    assert adapter.vqascore.name == "t2v-llava-1.5" and "conversation" in adapter.protocol
    _, processor = plain
    eos = processor.tokenizer.eos_token
    prompt = adapter.variant_prompt('Does this figure show "a red cube"? Please answer yes or no.')
    assert prompt == (
        "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
        "detailed, and polite answers to the user's questions. USER: <image>\n"
        'Does this figure show "a red cube"? Please answer yes or no. ASSISTANT: '
    )
    assert adapter.variant_answer() == "Yes" + eos
    images, texts = [_image(1), _image(2, size=48)], [["a red cube", "a blue sphere"], ["a gray cylinder"]]
    got = adapter.match(images, texts, batch_size=2)  # right-padded batches of different lengths
    masses = adapter.match_allowed_mass(images, texts)
    yes, no = (processor.tokenizer.convert_tokens_to_ids(w) for w in ("Yes", "No"))
    for image, row, values, mass_row in zip(images, texts, got, masses):
        for text, value, mass in zip(row, values, mass_row):
            full = f'{T2V_SYSTEM} USER: <image>\nDoes this figure show "{text}"? Please answer yes or no. ASSISTANT: Yes{eos}'
            # byte-level BPE: the prompt's trailing space stays its own token, so "Yes" + eos add two
            # tokens (Llama's SentencePiece merges it into "▁Yes": t2v's "-1 because white space")
            expected, answer_ids = _teacher_forced(plain, image, full, 2)
            assert answer_ids == [yes, processor.tokenizer.convert_tokens_to_ids(eos)]
            assert value == pytest.approx(expected, rel=1e-5)  # the natural log of the geometric mean
            log_probs, ids = _log_probs(plain, image, full)
            first = len(ids) - 3  # the position that predicts "Yes"
            assert mass == pytest.approx(
                math.exp(float(log_probs[first, yes])) + math.exp(float(log_probs[first, no])), rel=1e-4
            )
    adapter.close()


def test_t2v_instructblip_rule_by_hand(tiny_llava_dir, plain, tmp_path):
    """t2v_metrics' InstructBLIP rule: the image, then its question, no conversation; the answer
    lower-case "yes" as its own word and the end of sequence, exp(-mean CE)."""
    adapter = _adapter(tiny_llava_dir, tmp_path, vqascore="t2v-instructblip")
    _, processor = plain
    eos = processor.tokenizer.eos_token
    assert adapter.variant_prompt('Question: Does this figure show "a red cube"? Please answer yes or no.') == (
        '<image>Question: Does this figure show "a red cube"? Please answer yes or no.'
    )
    assert adapter.variant_answer() == " yes" + eos
    image, texts = _image(4), ["a red cube", "a green sphere"]
    (got,) = adapter.match([image], [texts])
    for text, value in zip(texts, got):
        full = f'<image>Question: Does this figure show "{text}"? Please answer yes or no. yes{eos}'
        # the tiny tokenizer has no "yes" merge: " yes" is 4 byte tokens, then eos: 5 answer tokens
        expected, answer_ids = _teacher_forced(plain, image, full, 5)
        assert processor.tokenizer.convert_ids_to_tokens(answer_ids) == ["Ġ", "y", "e", "s", eos]
        assert value == pytest.approx(expected, rel=1e-5)
    adapter.close()


def test_teacher_forced_chat_variant_uses_the_chat_template(tiny_llava_dir, plain, tmp_path):
    """``teacher-forced-chat`` (ours): t2v's LLaVA question and rule inside the checkpoint's own
    chat template, the reply "Yes" up to the template's end of turn."""
    adapter = _adapter(tiny_llava_dir, tmp_path, vqascore="teacher-forced-chat")
    image, texts = _image(1), ["a red cube", "a blue sphere"]
    (got,) = adapter.match([image], [texts])
    _, processor = plain
    yes = processor.tokenizer.convert_tokens_to_ids("Yes")
    for text, value in zip(texts, got):
        question = f'Does this figure show "{text}"? Please answer yes or no.'
        full = processor.apply_chat_template(_messages(question, "Yes"), tokenize=False).removesuffix("\n")
        assert full.endswith("assistant\nYes<|im_end|>")
        expected, answer_ids = _teacher_forced(plain, image, full, 2)
        assert answer_ids[0] == yes
        assert value == pytest.approx(expected, rel=1e-5)
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
        assert value == pytest.approx(float(log_probs[-1, token]), rel=1e-5)  # ln P, float64
    adapter.close()


def test_a_variant_is_named_or_refused(tiny_llava_dir, tmp_path):
    from conceptforge.errors import ConceptforgeError
    from conceptforge.loaders.harness.adapters.vqascore import vqascore_variant

    assert vqascore_variant(None, model_type="qwen2_vl").name == "t2v-qwen2-vl"
    assert vqascore_variant(None, model_type="llava_onevision").name == "t2v-llava-onevision"
    assert vqascore_variant(None, model_type="idefics3").name == "next-token"  # no reference rule
    assert vqascore_variant("auto", model_type="llava").name == "t2v-llava-1.5"
    assert vqascore_variant(None, model_type="instructblip").name == "t2v-instructblip"
    with pytest.raises(ConceptforgeError, match="one of t2v-llava-1.5"):
        vqascore_variant("t2v-blip", model_type=None)


@pytest.fixture(scope="module")
def small_binding_dir(tmp_path_factory):
    from conceptforge.testing.synthetic import write_single_object

    return write_single_object(tmp_path_factory.mktemp("binding") / "single-object", n_per_label=1)


def _cli(argv: list[str]) -> tuple[int, str]:
    import contextlib
    import io

    from conceptforge.commands import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(argv)
    return status, err.getvalue()


def test_the_variant_is_chosen_on_the_command_line(tiny_llava_dir, small_binding_dir, tmp_path):
    """``--task-option binding-clip.vqascore=t2v-instructblip`` runs that rule (its protocol line
    in the results, its scores in the samples: ln of a geometric mean, below 0), and the results
    record the option; the default records ``auto`` and runs t2v's LLaVA-1.5 conversation."""
    import json

    import pyarrow.parquet as pq

    base = ["evaluate", "--model", str(tiny_llava_dir), "--tasks", f"binding-clip:{small_binding_dir}"]
    base += ["--device", "cpu", "--cache-dir", str(tmp_path / "cache")]
    out = tmp_path / "blip.json"
    status, err = _cli([*base, "--task-option", "binding-clip.vqascore=t2v-instructblip", "--output", str(out)])
    assert status == 0, err
    (task,) = json.loads(out.read_text())["tasks"]
    assert task["options"]["vqascore"] == "t2v-instructblip"
    assert "VQAScore (t2v-instructblip, t2v_metrics' InstructBLIP scorer)" in task["variant"]
    rows = pq.read_table(tmp_path / "blip.samples" / "binding-clip.parquet").to_pylist()
    assert all(r["score_scale"] == "log-probability" and max(r["scores"]) < 0 for r in rows)
    default = tmp_path / "default.json"
    status, err = _cli([*base, "--output", str(default)])
    assert status == 0, err
    (task,) = json.loads(default.read_text())["tasks"]
    assert task["options"]["vqascore"] == "auto" and "t2v-llava-1.5" in task["variant"]
    assert "t2v_metrics' LLaVA-1.5 conversation" in task["variant"]


def test_a_variant_for_a_model_it_does_not_apply_to_is_one_line(tiny_clip_dir, tiny_llava_dir, tmp_path):
    """Checked before the model loads: a CLIP model is not scored by VQAScore; an unknown name
    lists the variants; with by_answer the option has nothing to choose."""
    base = ["evaluate", "--tasks", "binding-clip:org/data", "--output", str(tmp_path / "out.json")]
    cases = [
        (tiny_clip_dir, ["binding-clip.vqascore=t2v-llava-1.5"], "is a clip model, not scored by VQAScore"),
        (tiny_clip_dir, ["binding-clip.vqascore=t2v-blip"], "t2v-instructblip"),
        (tiny_llava_dir, ["binding-clip.vqascore=next-token", "binding-clip.by_answer=true"], "does not apply with"),
    ]
    for model, options, expected in cases:
        given = [arg for option in options for arg in ("--task-option", option)]
        status, err = _cli([*base, "--model", str(model), *given])
        lines = err.strip().splitlines()
        assert status == 2 and len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], err
        assert "binding-clip.vqascore" in lines[0]
    assert not (tmp_path / "out.json").exists()
