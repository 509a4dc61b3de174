"""The SUB specification (SUB paper appendices), CUB metadata and pair planning."""

import json

import pytest

from conceptforge.cub import load_cub
from conceptforge.errors import ConceptforgeError
from conceptforge.generators.sub import spec as sub_spec

from .conftest import CLASSES, write_mini_cub

APPENDIX_D = [
    (
        "European_Goldfinch",
        "has_crown_color::black",
        "bird",
        "A photo of a European Goldfinch with black colored feathers on the crown of its head",
        "A photo of a bird with black colored feathers on the crown of its head",
    ),
    (
        "Downy_Woodpecker",
        "has_breast_color::red",
        "bird",
        "A photo of a Downy Woodpecker with a red colored breast",
        "A photo of a bird with a red colored breast",
    ),
    (
        "Western_Grebe",
        "has_tail_pattern::solid",
        "Gray_Catbird",
        "A photo of a Western Grebe with a solid tail like a Gray Catbird",
        "A photo of a Gray Catbird with a solid tail",
    ),
    (
        "Cardinal",
        "has_breast_pattern::spotted",
        "Brown_Thrasher",
        "A photo of a Cardinal with a spotted belly like a Brown Thrasher",
        "A photo of a Brown Thrasher with a spotted belly",
    ),
    (
        "Blue_Jay",
        "has_bill_shape::needle",
        "Hummingbird",
        "A photo of a Blue Jay with the body of a Blue Jay and a beak like a Hummingbird",
        "A photo of a Hummingbird",
    ),
]


@pytest.mark.parametrize("bird,attribute,guide,c_r,c_g", APPENDIX_D)
def test_appendix_d_prompts_verbatim(bird, attribute, guide, c_r, c_g):
    sub = sub_spec.make_substitution(attribute)
    assert sub.guidance_bird == guide
    assert sub_spec.make_prompts(bird, sub) == (c_r, c_g)


def test_paper_spec_counts_and_schedules():
    spec = sub_spec.load_spec()
    assert len(spec.reference_birds) == 33 and len(set(spec.reference_birds)) == 33
    assert spec.reference_birds[0] == "Western_Grebe" and spec.reference_birds[-1] == "Painted_Bunting"
    assert len(spec.substitutions) == 32 and len(set(spec.substitutions)) == 32
    subs = [sub_spec.make_substitution(a) for a in spec.substitutions]
    categories = [s.category for s in subs]
    assert categories.count("colour") == 27 and categories.count("pattern") == 4 and categories.count("shape") == 1
    assert {s.group for s in subs} >= {"has_crown_color", "has_tail_pattern", "has_bill_shape"}
    for sub in subs:
        expected_tmax = 0.6 if sub.category == "pattern" else 0.9
        assert (sub.tdg.k, sub.tdg.tmin, sub.tdg.tmax) == (10.0, 0.2, expected_tmax)
    assert {s.attribute: s.guidance_bird for s in subs if s.category != "colour"} == {
        "has_bill_shape::needle": "Hummingbird",
        "has_breast_pattern::spotted": "Brown_Thrasher",
        "has_breast_pattern::striped": "Song_Sparrow",
        "has_tail_pattern::solid": "Gray_Catbird",
        "has_tail_pattern::multi-colored": "Cedar_Waxwing",
    }


def test_every_cub_group_has_a_template_and_articles_are_fixed(mini_cub):
    cub = load_cub(mini_cub)
    for attribute in cub.attributes:
        sub = sub_spec.make_substitution(attribute, cub=cub)
        c_r, c_g = sub_spec.make_prompts("Blue_Jay", sub)
        assert c_r.startswith("A photo of a Blue Jay") and "{" not in c_r + c_g
    sub = sub_spec.make_substitution("has_breast_color::orange")
    assert sub_spec.make_prompts("Blue_Jay", sub)[0] == "A photo of a Blue Jay with an orange colored breast"
    # Outside Table 3, the guidance bird is the class that most often shows the attribute.
    assert sub_spec.make_substitution("has_wing_pattern::striped", cub=cub).guidance_bird == "Cactus_Wren"
    assert (
        sub_spec.make_substitution("has_wing_pattern::striped", cub=cub, guidance_bird="Brown_Thrasher").guidance_bird
        == "Brown_Thrasher"
    )


