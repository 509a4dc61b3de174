"""Issue 45 items 2 and 3: VQAScore kept in log space (float64) from the forward pass to the
samples file and the tie rule, and ties only where two stored scores are equal.

Every expected number is worked out here: the accuracies from a plain transformers forward of
the same model (t2v_metrics' prompt string, its two answer tokens, the mean of their
log-probabilities), the tie credits from the scores written in each test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from conceptforge.loaders.harness.model_ref import resolve_model
from tests.harness.test_rescore_rules import _accepted, _refused

T2V_SYSTEM = (
    "A chat between a curious user and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the user's questions."
)
NO_BIAS = 200.0  # P(Yes) ~ e^-200 ~ 1e-87: far below float32's smallest (denormal) 1.4e-45


@pytest.fixture(scope="module")
def tiny_binding_dir(tmp_path_factory):
    """One image per label: 20 train, 2 val and 2 gen images, 5 candidates each."""
    from conceptforge.testing.synthetic import write_single_object

    return write_single_object(tmp_path_factory.mktemp("binding") / "single-object", n_per_label=1)


@pytest.fixture(scope="module")
def confident_no_session(tiny_llava_dir, tmp_path_factory):
    """A session of the tiny LLaVA made to say "No" to everything: its lm_head given a bias of
    +200 on "No" (every other token, "Yes" and the end of sequence included, ~e^-200 below it)
    and the "Yes" row scaled up, so the captions still differ in how unlikely "Yes" is."""
    import torch

    from conceptforge.loaders.harness.runner import ModelSession

    session = ModelSession(
        resolve_model(str(tiny_llava_dir)),
        device="cpu",
        dtype=None,
        cache_dir=str(tmp_path_factory.mktemp("cache")),
    )
    adapter = session.matcher()
    model, tokenizer = adapter.scorer.model, adapter.scorer.tokenizer
    old = model.get_output_embeddings()
    head = torch.nn.Linear(old.in_features, old.out_features, bias=True)
    yes, no = tokenizer.convert_tokens_to_ids("Yes"), tokenizer.convert_tokens_to_ids("No")
    with torch.no_grad():
        head.weight.copy_(old.weight)
        head.weight[yes] *= 20.0
        head.bias.zero_()
        head.bias[no] = NO_BIAS
    model.lm_head = head
    yield session
    session.close()


def _hand_scores(session, split) -> list[list[float]]:
    """ln VQAScore of every (image, candidate) of ``split``, written out here: t2v_metrics'
    LLaVA-1.5 string with "Yes" + eos, one plain forward each in float64, the mean of the two
    answer tokens' log-probabilities (the tiny byte-level vocabulary: "Yes" and eos are the last
    two tokens; test_vqascore_variants checks that count)."""
    import torch
    from transformers import AutoProcessor

    from conceptforge.loaders.harness.embeddings import load_pil

    adapter = session.matcher()
    processor = AutoProcessor.from_pretrained(session.model.id, backend="pil")
    eos = processor.tokenizer.eos_token
    out = []
    for image, candidates in zip(split.images, split.candidates):
        row = []
        for candidate in candidates:
            text = f"a photo of {candidate}"  # binding-clip's default template
            full = f'{T2V_SYSTEM} USER: <image>\nDoes this figure show "{text}"? Please answer yes or no. ASSISTANT: Yes{eos}'
            inputs = processor(images=load_pil(image), text=full, return_tensors="pt")
            with torch.no_grad():
                logits = adapter.scorer.model(**inputs).logits[0].double()
            log_probs, ids = torch.log_softmax(logits, dim=-1), inputs["input_ids"][0]
            n = len(ids)
            row.append((float(log_probs[n - 3, ids[n - 2]]) + float(log_probs[n - 2, ids[n - 1]])) / 2)
        out.append(row)
    return out


def test_a_confident_no_model_is_ranked_by_its_log_probabilities(confident_no_session, tiny_binding_dir, tmp_path):
    """The issue's case: every P(Yes) is far below float32's range, so the float32 cache made all
    five captions 0.0 and every row got chance credit (0.2). In log space each row has one
    winner; the per-split accuracy is the share of rows whose true caption has the highest
    hand-computed log-probability, and rescoring the stored rows (through parquet) gives it again."""
    from conceptforge.loaders.binding.data import load_binding
    from conceptforge.loaders.binding.task_rows import check_binding_rows
    from conceptforge.loaders.harness.registry import get_task
    from conceptforge.loaders.harness.runner import run_task
    from conceptforge.loaders.harness.samples import read_sample_rows, write_samples

    outcome = run_task("binding-clip", model=confident_no_session, dataset=str(tiny_binding_dir), batch_size=8)
    splits = load_binding(str(tiny_binding_dir))
    expected = {}
    for name in ("train", "val", "gen"):
        split = splits[name]
        hand = _hand_scores(confident_no_session, split)
        assert all(np.float32(math.exp(v)) == 0.0 for row in hand for v in row)  # float32 would say 0.0
        credits = []
        for row, label in zip(hand, split.label_index):
            top = max(row)
            assert sorted(row)[-2] < top  # one winner per row: no tie to split
            credits.append(1.0 if row[label] == top else 0.0)
        expected[name] = sum(credits) / len(credits)
        rows = [r for r in outcome.samples if r["split"] == name]
        assert [r["scores"] for r in rows] == [pytest.approx(h, rel=1e-6) for h in hand]  # ln P, not 0.0
    got = {name: outcome.metrics[f"{name}_accuracy"].value for name in expected}
    assert got == pytest.approx(expected, abs=1e-12)
    assert any(value != pytest.approx(0.2) for value in expected.values())  # not the all-tie chance credit
    assert {r["score_scale"] for r in outcome.samples} == {"log-probability"}

    # rescoring: the rows written to parquet and read back give the same credits and accuracies
    task = get_task("binding-clip")
    path = write_samples(tmp_path / "binding-clip.parquet", outcome.samples, task.columns, metadata={})
    back, _ = read_sample_rows(path)
    assert [r["scores"] for r in back] == [r["scores"] for r in outcome.samples]  # float64, bit for bit
    assert check_binding_rows(back, task.option_defaults()) is None
    rescored = task.score(back, task.option_defaults())
    assert {name: rescored[f"{name}_accuracy"].value for name in expected} == got


# ----------------------------------------------------------------------------------- ties
def test_near_ties_win_outright_and_exact_ties_split():
    """Worked by hand: a caption 6e-5 relative ahead in probability (ln ratio 6e-5) gets the
    whole credit on both probability scales; two exactly equal scores split it 1/2 each; equal
    -inf (P = 0) everywhere split it five ways. The similarity scale keeps its float32 rounding
    tolerance: 1e-7 relative apart is a tie there."""
    import torch

    from conceptforge.loaders.binding.scoring import LOG_PROBABILITY, PROBABILITY, SIMILARITY, prediction_mass

    p = 3e-7
    ahead = [p, p * (1 + 6e-5), p / 2, p / 3, p / 4]  # the live row: the second caption leads
    assert prediction_mass(torch.tensor([ahead], dtype=torch.float64), scale=PROBABILITY)[0].tolist() == [
        0.0,
        1.0,
        0.0,
        0.0,
        0.0,
    ]
    logs = torch.tensor([[math.log(v) for v in ahead]], dtype=torch.float64)
    assert prediction_mass(logs, scale=LOG_PROBABILITY)[0].tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]
    equal = torch.tensor([[-190.25, -190.25, -200.0, -201.0, -250.0]], dtype=torch.float64)
    assert prediction_mass(equal, scale=LOG_PROBABILITY)[0].tolist() == [0.5, 0.5, 0.0, 0.0, 0.0]
    nothing = torch.full((1, 5), -math.inf, dtype=torch.float64)
    assert prediction_mass(nothing, scale=LOG_PROBABILITY)[0].tolist() == pytest.approx([0.2] * 5)
    cosines = torch.tensor([[0.3, 0.3 * (1 + 1e-7), 0.1, 0.0, -0.2]], dtype=torch.float64)
    assert prediction_mass(cosines, scale=SIMILARITY)[0].tolist() == pytest.approx([0.5, 0.5, 0.0, 0.0, 0.0])


def _rows(scale: str, scores: list[list[float]], values: list[float]) -> list[dict]:
    """Two binding-clip gen rows of the candidates below, true label first."""
    candidates = ["red cube", "blue cube", "red sphere", "blue sphere", "gray cylinder"]
    rows = []
    for i, (row, value) in enumerate(zip(scores, values)):
        rows.append(
            {
                "task": "binding-clip",
                "item_id": f"gen/{i}",
                "candidates": candidates,
                "scores": row,
                "prediction": candidates[int(np.argmax(row))],
                "label": "red cube",
                "correct": value == 1.0,
                "value": value,
                "dataset": "org/data",
                "split": "gen",
                "swap_kind": "random",
                "label_index": 0,
                "candidate_kinds": ["true"] + ["random"] * 4,
                "score_scale": scale,
            }
        )
    return rows


def test_samples_files_rescore_with_exact_ties_and_old_ones_read_or_refused(tmp_path):
    """A log-probability file rescores to its hand accuracy: row 0 wins by ln 6e-5 (credit 1),
    row 1 ties two ways exactly (credit 1/2): (1 + 0.5) / 2 = 0.75. A file from before log space
    (scale "probability") whose values follow its scores is read the same way; one whose near-tie
    row was credited 1/2 by the old tolerance is refused in one line saying so."""
    p = 2e-9
    logs = [
        [math.log(p * (1 + 6e-5)), math.log(p), -30.0, -31.0, -32.0],
        [-25.5, -25.5, -30.0, -31.0, -32.0],
    ]
    metrics = _accepted(tmp_path, "log", "binding-clip", _rows("log-probability", logs, [1.0, 0.5]), "gen_accuracy")
    assert metrics["gen_accuracy"]["value"] == 0.75
    probabilities = [[p * (1 + 6e-5), p, 1e-13, 1e-14, 1e-15], [0.25, 0.25, 0.1, 0.1, 0.1]]
    old = _rows("probability", probabilities, [1.0, 0.5])
    assert _accepted(tmp_path, "old", "binding-clip", old, "gen_accuracy")["gen_accuracy"]["value"] == 0.75
    split_by_old_rule = _rows("probability", probabilities, [0.5, 0.5])  # the old 1e-5 tolerance's credit
    _refused(
        tmp_path,
        "old-tie",
        "binding-clip",
        split_by_old_rule,
        "gen_accuracy",
        "row gen/0: value 0.5",
        "older conceptforge that split near-equal probabilities",
    )
