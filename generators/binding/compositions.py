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

from conceptforge.generators.binding.benchmark import paper_vocabulary
from conceptforge.generators.binding.vocab import (
    OPPOSITE_RELATION,
    AdjNoun,
    Fact,
    Vocabulary,
    adjective_noun,
    relation_label,
)

DATASETS: tuple[str, ...] = ("single-object", "two-object", "relational")
SPLITS: tuple[str, ...] = ("train", "val", "gen")


def _vocab(vocab: Vocabulary | None) -> Vocabulary:
    return paper_vocabulary() if vocab is None else vocab


def all_adj_noun(vocab: Vocabulary | None = None) -> tuple[AdjNoun, ...]:
    v = _vocab(vocab)
    return tuple((c, s) for s in v.shapes for c in v.color_names)


def all_facts(vocab: Vocabulary | None = None) -> tuple[Fact, ...]:
    v = _vocab(vocab)
    return tuple((a, r, b) for a in v.shapes for r in v.relations for b in v.shapes if a != b)


def adj_noun_split(composition: AdjNoun, vocab: Vocabulary | None = None) -> str:
    for split, held in _vocab(vocab).adj_noun_held_out:
        if composition in held:
            return split
    return "train"


def fact_split(fact: Fact, vocab: Vocabulary | None = None) -> str:
    for split, held in _vocab(vocab).relation_held_out:
        if fact in held:
            return split
    return "train"


def split_classes(dataset: str, split: str, vocab: Vocabulary | None = None) -> list[AdjNoun] | list[Fact]:
    """The true class labels of ``split`` (paper: 14/2/8 adjective–noun, 20/2/2 relational)."""
    if dataset == "relational":
        return [fact for fact in all_facts(vocab) if fact_split(fact, vocab) == split]
    return [comp for comp in all_adj_noun(vocab) if adj_noun_split(comp, vocab) == split]


def allowed_in_picture(split_of_thing: str, item_split: str) -> bool:
    """A picture of ``item_split`` may show train compositions and its own split's only."""
    return split_of_thing in ("train", item_split)


_PAPER_TABLES = {
    "SHAPES": lambda v: v.shapes,
    "COLORS": lambda v: v.color_names,
    "RELATIONS": lambda v: v.relations,
    "MATERIALS": lambda v: v.materials,
    "COLOR_RGB": lambda v: v.color_rgb,
    "SIZE_RADIUS": lambda v: v.size_radius,
    "ADJ_NOUN_HELD_OUT": lambda v: dict(v.adj_noun_held_out),
    "RELATION_HELD_OUT": lambda v: dict(v.relation_held_out),
    "ALL_ADJ_NOUN": all_adj_noun,
    "ALL_FACTS": all_facts,
}


def __getattr__(name: str):
    """The paper's vocabulary and tables under their old names (``COLORS``, ``ADJ_NOUN_HELD_OUT``, …)."""
    if name in _PAPER_TABLES:
        return _PAPER_TABLES[name](paper_vocabulary())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Candidate:
    label: str
    kind: str  # true | random | hard-swap | bRa | aSb | aRc | cRb


def single_object_candidates(true: AdjNoun, rng: random.Random, vocab: Vocabulary | None = None) -> list[Candidate]:
    """True label + 4 random other adjective–noun combinations."""
    others = [c for c in all_adj_noun(vocab) if c != true]
    picks = rng.sample(others, 4)
    return [Candidate(adjective_noun(*true), "true")] + [Candidate(adjective_noun(*c), "random") for c in picks]


def two_object_candidates(
    true: AdjNoun, other: AdjNoun, rng: random.Random, vocab: Vocabulary | None = None
) -> list[Candidate]:
    """True label, the two attribute swaps (hard), and two random negatives.

    The second object's own label is also true of the image, so it is never a distractor.
    """
    (color_a, shape_a), (color_b, shape_b) = true, other
    swaps = [(color_a, shape_b), (color_b, shape_a)]
    excluded = {true, other, *swaps}
    pool = [c for c in all_adj_noun(vocab) if c not in excluded]
    picks = rng.sample(pool, 2)
    return (
        [Candidate(adjective_noun(*true), "true")]
        + [Candidate(adjective_noun(*c), "hard-swap") for c in swaps]
        + [Candidate(adjective_noun(*c), "random") for c in picks]
    )


def relational_candidates(
    fact: Fact, vocab: Vocabulary | None = None, rng: random.Random | None = None
) -> list[Candidate]:
    """True label + {bRa, aSb, aRc, cRb} with S the opposite relation and c a third shape (the
    only one with three shapes; with more, drawn from the item's ``rng``)."""
    a, relation, b = fact
    thirds = [shape for shape in _vocab(vocab).shapes if shape not in (a, b)]
    c = thirds[0] if len(thirds) == 1 or rng is None else rng.choice(thirds)
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
