"""Bad binding specs (issue 46): each is refused by ``conceptforge generate binding --spec`` with
ONE line naming the field path and the fix, exit 2, and nothing written (``--out`` never made).

Every expected line is written by hand from the spec the test wrote. Most cases run the command's
own ``main`` in this process (the console script's function, same parser and error handling);
two run the installed console script in a subprocess, as a user would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conceptforge.commands import main

REPO_ROOT = Path(__file__).resolve().parents[2]

INLINE = """\
method: binding
spec_version: 1
name: walk
vocabulary:
  shapes: {cube: SmoothCube_v2, sphere: Sphere, cylinder: SmoothCylinder}
  colors: {red: [173, 35, 35], blue: [42, 75, 215], green: [29, 105, 20]}
  materials: {rubber: Rubber}
  sizes: {large: 0.7}
splits:
  single-object: {train: 2, val: 1, gen: 1}
"""


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _refused(capsys, tmp_path: Path, spec: Path, *extra: str) -> str:
    out = tmp_path / "out"
    code = main(["generate", "binding", "--spec", str(spec), "--out", str(out), *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert not out.exists()
    return err[0]


def test_colour_out_of_range(tmp_path, capsys):
    spec = _spec(tmp_path, INLINE.replace("red: [173, 35, 35]", "red: [300, 35, 35]"))
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: vocabulary.colors.red[0]: Input should be less than or equal to 255 (got 300)"
    )


def test_shape_file_missing(tmp_path, capsys):
    (tmp_path / "shapes").mkdir()
    spec = _spec(
        tmp_path,
        INLINE.replace("cylinder: SmoothCylinder}", "cylinder: SmoothCylinder, cone: Cone}").replace(
            "vocabulary:\n", "vocabulary:\n  shape_dir: shapes\n"
        ),
    )
    missing = tmp_path / "shapes" / "Cone.blend"
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: vocabulary.shapes.cone: shape file for 'Cone': {missing} is missing; put Cone.blend "
        "(an object named Cone) in the shape folder, or use a built-in shape (cube, cylinder, sphere)"
    )


def test_properties_json_shape_that_no_blend_file_provides(tmp_path, capsys):
    """CLEVR's layout (properties.json beside shapes/) naming an object with no file: generate and
    spec check refuse it alike, and init's starter says MISSING in its comments."""
    import json

    (tmp_path / "shapes").mkdir()
    properties = {
        "shapes": {"cube": "SmoothCube_v2", "sphere": "Sphere", "pyramid": "Pyramid"},
        "colors": {"red": [173, 35, 35], "blue": [42, 75, 215], "green": [29, 105, 20]},
        "materials": {"rubber": "Rubber"},
        "sizes": {"large": 0.7},
    }
    (tmp_path / "properties.json").write_text(json.dumps(properties), encoding="utf-8")
    starter = tmp_path / "starter.yaml"
    assert main(["init", "binding", "--from", str(tmp_path), "--name", "pyr", "--out", str(starter)]) == 0
    capsys.readouterr()
    missing = tmp_path / "shapes" / "Pyramid.blend"
    assert f"#   shape pyramid: Blender object Pyramid (MISSING: put Pyramid.blend in {missing.parent})" in (
        starter.read_text(encoding="utf-8").splitlines()
    )
    expected = (
        f"error: {starter}: vocabulary.shapes.pyramid: shape file for 'Pyramid': {missing} is missing; put "
        "Pyramid.blend (an object named Pyramid) in the shape folder, or use a built-in shape (cube, cylinder, sphere)"
    )
    assert _refused(capsys, tmp_path, starter) == expected
    assert main(["spec", "check", str(starter)]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [expected] and captured.out == ""


def test_shape_file_without_that_object(tmp_path, capsys):
    (tmp_path / "shapes").mkdir()
    (tmp_path / "shapes" / "Cone.blend").write_bytes(b"BLENDER17-01v0500" + b"\0" * 64 + b"OBPyramid\0")
    spec = _spec(
        tmp_path,
        INLINE.replace("cylinder: SmoothCylinder}", "cylinder: SmoothCylinder, cone: Cone}").replace(
            "vocabulary:\n", "vocabulary:\n  shape_dir: shapes\n"
        ),
    )
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: vocabulary.shapes.cone: {tmp_path / 'shapes' / 'Cone.blend'} has no object named 'Cone'; "
        "save the shape as an object of that name"
    )


def test_unknown_relation(tmp_path, capsys):
    spec = _spec(tmp_path, INLINE + "relations: [left, right, above]\n")
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: relations[2]: Input should be 'left', 'right', 'front' or 'behind' (got 'above')"
    )


