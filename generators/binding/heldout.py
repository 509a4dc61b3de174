"""Held-out compositions from a vocabulary, by the paper's §3 rules.

The rules (paper 004 §3): the true class labels of train, val and gen never overlap, and every
single adjective (colour), noun (shape) and relation occurs in train. A relational held-out split
is an *image type*: ``a R b`` and its converse ``b S a`` (S the opposite of R) are the same
picture, so they are held out together.

When a spec names no held-out compositions they are computed with the paper's proportions: of the
N colour–shape compositions, round(N/3) go to gen and round(N/12) to val (the paper: 8 and 2 of
24), and one relational image type each to val and gen (the paper: 2 + 2 of 24 labels). The
choice is a seeded shuffle (``held_out.seed``) taken greedily, skipping any composition whose
removal would leave a colour or shape without a train composition.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from conceptforge.generators.binding.vocab import OPPOSITE_RELATION, AdjNoun, Fact
from conceptforge.specs import spec_error

HELD_OUT_SPLITS = ("val", "gen")
GEN_SHARE, VAL_SHARE = 1 / 3, 1 / 12  # paper 004 §3: 8 and 2 of 24 adjective-noun classes


def converse(fact: Fact) -> Fact:
    subject, relation, obj = fact
    return (obj, OPPOSITE_RELATION[relation], subject)


def auto_adj_noun(shapes: Sequence[str], colors: Sequence[str], seed: int) -> dict[str, tuple[AdjNoun, ...]]:
    compositions = [(c, s) for s in shapes for c in colors]
    targets = {"gen": max(1, round(len(compositions) * GEN_SHARE)), "val": max(1, round(len(compositions) * VAL_SHARE))}
    order = list(compositions)
    random.Random(seed).shuffle(order)
    train = set(compositions)
    held: dict[str, list[AdjNoun]] = {"val": [], "gen": []}
    for split in ("gen", "val"):
        for composition in order:
            if len(held[split]) >= targets[split]:
                break
            rest = train - {composition}
            if composition in train and _covers(rest, shapes, colors):
                held[split].append(composition)
                train = rest
    return {split: tuple(held[split]) for split in HELD_OUT_SPLITS}


def auto_relational(shapes: Sequence[str], relations: Sequence[str], seed: int) -> dict[str, tuple[Fact, ...]]:
    image_types = []
    for i, a in enumerate(shapes):
        for b in shapes[i + 1 :]:
            for relation in relations:
                fact = (a, relation, b)
                if converse(fact) not in {f for t in image_types for f in t}:
                    image_types.append((fact, converse(fact)))
    random.Random(seed).shuffle(image_types)
    return {"val": image_types[0] if image_types else (), "gen": image_types[1] if len(image_types) > 1 else ()}


def _covers(train: set[AdjNoun], shapes: Sequence[str], colors: Sequence[str]) -> bool:
    return {s for _, s in train} == set(shapes) and {c for c, _ in train} == set(colors)


def compute_held_out(
    shapes: Sequence[str],
    colors: Sequence[str],
    relations: Sequence[str],
    spec: Any,
    *,
    datasets: Sequence[str],
    source: str = "",
) -> dict[str, dict[str, tuple]]:
    """The held-out compositions: the spec's where named (relational ones with their converses), else computed."""
    if spec.adjective_noun is not None:
        adj_noun = {split: tuple(tuple(c) for c in spec.adjective_noun.get(split, ())) for split in HELD_OUT_SPLITS}
    else:
        adj_noun = auto_adj_noun(shapes, colors, spec.seed)
    if spec.relational is not None:
        relational = {}
        for split in HELD_OUT_SPLITS:
            facts: list[Fact] = []
            for index, fact in enumerate(spec.relational.get(split, ())):
                fact = tuple(fact)
                _check_fact(fact, shapes, relations, f"held_out.relational.{split}[{index}]", source=source)
                facts += [f for f in (fact, converse(fact)) if f not in facts]
            relational[split] = tuple(facts)
    else:
        relational = (
            auto_relational(shapes, relations, spec.seed) if "relational" in datasets else {"val": (), "gen": ()}
        )
    return {"adjective_noun": adj_noun, "relational": relational}


