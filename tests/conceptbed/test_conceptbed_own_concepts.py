"""ConceptBed on a researcher's own concepts (issue 46): an ImageFolder of synthetic concepts, one
concept from a `datasets` folder by its label, a style on its own subjects, composition templates.
Generate -> the release carries the spec and says it in its card -> verify -> the starter spec."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from datasets import ClassLabel, Dataset, Features, load_dataset
from datasets import Image as ImageFeature
from PIL import Image

from conceptforge.generators.conceptbed.spec_resolution import load_conceptbed_spec

SPEC = """\
method: conceptbed
spec_version: 1
name: toy-shapes
description: Synthetic concepts for the tests.
concepts:
  - {name: red_cube, class_noun: cube, images: {folder: refs/red_cube}}
  - {name: striped_vase, class_noun: vase, prompt_name: striped vase, images: {folder: refs/striped_vase}}
  - name: dotted_ball
    class_noun: ball
    images: {dataset: {path: balls, image_column: picture, class_column: shape}, label: dotted}
  - {name: pixel_art, class_noun: pixel art, kind: style, images: {folder: refs/pixel_art}}
  - {name: ink_wash, class_noun: ink drawing, kind: style, images: {folder: refs/ink_wash}}
prompts: {style_subjects: [boat, owl]}
composition_templates: ["a {} on a wooden table"]
learner: {name: none}
sampling: {num_images: 2, num_inference_steps: 2, resolution: 32}
"""


def _noise(seed: int, tint: tuple[int, int, int]) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(np.clip(rng.integers(0, 120, (40, 40, 3)) + np.array(tint), 0, 255).astype(np.uint8))


@pytest.fixture(scope="module")
def own_concepts(tmp_path_factory) -> Path:
    """The spec beside its ImageFolder (3 concept folders) and a saved dataset of two labels."""
    root = tmp_path_factory.mktemp("own")
    for c, concept in enumerate(("red_cube", "striped_vase", "pixel_art", "ink_wash")):
        folder = root / "refs" / concept
        folder.mkdir(parents=True)
        for k in range(2 + c):
            _noise(10 * c + k, (60 * c, 0, 0)).save(folder / f"{k}.png")
    features = Features({"picture": ImageFeature(), "shape": ClassLabel(names=["plain", "dotted"])})
    rows = {"picture": [_noise(100 + k, (0, 0, 90)) for k in range(5)], "shape": [0, 1, 1, 0, 1]}
    Dataset.from_dict(rows, features=features).save_to_disk(str(root / "balls"))
    (root / "toy.yaml").write_text(SPEC)
    return root


def test_generate_from_an_own_spec(tmp_path, own_concepts, tiny_sd, run_script, monkeypatch):
    monkeypatch.setenv("CONCEPTFORGE_REFERENCES_DIR", str(tmp_path / "refs-cache"))
    spec = own_concepts / "toy.yaml"
    out = tmp_path / "toy"
    code, plan, err = run_script(
        "generate_conceptbed.py", "--spec", str(spec), "--out", str(out), "--model-id", str(tiny_sd), "--dry-run"
    )
    assert code == 0, err[-2000:]
    assert "benchmark: toy-shapes (5 concepts)" in plan
    assert "dotted_ball (object, class noun 'ball'): 3 reference image(s); 2 concept + 1 composition image(s)" in plan
    assert "pixel_art (style, class noun 'pixel art'): 4 reference image(s)" in plan
    assert not out.exists()  # a plan writes nothing

    code, stdout, err = run_script(
        "generate_conceptbed.py", "--spec", str(spec), "--out", str(out), "--model-id", str(tiny_sd)
    )
    assert code == 0 and "wrote" in stdout, err[-2000:]
    ds = load_dataset(str(out))
    prompts = {(r["concept"], r["prompt"]) for r in ds["concept"]}
    # learner none: V* is the concept's words in prompts (prompt_name, else the name with spaces)
    assert prompts == {
        ("red_cube", "A photo of red cube"),
        ("striped_vase", "A photo of striped vase"),
        ("dotted_ball", "A photo of dotted ball"),
        ("pixel_art", "A photo of a boat in the style of pixel art"),
        ("pixel_art", "A photo of an owl in the style of pixel art"),
        ("ink_wash", "A photo of a boat in the style of ink wash"),
        ("ink_wash", "A photo of an owl in the style of ink wash"),
    }
    composition = {r["concept"]: (r["caption"], r["prompt"]) for r in ds["composition"]}
    assert composition["red_cube"] == ("a cube on a wooden table", "a red cube on a wooden table")
    assert composition["striped_vase"] == ("a vase on a wooden table", "a striped vase on a wooden table")
    label = ds["concept"].features["concept_label"]
    assert label.names == ["red_cube", "striped_vase", "dotted_ball", "pixel_art", "ink_wash"]
    assert [label.int2str(v) for v in ds["concept"]["concept_label"]] == ds["concept"]["concept"]
    # the release carries its spec, normalised, and it loads as a spec again
    carried = yaml.safe_load((out / "benchmark_spec.yaml").read_text())
    assert carried["name"] == "toy-shapes" and carried["sampling"]["num_images"] == 2
    assert carried["prompts"]["concept"] == "A photo of {}" and carried["max_reference_images"] == 100
    assert [c["class_noun"] for c in carried["concepts"]] == ["cube", "vase", "ball", "pixel art", "ink drawing"]
    from conceptforge.cards.local_dataset import read_dataset_dir

    assert "benchmark_spec.yaml" in read_dataset_dir(out).data_paths()  # publish uploads it with the shards
    card = (out / "README.md").read_text()
    section = card[card.index("## Benchmark spec") : card.index("## Version")]
    assert "- concepts: 5 (3 object, 2 style)" in section
    assert "| dotted_ball | object | ball | dataset label `dotted` |" in section
    assert "| red_cube | object | cube | folder `refs/red_cube` |" in section
    assert "`a {} on a wooden table`" in section and "rows: concept 10, composition 5" in section
    # verify samples the rows again from the release alone
    code, text, err = run_script("verify.py", str(out), "--all", "--weights", f"diffusion={tiny_sd}")
    assert code == 0 and "verified: 15 of 15 item(s)" in text, err[-2000:] + text
    evaluate_with_own_oracles(tmp_path, spec, out, run_script)


def evaluate_with_own_oracles(tmp_path: Path, spec: Path, release: Path, run_script) -> None:
    """Oracles fine-tuned on the spec's own concepts (train-oracle --concepts SPEC), then CCD."""
    from conceptforge.testing.tiny_conceptbed import build_tiny_classifier

    oracles = {}
    for kind, names in (("object", ["red_cube", "striped_vase", "dotted_ball"]), ("style", ["pixel_art", "ink_wash"])):
        base = build_tiny_classifier(tmp_path / f"base-{kind}", ["a", "b"], arch="resnet")
        oracles[kind] = tmp_path / f"oracle-{kind}"
        code, text, err = run_script(
            "train_oracle.py",
            *("--task", kind, "--concepts", str(spec), "--out", str(oracles[kind]), "--model-id", str(base)),
            *("--epochs", "1", "--batch-size", "4"),
        )
        assert code == 0, err[-2000:]
        assert f"oracle with {len(names)} concepts" in text
        id2label = json.loads((oracles[kind] / "config.json").read_text())["id2label"]
        assert sorted(id2label.values()) == sorted(names)
    code, text, err = run_script(
        "evaluate.py",
        *("conceptbed", "--generated", str(release), "--concepts", str(spec), "--no-vqa", "--device", "cpu"),
        *("--object-oracle", str(oracles["object"]), "--style-oracle", str(oracles["style"]), "--per-concept"),
    )
    assert code == 0, err[-3000:]
    assert "| none |" in text and "| original |" in text  # the learner's row and the real images' row
    for concept in ("red_cube", "dotted_ball", "ink_wash"):
        assert concept in text


