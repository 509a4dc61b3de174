import json

import pytest
import torch
from PIL import Image

from conceptforge.cub import CubAttributes
from conceptforge.cub import group_words as humanize_group
from conceptforge.errors import ConceptforgeError
from conceptforge.filters.vqa.questions import OTHER, QuestionBuilder, build_question
from conceptforge.filters.vqa.scorer import VQAScorer
from conceptforge.testing.sub_inputs import MINI_ATTRIBUTES, image_png

GROUPS = CubAttributes.from_names(MINI_ATTRIBUTES).groups


def _images(n, offset=0):
    import io

    return [
        Image.open(io.BytesIO(image_png(offset + i, size=(40 + 3 * i, 30 + 2 * i)))).convert("RGB") for i in range(n)
    ]


def test_question_text_follows_the_paper():
    q = build_question("has_bill_shape", GROUPS["has_bill_shape"], answer_hint="")
    assert q.text == (
        "What type of bill shape does this bird have? Please pick between "
        "A) curved (up or down) B) dagger C) needle D) Other"
    )
    assert q.options == ("curved_(up_or_down)", "dagger", "needle", OTHER)
    assert q.letters == ("A", "B", "C", "D")
    assert humanize_group("has_upperparts_color") == "upperparts color"


def test_unknown_group_is_a_clear_error():
    builder = QuestionBuilder(GROUPS)
    with pytest.raises(ConceptforgeError, match="unknown attribute group 'has_fin_color'"):
        builder("has_fin_color")
    with pytest.raises(ConceptforgeError, match="more options than letters"):
        build_question("has_x", [f"v{i}" for i in range(26)])


def test_probabilities_sum_to_one_and_match_a_hand_forward(tiny_scorer):
    question = QuestionBuilder(GROUPS)("has_crown_color")
    image = _images(1)[0]
    [scores] = tiny_scorer.score([image], [question])
    assert len(scores.probs) == len(question.options) == 11
    assert sum(scores.probs) == pytest.approx(1.0, abs=1e-9)
    assert 0.0 < scores.raw_mass <= 1.0

    # By hand: the full model forward, softmax over the vocabulary at the last prompt token.
    processor, model = tiny_scorer.processor, tiny_scorer.model
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question.text}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n") and question.text in text
    inputs = processor(text=[text], images=[image], return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits[0, -1].float()
    probs = torch.softmax(logits, dim=-1)
    letter_ids = [processor.tokenizer.convert_tokens_to_ids(letter) for letter in "ABCDEFGHIJK"]
    mass = probs[letter_ids]
    assert scores.raw_mass == pytest.approx(float(mass.sum()), rel=1e-5)
    expected = (mass / mass.sum()).tolist()
    assert list(scores.probs) == pytest.approx(expected, rel=1e-4, abs=1e-7)
    assert scores.answer == question.options[int(mass.argmax())]


def test_batching_gives_the_same_numbers_as_one_by_one(tiny_scorer):
    builder = QuestionBuilder(GROUPS)
    images = _images(5)
    questions = [
        builder(g)
        for g in ("has_crown_color", "has_bill_shape", "has_tail_pattern", "has_crown_color", "has_bill_shape")
    ]
    batched = tiny_scorer.score(images, questions, batch_size=5)
    single = [tiny_scorer.score([im], [q], batch_size=1)[0] for im, q in zip(images, questions)]
    for b, s in zip(batched, single):
        assert b.options == s.options
        assert list(b.probs) == pytest.approx(list(s.probs), rel=1e-4, abs=1e-6)
        assert b.raw_mass == pytest.approx(s.raw_mass, rel=1e-4)


def test_multi_token_option_letters_are_refused(tiny_vlm_no_k):
    scorer = VQAScorer.from_pretrained(str(tiny_vlm_no_k), device="cpu")
    builder = QuestionBuilder(GROUPS)
    # Four options (A-D) are single tokens, so the bill-shape question is fine ...
    scorer.score(_images(1), [builder("has_bill_shape")])
    # ... but the crown-colour question needs the letter K, which this tokenizer cannot encode.
    with pytest.raises(ConceptforgeError, match="option letter 'K'.*cannot be used"):
        scorer.score(_images(1), [builder("has_crown_color")])


def test_remote_code_needs_the_explicit_flag(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "model_type": "conceptforge_remote_vlm",
                "auto_map": {"AutoConfig": "configuration_remote.RemoteConfig"},
            }
        )
    )
    (tmp_path / "configuration_remote.py").write_text("raise RuntimeError('remote code must not run')\n")
    with pytest.raises(ConceptforgeError, match="explicit --trust-remote-code"):
        VQAScorer.from_pretrained(str(tmp_path), device="cpu")


def test_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(ConceptforgeError) as caught:
        VQAScorer.from_pretrained(str(tmp_path / "nope"), device="cpu")
    assert str(caught.value) == f"cannot load VQA model: no such local folder {tmp_path / 'nope'}"


def test_native_internvl_loads_without_torchvision_and_batches_exactly(tmp_path):
    from conceptforge.filters.vqa.scorer import _processor_without_video
    from conceptforge.testing.tiny_vlms import build_tiny_internvl

    path = str(build_tiny_internvl(tmp_path / "internvl"))
    # Without torchvision the processor is rebuilt without its video processor; with it (open_clip's
    # extra installs it) AutoProcessor loads as usual: the rebuilt one is checked either way.
    rebuilt = _processor_without_video(path, {"revision": None, "trust_remote_code": False}, ImportError("torchvision"))
    assert rebuilt.video_processor is None
    scorer = VQAScorer.from_pretrained(path, device="cpu")
    without_video = VQAScorer(scorer.model, rebuilt, model_id=path)
    question = QuestionBuilder(GROUPS)("has_bill_shape")
    images = _images(3)
    batched = scorer.score(images, [question] * 3, batch_size=3)
    for image, b in zip(images, batched):
        [s] = scorer.score([image], [question])
        [w] = without_video.score([image], [question])
        assert list(w.probs) == pytest.approx(list(s.probs), rel=1e-6)
        assert sum(b.probs) == pytest.approx(1.0, abs=1e-9)
        assert list(b.probs) == pytest.approx(list(s.probs), rel=1e-4, abs=1e-6)
