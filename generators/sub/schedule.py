"""The eta schedule of Tied Diffusion Guidance (SUB paper, Eq. 4) and its per-category parameters.

Kept apart from the tie itself (``tdg``, tensor code): a spec, a plan and a ``--dry-run`` need the
schedule's parameters and no torch, so a plan is printed at once on a login node.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

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
