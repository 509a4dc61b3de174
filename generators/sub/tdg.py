"""Tied Diffusion Guidance (SUB paper, Section 3): the tie and its eta schedule, as pure functions.

The tie compares two noise predictions element-wise. Where they differ by no more than the
eta-th percentile of their absolute differences (computed per pair), both get the mean; elsewhere
each keeps its own prediction. Applied symmetrically (R gets mu(eR, eG), G gets mu(eG, eR)), the
tied elements become identical in both images and the rest stay free.

Percentile definition. "The eta-th percentile" is taken as the ``ceil(eta * n)``-th smallest of
the n absolute differences (``torch.kthvalue``), so eta is exactly the fraction of elements tied
(up to equal values at the threshold): eta = 1 ties every element, eta = 0 ties none, and no
interpolation is involved. ``torch.quantile`` would refuse bf16 and tensors over 2**24 elements
(a FLUX latent batch at 1024 px is 4096 x 64 = 262,144 per image, far below, but 2048 px video
latents are not) and is ~6x slower. Its ``interpolation="higher"`` variant differs from ours by
at most one rank.
"""

from __future__ import annotations

import torch

# the schedule and its parameters need no torch (a plan or a dry run imports them alone); their
# names stay importable from here, beside the tie
from conceptforge.generators.sub.schedule import TDGParams, eta_schedule, tie_count

__all__ = ["TDGParams", "eta_schedule", "tie", "tie_count", "tie_mask", "tie_pair"]


def _work_dtype(tensor: torch.Tensor) -> torch.dtype:
    return torch.float64 if tensor.dtype == torch.float64 else torch.float32


def _mask_or_none(e1: torch.Tensor, e2: torch.Tensor, eta: float) -> torch.Tensor | None:
    """The tie mask, or None when nothing is tied (eta = 0): no kernel launch, no host sync."""
    if e1.shape != e2.shape:
        raise ValueError(f"tie needs equal shapes, got {tuple(e1.shape)} and {tuple(e2.shape)}")
    batch = e1.shape[0]
    n = e1.numel() // max(batch, 1)
    k = tie_count(eta, n)
    if k == 0:
        return None
    if k == n:
        return torch.ones_like(e1, dtype=torch.bool)
    work = _work_dtype(e1)
    diff = (e1.to(work) - e2.to(work)).abs().reshape(batch, -1)
    threshold = torch.kthvalue(diff, k, dim=1, keepdim=True).values
    return (diff <= threshold).reshape(e1.shape)


def tie_mask(e1: torch.Tensor, e2: torch.Tensor, eta: float) -> torch.Tensor:
    """Boolean mask (same shape as the inputs) of the elements tied at ``eta``.

    Dimension 0 indexes pairs; the percentile is computed over all other dimensions of each
    pair separately. Differences are taken in float32 (float64 stays float64) so that bf16
    inputs rank like their exact values.
    """
    mask = _mask_or_none(e1, e2, eta)
    return torch.zeros_like(e1, dtype=torch.bool) if mask is None else mask


def _mean(e1: torch.Tensor, e2: torch.Tensor) -> torch.Tensor:
    work = _work_dtype(e1)
    return ((e1.to(work) + e2.to(work)) / 2).to(e1.dtype)


def tie(e1: torch.Tensor, e2: torch.Tensor, eta: float) -> torch.Tensor:
    """Eq. 3: mu(e1, e2, eta) — the mean where |e1 - e2| is within the eta-th percentile, else e1."""
    mask = _mask_or_none(e1, e2, eta)
    if mask is None:
        return e1
    return torch.where(mask, _mean(e1, e2), e1)


def tie_pair(e_reference: torch.Tensor, e_guidance: torch.Tensor, eta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eqs. 5-6: the symmetric tie, ``(mu(eR, eG), mu(eG, eR))``, with one shared mask.

    The mask depends only on |eR - eG|, so it is computed once and the tied elements get the
    same mean in both outputs.
    """
    mask = _mask_or_none(e_reference, e_guidance, eta)
    if mask is None:
        return e_reference, e_guidance
    mean = _mean(e_reference, e_guidance)
    return torch.where(mask, mean, e_reference), torch.where(mask, mean, e_guidance)
