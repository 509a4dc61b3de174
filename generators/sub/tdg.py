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

import math
from dataclasses import asdict, dataclass

import torch

from conceptforge.errors import InvalidArgumentError


@dataclass(frozen=True)
class TDGParams:
    """The eta schedule of one attribute category: eta(t) = ((t - tmin) / (tmax - tmin)) ** k.

    Paper values: k = 10, tmin = 0.2; tmax = 0.6 for pattern attributes and 0.9 for colour and
    shape attributes.
    """

    k: float = 10.0
    tmin: float = 0.2
    tmax: float = 0.9

    def __post_init__(self) -> None:
        if not 0.0 <= self.tmin < self.tmax <= 1.0:
            raise InvalidArgumentError(f"TDG needs 0 <= tmin < tmax <= 1, got tmin={self.tmin}, tmax={self.tmax}")
        if not self.k > 0 or not math.isfinite(self.k):
            raise InvalidArgumentError(f"TDG needs k > 0, got k={self.k}")

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def eta_schedule(t: float, tmin: float, tmax: float, k: float) -> float:
    """Eq. 4: 1 above ``tmax``, ``((t - tmin) / (tmax - tmin)) ** k`` in between, 0 below ``tmin``.

    ``t`` is the diffusion time in [0, 1] with 1 = pure noise (FLUX: the flow-matching sigma,
    i.e. the timestep the transformer sees divided by 1000).
    """
    if t > tmax:
        return 1.0
    if t < tmin:
        return 0.0
    return float(((t - tmin) / (tmax - tmin)) ** k)


def tie_count(eta: float, n: int) -> int:
    """How many of ``n`` elements the eta-th percentile covers: ``ceil(eta * n)`` in [0, n]."""
    if not 0.0 <= eta <= 1.0:
        raise ValueError(f"eta must be in [0, 1], got {eta}")
    # Rounding to 9 decimals first keeps float error (0.3 * 10 = 3.0000000000000004) from
    # tying one element too many.
    return min(n, max(0, math.ceil(round(eta * n, 9))))


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
