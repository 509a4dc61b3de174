"""Splits and distractors of the binding datasets, exactly as Binding paper §3 (no Blender needed)."""

import random
from collections import Counter

import pytest

from conceptforge.generators.binding.compositions import (
    ADJ_NOUN_HELD_OUT,
    ALL_ADJ_NOUN,
    ALL_FACTS,
    COLORS,
    DATASETS,
    RELATIONS,
    SHAPES,
    SPLITS,
    relational_candidates,
    shuffled,
    single_object_candidates,
    split_classes,
    two_object_candidates,
)
from conceptforge.generators.binding.vocab import OPPOSITE_RELATION


def test_class_counts_match_table_1():
    counts = {d: [len(split_classes(d, s)) for s in SPLITS] for d in DATASETS}
    assert counts == {"single-object": [14, 2, 8], "two-object": [14, 2, 8], "relational": [20, 2, 2]}


@pytest.mark.parametrize("dataset", DATASETS)
def test_splits_are_disjoint_and_train_covers_every_word(dataset):
    per_split = {s: set(split_classes(dataset, s)) for s in SPLITS}
    assert not per_split["train"] & per_split["val"]
    assert not per_split["train"] & per_split["gen"]
    assert not per_split["val"] & per_split["gen"]
    train_words = {word for label in per_split["train"] for word in label}
    expected = set(SHAPES) | (set(RELATIONS) if dataset == "relational" else set(COLORS))
    assert expected <= train_words


def test_paper_held_out_sets():
    assert set(split_classes("single-object", "val")) == {("brown", "cube"), ("green", "cylinder")}
    assert ("purple", "cube") in ADJ_NOUN_HELD_OUT["gen"]
    assert set(split_classes("relational", "val")) == {("cube", "front", "sphere"), ("sphere", "behind", "cube")}
    assert set(split_classes("relational", "gen")) == {("cylinder", "front", "cube"), ("cube", "behind", "cylinder")}
    assert len(ALL_ADJ_NOUN) == 24 and len(ALL_FACTS) == 24


def test_single_object_distractors_are_other_combinations():
    rng = random.Random(0)
    for true in ALL_ADJ_NOUN:
        candidates = single_object_candidates(true, rng)
        labels = [c.label for c in candidates]
        assert len(set(labels)) == 5 and labels[0] == f"{true[0]} {true[1]}"
        assert Counter(c.kind for c in candidates) == {"true": 1, "random": 4}


def test_two_object_hard_distractors_swap_attributes():
    rng = random.Random(1)
    candidates = two_object_candidates(("red", "cube"), ("yellow", "sphere"), rng)
    labels = {c.kind: [] for c in candidates}
    for c in candidates:
        labels[c.kind].append(c.label)
    assert labels["true"] == ["red cube"]
    assert sorted(labels["hard-swap"]) == ["red sphere", "yellow cube"]
    assert len(labels["random"]) == 2
    # The other object's own label is true of the image and must never be a distractor.
    assert "yellow sphere" not in labels["random"]
    assert len({c.label for c in candidates}) == 5


def test_relational_distractors():
    candidates = relational_candidates(("cube", "left", "sphere"))
    assert {c.kind: c.label for c in candidates} == {
        "true": "cube left sphere",
        "bRa": "sphere left cube",
        "aSb": "cube right sphere",
        "aRc": "cube left cylinder",
        "cRb": "cylinder left sphere",
    }
    assert all(OPPOSITE_RELATION[OPPOSITE_RELATION[r]] == r for r in RELATIONS)


def test_shuffle_is_seeded_and_tracks_the_true_label():
    candidates = relational_candidates(("cylinder", "front", "cube"))
    order_a, index_a = shuffled(candidates, random.Random(5))
    order_b, index_b = shuffled(candidates, random.Random(5))
    assert order_a == order_b and index_a == index_b
    assert order_a[index_a].kind == "true"
    # Over many seeds the true label lands at every position (no position bias).
    positions = {shuffled(candidates, random.Random(seed))[1] for seed in range(200)}
    assert positions == {0, 1, 2, 3, 4}
