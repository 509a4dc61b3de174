"""The concept library (Table 9) and spec resolution over local dataset layouts."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from conceptforge.errors import ConceptforgeError
from conceptforge.generators.conceptbed.concepts import CUB_CLASSES, IMAGENET_CONCEPTS, PACS_STYLES, library
from conceptforge.generators.conceptbed.spec import expand_concept_names, load_spec


def test_library_matches_table9():
    assert PACS_STYLES == ("art_painting", "cartoon", "photo", "sketch")
    assert len(IMAGENET_CONCEPTS) == 80 and len(CUB_CLASSES) == 200 and len(library()) == 284
    assert CUB_CLASSES[0] == "001.Black_footed_Albatross" and CUB_CLASSES[102] == "103.Sayornis"
    assert CUB_CLASSES[-1] == "200.Common_Yellowthroat"
    names = [n for n, _ in IMAGENET_CONCEPTS]
    assert names[:4] == ["langur", "hand-held_computer", "guenon", "brambling"] and names[-1] == "indigo_bunting"
    # parent groups are Table 10's groups of identical composition counts
    groups = Counter(parent for _, parent in IMAGENET_CONCEPTS)
    assert groups["dog"] == 11 and groups["monkey"] == 20 and groups["bird"] == 11
    assert groups["truck"] == 6 and groups["car"] == 6 and groups["boat"] == 6 and groups["cat"] == 2


def test_expand_names():
    assert expand_concept_names("style") == list(PACS_STYLES)
    assert len(expand_concept_names(["object", "beagle"])) == 80
    assert len(expand_concept_names("all")) == 284
    with pytest.raises(ConceptforgeError, match="unknown ConceptBed concept 'dragon'"):
        expand_concept_names(["dragon"])


def test_spec_resolves_each_layout(tmp_path, datasets_root, write_spec):
    path = write_spec(
        tmp_path, datasets_root, ["art_painting", "beagle", "tabby", "002.Laysan_Albatross"], max_reference_images=9
    )
    spec = load_spec(path)
    by = spec.by_name()
    style = by["art_painting"]
    assert style.kind == "style" and len(style.reference_images) == 9
    assert [p.parent.name for p in style.reference_images[:7]] == [
        "dog",
        "elephant",
        "giraffe",
        "guitar",
        "horse",
        "house",
        "person",
    ]
    assert by["beagle"].reference_images[0].parent.name == "n02088364" and by["beagle"].parent == "dog"
    assert by["tabby"].reference_images[0].parent.name == "n02123045"  # "tabby, tabby cat"
    assert by["002.Laysan_Albatross"].kind == "cub" and len(by["002.Laysan_Albatross"].reference_images) == 2
    assert by["002.Laysan_Albatross"].class_noun == "Laysan Albatross"


def test_spec_errors(tmp_path, datasets_root, write_spec):
    with pytest.raises(ConceptforgeError, match="not found"):
        load_spec(write_spec(tmp_path, datasets_root, ["langur"]))
    raw = {"concepts": ["beagle"]}
    (tmp_path / "s.json").write_text(json.dumps(raw))
    with pytest.raises(ConceptforgeError, match="needs 'imagenet_root'"):
        load_spec(tmp_path / "s.json")
    (tmp_path / "s.json").write_text("[1,")
    with pytest.raises(ConceptforgeError, match="not valid JSON"):
        load_spec(tmp_path / "s.json")
    with pytest.raises(ConceptforgeError, match="does not exist"):
        load_spec(tmp_path / "none.json")
