"""``starter_spec`` for binding (issue 46): a starter spec from CLEVR's properties.json and its
shapes/materials folders; the comments say what was found and the defaults chosen, and the YAML
loads and resolves as it is. Counts below are worked out by hand from the test's vocabulary."""

from __future__ import annotations

import json

import pytest

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError
from conceptforge.generators.binding.benchmark import load_binding_spec, spec_vocabulary
from conceptforge.generators.binding.starter import starter_spec
from tests.specs.binding_assets import make_clevr_folder

pytest.importorskip("bpy", reason="Blender (bpy) is part of the test install: pip install '.[blender]'")


@pytest.fixture(scope="module")
def clevr_folder(tmp_path_factory):
    return make_clevr_folder(tmp_path_factory.mktemp("clevr"))


def test_starter_says_what_it_found_and_loads(clevr_folder, tmp_path):
    text = starter_spec(str(clevr_folder), name="my-cones")
    comments = [line for line in text.splitlines() if line.startswith("#")]
    assert "#   shape cone: Blender object Cone (shape file Cone.blend)" in comments
    assert "#   shape cube: Blender object SmoothCube_v2 (built in)" in comments
    assert "#   material glow: Glow (node group file Glow.blend)" in comments
    assert any(line.startswith("#   3 colours: red (173, 35, 35), blue (42, 75, 215), orange") for line in comments)
    assert any("computed by the paper's rules from the 12 colour-shape" in line for line in comments)
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    spec_file = load_binding_spec(path)
    assert spec_file.name == "my-cones"
    # 4 shapes x 3 colours = 12 compositions: gen 12/3 = 4, val 12/12 = 1, train 7; 20 images a class
    sizes = spec_file.spec.splits
    assert (sizes["single-object"].train, sizes["single-object"].val, sizes["single-object"].gen) == (140, 20, 80)
    # relational: 4 x 3 ordered shape pairs x 4 relations = 48 labels, 2 image types (4 labels) held out
    assert (sizes["relational"].train, sizes["relational"].val, sizes["relational"].gen) == (880, 40, 40)
    vocab = spec_vocabulary(spec_file)  # the shape and material files resolve from the written paths
    assert dict(vocab.shape_files)["cone"].endswith("Cone.blend")
    gen = ", ".join(" ".join(c) for c in dict(vocab.adj_noun_held_out)["gen"])
    assert any(line.strip().startswith(f"#     compositions: gen {gen};") for line in comments)


def test_two_shapes_leave_out_the_relational_dataset(tmp_path):
    (tmp_path / "properties.json").write_text(
        json.dumps(
            {
                "shapes": {"cube": "SmoothCube_v2", "sphere": "Sphere"},
                "colors": {"red": [173, 35, 35], "blue": [42, 75, 215], "gray": [87, 87, 87]},
                "materials": {"rubber": "Rubber"},
                "sizes": {"large": 0.7},
            }
        )
    )
    text = starter_spec(str(tmp_path / "properties.json"), name="two")
    assert "no relational dataset: it needs 3 shapes" in text
    (tmp_path / "spec.yaml").write_text(text)
    assert set(load_binding_spec(tmp_path / "spec.yaml").spec.splits) == {"single-object", "two-object"}


def test_bad_sources_are_one_line(tmp_path):
    with pytest.raises(DataNotFoundError, match=r"^--from .*: no properties.json there; give CLEVR's"):
        starter_spec(str(tmp_path), name="x")
    (tmp_path / "properties.json").write_text("{not json")
    with pytest.raises(DataFormatError, match=r"properties.json: not JSON"):
        starter_spec(str(tmp_path), name="x")
    (tmp_path / "properties.json").write_text(json.dumps({"shapes": {"cube": "Cube"}, "sizes": {"l": 1}}))
    with pytest.raises(DataFormatError, match=r"no colors, materials mapping"):
        starter_spec(str(tmp_path), name="x")
    with pytest.raises(InvalidArgumentError, match=r"not a Hub dataset"):
        starter_spec("org/clevr@v1", name="x")
