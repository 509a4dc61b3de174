import numpy as np
import pytest

from conceptforge.cub import load_cub, to_cub_attribute
from conceptforge.errors import ConceptforgeError
from conceptforge.loaders.sub.cbm import cbm_concept_names
from conceptforge.loaders.sub.scoring import SubItem, build_report, score_cbm_predictions, score_vlm_predictions

pytestmark = pytest.mark.usefixtures("offline_single_thread")


@pytest.fixture(scope="module")
def cub(fake_cub):
    return load_cub(fake_cub, need="votes")


def test_cub_metadata_majority_vote_and_groups(cub):
    assert len(cub.attributes) == 10 and set(cub.groups) == {"has_bill_shape", "has_crown_color", "has_tail_pattern"}
    # the first image of each class disagrees; the vote recovers the class attributes
    assert cub.class_attributes("073.Blue_Jay") == {
        "has_bill_shape::dagger",
        "has_crown_color::blue",
        "has_tail_pattern::multi-colored",
    }
    assert cub.class_attributes("Blue Jay") == cub.class_attributes("Blue_Jay")
    assert cub.class_attributes("Black-footed Albatross") == cub.class_attributes("001.Black_footed_Albatross")
    with pytest.raises(ConceptforgeError, match="not a CUB class"):
        cub.class_attributes("Dodo")
    # present in >= 2 classes (the real subset uses 10 of 200)
    assert cub.cbm_attributes(min_class_count=2) == [
        "has_bill_shape::dagger",
        "has_bill_shape::needle",
        "has_crown_color::blue",
        "has_crown_color::black",
        "has_tail_pattern::solid",
    ]


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
    report = build_report(
        "vlm", "m", "r", score_vlm_predictions(items, [None, None, None], cub, s_minus="any-original")
    )
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
    report = build_report("vlm", "m", "r", score_vlm_predictions(items, predictions, cub, s_minus="any-original"))
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
    report = build_report("cbm", "m", "", score_cbm_predictions(items, present, names, s_minus="any-original"))
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


# Fake CUB class-level labels (conceptforge/testing/synthetic.py): Blue_Jay bill dagger, crown blue, tail
# multi-coloured; Albatross crown black; Nuthatch crown blue. With cbm_min_classes=2 the "CBM
# subset" holds the attributes present in >= 2 of the 4 classes: dagger, needle, black, blue,
# solid (multi-coloured and spotted are in one class each, so they are not CBM labels).
PAPER_ITEMS = [
    SubItem(None, "Blue_Jay", "has_bill_shape::needle", ("has_bill_shape::dagger",)),  # S- = dagger
    SubItem(
        None, "Blue_Jay", "has_tail_pattern::spotted", ("has_tail_pattern::multi-colored",)
    ),  # no CBM label: S- unscored
    SubItem(None, "Black_footed_Albatross", "has_crown_color::red", ("has_crown_color::black",)),  # S- = black
    SubItem(None, "White_breasted_Nuthatch", "has_crown_color::yellow", ("has_crown_color::blue",)),  # S- = blue
    SubItem(None, "Blue_Jay", "has_crown_color::blue", ()),  # S+ is the bird's own value: no other, S- unscored
]


def test_paper_s_minus_targets_come_from_the_cbm_class_labels(cub):
    from conceptforge.loaders.sub.scoring import s_minus_targets

    assert s_minus_targets(PAPER_ITEMS, cub, cbm_min_classes=2) == [
        ["has_bill_shape::dagger"],
        [],
        ["has_crown_color::black"],
        ["has_crown_color::blue"],
        [],
    ]
    # with every class-level label in the subset, the Blue Jay's multi-coloured tail counts too
    assert s_minus_targets(PAPER_ITEMS, cub, cbm_min_classes=1)[1] == ["has_tail_pattern::multi-colored"]
    assert s_minus_targets(PAPER_ITEMS, None, rule="any-original")[1] == ["has_tail_pattern::multi-colored"]
    with pytest.raises(ConceptforgeError, match="unknown S- rule"):
        s_minus_targets(PAPER_ITEMS, cub, rule="authors")


