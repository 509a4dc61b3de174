"""CUB and MIT-States loaders on miniature directories in the real layouts."""

import numpy as np
import pytest

from conceptforge.cub import readable_attribute
from conceptforge.errors import ConceptforgeError
from conceptforge.loaders.compmap.cub_arrays import cub_primitives
from conceptforge.loaders.compmap.mit_states import load_mit_states
from tests.compmap.synthetic import GROUPS, MIT_ATTRS, MIT_OBJS, MIT_SPLITS, write_fake_cub


def test_cub_layout_groups_and_majority_vote(fake_cub):
    cub = cub_primitives(fake_cub)
    assert len(cub.class_names) == 6 and cub.class_names[0] == "Bird number 1"
    assert len(cub.attributes) == sum(len(v) for v in GROUPS.values())
    assert list(cub.groups) == ["bill shape", "wing color", "size"]
    assert readable_attribute(cub.attributes[6]) == ("size", "small (5 - 9 in)")
    assert cub.is_train.sum() == 24 and len(cub.labels) == 48
    class_gt = cub.class_attributes()
    # majority vote over noisy annotations recovers each class's one value per group
    for c in range(6):
        for g, idx in enumerate(cub.groups.values()):
            assert class_gt[c, idx].tolist().index(1.0) == (c + g) % len(idx)
    gt = cub.gt_primitives()
    assert np.array_equal(gt, class_gt[cub.labels])  # identical within a class
    assert not np.array_equal(cub.image_attributes, gt)  # per-image labels were noisy


def test_cub_attributes_file_at_root(tmp_path):
    root = write_fake_cub(tmp_path / "CUB_200_2011", num_classes=2, per_class=2, attributes_at_root=True)
    assert len(cub_primitives(root).attributes) == 8


def test_cub_bad_inputs(tmp_path, fake_cub):
    with pytest.raises(ConceptforgeError, match="does not exist"):
        cub_primitives(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConceptforgeError, match="images.txt"):
        cub_primitives(tmp_path / "empty")
    with pytest.raises(ConceptforgeError, match="has_<group>::<value>"):
        readable_attribute("bill_shape_needle")


def test_mit_states_split_files(fake_mit):
    data = load_mit_states(fake_mit)
    assert data.attrs == sorted(MIT_ATTRS) and data.objs == sorted(MIT_OBJS)
    assert data.seen_pairs == MIT_SPLITS["train"]
    closed = data.candidate_pairs("closed")
    assert len(closed) == len(set(MIT_SPLITS["train"]) | set(MIT_SPLITS["val"]) | set(MIT_SPLITS["test"]))
    assert len(data.candidate_pairs("open")) == 9
    assert len(data.samples["train"]) == 18  # the NA record is dropped
    gt = data.gt_primitives("test")
    assert gt.shape == (12, 6) and (gt.sum(1) == 2).all()
    labels = data.labels("test", closed)
    assert [closed[i] for i in labels[:3]] == [("wet", "dog")] * 3


def test_mit_states_missing_split(tmp_path):
    (tmp_path / "compositional-split-natural").mkdir()
    with pytest.raises(ConceptforgeError, match="train_pairs.txt"):
        load_mit_states(tmp_path)
