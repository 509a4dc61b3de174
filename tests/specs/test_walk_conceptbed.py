"""The ConceptBed spec walk (issue 46): each bad spec is one line naming the field and the fix,
exit 2, and nothing written (OUT absent), before any model is read.

In-process through ``conceptforge.commands.main`` (the command line's own entry point; a
subprocess costs ~10 s of imports each); one real subprocess checks the exit code end to end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
CONCEPT = "{name: mug, class_noun: mug, images: {folder: refs/mug}}"


def _spec(body: str) -> str:
    return f"method: conceptbed\nspec_version: 1\nname: walk\n{body}\n"


#: (id, spec body, what the one line must say: the field path, then words of the fix)
BAD_SPECS = [
    ("unknown-field", f"concepts: [{CONCEPT}]\ncolour: red", ("colour: unknown field", "remove it")),
    ("empty-concepts", "concepts: []", ("concepts:", "at least 1")),
    ("no-concepts", "sampling: {num_images: 2}", ("concepts:", "required")),
    (
        "class-without-images",
        "concepts: [{name: empty, class_noun: cup, images: {folder: refs/empty}}]",
        ("concepts[0].images.folder:", "has no image files", "add images or remove the concept"),
    ),
    (
        "missing-folder",
        "concepts: [{name: cup, class_noun: cup, images: {folder: refs/nope}}]",
        ("concepts[0].images.folder:", "no such folder"),
    ),
    (
        "unknown-learner",
        f"concepts: [{CONCEPT}]\nlearner: {{name: lora-magic}}",
        ("learner.name:", "'textual-inversion', 'dreambooth', 'custom-diffusion' or 'none'"),
    ),
    (
        "template-without-slot",
        f"concepts: [{CONCEPT}]\ncomposition_templates: ['a mug on a table']",
        ("composition_templates[0]:", "needs exactly one '{}'"),
    ),
    (
        "template-with-two-slots",
        f"concepts: [{CONCEPT}]\ncomposition_templates: ['a {{}} next to a {{}}']",
        ("composition_templates[0]:", "needs exactly one '{}'"),
    ),
    (
        "duplicate-name",
        f"concepts: [{CONCEPT}, {CONCEPT}]",
        ("concepts[1].name:", "is already concepts[0]", "give each concept its own name"),
    ),
    (
        "two-image-sources",
        "concepts: [{name: mug, class_noun: mug, images: {folder: refs/mug, cub: 001.Black_footed_Albatross}}]",
        ("concepts[0].images:", "give exactly one of", "(got folder, cub)"),
    ),
    (
        "dataset-without-label",
        "concepts: [{name: mug, class_noun: mug, images: {dataset: {path: mugs}}}]",
        ("concepts[0].images.label:", "add e.g. 'label:"),
    ),
    (
        "hub-without-revision",
        "concepts: [{name: mug, class_noun: mug, images: {dataset: {hub: org/mugs}, label: mug}}]",
        ("concepts[0].images.dataset.revision:", "pinned revision"),
    ),
    (
        "label-not-in-dataset",
        "concepts: [{name: mug, class_noun: mug, images: {dataset: {path: mugs}, label: teapot}}]",
        ("concepts[0].images.label:", "no rows", "labels there: cup, mug"),
    ),
    (
        "paper-source-without-root",
        "concepts: [{name: beagle, class_noun: dog, images: {imagenet: beagle}}]",
        ("concepts[0].images.imagenet:", "needs roots.imagenet"),
    ),
    (
        "missing-class-noun",
        "concepts: [{name: mug, images: {folder: refs/mug}}]",
        ("concepts[0].class_noun:", "required"),
    ),
    (
        "unknown-kind",
        "concepts: [{name: mug, class_noun: mug, kind: texture, images: {folder: refs/mug}}]",
        ("concepts[0].kind:", "'object', 'style' or 'cub'"),
    ),
    (
        "style-prompt-without-subject",
        "concepts: [{name: ink, class_noun: ink, kind: style, images: {folder: refs/mug}}]\n"
        "prompts: {style: 'A drawing in the style of {}'}",
        ("prompts.style:", "needs '{subject}'"),
    ),
    (
        "zero-images",
        f"concepts: [{CONCEPT}]\nsampling: {{num_images: 0}}",
        ("sampling.num_images:", "greater than or equal to 1"),
    ),
    ("wrong-method", f"concepts: [{CONCEPT}]", ("method:", "not a conceptbed spec")),
    ("missing-captions", f"concepts: [{CONCEPT}]\ncaptions: nope.jsonl", ("captions:", "no such file or folder")),
    (
        "dreambooth-mode-on-another-learner",
        f"concepts: [{CONCEPT}]\nlearner: {{name: textual-inversion, dreambooth_mode: lora}}",
        ("learner.dreambooth_mode:", "applies to dreambooth", "remove it"),
    ),
]


@pytest.fixture(scope="module")
def walk_dir(tmp_path_factory) -> Path:
    """A folder with a concept of two images, an empty concept folder and a dataset of cups and mugs."""
    from datasets import Dataset, Features, Value
    from datasets import Image as ImageFeature

    root = tmp_path_factory.mktemp("walk")
    (root / "refs" / "mug").mkdir(parents=True)
    (root / "refs" / "empty").mkdir(parents=True)
    (root / "refs" / "empty" / "notes.txt").write_text("not an image")
    for k in range(2):
        Image.fromarray(np.full((8, 8, 3), 40 * k, dtype=np.uint8)).save(root / "refs" / "mug" / f"{k}.png")
    image = Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8))
    features = Features({"image": ImageFeature(), "label": Value("string")})
    Dataset.from_dict({"image": [image, image], "label": ["mug", "cup"]}, features=features).save_to_disk(
        str(root / "mugs")
    )
    return root


def _write(walk_dir: Path, name: str, body: str) -> Path:
    text = _spec(body)
    if name == "wrong-method":
        text = text.replace("method: conceptbed", "method: binding")
    path = walk_dir / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("name", "body", "expected"), BAD_SPECS, ids=[case[0] for case in BAD_SPECS])
def test_bad_spec_is_one_line_and_writes_nothing(name, body, expected, walk_dir, tmp_path, capsys, hub_offline):
    from conceptforge.commands import main

    spec = _write(walk_dir, name, body)
    out = tmp_path / "out"
    capsys.readouterr()
    code = main(["generate", "conceptbed", "--spec", str(spec), "--out", str(out), "--learner", "none"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {spec}: "), lines[0]
    for words in expected:
        assert words in lines[0], lines[0]
    assert not out.exists()


def test_bad_spec_through_the_real_command_line(walk_dir, tmp_path):
    spec = _write(walk_dir, "subprocess", "concepts: [{name: empty, class_noun: cup, images: {folder: refs/empty}}]")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "conceptforge", "generate", "conceptbed", "--spec", str(spec), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {spec}: concepts[0].images.folder: concept 'empty' has no image files "
        "(.jpg, .png, ... as datasets' imagefolder reads); add images or remove the concept"
    ]
    assert not out.exists()


def test_spec_and_preset_are_exclusive(walk_dir, tmp_path, capsys):
    from conceptforge.commands import main

    spec = _write(walk_dir, "fine", f"concepts: [{CONCEPT}]")
    capsys.readouterr()
    code = main(
        ["generate", "conceptbed", "--spec", str(spec), "--preset", "conceptbed-paper", "--out", str(tmp_path / "o")]
    )
    assert code == 2 and "--spec and --preset are exclusive" in capsys.readouterr().err
    code = main(
        ["generate", "conceptbed", "--preset", "conceptbed-paper", "--learner", "none", "--out", str(tmp_path / "o")]
    )
    assert code == 2 and "--preset conceptbed-paper needs --concepts FILE" in capsys.readouterr().err
    code = main(["generate", "conceptbed", "--spec", str(spec), "--out", str(tmp_path / "o")])
    assert code == 2 and "--learner: give one of" in capsys.readouterr().err  # neither the flag nor learner.name
    assert not (tmp_path / "o").exists()


def test_the_spec_names_every_learner_and_ships_its_schema():
    """The spec's learner names are learners.LEARNERS (spelled out for the JSON Schema), and the
    shipped schema is the spec class's own."""
    import typing

    from conceptforge.generators.conceptbed.benchmark import ConceptBedBenchmarkSpec, LearnerSettings
    from conceptforge.generators.conceptbed.learners import LEARNERS
    from conceptforge.specs.schema import schema_text, shipped_schema_path

    literal = next(
        arg for arg in typing.get_args(typing.get_type_hints(LearnerSettings)["name"]) if arg is not type(None)
    )
    assert set(typing.get_args(literal)) == set(LEARNERS)
    assert shipped_schema_path("conceptbed").read_text() == schema_text("conceptbed", ConceptBedBenchmarkSpec)
