"""Splits, held-out compositions and distractors of the three binding datasets (paper 004 §3).

Split rule (paper): the true class labels of train / val / gen never overlap, and every single
adjective, noun and relation occurs in train. We also keep held-out compositions out of the
*pictures* of other splits: a train image never shows a val or gen composition, even as the
second object or as the relation along the other axis, so "held out" means unseen.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from conceptforge.generators.binding.vocab import (
    COLORS,
    OPPOSITE_RELATION,
    RELATIONS,
    SHAPES,
    adjective_noun,
    relation_label,
)

DATASETS: tuple[str, ...] = ("single-object", "two-object", "relational")
SPLITS: tuple[str, ...] = ("train", "val", "gen")

AdjNoun = tuple[str, str]  # (color, shape)
Fact = tuple[str, str, str]  # (subject shape, relation, object shape)

# Paper 004 §3, "Single-object dataset"; the two-object dataset uses the same split.
ADJ_NOUN_HELD_OUT: dict[str, tuple[AdjNoun, ...]] = {
    "val": (("brown", "cube"), ("green", "cylinder")),
    "gen": (
        ("green", "cube"),
        ("purple", "cube"),
        ("red", "cube"),
        ("cyan", "cube"),
        ("blue", "cylinder"),
        ("gray", "cylinder"),
        ("yellow", "cylinder"),
        ("brown", "cylinder"),
    ),
}
# Paper 004 §3, "Relational dataset": each held-out split is one image type named both ways.
RELATION_HELD_OUT: dict[str, tuple[Fact, ...]] = {
    "val": (("cube", "front", "sphere"), ("sphere", "behind", "cube")),
    "gen": (("cylinder", "front", "cube"), ("cube", "behind", "cylinder")),
}

ALL_ADJ_NOUN: tuple[AdjNoun, ...] = tuple((c, s) for s in SHAPES for c in COLORS)
ALL_FACTS: tuple[Fact, ...] = tuple((a, r, b) for a in SHAPES for r in RELATIONS for b in SHAPES if a != b)


def adj_noun_split(composition: AdjNoun) -> str:
    for split, held in ADJ_NOUN_HELD_OUT.items():
        if composition in held:
            return split
    return "train"


def fact_split(fact: Fact) -> str:
    for split, held in RELATION_HELD_OUT.items():
        if fact in held:
            return split
    return "train"


def split_classes(dataset: str, split: str) -> list[AdjNoun] | list[Fact]:
    """The true class labels of ``split`` (14/2/8 adjective–noun, 20/2/2 relational)."""
    if dataset == "relational":
        return [fact for fact in ALL_FACTS if fact_split(fact) == split]
    return [comp for comp in ALL_ADJ_NOUN if adj_noun_split(comp) == split]


def allowed_in_picture(split_of_thing: str, item_split: str) -> bool:
    """A picture of ``item_split`` may show train compositions and its own split's only."""
    return split_of_thing in ("train", item_split)


@dataclass(frozen=True)
class Candidate:
    label: str
    kind: str  # true | random | hard-swap | bRa | aSb | aRc | cRb


def single_object_candidates(true: AdjNoun, rng: random.Random) -> list[Candidate]:
    """True label + 4 random other adjective–noun combinations."""
    others = [c for c in ALL_ADJ_NOUN if c != true]
    picks = rng.sample(others, 4)
    return [Candidate(adjective_noun(*true), "true")] + [Candidate(adjective_noun(*c), "random") for c in picks]


def two_object_candidates(true: AdjNoun, other: AdjNoun, rng: random.Random) -> list[Candidate]:
    """True label, the two attribute swaps (hard), and two random negatives.

    The second object's own label is also true of the image, so it is never a distractor.
    """
    (color_a, shape_a), (color_b, shape_b) = true, other
    swaps = [(color_a, shape_b), (color_b, shape_a)]
    excluded = {true, other, *swaps}
    pool = [c for c in ALL_ADJ_NOUN if c not in excluded]
    picks = rng.sample(pool, 2)
    return (
        [Candidate(adjective_noun(*true), "true")]
        + [Candidate(adjective_noun(*c), "hard-swap") for c in swaps]
        + [Candidate(adjective_noun(*c), "random") for c in picks]
    )


def relational_candidates(fact: Fact) -> list[Candidate]:
    """True label + {bRa, aSb, aRc, cRb} with S the opposite relation and c the third shape."""
    a, relation, b = fact
    (c,) = [shape for shape in SHAPES if shape not in (a, b)]
    opposite = OPPOSITE_RELATION[relation]
    return [
        Candidate(relation_label(a, relation, b), "true"),
        Candidate(relation_label(b, relation, a), "bRa"),
        Candidate(relation_label(a, opposite, b), "aSb"),
        Candidate(relation_label(a, relation, c), "aRc"),
        Candidate(relation_label(c, relation, b), "cRb"),
    ]


def shuffled(candidates: Sequence[Candidate], rng: random.Random) -> tuple[list[Candidate], int]:
    """Shuffle candidates with the item's rng; return them and the index of the true label."""
    order = list(candidates)
    rng.shuffle(order)
    return order, next(i for i, c in enumerate(order) if c.kind == "true")
