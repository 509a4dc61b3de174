"""SUB's VQA filter decision: discard wrong answers, rank by S+ probability, keep the top share.

Paper 001 §4.2: an image is discarded when the VQA model's answer is not S+; the rest of a
bird–attribute pair is ranked by the probability of S+; the top 10% of the pair's candidates
(50 of 500) is kept; a pair where fewer than that survive is eliminated. This module is the
pure decision plus its statistics (no models, no files), so every edge case is testable.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from conceptforge.errors import InvalidArgumentError

COUNT_KEYS = ("candidates", "unreadable", "wrong_answer", "below_threshold", "in_dropped_pair", "below_rank", "kept")


@dataclass(frozen=True)
class FilterParams:
    """Thresholds of the filter; paper values by default.

    ``keep_fraction``: share of a pair's candidates kept (0.1 = 50 of 500).
    ``min_survivor_fraction``: a pair is dropped when fewer than this share of its candidates
    answer S+ (``None`` = ``keep_fraction``, the paper's rule).
    ``min_splus_prob``: an extra floor on the S+ probability (0 = none, the paper's rule).
    """

    keep_fraction: float = 0.1
    min_survivor_fraction: float | None = None
    min_splus_prob: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.keep_fraction <= 1.0:
            raise InvalidArgumentError(f"--keep-fraction must be in (0, 1], got {self.keep_fraction}")
        if self.min_survivor_fraction is not None and not 0.0 <= self.min_survivor_fraction <= 1.0:
            raise InvalidArgumentError(f"--min-survivor-fraction must be in [0, 1], got {self.min_survivor_fraction}")
        if not 0.0 <= self.min_splus_prob <= 1.0:
            raise InvalidArgumentError(f"--min-splus-prob must be in [0, 1], got {self.min_splus_prob}")

    @property
    def survivor_fraction(self) -> float:
        return self.keep_fraction if self.min_survivor_fraction is None else self.min_survivor_fraction


def share_count(fraction: float, total: int) -> int:
    """``ceil(fraction * total)`` robust to float noise: 0.1 * 500 -> 50, 0.1 * 30 -> 3, 0.1 * 5 -> 1."""
    return max(0, math.ceil(round(fraction * total, 9)))


@dataclass(frozen=True)
class ScoredCandidate:
    """What the decision needs about one candidate image."""

    item_id: str
    bird: str
    attribute: str  # S+, ``has_<group>::<value>``
    splus: str  # the S+ option value as asked
    answer: str | None  # argmax option; None when the image could not be read
    splus_prob: float = 0.0

    @property
    def group(self) -> str:
        return self.attribute.partition("::")[0]


@dataclass
class PairOutcome:
    bird: str
    attribute: str
    candidates: int = 0
    unreadable: int = 0
    wrong_answer: int = 0
    below_threshold: int = 0
    in_dropped_pair: int = 0
    below_rank: int = 0
    kept: int = 0
    target: int = 0  # images the pair should keep
    required: int = 0  # survivors needed to keep the pair
    dropped: bool = False
    reason: str = ""


@dataclass
class FilterDecision:
    ranks: dict[str, int] = field(default_factory=dict)  # kept item id -> rank in its pair (0 = best)
    pairs: list[PairOutcome] = field(default_factory=list)

    @property
    def kept_ids(self) -> set[str]:
        return set(self.ranks)


def decide(candidates: Iterable[ScoredCandidate], params: FilterParams = FilterParams()) -> FilterDecision:
    """Apply the filter to all candidates; pairs are processed in (bird, attribute) order.

    Ties in S+ probability are broken by item id, so the kept set never depends on input order.
    """
    by_pair: dict[tuple[str, str], list[ScoredCandidate]] = defaultdict(list)
    for candidate in candidates:
        by_pair[(candidate.bird, candidate.attribute)].append(candidate)
    decision = FilterDecision()
    for (bird, attribute), members in sorted(by_pair.items()):
        outcome = PairOutcome(bird, attribute, candidates=len(members))
        survivors = []
        for member in members:
            if member.answer is None:
                outcome.unreadable += 1
            elif member.answer != member.splus:
                outcome.wrong_answer += 1
            elif member.splus_prob < params.min_splus_prob:
                outcome.below_threshold += 1
            else:
                survivors.append(member)
        survivors.sort(key=lambda m: (-m.splus_prob, m.item_id))
        outcome.target = max(1, share_count(params.keep_fraction, len(members)))
        outcome.required = share_count(params.survivor_fraction, len(members))
        if len(survivors) < outcome.required or not survivors:
            outcome.dropped = True
            outcome.in_dropped_pair = len(survivors)
            outcome.reason = f"only {len(survivors)} of {len(members)} images answer S+; {outcome.required} needed"
        else:
            chosen = survivors[: outcome.target]
            outcome.kept = len(chosen)
            outcome.below_rank = len(survivors) - len(chosen)
            for rank, member in enumerate(chosen):
                decision.ranks[member.item_id] = rank
        decision.pairs.append(outcome)
    return decision


def _add(counts: dict[str, int], outcome: PairOutcome) -> None:
    for key in COUNT_KEYS:
        counts[key] = counts.get(key, 0) + getattr(outcome, key)
    counts["pairs"] = counts.get("pairs", 0) + 1
    counts["pairs_kept"] = counts.get("pairs_kept", 0) + (0 if outcome.dropped else 1)
    counts["pairs_dropped"] = counts.get("pairs_dropped", 0) + (1 if outcome.dropped else 0)


def filter_statistics(decision: FilterDecision, params: FilterParams) -> dict:
    """Counts for the card: totals, per attribute, per group, per pair, and dropped pairs with why.

    Every candidate lands in exactly one of ``unreadable``, ``wrong_answer``, ``below_threshold``,
    ``in_dropped_pair``, ``below_rank`` or ``kept``.
    """
    totals: dict[str, int] = {}
    per_attribute: dict[str, dict[str, int]] = defaultdict(dict)
    per_group: dict[str, dict[str, int]] = defaultdict(dict)
    for outcome in decision.pairs:
        _add(totals, outcome)
        _add(per_attribute[outcome.attribute], outcome)
        _add(per_group[outcome.attribute.partition("::")[0]], outcome)
    return {
        "params": {
            "keep_fraction": params.keep_fraction,
            "min_survivor_fraction": params.survivor_fraction,
            "min_splus_prob": params.min_splus_prob,
        },
        "totals": totals,
        "per_attribute": dict(sorted(per_attribute.items())),
        "per_group": dict(sorted(per_group.items())),
        "per_pair": [asdict(outcome) for outcome in decision.pairs],
        "dropped_pairs": [
            {"bird": o.bird, "attribute": o.attribute, "reason": o.reason} for o in decision.pairs if o.dropped
        ],
    }
