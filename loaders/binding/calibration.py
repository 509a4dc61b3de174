"""Calibrated stacking (Binding paper Appendix C; Chao et al. 2016) for the single-object setting.

Trained models favour the label compositions seen in training. A coefficient ``c`` is subtracted
from the cosine score of every candidate whose label is a seen (training) class. ``c`` is chosen
on two validation sets — a 10% hold-out of train (seen classes) and the val split (unseen
classes) — by sweeping ``[−l_max, +l_max]`` in steps of ``l_max / 100`` (``l_max`` the largest
cosine score) and keeping the highest harmonic mean of seen and unseen accuracy; it is then
applied to the generalisation split.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from conceptforge.loaders.binding.data import BindingSplit
from conceptforge.loaders.binding.scoring import accuracy


def seen_mask(split: BindingSplit, seen_labels: Iterable[str]) -> torch.Tensor:
    seen = set(seen_labels)
    return torch.tensor([[float(c in seen) for c in row] for row in split.candidates], dtype=torch.float64)


def calibrate(
    seen_scores: torch.Tensor,
    seen_split: BindingSplit,
    unseen_scores: torch.Tensor,
    unseen_split: BindingSplit,
    seen_labels: Iterable[str],
    *,
    steps: int = 100,
) -> tuple[float, float]:
    """Return (coefficient, harmonic mean of seen/unseen accuracy at that coefficient)."""
    seen_labels = set(seen_labels)
    mask_seen, mask_unseen = seen_mask(seen_split, seen_labels), seen_mask(unseen_split, seen_labels)
    seen_scores, unseen_scores = seen_scores.double(), unseen_scores.double()
    l_max = float(torch.cat([seen_scores.flatten(), unseen_scores.flatten()]).abs().max())
    best = (-1.0, 0.0)
    for step in range(-steps, steps + 1):
        c = l_max * step / steps
        acc_seen = accuracy(seen_scores - c * mask_seen, seen_split.label_index)
        acc_unseen = accuracy(unseen_scores - c * mask_unseen, unseen_split.label_index)
        harmonic = 2 * acc_seen * acc_unseen / (acc_seen + acc_unseen) if acc_seen + acc_unseen > 0 else 0.0
        # strictly better, or as good with a smaller correction
        if harmonic > best[0] + 1e-12 or (abs(harmonic - best[0]) <= 1e-12 and abs(c) < abs(best[1])):
            best = (harmonic, c)
    return best[1], best[0]
