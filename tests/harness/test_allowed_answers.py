"""Issue #39 point 4: the allowed answers (option letters, Yes/No) normalised in log space with the
mass they carried recorded, and binding ties decided on the score's own scale. Every expected
number is worked out here from the formula (``math``) or from a plain transformers forward."""

from __future__ import annotations

import logging
import math

import pytest

from conceptforge.loaders.harness.model_ref import resolve_model


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    return top + math.log(math.fsum(math.exp(v - top) for v in values))


# ----------------------------------------------------------------------------------- option letters
LETTER_LOGITS = [-4.0, -3.0, -2.5, -2.0]


def test_option_letters_far_below_float32_keep_their_ratios():
    """Letters at logits -4, -3, -2.5, -2 beside one token at 100 carry ~1e-44 of the mass: a
    float32 softmax rounds them to a few denormal steps (options ~0.1 off); in log space the
    options are softmax([-4, -3, -2.5, -2]) to float precision."""
    import torch

    from conceptforge.filters.vqa.scorer import option_scores

    logits = torch.zeros(40, dtype=torch.float32)
    logits[0] = 100.0
    letters = [[1], [2], [3], [4]]
    for i, (token,) in enumerate(letters):
        logits[token] = LETTER_LOGITS[i]
    got = option_scores(("a", "b", "c", "none"), torch.log_softmax(logits, dim=-1), letters)
    denominator = math.fsum(math.exp(v) for v in LETTER_LOGITS)
    assert list(got.probs) == pytest.approx([math.exp(v) / denominator for v in LETTER_LOGITS], rel=1e-5)
    everything = [100.0, *LETTER_LOGITS] + [0.0] * 35
    expected_mass = math.exp(_logsumexp(LETTER_LOGITS) - _logsumexp(everything))
    assert expected_mass < 1e-30
    assert got.raw_mass == pytest.approx(expected_mass, rel=1e-4)  # float64 holds it
    # the float32 softmax-then-renormalise this replaces is far off on the same logits
    probs = torch.softmax(logits, dim=-1)[1:5].double()
    assert max(abs(float(p / probs.sum()) - e) for p, e in zip(probs, got.probs)) > 0.05


def test_normalise_allowed_from_endpoint_log_probabilities():
    """The served-model path: per-answer log-probabilities (variants already summed), no logits."""
    import numpy as np

    from conceptforge.loaders.harness.allowed_tokens import allowed_distribution, normalise_allowed

    got = normalise_allowed(np.array([[-80.0, -81.0, -np.inf], [-np.inf, -np.inf, -np.inf]]))
    first = 1.0 / (1.0 + math.exp(-1.0))
    assert got.probs[0].tolist() == pytest.approx([first, 1.0 - first, 0.0])
    assert got.probs[1].tolist() == pytest.approx([1 / 3] * 3)  # no mass at all: uniform
    assert got.log_mass[0] == pytest.approx(_logsumexp([-80.0, -81.0]))
    assert got.mass[1] == 0.0
    # a letter with two token variants ("A", " A") counts both
    logits = np.log(np.array([[0.1, 0.2, 0.3, 0.4]]))
    both = allowed_distribution(logits, [[0, 1], [2]])
    assert both.probs[0].tolist() == pytest.approx([0.3 / 0.6, 0.3 / 0.6])
    assert both.mass[0] == pytest.approx(0.6)


def test_low_allowed_mass_is_counted_and_warned(caplog):
    from conceptforge.loaders.harness.allowed_tokens import LOW_ALLOWED_MASS_METRIC, low_allowed_mass_metric
    from conceptforge.loaders.harness.sample_columns import ALLOWED_MASS_COLUMN, ALLOWED_MASS_FLOOR

    rows = [{ALLOWED_MASS_COLUMN: m} for m in (0.9, ALLOWED_MASS_FLOOR, 0.2, None, 1e-40)]
    with caplog.at_level(logging.WARNING, logger="conceptforge"):
        found = low_allowed_mass_metric(rows, what="sub-vlm")[LOW_ALLOWED_MASS_METRIC]
    assert (found.value, found.n) == (2.0, 4)  # 0.2 and 1e-40 of the four that carry a mass
    assert "sub-vlm: 2 of 4 samples" in caplog.text
    assert low_allowed_mass_metric([{"value": 1.0}], what="x") == {}  # no answer tokens: no metric


def test_no_allowed_mass_is_counted_apart_and_warned_as_mass_0(caplog):
    """EP05: a mass of exactly 0 (no allowed answer among a server's top 20) is said as such, not
    as "less than 0.5". By hand over masses 0.9, 0.2, 0, 0: below 0.5 are 0.2, 0, 0 (3 of 4);
    none at all: the two zeros (2 of 4); the first warning names the one above 0 (0.2)."""
    from conceptforge.loaders.harness.allowed_tokens import (
        LOW_ALLOWED_MASS_METRIC,
        NO_ALLOWED_MASS_METRIC,
        low_allowed_mass_metric,
        no_allowed_mass,
    )
    from conceptforge.loaders.harness.sample_columns import ALLOWED_MASS_COLUMN

    rows = [{ALLOWED_MASS_COLUMN: m} for m in (0.9, 0.2, 0.0, 0.0)]
    with caplog.at_level(logging.WARNING, logger="conceptforge"):
        found = low_allowed_mass_metric(rows, what="sub-vlm")
    low, none = found[LOW_ALLOWED_MASS_METRIC], found[NO_ALLOWED_MASS_METRIC]
    assert (low.value, low.n, none.value, none.n) == (3.0, 4, 2.0, 4)
    assert [r.getMessage() for r in caplog.records] == [
        "sub-vlm: 1 of 4 samples gave the allowed answers less than 0.5 of the next-token probability (but more "
        "than 0) (the model mostly wanted to say something else; column allowed_mass in the samples file)",
        "sub-vlm: 2 of 4 samples gave the allowed answers no probability at all (mass 0: none of them among the "
        "log-probabilities returned); scored wrong, counted in no_allowed_mass",
    ]
    assert NO_ALLOWED_MASS_METRIC not in low_allowed_mass_metric([{ALLOWED_MASS_COLUMN: 1e-300}], what="x")
    assert [no_allowed_mass(m) for m in (None, 0.0, 1e-300, 1.0)] == [False, True, False, False]


