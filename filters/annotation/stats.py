"""Agreement and correlation statistics, written out so that every number can be checked by hand.

- Krippendorff's alpha (nominal, ordinal, interval): the agreement measure that accepts any
  number of annotators per item and missing answers, which is how crowd and volunteer studies
  look (ConceptBed: three workers per image; SUB: four volunteers on overlapping subsets).
- Mean pairwise percent agreement: the plain number people expect next to alpha.
- Pearson's r: what ConceptBed Table 3 reports between a metric and the human scores.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from itertools import permutations

ALPHA_LEVELS = ("nominal", "ordinal", "interval")


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's correlation coefficient; None when undefined (< 2 points or a constant side)."""
    if len(xs) != len(ys):
        raise ValueError("pearson needs two sequences of the same length")
    n = len(xs)
    if n < 2:
        return None
    mean_x, mean_y = math.fsum(xs) / n, math.fsum(ys) / n
    sxy = math.fsum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
    sxx = math.fsum((x - mean_x) ** 2 for x in xs)
    syy = math.fsum((y - mean_y) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def _pairable(units: Iterable[Sequence[Hashable]]) -> list[list[Hashable]]:
    return [list(values) for values in units if len(values) >= 2]


def krippendorff_alpha(units: Iterable[Sequence[Hashable]], *, metric: str = "nominal") -> float | None:
    """Krippendorff's alpha over ``units`` (each: the values the annotators gave one item).

    Items with fewer than two values carry no agreement information and are skipped. Returns
    None when there is nothing to compare or no variation at all (expected disagreement 0).
    """
    if metric not in ALPHA_LEVELS:
        raise ValueError(f"metric must be one of {ALPHA_LEVELS}")
    pairable = _pairable(units)
    if not pairable:
        return None
    coincidence: Counter = Counter()
    for values in pairable:
        weight = 1.0 / (len(values) - 1)
        for a, b in permutations(values, 2):
            coincidence[(a, b)] += weight
    marginals: Counter = Counter()
    for (a, _), count in coincidence.items():
        marginals[a] += count
    n = sum(marginals.values())
    categories = sorted(marginals)

    if metric == "nominal":

        def delta(a, b):
            return 0.0 if a == b else 1.0
    elif metric == "interval":

        def delta(a, b):
            return (float(a) - float(b)) ** 2
    else:  # ordinal: squared rank distance through the marginal frequencies
        rank = {c: i for i, c in enumerate(categories)}

        def delta(a, b):
            lo, hi = sorted((rank[a], rank[b]))
            between = sum(marginals[categories[g]] for g in range(lo, hi + 1))
            return (between - (marginals[a] + marginals[b]) / 2.0) ** 2

    observed = sum(count * delta(a, b) for (a, b), count in coincidence.items()) / n
    expected = sum(marginals[a] * marginals[b] * delta(a, b) for a in categories for b in categories) / (n * (n - 1))
    if expected == 0:
        return None
    return 1.0 - observed / expected


def percent_agreement(units: Iterable[Sequence[Hashable]]) -> float | None:
    """Mean over items (with >= 2 answers) of the share of annotator pairs that agree."""
    shares = []
    for values in _pairable(units):
        pairs = list(permutations(values, 2))
        shares.append(sum(a == b for a, b in pairs) / len(pairs))
    return sum(shares) / len(shares) if shares else None


def agreement_report(units_by_item: Mapping[str, Sequence[Hashable]], *, metric: str) -> dict[str, object]:
    units = list(units_by_item.values())
    pairable = _pairable(units)
    return {
        "metric": metric,
        "krippendorff_alpha": krippendorff_alpha(units, metric=metric),
        "percent_agreement": percent_agreement(units),
        "items_with_2plus_annotators": len(pairable),
    }


def bootstrap_interval(
    units: Sequence[Sequence[Hashable]],
    statistic,
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``statistic(units)`` over items (units resampled with replacement).

    Why items: the answers to one item are not independent of each other, the items are (as far
    as a study can make them), so the item is what is resampled. The seed is fixed, so a card
    shows the same interval on every rebuild. Resamples where the statistic is undefined (None:
    no variation at all) are skipped; None when fewer than half of them are defined.
    """
    import random

    units = [list(u) for u in units]
    if not units:
        return None
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        value = statistic([units[rng.randrange(len(units))] for _ in units])
        if value is not None:
            values.append(value)
    if len(values) < resamples / 2:
        return None
    values.sort()
    tail = (1.0 - level) / 2
    low = values[int(math.floor(tail * (len(values) - 1)))]
    high = values[int(math.ceil((1.0 - tail) * (len(values) - 1)))]
    return low, high