def test_the_carried_spec_loads(tmp_path, own_concepts):
    """benchmark_spec.yaml's text (normalised) is a valid spec with the same fields."""
    from conceptforge.generators.conceptbed.spec_resolution import normalised_spec

    loaded = load_conceptbed_spec(own_concepts / "toy.yaml")
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump(normalised_spec(loaded)))
    assert load_conceptbed_spec(again).spec == loaded.spec


def test_starter_from_an_image_folder_loads_as_a_spec(tmp_path, own_concepts, monkeypatch):
    from conceptforge.generators.conceptbed.starter import starter_spec

    monkeypatch.chdir(own_concepts)
    text = starter_spec("refs", name="toy")
    assert (
        "# Found 4 concept(s): ink_wash (5 images), pixel_art (4 images), red_cube (2 images), striped_vase (3 images)."
        in text
    )
    assert "Few reference images (< 3): red_cube" in text
    (own_concepts / "starter.yaml").write_text(text)
    spec = load_conceptbed_spec(own_concepts / "starter.yaml").spec
    assert [(c.name, c.class_noun, c.images.folder) for c in spec.concepts] == [
        ("ink_wash", "wash", "refs/ink_wash"),
        ("pixel_art", "art", "refs/pixel_art"),
        ("red_cube", "cube", "refs/red_cube"),
        ("striped_vase", "vase", "refs/striped_vase"),
    ]
    assert spec.learner.name == "textual-inversion" and len(spec.composition_templates) == 4


def test_starter_from_a_dataset_and_its_errors(own_concepts, monkeypatch):
    from conceptforge.errors import ConceptforgeError
    from conceptforge.generators.conceptbed.starter import starter_spec

    monkeypatch.chdir(own_concepts)
    text = starter_spec("balls", name="balls")
    assert "(images: 'picture', classes: 'shape')" in text and "plain (2 images), dotted (3 images)" in text
    (own_concepts / "balls.yaml").write_text(text)
    spec = load_conceptbed_spec(own_concepts / "balls.yaml").spec
    assert [(c.name, c.images.label, c.images.dataset.class_column) for c in spec.concepts] == [
        ("plain", "plain", "shape"),
        ("dotted", "dotted", "shape"),
    ]
    for source, message in (("missing-folder", "no such folder"), ("org/name", "needs its revision")):
        with pytest.raises(ConceptforgeError, match=message) as caught:
            starter_spec(source, name="x")
        assert "\n" not in str(caught.value)
