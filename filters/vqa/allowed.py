"""Probabilities over a few allowed answer tokens (option letters, Yes/No), computed in log space.

Why log space: a model that puts almost all its next-token mass elsewhere (a letter at 1e-40 in
float32 is zero or denormal) makes a softmax-then-renormalise read 0/0 or rounding noise as the
options' distribution. Working with log-probabilities (``log_softmax`` of the logits, or the
log-probabilities an endpoint returns) and normalising with ``logsumexp`` keeps the ratios
exact whatever the allowed tokens' share; that share is returned beside them as ``mass`` (what
an evaluation run records per sample as ``allowed_mass``).

Pure math, no model: the local scorer (``filters.vqa.scorer``) and the served-model clients
(through ``loaders.harness.allowed_tokens``) share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AllowedDistribution:
    """Per row: each allowed answer's probability normalised over the answers (rows sum to 1;
    uniform when no answer has any mass), and the share of the whole next-token distribution the
    answers carried (``mass``; ``log_mass`` keeps it where float64 would underflow too)."""

    probs: np.ndarray  # [B, G] float64
    mass: np.ndarray  # [B] float64
    log_mass: np.ndarray  # [B] float64, natural log


def normalise_allowed(group_log_probs: np.ndarray, log_total: np.ndarray | float = 0.0) -> AllowedDistribution:
    """[B, G] log-probabilities (or unnormalised log-scores) of each allowed answer, already
    summed over the answer's token variants (``-inf``: no mass), and each row's log normaliser
    ``log_total`` (0 when ``group_log_probs`` are log-probabilities of the whole vocabulary) ->
    the answers' distribution and the mass they carried."""
    logs = np.atleast_2d(np.asarray(group_log_probs, dtype=np.float64))
    log_allowed = _logsumexp(logs, axis=1)
    finite = np.isfinite(log_allowed)
    probs = np.full(logs.shape, 1.0 / max(logs.shape[1], 1))
    if finite.any():
        probs[finite] = np.exp(logs[finite] - log_allowed[finite, None])
    log_mass = np.where(
        finite, log_allowed - np.broadcast_to(np.asarray(log_total, dtype=np.float64), log_allowed.shape), -np.inf
    )
    log_mass = np.minimum(log_mass, 0.0)  # rounding of a mass of 1
    return AllowedDistribution(probs, np.exp(log_mass), log_mass)


def allowed_distribution(logits: object, groups: Sequence[Sequence[int]]) -> AllowedDistribution:
    """[B, V] (or [V]) next-token logits or log-probabilities (torch or numpy) and, per allowed
    answer, its token ids (a letter's "A" and " A") -> :func:`normalise_allowed` of the answers'
    log-probabilities under the full-vocabulary softmax."""
    array = _as_float64(logits)
    log_total = _logsumexp(array, axis=1)
    group_logs = np.stack([_logsumexp(array[:, list(ids)], axis=1) for ids in groups], axis=1)
    return normalise_allowed(group_logs, log_total)


def _as_float64(values: object) -> np.ndarray:
    if hasattr(values, "detach"):
        values = values.detach().cpu().double().numpy()
    return np.atleast_2d(np.asarray(values, dtype=np.float64))


def _logsumexp(values: np.ndarray, *, axis: int) -> np.ndarray:
    top = np.max(values, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(values - top), axis=axis)) + np.squeeze(top, axis=axis)
