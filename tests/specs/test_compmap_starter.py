"""``loaders/compmap/starter.py``: starter specs from each kind of source load as CompMap specs and
say what they found; a bad source is one line."""

from __future__ import annotations

import pytest

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError
from conceptforge.loaders.compmap.benchmark import load_compmap_spec
from conceptforge.loaders.compmap.starter import starter_spec
from tests.compmap.synthetic import MIT_SPLITS, write_fake_cub, write_fake_mit_states
from tests.specs.compmap_data import write_gadgets, write_shape_pairs


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("compmap-starter")
    write_shape_pairs(root / "shapes")
    write_shape_pairs(root / "shapes-nosplit", per_pair=4, split_column=False)
    gadgets, _ = write_gadgets(root)
    images = root / "photos"
    for name in ("cat", "dog"):
        (images / name).mkdir(parents=True)
        from PIL import Image

        for i in range(3):
            Image.new("RGB", (4, 4)).save(images / name / f"{i}.png")
    return {
        "root": root,
        "shapes": root / "shapes",
        "nosplit": root / "shapes-nosplit",
        "gadgets": gadgets,
        "mit": write_fake_mit_states(root / "mit"),
        "cub": write_fake_cub(root / "CUB_200_2011"),
        "photos": images,
    }


def _load(tmp_path, text: str):
    path = tmp_path / "starter.yaml"
    path.write_text(text)
    return load_compmap_spec(path).spec


def test_pair_dataset_with_split_column(sources, tmp_path):
    text = starter_spec(str(sources["shapes"]), name="shapes")
    assert "attributes (3) in column 'texture': dotted, plain, striped" in text
    assert "objects (3) in column 'shape': circle, square, triangle" in text
    assert "pairs: 7 (3 to 6 images each)" in text and "split: the column 'split' (test 9, train 12, val 6)" in text
    spec = _load(tmp_path, text)
    assert spec.czsl.split_column == "split" and spec.czsl.attribute_column == "texture"


def test_pair_dataset_without_split_gets_a_rule(sources, tmp_path):
    from conceptforge.loaders.compmap.spec_data import czsl_data

    text = starter_spec(str(sources["nosplit"]), name="shapes")
    spec = _load(tmp_path, text)
    # 7 pairs: max(2, 7 // 5) = 2 unseen, from the end of the sorted list, primitives kept seen:
    # striped triangle (striped circle, plain triangle stay seen); not striped circle (striped would
    # be seen nowhere), not plain triangle (triangle nowhere); plain square (plain circle, dotted square)
    assert spec.czsl.split_column is None
    assert spec.czsl.unseen_pairs == ("plain square", "striped triangle")
    data = czsl_data(load_compmap_spec(tmp_path / "starter.yaml"))
    seen_attrs = {a for a, _ in data.seen_pairs}
    seen_objs = {o for _, o in data.seen_pairs}
    for pair in spec.czsl.unseen_pairs:
        attr, obj = pair.split()
        assert attr in seen_attrs and obj in seen_objs and (attr, obj) not in data.seen_pairs


def test_class_dataset_and_imagefolder_are_few_shot(sources, tmp_path):
    text = starter_spec(str(sources["gadgets"]), name="gadgets")
    assert "classes (5) in column 'label': blender, grinder, kettle, mixer, toaster" in text
    spec = _load(tmp_path, text)
    assert spec.few_shot.split_column == "split" and spec.few_shot.ways == (5,)
    text = starter_spec(str(sources["photos"]), name="photos")
    assert "classes (2): cat, dog" in text and "images: 6 (3 to 3 per class)" in text
    spec = _load(tmp_path, text)
    assert spec.few_shot.source.imagefolder == str(sources["photos"]) and spec.few_shot.ways == (2,)


def test_paper_layouts(sources, tmp_path):
    text = starter_spec(str(sources["mit"]), name="mit")
    pairs = {p for part in MIT_SPLITS.values() for p in part}
    assert f"pairs: {len(pairs)} (train/val/test 6/3/4)" in text
    assert _load(tmp_path, text).czsl.mit_states.folder == str(sources["mit"])
    text = starter_spec(str(sources["cub"]), name="cub")
    assert "attributes: 8 in 3 groups" in text and "classes (6)" in text
    assert _load(tmp_path, text).few_shot.cub.folder == str(sources["cub"])


@pytest.mark.parametrize(
    ("given", "error", "words"),
    [
        ("missing-folder", DataNotFoundError, "no such folder"),
        ("org/name", InvalidArgumentError, "needs a pinned revision: org/name@v1.0.0"),
        ("FILE", DataFormatError, "is a file"),
    ],
)
def test_bad_sources_are_one_line(sources, tmp_path, given, error, words):
    if given == "FILE":
        given = str(sources["root"] / "gadgets.csv")
    with pytest.raises(error) as caught:
        starter_spec(given, name="x")
    assert words in str(caught.value) and "\n" not in str(caught.value)
