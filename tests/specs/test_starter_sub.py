"""``starter_spec`` of the SUB method (the contract of ``conceptforge init sub --from SOURCE``):
the starter of a dataset loads as a valid spec, finds the classes, the attribute groups and the
substitution each group's rule picks (worked out by hand from tests/specs/sub_synthetic.py)."""

from __future__ import annotations

import pytest
from PIL import Image

from conceptforge.errors import ConceptforgeError
from conceptforge.generators.sub.benchmark import SubBenchmarkSpec
from conceptforge.generators.sub.own_benchmark import load_sub_benchmark
from conceptforge.generators.sub.starter import starter_spec
from conceptforge.specs import load_benchmark_spec
from tests.specs.sub_synthetic import CLASSES, save_mug_dataset


@pytest.fixture(scope="module")
def mugs(tmp_path_factory):
    return save_mug_dataset(tmp_path_factory.mktemp("starter") / "mugs")


def test_starter_of_a_value_column_dataset_loads_and_says_what_it_found(mugs, tmp_path):
    text = starter_spec(str(mugs), name="my-mugs")
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    spec = load_benchmark_spec(path, method="sub", spec_cls=SubBenchmarkSpec).spec
    assert spec.classes == tuple(CLASSES)
    assert {g: d.values for g, d in spec.groups.items()} == {
        "body_colour": ("red", "blue", "white", "black"),
        "surface_pattern": ("solid", "striped", "dotted"),
        "handle_shape": ("round", "square", "ring"),
    }
    assert [spec.groups[g].category for g in spec.groups] == ["colour", "pattern", "shape"]
    # The value the fewest classes have (>= 50 % of images): red / striped / round, 1 class each.
    assert spec.substitutions == ("body_colour::red", "surface_pattern::striped", "handle_shape::round")
    assert "# Classes: column 'label', 4 classes; images: column 'image'." in text
    assert '  - "Diner_Mug"  # 6 images' in text
    assert '  - "surface_pattern::striped"  # present in 1 of 4 classes' in text
    benchmark = load_sub_benchmark(path)  # the labels read back through the spec: the generator can run it
    assert benchmark.table.removed_attribute("Travel_Mug", "body_colour") == "body_colour::black"


def test_starter_of_a_group_column_dataset(tmp_path):
    from datasets import ClassLabel, Dataset, Features, Value
    from datasets import Image as ImageFeature

    rows = {"image": [], "car": [], "paint": [], "roof": []}
    for index, (car, paint, roof) in enumerate(
        [("Sedan", "red", "flat"), ("Sedan", "red", "flat"), ("Coupe", "blue", "curved"), ("Coupe", "grey", "curved")]
    ):
        rows["image"].append(Image.new("RGB", (8, 8), (index * 40, 0, 0)))
        rows["car"].append(["Sedan", "Coupe"].index(car))
        rows["paint"].append(paint)
        rows["roof"].append(roof)
    features = Features(
        {
            "image": ImageFeature(),
            "car": ClassLabel(names=["Sedan", "Coupe"]),
            "paint": Value("string"),
            "roof": Value("string"),
        }
    )
    Dataset.from_dict(rows, features=features).save_to_disk(str(tmp_path / "cars"))
    text = starter_spec(str(tmp_path / "cars"), name="cars")
    (tmp_path / "cars.yaml").write_text(text)
    spec = load_sub_benchmark(tmp_path / "cars.yaml").benchmark
    assert spec.source.layout == "group-columns" and spec.source.dataset.class_column == "car"
    assert {g: d.values for g, d in spec.groups.items()} == {
        "paint": ("blue", "grey", "red"),
        "roof": ("curved", "flat"),
    }
    # paint: blue and grey 50 % of Coupe's images each (both count), red all of Sedan's -> blue (first of the 1-class values)
    assert spec.substitutions == ("paint::blue", "roof::curved")


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda root: str(root / "missing"), "no such dataset folder, and not ORG/NAME@REVISION"),
        (
            lambda root: "my-lab/mugs",
            "a Hub dataset needs a pinned revision, ORG/NAME@REVISION (e.g. my-lab/mugs@v1.0.0)",
        ),
        (lambda root: _image_folder(root), "an ImageFolder has classes but no attribute labels, which SUB needs"),
    ],
)
def test_a_bad_source_is_one_line(tmp_path, make, message):
    with pytest.raises(ConceptforgeError) as error:
        starter_spec(make(tmp_path), name="x")
    assert message in str(error.value) and "\n" not in str(error.value)


def _image_folder(root):
    for name in ("mug", "cup"):
        (root / "folder" / name).mkdir(parents=True)
        Image.new("RGB", (8, 8)).save(root / "folder" / name / "a.png")
    return str(root / "folder")