def test_empty_shapes(tmp_path, capsys):
    spec = _spec(
        tmp_path,
        INLINE.replace("shapes: {cube: SmoothCube_v2, sphere: Sphere, cylinder: SmoothCylinder}", "shapes: {}"),
    )
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: vocabulary.shapes: is empty; name at least one (or leave it out)"
    )


def test_material_missing(tmp_path, capsys):
    spec = _spec(tmp_path, INLINE.replace("materials: {rubber: Rubber}", "materials: {rubber: Rubber, glow: Glow}"))
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: vocabulary.materials.glow: material file for 'Glow': no vocabulary.material_dir is "
        "given; put Glow.blend (a node group named Glow with a Color input) in the material folder, or use "
        "Rubber or MyMetal"
    )


def test_properties_file_missing(tmp_path, capsys):
    spec = _spec(
        tmp_path,
        "method: binding\nspec_version: 1\nname: walk\nvocabulary: {properties: props.json}\n"
        "splits: {single-object: {train: 1}}\n",
    )
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: vocabulary.properties: {tmp_path / 'props.json'} does not exist; give CLEVR's properties.json"
    )


def test_unknown_vocabulary_field(tmp_path, capsys):
    spec = _spec(tmp_path, INLINE.replace("  sizes:", "  colour: {pink: [1, 2, 3]}\n  sizes:"))
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: vocabulary.colour: unknown field; remove it or check its spelling "
        "(conceptforge spec schema METHOD lists the fields)"
    )


def test_held_out_unknown_colour(tmp_path, capsys):
    spec = _spec(tmp_path, INLINE + "held_out:\n  adjective_noun: {val: [[pink, cube]]}\n")
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: held_out.adjective_noun.val[0]: unknown colour 'pink'; known colours: red, blue, green"
    )


def test_held_out_takes_a_colour_out_of_train(tmp_path, capsys):
    held = "held_out:\n  adjective_noun: {gen: [[red, cube], [red, sphere], [red, cylinder]]}\n"
    spec = _spec(tmp_path, INLINE + held)
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: held_out.adjective_noun: red would never occur in train (paper §3: every adjective "
        "and noun is in train); hold out fewer compositions"
    )


def test_relational_needs_three_shapes(tmp_path, capsys):
    spec = _spec(
        tmp_path,
        INLINE.replace(", cylinder: SmoothCylinder}", "}").replace(
            "splits:\n", "splits:\n  relational: {train: 2, val: 1, gen: 1}\n"
        ),
    )
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: vocabulary.shapes: the relational dataset needs at least 3 shapes (aRc, cRb "
        "distractors name a third), got 2"
    )


def test_relation_without_its_opposite(tmp_path, capsys):
    spec = _spec(
        tmp_path,
        INLINE.replace("splits:\n", "splits:\n  relational: {train: 2, val: 1, gen: 1}\n")
        + "relations: [left, front, behind]\n",
    )
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: relations[0]: 'left' needs its opposite 'right' too (the aSb distractor)"
    )


def test_split_with_images_but_no_held_out_class(tmp_path, capsys):
    spec = _spec(tmp_path, INLINE + "held_out:\n  adjective_noun: {val: [[red, cube]]}\n")
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: splits.single-object.gen: 1 images but no gen class to show; hold out compositions "
        "for gen in held_out.adjective_noun, or set it to 0"
    )


def test_colour_name_of_two_words(tmp_path, capsys):
    spec = _spec(tmp_path, INLINE.replace("green: [29, 105, 20]", "dark green: [29, 105, 20]"))
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: vocabulary.colors.dark green: 'dark green' is not one word; use letters, digits, '_' "
        "or '-' (labels join words with spaces)"
    )


def test_dataset_the_spec_does_not_size(tmp_path, capsys):
    spec = _spec(tmp_path, INLINE)
    assert _refused(capsys, tmp_path, spec, "--dataset", "two-object") == (
        "error: --dataset two-object: the spec gives no sizes for it (splits: single-object); add "
        "'splits.two-object' to the spec or pick another"
    )


def test_spec_and_preset_together(tmp_path, capsys):
    spec = _spec(tmp_path, INLINE)
    assert _refused(capsys, tmp_path, spec, "--preset", "demo") == (
        "error: conceptforge generate binding: argument --preset: not allowed with argument --spec "
        "(see conceptforge generate binding --help)"
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("sizes: {large: 0.7}", "sizes: {large: -1}"),
            "vocabulary.sizes.large: Input should be greater than 0 (got -1)",
        ),
        (
            ("method: binding", "method: sub"),
            "method: this is a sub spec, not a binding spec; use 'conceptforge generate sub'",
        ),
    ],
)
def test_through_the_console_script(tmp_path, change, expected):
    spec = _spec(tmp_path, INLINE.replace(*change))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "conceptforge", "generate", "binding", "--spec", str(spec), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [f"error: {spec}: {expected}"]
    assert not out.exists()
