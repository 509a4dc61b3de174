"""Accuracy and error breakdowns over the stored candidates, with ties split evenly.

Why tie-aware: a scorer that gives every candidate the same score (a commutative model on aRb
vs bRa, or a degenerate model) must not look right because of where the true label sits. Each
example's prediction is a distribution spreading its mass evenly over the top-scoring
candidates; accuracy is the expected accuracy of breaking ties uniformly at random, so no
candidate order can inflate it (the reference loader put the true label first and never
shuffled: ties looked correct).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import torch

from conceptforge.loaders.binding.data import ADJ_NOUN, BindingSplit, parse_label

ADJ_NOUN_ERRORS = ("Adj", "Noun", "Both")
RELATION_ERRORS = ("bRa", "aSb", "aRc", "cRb")


#: What a score is, declared by the adapter/protocol that made it; ties are decided on its scale.
SIMILARITY = "similarity"  # cosines, logits, log-odds computed in float32: float noise is absolute near 0
LOG_PROBABILITY = "log-probability"  # ln VQAScore in float64 (generative VLMs, served models): ranked exactly
PROBABILITY = "probability"  # P(Yes) itself: samples files written before log space (read, ranked exactly)
SCORE_SCALES = (SIMILARITY, LOG_PROBABILITY, PROBABILITY)
#: The similarity scale's tolerance (docs/metrics.md, "Ties"), unchanged from earlier versions:
#: similarity scores are float32 computations (embeddings are cached as float32), and one value
#: computed in two orders differs by float32 rounding, ~sqrt(d)·2^-24 ≈ 2e-6 relative for a
#: 512-1024-term dot product. Measured on commutative CDSMs (aRb vs bRa, 5 seeds × 24 pairs):
#: Add and Mult differ by < 1e-6 absolute (all tied); Conv, through FFTs, by up to 4e-5 of the
#: top score at d = 512-768, so 1 pair in 120 there falls outside it and is ranked, not tied.
SIMILARITY_RTOL = 1e-5
SIMILARITY_ATOL = 1e-6


def prediction_mass(scores: torch.Tensor, *, scale: str = SIMILARITY) -> torch.Tensor:
    """[N, K] scores -> [N, K] mass, uniform over the candidates tied with the row maximum.

    Which candidates tie depends on ``scale``: probabilities and log-probabilities are ranked as
    the raw values they are (the binding authors and t2v_metrics take the argmax of the stored
    scores): only exactly equal values tie (a caption ahead by 6e-5 relative wins outright), and a
    row of P = 0 (or ln P = -inf) ties every zero. They are float64 from the forward pass on, so
    no rounding of ours makes two different answers equal. A similarity (float32 computation)
    ties within :data:`SIMILARITY_RTOL` / :data:`SIMILARITY_ATOL` of the maximum, the rounding
    of one sum computed in another order (e.g. (s⊛R)⊛o vs (o⊛R)⊛s)."""
    if scale not in SCORE_SCALES:
        raise ValueError(f"score scale {scale!r}: one of {', '.join(SCORE_SCALES)}")
    scores = scores.detach().double()
    top = scores.amax(dim=1, keepdim=True)  # amax: .max(dim) is oddly slow on small CPU tensors
    if scale == SIMILARITY:
        tied = scores >= top - (SIMILARITY_ATOL + SIMILARITY_RTOL * top.abs())
    else:
        tied = scores == top  # -inf == -inf: a row of zero probabilities ties throughout
    return tied.float() / tied.sum(dim=1, keepdim=True)


def accuracy(scores: torch.Tensor, label_index: Sequence[int], *, scale: str = SIMILARITY) -> float:
    if len(label_index) == 0:
        return float("nan")
    mass = prediction_mass(scores, scale=scale)
    return float(mass[torch.arange(len(label_index)), torch.as_tensor(list(label_index))].mean())


def adj_noun_error(label: str, candidate: str) -> str:
    (adj, noun), (cadj, cnoun) = parse_label(label), parse_label(candidate)
    if adj != cadj and noun == cnoun:
        return "Adj"
    if noun != cnoun and adj == cadj:
        return "Noun"
    return "Both"


def error_breakdown(scores: torch.Tensor, split: BindingSplit) -> dict[str, float]:
    """Share of the error mass per error type (Binding paper Tables 3, 5, 7; sums to 1 if any error).

    Adjective–noun: Adj (adjective wrong, noun right), Noun, Both. Relational: the kind of the
    chosen distractor (bRa, aSb, aRc, cRb) as stored in ``candidate_kinds``.
    """
    mass = prediction_mass(scores, scale=split.score_scale)
    totals: dict[str, float] = defaultdict(float)
    keys = ADJ_NOUN_ERRORS if split.setting == ADJ_NOUN else RELATION_ERRORS
    for row in range(len(split)):
        for col, candidate in enumerate(split.candidates[row]):
            share = float(mass[row, col])
            if col == split.label_index[row] or share == 0.0:
                continue
            if split.setting == ADJ_NOUN:
                key = adj_noun_error(split.labels[row], candidate)
            else:
                key = split.kinds[row][col]
            totals[key] += share
    total = sum(totals.values())
    result = {key: (totals.get(key, 0.0) / total if total else float("nan")) for key in keys}
    for key, value in totals.items():  # kinds outside the paper's table (e.g. "random") are kept
        if key not in result:
            result[key] = value / total
    return result


def kind_breakdown(scores: torch.Tensor, split: BindingSplit) -> dict[str, float]:
    """Share of the error mass per stored candidate kind (random, hard-swap, bRa, ...)."""
    mass = prediction_mass(scores, scale=split.score_scale)
    totals: dict[str, float] = defaultdict(float)
    for row in range(len(split)):
        for col, kind in enumerate(split.kinds[row]):
            if col != split.label_index[row]:
                totals[kind] += float(mass[row, col])
    total = sum(totals.values())
    return {k: v / total for k, v in sorted(totals.items())} if total else {}
