import numpy as np
import pytest

from conceptforge.errors import ConceptforgeError
from conceptforge.cub import load_cub, to_cub_attribute
from conceptforge.loaders.sub import SubItem, build_report, cbm_concept_names, score_cbm_predictions, score_vlm_predictions


@pytest.fixture(scope="module")
def cub(fake_cub):
    return load_cub(fake_cub, need="votes")


def test_cub_metadata_majority_vote_and_groups(cub):
    assert len(cub.attributes) == 10 and set(cub.groups) == {"has_bill_shape", "has_crown_color", "has_tail_pattern"}
    # the first image of each class disagrees; the vote recovers the class attributes
    assert cub.class_attributes("073.Blue_Jay") == {"has_bill_shape::dagger", "has_crown_color::blue", "has_tail_pattern::multi-colored"}
    assert cub.class_attributes("Blue Jay") == cub.class_attributes("Blue_Jay")
    assert cub.class_attributes("Black-footed Albatross") == cub.class_attributes("001.Black_footed_Albatross")
    with pytest.raises(ConceptforgeError, match="not a CUB class"):
        cub.class_attributes("Dodo")
    # present in >= 2 classes (the real subset uses 10 of 200)
    assert cub.cbm_attributes(min_class_count=2) == [
        "has_bill_shape::dagger", "has_bill_shape::needle", "has_crown_color::blue", "has_crown_color::black", "has_tail_pattern::solid"]


def test_published_separator_is_converted():
    assert to_cub_attribute("has_crown_color--black") == "has_crown_color::black"
    assert to_cub_attribute("has_tail_pattern--multi-colored") == "has_tail_pattern::multi-colored"
    with pytest.raises(ConceptforgeError):
        to_cub_attribute("crown black")


def test_appendix_f_chance_on_a_constructed_example(cub):
    items = [
        SubItem(None, "Blue_Jay", "has_bill_shape::needle", ("has_bill_shape::dagger",)),  # |A| = 3 -> 1/4
        SubItem(None, "Blue_Jay", "has_crown_color::red", ("has_crown_color::blue",)),  # |A| = 4 -> 1/5
        SubItem(None, "Blue_Jay", "has_crown_color::yellow", ()),  # no S- label: only in S+
    ]
    report = build_report("vlm", "m", "r", score_vlm_predictions(items, [None, None, None], cub))
    assert report.summary["chance_s_plus"] == pytest.approx((1 / 4 + 1 / 5 + 1 / 5) / 3)
    assert report.summary["chance_s_minus"] == pytest.approx(((1 - 1 / 4) + (1 - 1 / 5)) / 2)
    assert report.summary["n_s_plus"] == 3 and report.summary["n_s_minus"] == 2


def test_vlm_splus_sminus_on_hand_made_predictions(cub):
    items = [
        SubItem(None, "A", "has_bill_shape::needle", ("has_bill_shape::dagger",)),
        SubItem(None, "A", "has_bill_shape::needle", ("has_bill_shape::dagger",)),
        SubItem(None, "B", "has_crown_color::red", ("has_crown_color::blue",)),
        SubItem(None, "B", "has_crown_color::red", ("has_crown_color::blue",)),
    ]
    predictions = ["has_bill_shape::needle", "has_bill_shape::dagger", None, "has_crown_color::red"]
    report = build_report("vlm", "m", "r", score_vlm_predictions(items, predictions, cub))
    assert report.s_plus == pytest.approx(2 / 4)
    assert report.s_minus == pytest.approx(3 / 4)  # only the second picked the removed attribute
    assert report.per_attribute["has_bill_shape::needle"]["s_plus"] == pytest.approx(0.5)
    assert report.per_bird["B"]["s_minus"] == pytest.approx(1.0)
    assert "Random chance" in report.format()


def test_cbm_scoring_thresholded_and_out_of_vocabulary(cub):
    names = ["has_bill_shape::needle", "has_bill_shape::dagger", "has_crown_color::blue"]
    items = [
        SubItem(None, "A", "has_bill_shape::needle", ("has_bill_shape::dagger",)),
        SubItem(None, "A", "has_bill_shape::needle", ("has_bill_shape::dagger",)),
        SubItem(None, "B", "has_crown_color::red", ("has_crown_color::blue",)),  # S+ not in vocabulary
    ]
    present = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1]], dtype=bool)
    report = build_report("cbm", "m", "", score_cbm_predictions(items, present, names))
    assert report.summary["n_s_plus"] == 2 and report.s_plus == pytest.approx(1.0)
    assert report.summary["n_s_minus"] == 3 and report.s_minus == pytest.approx(1 / 3)
    assert report.summary["chance_s_plus"] == pytest.approx(0.5)


def test_cbm_vocabulary_mismatch_is_one_line(cub):
    assert cbm_concept_names(10, cub) == cub.attributes
    with pytest.raises(ConceptforgeError, match="matching neither"):
        cbm_concept_names(7, cub)
    with pytest.raises(ConceptforgeError, match="do not match"):
        cbm_concept_names(3, cub, ["has_bill_shape::needle"])
    with pytest.raises(ConceptforgeError, match="not in the CUB attribute vocabulary"):
        cbm_concept_names(1, cub, ["has_wing_color::pink"])