def test_cub_metadata_and_removed_attribute(mini_cub):
    cub = load_cub(mini_cub.parent)  # the folder holding CUB_200_2011 works too
    assert cub.classes == CLASSES and len(cub.attributes) == 312
    assert cub.present_in_group("Blue_Jay", "has_crown_color") == ["has_crown_color::blue", "has_crown_color::white"]
    assert cub.removed_attribute("Blue_Jay", "has_crown_color") == "has_crown_color::blue"
    assert cub.removed_attribute("Blue_Jay", "has_leg_color") == ""


def test_plan_drops_pairs_whose_bird_already_has_s_plus(mini_cub):
    cub = load_cub(mini_cub)
    spec = sub_spec.load_spec()
    plan = sub_spec.plan_pairs(spec.reference_birds, spec.substitutions, cub=cub)
    assert set(plan.dropped) == {
        ("European_Goldfinch", "has_crown_color::black"),
        ("Cardinal", "has_breast_color::red"),
        ("Song_Sparrow", "has_breast_pattern::striped"),
        ("Blue_Jay", "has_crown_color::white"),  # present (60%) though not the bird's S- (blue, 90%)
    }
    assert len(plan.pairs) == 33 * 32 - 4
    keys = [(p.bird, p.attribute) for p in plan.pairs]
    assert ("European_Goldfinch", "has_crown_color::black") not in keys
    jay = next(p for p in plan.pairs if p.bird == "Blue_Jay" and p.attribute == "has_crown_color::black")
    assert jay.removed_attribute == "has_crown_color::blue" and jay.category == "colour"
    full = sub_spec.plan_pairs(spec.reference_birds, spec.substitutions, cub=cub, drop_present=False)
    assert len(full.pairs) == 33 * 32 and not full.dropped


def test_candidate_spec_and_reference_selection(mini_cub, tmp_path):
    cub = load_cub(mini_cub)
    path = tmp_path / "candidates.json"
    path.write_text(
        json.dumps(
            {
                "birds": ["Blue_Jay", "Cardinal", "Blue_Jay"],
                "attributes": ["has_wing_pattern::striped", "has_crown_color::black"],
            }
        )
    )
    candidate = sub_spec.read_candidate_spec(path)
    assert candidate.birds == ("Blue_Jay", "Cardinal")
    plan = sub_spec.plan_pairs(candidate.birds, candidate.attributes, cub=cub, drop_present=False)
    assert [(p.bird, p.attribute) for p in plan.pairs] == [
        ("Blue_Jay", "has_wing_pattern::striped"),
        ("Blue_Jay", "has_crown_color::black"),
        ("Cardinal", "has_wing_pattern::striped"),
        ("Cardinal", "has_crown_color::black"),
    ]
    assert plan.pairs[0].prompt_reference == "A photo of a Blue Jay with striped wings like a Cactus Wren"
    selection = sub_spec.plan_reference_selection(cub)
    assert len(selection.pairs) == len(CLASSES)
    assert selection.pairs[0].prompt_reference == "A photo of a Western Grebe" and selection.pairs[0].attribute == ""
    assert sub_spec.plan_reference_selection(cub, ["032.Blue_Jay"]).pairs[0].bird == "Blue_Jay"
    with pytest.raises(ConceptforgeError, match="not a CUB class"):
        sub_spec.plan_reference_selection(cub, ["Dodo"])
    path.write_text(json.dumps({"birds": [], "attributes": ["has_crown_color::black"]}))
    with pytest.raises(ConceptforgeError, match="'birds' must be a non-empty list"):
        sub_spec.read_candidate_spec(path)
    with pytest.raises(ConceptforgeError, match="not in CUB's form"):
        sub_spec.plan_pairs(["Blue_Jay"], ["crown black"], cub=cub)


def test_cub_errors_name_what_is_missing(tmp_path):
    with pytest.raises(ConceptforgeError, match="does not exist"):
        load_cub(tmp_path / "nope")
    with pytest.raises(ConceptforgeError, match="missing classes.txt"):
        load_cub(tmp_path)
    cub = write_mini_cub(tmp_path / "a")
    (tmp_path / "a" / "attributes.txt").unlink()
    with pytest.raises(ConceptforgeError, match="missing attributes.txt"):
        load_cub(cub)
    cub = write_mini_cub(tmp_path / "b", with_attributes_beside=False)
    assert len(load_cub(cub).attributes) == 312
    (cub / "attributes" / "class_attribute_labels_continuous.txt").write_text("1 2 3\n")
    with pytest.raises(ConceptforgeError, match="expected 36 classes x 312 attributes"):
        load_cub(cub)
