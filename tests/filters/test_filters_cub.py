import pytest

from conceptforge import ItemResult, ItemStore, WorkItem
from conceptforge.cub import CubDataset, load_attributes, split_attribute
from conceptforge.cub import bird_name as class_short_name
from conceptforge.errors import ConceptforgeError
from conceptforge.filters.sub.candidate_selection import group_answers
from conceptforge.testing.sub_inputs import MINI_ATTRIBUTES


def test_reads_the_cub_layout(mini_cub):
    attributes = load_attributes(mini_cub)
    assert attributes.values("has_bill_shape") == ["curved_(up_or_down)", "dagger", "needle"]
    assert attributes.index("has_crown_color::blue") == 3
    cub = CubDataset.load(mini_cub)
    assert cub.classes[2] == "Cardinal" and len(cub.images) == 12 and cub.images[0].path.is_file()
    labels = cub.image_labels()
    assert set(labels) == {image.image_id for image in cub.images}
    classes = cub.class_labels()
    assert classes[1] == {j for j in range(len(MINI_ATTRIBUTES)) if (0 + j) % 3 == 0}
    assert class_short_name("017.Cardinal") == "Cardinal" and split_attribute("has_x::y") == ("has_x", "y")


def test_bad_cub_dirs_are_clear_errors(tmp_path, mini_cub):
    with pytest.raises(ConceptforgeError, match="not a CUB_200_2011 directory"):
        load_attributes(tmp_path)
    (tmp_path / "attributes.txt").write_text("1 has_bill_shape::dagger\n3 oops\n")
    with pytest.raises(ConceptforgeError, match="line 2"):
        load_attributes(tmp_path)
    with pytest.raises(ConceptforgeError, match="unknown attribute group"):
        load_attributes(mini_cub).values("has_fin_color")


def test_group_answers_join_class_level_truth(mini_cub, tmp_path):
    cub = CubDataset.load(mini_cub)
    store = ItemStore(tmp_path / "work")
    image = cub.images[0]  # class 1: attribute columns j with j % 3 == 0 are present
    options = ["curved_(up_or_down)", "dagger", "needle", "Other"]
    store.write_chunk(
        0,
        [
            (
                WorkItem(f"{image.image_id:06d}__has_bill_shape", 0, "cub"),
                ItemResult(
                    metadata={
                        "status": "ok",
                        "group": "has_bill_shape",
                        "image_id": image.image_id,
                        "options": options,
                        "probs": [0.7, 0.1, 0.1, 0.1],
                        "raw_mass": 0.9,
                    }
                ),
            )
        ],
    )
    [answer] = group_answers(cub, store, ground_truth="class")
    assert answer.answer == "curved_(up_or_down)" and answer.answer_prob == pytest.approx(0.7)
    assert answer.present == frozenset({"curved_(up_or_down)"})  # column 0 only, within the group
    with pytest.raises(ConceptforgeError, match="--ground-truth"):
        group_answers(cub, store, ground_truth="both")