def test_vlm_s_minus_paper_rule_by_hand(cub):
    """Predictions: 1 dagger (S+ no, S- wrong), 2 spotted (S+ yes), 3 none (S+ no, S- right),
    4 blue (S+ no, S- wrong), 5 blue (S+ yes). S+ = 2/5 = 0.4; S- on items 1, 3, 4 = 1/3.
    Chance (App. F): S+ = mean(1/4, 1/4, 1/5, 1/5, 1/5) = 1.1/5 = 0.22 (bill and tail have 3
    values, crown 4; + "none"); S- = mean(1 − 1/4, 1 − 1/5, 1 − 1/5) = 2.35/3 = 0.783333.
    The v1 variant ("any-original", removed = the dataset's column) also scores item 2 (spotted ≠
    multi-coloured: right): S- = 2/4 = 0.5 over items 1-4."""
    predictions = [
        "has_bill_shape::dagger",
        "has_tail_pattern::spotted",
        None,
        "has_crown_color::blue",
        "has_crown_color::blue",
    ]
    report = build_report("vlm", "m", "r", score_vlm_predictions(PAPER_ITEMS, predictions, cub, cbm_min_classes=2))
    assert report.s_plus == pytest.approx(0.4) and report.s_minus == pytest.approx(1 / 3)
    assert report.summary["n_s_minus"] == 3
    assert report.summary["chance_s_plus"] == pytest.approx(0.22)
    assert report.summary["chance_s_minus"] == pytest.approx(0.783333, abs=1e-6)
    v1 = build_report("vlm", "m", "r", score_vlm_predictions(PAPER_ITEMS, predictions, cub, s_minus="any-original"))
    assert v1.s_minus == pytest.approx(0.5) and v1.summary["n_s_minus"] == 4


def test_cbm_s_minus_paper_rule_by_hand(cub):
    """Present (sigmoid >= 0.5) per item over the 10 fake-CUB attributes:
    1 needle + dagger -> S+ right, S- (dagger) wrong; 2 spotted + multi-coloured -> S+ right,
    S- unscored (paper) / wrong (v1); 3 red, not black -> S+ right, S- right; 4 neither yellow
    nor blue -> S+ wrong, S- right; 5 blue -> S+ right. Paper: S+ 4/5 = 0.8, S- 2/3 (items 1, 3,
    4). v1 ("any-original"): S- 2/4 = 0.5 (items 1-4). A multi-valued original (Albatross crown
    black and blue, blue predicted) is wrong under v1 although black itself is absent."""
    names = cub.attributes
    on = lambda *attrs: [a in attrs for a in names]  # noqa: E731
    present = np.array(
        [
            on("has_bill_shape::needle", "has_bill_shape::dagger"),
            on("has_tail_pattern::spotted", "has_tail_pattern::multi-colored"),
            on("has_crown_color::red"),
            on(),
            on("has_crown_color::blue"),
        ]
    )
    report = build_report(
        "cbm", "m", "", score_cbm_predictions(PAPER_ITEMS, present, names, cub=cub, cbm_min_classes=2)
    )
    assert report.s_plus == pytest.approx(0.8) and report.s_minus == pytest.approx(2 / 3)
    assert report.summary["chance_s_minus"] == pytest.approx(0.5)
    v1 = build_report("cbm", "m", "", score_cbm_predictions(PAPER_ITEMS, present, names, s_minus="any-original"))
    assert v1.s_minus == pytest.approx(0.5) and v1.summary["n_s_minus"] == 4
    multi = [
        SubItem(
            None, "Black_footed_Albatross", "has_crown_color::red", ("has_crown_color::black", "has_crown_color::blue")
        )
    ]
    row = np.array([on("has_crown_color::red", "has_crown_color::blue")])
    assert score_cbm_predictions(multi, row, names, s_minus="any-original")[0].s_minus is False
    assert score_cbm_predictions(multi, row, names, cub=cub, cbm_min_classes=2)[0].s_minus is True
    with pytest.raises(ConceptforgeError, match="needs CUB's class-level labels"):
        score_cbm_predictions(PAPER_ITEMS, present, names)