# ----------------------------------------------------------------------------------- binding ties
def test_binding_ties_are_decided_on_the_probability_scale():
    import torch

    from conceptforge.loaders.binding.scoring import LOG_PROBABILITY, PROBABILITY, SIMILARITY, prediction_mass

    confident_no = torch.tensor([[5e-12, 9e-15, 9e-15, 1e-13, 2e-14]], dtype=torch.float64)
    assert prediction_mass(confident_no, scale=PROBABILITY)[0].tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert prediction_mass(confident_no.log(), scale=LOG_PROBABILITY)[0].tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert prediction_mass(confident_no, scale=SIMILARITY)[0].tolist() == pytest.approx([0.2] * 5)  # cosines: noise
    # probabilities are ranked as stored: 1e-9 relative ahead wins; only P = 0 everywhere ties
    rounding = torch.tensor([[1e-20, 1e-20 * (1 + 1e-9), 1e-25], [0.0, 0.0, 0.0]], dtype=torch.float64)
    assert prediction_mass(rounding, scale=PROBABILITY).flatten().tolist() == pytest.approx(
        [0.0, 1.0, 0.0, *[1 / 3] * 3]
    )


@pytest.fixture()
def confident_no_llava(tiny_llava_dir, tmp_path):
    """The tiny LLaVA made to say "No" to everything: an lm_head bias of +60 on "No" (P(Yes) far
    below 1e-6 for every caption) and the "Yes" row scaled up so captions still differ."""
    import torch

    from conceptforge.loaders.harness.adapters.base import load_adapter
    from conceptforge.loaders.harness.adapters.generative_vlm import GenerativeVLMAdapter

    loaded = load_adapter(resolve_model(str(tiny_llava_dir)), device="cpu", dtype=None, cache_dir=str(tmp_path))
    # the next-token variant: P(Yes) itself is the score (the teacher-forced default multiplies in P(end | Yes))
    adapter = GenerativeVLMAdapter(loaded.scorer, revision="r", cache_dir=tmp_path / "nt", vqascore="next-token")
    model = adapter.scorer.model
    old = model.get_output_embeddings()
    head = torch.nn.Linear(old.in_features, old.out_features, bias=True)
    tokenizer = adapter.scorer.tokenizer
    yes, no = tokenizer.convert_tokens_to_ids("Yes"), tokenizer.convert_tokens_to_ids("No")
    with torch.no_grad():
        head.weight.copy_(old.weight)
        head.weight[yes] *= 20.0
        head.bias.zero_()
        head.bias[no] = 60.0
    model.lm_head = head
    yield adapter, yes
    adapter.close()


def test_a_confident_no_model_is_credited_by_its_ratios(confident_no_llava, tiny_llava_dir, single_object_dir):
    import torch
    from transformers import AutoProcessor

    from conceptforge.loaders.binding.clip_task import match_scores
    from conceptforge.loaders.binding.data import load_binding
    from conceptforge.loaders.binding.task_rows import check_binding_rows, sample_rows
    from conceptforge.loaders.harness.adapters.generative_vlm import VQASCORE_QUESTION
    from conceptforge.loaders.harness.embeddings import load_pil

    adapter, yes = confident_no_llava
    part = load_binding(str(single_object_dir))["gen"].subset([0, 1, 2])
    template = "a photo of a {label}"
    scores = match_scores(adapter, part, template=template, batch_size=4)
    rows = sample_rows("binding-clip", "d", part, scores, scale=adapter.score_scale)
    processor = AutoProcessor.from_pretrained(tiny_llava_dir, backend="pil")
    for i, row in enumerate(rows):
        hand = []
        for candidate in part.candidates[i]:  # plain transformers: the prompt, the forward, P(Yes)
            text = VQASCORE_QUESTION.format(text=template.format(label=candidate))
            messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
            prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            inputs = processor(images=load_pil(part.images[i]), text=prompt, return_tensors="pt")
            with torch.no_grad():
                logits = adapter.scorer.model(**inputs).logits[0, -1].double()
            hand.append(math.exp(float(torch.log_softmax(logits, dim=-1)[yes])))
        assert max(hand) < 1e-6  # the regime where an absolute tolerance called everything tied
        assert row["scores"] == pytest.approx([math.log(p) for p in hand], rel=1e-5)  # stored as ln P
        label = part.label_index[i]
        others = [p for j, p in enumerate(hand) if j != label]
        ratio = hand[label] / max(others)
        assert abs(math.log(ratio)) > 1e-3  # distinct by far more than rounding
        assert row["value"] == (1.0 if ratio > 1 else 0.0)
        assert row["score_scale"] == "log-probability"
    assert check_binding_rows(rows, {}) is None  # the rescoring path decides ties the same way
