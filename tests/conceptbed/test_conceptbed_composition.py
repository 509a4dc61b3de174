"""Composite prompts: Table 4 questions, Figure 7 categories, caption loading, V* substitution."""

from __future__ import annotations

import json

import pytest

from conceptforge.errors import ConceptforgeError
from conceptforge.generators.conceptbed.composition import (
    generate_questions,
    load_captions,
    load_categoriser,
    rule_based_categories,
    substitute_subject,
    with_questions_and_categories,
)

TABLE4 = [
    ("two birds standing on branches", ["are there two birds?", "are there branches?"]),
    ("tongue hanging out a dog's mouth", ["is there tongue?", "is there a dog's mouth?"]),
    ("cat is licking herself", ["is there cat?", "is the cat licking herself?"]),
    ("the monkey is holding onto a red bar", ["is there the monkey?", "is there a red bar?"]),
    ("Propeller blade on an aircraft", ["is there propeller blade?", "is there an aircraft?"]),
    ("the vine is around clock", ["is there the vine?", "is there clock?"]),
    ("man driving the boat", ["is there man?", "is there the boat?"]),
]


@pytest.mark.parametrize("caption,questions", TABLE4)
def test_questions_reproduce_table4(caption, questions):
    assert generate_questions(caption) == questions


FIGURE7 = [
    ("wood is under bird", ["relation"]),
    ("the dog has a black nose", ["attribute"]),
    ("there are two mouse", ["counting"]),
    ("the monkey is biting the banana", ["action"]),
    ("The bird is eating food out of the person's hand", ["action", "relation"]),
    ("the dog has large brown paws", ["attribute"]),
]


@pytest.mark.parametrize("caption,categories", FIGURE7)
def test_rule_categoriser_on_figure7_examples(caption, categories):
    assert rule_based_categories(caption) == categories


def test_subject_substitution():
    assert substitute_subject("the dog has a black nose", ["dog"], "<object>") == "the <object> has a black nose"
    assert substitute_subject("two dogs on grass", ["dog"], "sks beagle") == "two sks beagles on grass"
    assert substitute_subject("a Dog runs", ["dog"], "V") == "a V runs"
    assert substitute_subject("a hotdog stand", ["dog"], "V") is None


def test_load_captions_jsonl_and_folder(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(
        json.dumps({"concept": "beagle", "caption": "the  dog has a black nose", "categories": "attribute, relation"})
        + "\n"
        + json.dumps({"concept": "other", "caption": "x"})
        + "\n\n"
        + json.dumps({"concept": "beagle", "caption": "dog on a sofa", "image": "img/1.jpg"})
        + "\n"
    )
    loaded = load_captions(path, ["beagle"])
    assert [c.caption for c in loaded["beagle"]] == ["the dog has a black nose", "dog on a sofa"]
    assert loaded["beagle"][0].categories == ("attribute", "relation")
    assert loaded["beagle"][1].image == tmp_path / "img" / "1.jpg"
    enriched = with_questions_and_categories(loaded["beagle"], rule_based_categories)
    assert enriched[0].categories == ("attribute", "relation")  # the file's categories win
    assert enriched[1].categories == ("relation",) and enriched[1].questions == ("is there dog?", "is there a sofa?")
    folder = tmp_path / "captions"
    folder.mkdir()
    (folder / "tabby.txt").write_text("cat is licking herself\n\n")
    assert load_captions(folder, ["tabby", "beagle"])["tabby"][0].caption == "cat is licking herself"


def test_caption_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"concept": "beagle", "caption": "x", "categories": ["colour"]}) + "\n")
    with pytest.raises(ConceptforgeError, match="unknown category 'colour'"):
        load_captions(bad, ["beagle"])
    bad.write_text("{not json\n")
    with pytest.raises(ConceptforgeError, match=r"bad.jsonl:1"):
        load_captions(bad, ["beagle"])
    with pytest.raises(ConceptforgeError, match="do not exist"):
        load_captions(tmp_path / "missing.jsonl", ["beagle"])


def test_pluggable_categoriser():
    assert load_categoriser("rules") is rule_based_categories
    function = load_categoriser("conceptforge.generators.conceptbed.composition:rule_based_categories")
    assert function("two cats") == ["counting"]
    with pytest.raises(ConceptforgeError):
        load_categoriser("no_such_module:f")
