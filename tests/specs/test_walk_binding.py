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
from tests.specs.walk_cases import edited, read_cases

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


def _inline_edits() -> list:
    """The one-edit cases of walk_binding_cases.yaml, each as (spec text, the refusal after ``SPEC: ``)."""
    return [pytest.param(edited(INLINE, case), case["refused"], id=case["id"]) for case in read_cases("binding")]


@pytest.mark.parametrize(("text", "expected"), _inline_edits())
def test_inline_edit_refused(tmp_path, capsys, text, expected):
    spec = _spec(tmp_path, text)
    assert _refused(capsys, tmp_path, spec) == f"error: {spec}: {expected}"


def _cone_spec(tmp_path: Path) -> Path:
    """INLINE with a fourth shape, Cone, looked up in the spec's shapes/ folder (made empty)."""
    (tmp_path / "shapes").mkdir()
    return _spec(
        tmp_path,
        INLINE.replace("cylinder: SmoothCylinder}", "cylinder: SmoothCylinder, cone: Cone}").replace(
            "vocabulary:\n", "vocabulary:\n  shape_dir: shapes\n"
        ),
    )


def test_shape_file_missing(tmp_path, capsys):
    spec = _cone_spec(tmp_path)
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
    spec = _cone_spec(tmp_path)
    (tmp_path / "shapes" / "Cone.blend").write_bytes(b"BLENDER17-01v0500" + b"\0" * 64 + b"OBPyramid\0")
    assert _refused(capsys, tmp_path, spec) == (
        f"error: {spec}: vocabulary.shapes.cone: {tmp_path / 'shapes' / 'Cone.blend'} has no object named 'Cone'; "
        "save the shape as an object of that name"
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