def _check_fact(fact: Fact, shapes: Sequence[str], relations: Sequence[str], path: str, *, source: str) -> None:
    subject, relation, obj = fact
    for role, shape in (("subject", subject), ("object", obj)):
        if shape not in shapes:
            raise spec_error(path, f"unknown {role} shape {shape!r}; known shapes: {', '.join(shapes)}", source=source)
    if subject == obj:
        raise spec_error(path, "subject and object must be different shapes", source=source)
    if relation not in relations:
        raise spec_error(path, f"relation {relation!r} is not in relations ({', '.join(relations)})", source=source)


def check_held_out(
    shapes: Sequence[str],
    colors: Sequence[str],
    held: dict[str, dict[str, tuple]],
    *,
    datasets: Sequence[str],
    source: str = "",
) -> None:
    """The paper's rules hold for these held-out compositions, and every dataset can draw its distractors."""
    compositions = [(c, s) for s in shapes for c in colors]
    adj_noun = held["adjective_noun"]
    seen: dict[AdjNoun, str] = {}
    for split in HELD_OUT_SPLITS:
        for index, composition in enumerate(adj_noun[split]):
            path = f"held_out.adjective_noun.{split}[{index}]"
            color, shape = composition
            if color not in colors:
                raise spec_error(path, f"unknown colour {color!r}; known colours: {', '.join(colors)}", source=source)
            if shape not in shapes:
                raise spec_error(path, f"unknown shape {shape!r}; known shapes: {', '.join(shapes)}", source=source)
            if composition in seen:
                raise spec_error(path, f"{color} {shape} is already held out in {seen[composition]}", source=source)
            seen[composition] = split
    train = {c for c in compositions if c not in seen}
    if {"single-object", "two-object"} & set(datasets) and not _covers(train, shapes, colors):
        missing = sorted(({s for s in shapes} - {s for _, s in train}) | ({c for c in colors} - {c for c, _ in train}))
        raise spec_error(
            "held_out.adjective_noun",
            f"{', '.join(missing)} would never occur in train (paper §3: every adjective and noun is in train); "
            "hold out fewer compositions",
            source=source,
        )
    if "single-object" in datasets and len(compositions) < 5:
        raise spec_error(
            "vocabulary",
            f"{len(compositions)} colour-shape compositions cannot give 4 distractors; "
            "the single-object dataset needs at least 5",
            source=source,
        )
    if "two-object" in datasets:
        if len(shapes) < 2 or len(colors) < 2 or len(compositions) < 6:
            raise spec_error(
                "vocabulary",
                "the two-object dataset needs at least 2 shapes, 2 colours and 6 "
                "compositions (two objects differ in both, and 2 random distractors)",
                source=source,
            )
        for split in ("train", *HELD_OUT_SPLITS):
            own = train if split == "train" else set(adj_noun[split])
            for color, shape in own:
                if not any(c != color and s != shape for c, s in train | own):
                    raise spec_error(
                        "held_out.adjective_noun",
                        f"a two-object {split} image of {color} {shape} has no second object to show "
                        "(different colour and shape, seen in train or its own split); hold out fewer",
                        source=source,
                    )
    if "relational" in datasets:
        if len(shapes) < 3:
            raise spec_error(
                "vocabulary.shapes",
                f"the relational dataset needs at least 3 shapes (aRc, cRb "
                f"distractors name a third), got {len(shapes)}",
                source=source,
            )
        val, gen = set(held["relational"]["val"]), set(held["relational"]["gen"])
        if val & gen:
            raise spec_error("held_out.relational", "val and gen hold out the same image type", source=source)
        if not held["relational"]["val"] or not held["relational"]["gen"]:
            raise spec_error(
                "held_out.relational", "val and gen each need at least one held-out image type", source=source
            )
