"""Binding on a researcher's own vocabulary (issue 46): a CLEVR ``properties.json`` with a new colour
(orange), a new material (a node group saved with bpy) and a new shape (a cone saved with bpy as
``shapes/Cone.blend``), through ``conceptforge generate binding --spec``, rendered at 64x48.

The split test recomputes the paper's §3 rules from the vocabulary by hand (not with the
generator's code) and checks the release against them.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from datasets import load_dataset

from conceptforge.generators.binding.benchmark import load_binding_spec, spec_vocabulary
from tests.specs.binding_assets import PROPERTIES, make_clevr_folder

pytest.importorskip("bpy", reason="Blender (bpy) is part of the test install: pip install '.[blender]'")

REPO_ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--resolution", "64x48", "--samples", "2"]
OPPOSITE = {"left": "right", "right": "left", "front": "behind", "behind": "front"}
SPEC = """\
method: binding
spec_version: 1
name: cones-and-glow
description: CLEVR's shapes with a cone, an orange colour and a glowing material.
vocabulary:
  properties: properties.json
  shape_dir: shapes
  material_dir: materials
splits:
  single-object: {train: 3, val: 1, gen: 2}
  two-object: {train: 2, val: 1, gen: 1}
  relational: {train: 2, val: 1, gen: 1}
"""


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "conceptforge", "generate", "binding", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def vocabulary_folder(tmp_path_factory) -> Path:
    root = make_clevr_folder(tmp_path_factory.mktemp("clevr-vocabulary"))
    (root / "spec.yaml").write_text(SPEC, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def release(vocabulary_folder, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("own-binding") / "release"
    result = _cli("--spec", str(vocabulary_folder / "spec.yaml"), "--out", str(out), *SMALL)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def _rows(release: Path, config: str) -> dict[str, list[dict]]:
    ds = load_dataset(str(release), config)
    out = {}
    for split in ds:
        features = ds[split].features
        label, obj = features["label"], features["objects"].feature
        rows = []
        for row in ds[split]:
            row["label"] = label.int2str(row["label"])
            for o in row["objects"]:
                for key in ("shape", "color", "material", "size"):
                    o[key] = obj[key].int2str(o[key])
            rows.append(row)
        out[split] = rows
    return out


def test_new_shape_colour_and_material_are_rendered(release):
    seen = {"shape": set(), "color": set(), "material": set()}
    for config in ("single-object", "two-object", "relational"):
        ds = load_dataset(str(release), config)
        names = ds["train"].features["objects"].feature
        assert names["shape"].names == ["cube", "sphere", "cylinder", "cone"]
        assert names["color"].names == ["red", "blue", "orange"]
        assert names["material"].names == ["rubber", "glow"]
        for _split, rows in _rows(release, config).items():
            for row in rows:
                assert row["image"].size == (64, 48)
                assert row["candidates"][row["label_index"]] == row["label"]
                assert len(set(row["candidates"])) == 5
                for o in row["objects"]:
                    assert o["pixels"] >= 8  # visible: CLEVR's 200 px at 320x240, scaled
                    for key in seen:
                        seen[key].add(o[key])
    assert {"cone", "orange", "glow"} <= seen["shape"] | seen["color"] | seen["material"]
    # the cone is drawn from its .blend file: it shows, with its own pixels, in some picture
    scenes = json.loads((release / "scenes" / "single-object" / "val.json").read_text())
    assert scenes["scenes"][0]["objects"][0].keys() >= {"shape", "color", "material", "size", "3d_coords"}


def _hand_held_out(shapes: list[str], colors: list[str], seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    """The paper's proportions (8 + 2 of 24 -> N/3 gen, N/12 val) by a seeded greedy pick that never
    takes a colour's or a shape's last train composition: worked out here from the vocabulary."""
    pairs = [(c, s) for s in shapes for c in colors]
    order = pairs[:]
    random.Random(seed).shuffle(order)
    want = {"gen": round(len(pairs) / 3), "val": round(len(pairs) / 12)}
    train, held = list(pairs), {"gen": [], "val": []}
    for split in ("gen", "val"):
        for pair in order:
            rest = [p for p in train if p != pair]
            if len(held[split]) < want[split] and pair in train:
                if {c for c, _ in rest} == set(colors) and {s for _, s in rest} == set(shapes):
                    held[split].append(pair)
                    train = rest
    return held


def test_splits_follow_the_paper_rules_recomputed_from_the_vocabulary(release):
    shapes, colors = list(PROPERTIES["shapes"]), list(PROPERTIES["colors"])
    spec = yaml.safe_load((release / "benchmark_spec.yaml").read_text())
    held = {split: [tuple(p) for p in pairs] for split, pairs in spec["held_out"]["adjective_noun"].items()}
    assert held == _hand_held_out(shapes, colors)
    assert len(held["gen"]) == 4 and len(held["val"]) == 1  # 12 compositions: 12/3 and 12/12
    train = [(c, s) for s in shapes for c in colors if (c, s) not in held["gen"] + held["val"]]
    assert {c for c, _ in train} == set(colors) and {s for _, s in train} == set(shapes)
    split_of = {pair: split for split, pairs in held.items() for pair in pairs}
    for config in ("single-object", "two-object"):
        for split, rows in _rows(release, config).items():
            for row in rows:
                color, shape = row["label"].split(" ")
                assert split_of.get((color, shape), "train") == split
                for o in row["objects"]:  # a picture shows train compositions and its own split's only
                    assert split_of.get((o["color"], o["shape"]), "train") in ("train", split)
    facts = {split: [tuple(f) for f in fs] for split, fs in spec["held_out"]["relational"].items()}
    for fs in facts.values():  # one image type each: a fact and its converse
        (a, r, b), converse = fs
        assert converse == (b, OPPOSITE[r], a)
    fact_split = {fact: split for split, fs in facts.items() for fact in fs}
    all_facts = [(a, r, b) for a in shapes for r in OPPOSITE for b in shapes if a != b]
    train_facts = [f for f in all_facts if f not in fact_split]
    assert len(train_facts) == 4 * 3 * 4 - 4
    assert {f[1] for f in train_facts} == set(OPPOSITE) and {f[0] for f in train_facts} == set(shapes)
    for split, rows in _rows(release, "relational").items():
        for row in rows:
            subject, relation, obj = row["label"].split(" ")
            assert fact_split.get((subject, relation, obj), "train") == split
            kinds = dict(zip(row["candidate_kinds"], row["candidates"]))
            assert kinds["bRa"] == f"{obj} {relation} {subject}"
            assert kinds["aSb"] == f"{subject} {OPPOSITE[relation]} {obj}"
            third = kinds["aRc"].split(" ")[2]
            assert third in shapes and third not in (subject, obj)
            assert kinds["cRb"] == f"{third} {relation} {obj}"


def test_release_carries_its_spec_and_says_it_in_the_card(release, vocabulary_folder):
    spec_file = load_binding_spec(release / "benchmark_spec.yaml")  # what was validated, loads again
    assert spec_file.name == "cones-and-glow"
    # ... and resolves on its own: the release carries the shape and material files it names
    own = spec_vocabulary(spec_file)
    assert dict(own.shape_files)["cone"] == str((release / "vocabulary" / "shapes" / "Cone.blend").resolve())
    assert (release / "vocabulary" / "shapes" / "Cone.blend").read_bytes() == (
        vocabulary_folder / "shapes" / "Cone.blend"
    ).read_bytes()
    assert dict(own.material_files)["glow"].endswith("vocabulary/materials/Glow.blend")
    assert (
        own.adj_noun_held_out == spec_vocabulary(load_binding_spec(vocabulary_folder / "spec.yaml")).adj_noun_held_out
    )
    assert spec_file.spec.vocabulary.shapes["cone"] == "Cone"
    assert tuple(spec_file.spec.vocabulary.colors["orange"]) == (255, 140, 0)
    from conceptforge.cards.local_dataset import read_dataset_dir

    published = read_dataset_dir(release).data_paths()  # what `conceptforge publish` uploads
    assert {"benchmark_spec.yaml", "vocabulary/shapes/Cone.blend", "vocabulary/materials/Glow.blend"} <= set(published)
    card = (release / "README.md").read_text()
    section = card[card.index("## Benchmark spec") :]
    for text in (
        "cones-and-glow",
        "| shape | cone | Blender object `Cone` (`Cone.blend`) |",
        "| colour | orange |",
        "| material | glow | `Glow` |",
        "Rules applied",
        "| single-object | 7 / 3 | 1 / 1 | 4 / 2 |",
    ):
        assert text in section, text
    assert "eight colours and two materials" not in card  # the paper's vocabulary is not claimed


def test_dry_run_prints_the_plan_and_writes_nothing(vocabulary_folder, tmp_path):
    out = tmp_path / "never"
    result = _cli("--spec", str(vocabulary_folder / "spec.yaml"), "--out", str(out), "--dry-run")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("spec cones-and-glow (") and "4 shapes, 3 colours, 2 materials" in lines[0]
    assert "  shapes: cube, sphere, cylinder, cone (Cone.blend)" in lines
    assert "  single-object classes: train 7, val 1, gen 4" in lines
    assert "total: 14 images" in lines
    assert not out.exists()


def test_evaluation_reads_the_vocabulary_from_the_release_spec(release):
    """The CDSMs' words are the release's spec (every colour and shape, in its order), not only the
    words the sampled labels happen to use."""
    from conceptforge.loaders.binding.data import load_binding, release_spec_words
    from conceptforge.loaders.binding.models import Vocabulary

    words = release_spec_words(str(release))
    assert words == {
        "shapes": ["cube", "sphere", "cylinder", "cone"],
        "colors": ["red", "blue", "orange"],
        "relations": ["left", "right", "front", "behind"],
    }
    splits = load_binding(str(release), config="two-object")
    vocab = Vocabulary.from_release(list(splits.values()), words)
    assert vocab.adjectives == ["red", "blue", "orange"] and vocab.nouns == ["cube", "sphere", "cylinder", "cone"]
    relational = Vocabulary.from_release(list(load_binding(str(release), config="relational").values()), words)
    assert relational.relations == ["left", "right", "front", "behind"]


@pytest.mark.heavy  # a tiny CLIP and a fresh evaluate process: ~45 s of CPU
@pytest.mark.usefixtures("offline_single_thread")
def test_evaluation_tasks_run_on_the_own_release(release, tiny_clip_dir, tmp_path):
    """binding-clip and binding-cdsm score the own release end to end (conceptforge evaluate)."""
    from tests.evaluation_fixtures import evaluate_script

    out = tmp_path / "run.json"
    tasks = f"binding-clip:{release},binding-cdsm:{release}"
    options = ["binding-cdsm.models=add", "binding-cdsm.seeds=0", "binding-cdsm.epochs=1"]
    options += ["binding-clip.config=two-object", "binding-cdsm.config=two-object"]
    argv = ["--model", str(tiny_clip_dir), "--tasks", tasks, "--device", "cpu", "--output", str(out)]
    argv += ["--cache-dir", str(tmp_path / "cache")] + [a for o in options for a in ("--task-option", o)]
    result = evaluate_script(*argv)
    assert result.returncode == 0, result.stderr[-3000:]
    run = json.loads(out.read_text())
    text = json.dumps(run)
    assert "binding-clip" in text and "binding-cdsm" in text


def test_docs_example_spec_is_valid_for_this_vocabulary(vocabulary_folder, tmp_path):
    """docs/binding.md's complete example loads and resolves against the same CLEVR folder, and
    its JSON form passes the shipped JSON Schema (what an editor checks)."""
    import jsonschema

    from conceptforge.specs.schema import shipped_schema_path

    page = (REPO_ROOT / "docs" / "binding.md").read_text(encoding="utf-8")
    section = page[page.index("## Your own binding vocabulary") :]
    example = section[section.index("```yaml\n") + len("```yaml\n") :]
    example = example[: example.index("```")]
    path = vocabulary_folder / "docs-example.yaml"
    path.write_text(example, encoding="utf-8")
    vocab = spec_vocabulary(load_binding_spec(path))
    assert dict(vocab.shape_files)["cone"].endswith("Cone.blend")
    assert dict(vocab.relation_held_out)["val"] == (("cube", "front", "cone"), ("cone", "behind", "cube"))
    schema = json.loads(shipped_schema_path("binding").read_text(encoding="utf-8"))
    jsonschema.validate(yaml.safe_load(example), schema)


@pytest.mark.heavy  # a publish to the local Hub server: ~15 s of CPU
def test_published_release_carries_its_spec_to_the_hub(release, tmp_path):
    """``conceptforge publish`` uploads benchmark_spec.yaml and the vocabulary files, and the
    evaluation reads the spec back from the Hub at the release's revision."""
    import secrets

    from conceptforge.testing.hub_server import HubServer

    token = "hf_" + secrets.token_hex(16)
    server = HubServer(tmp_path / "hub-storage", token=token).start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
        env |= {"HF_ENDPOINT": server.url, "HF_TOKEN": token, "HF_HUB_DISABLE_XET": "1"}
        env |= {"HF_HOME": str(tmp_path / "hf-home"), "PYTHONPATH": str(REPO_ROOT), "TQDM_DISABLE": "1"}
        command = [sys.executable, "-m", "conceptforge", "publish", str(release)]
        published = subprocess.run(
            [*command, "--repo-id", "me/cones", "--version", "v1.0.0"], env=env, capture_output=True, text=True
        )
        assert published.returncode == 0, published.stderr[-3000:]
        read_back = (
            "import json; from huggingface_hub import hf_hub_download; "
            "from conceptforge.loaders.binding.data import release_spec_words; "
            "cone = hf_hub_download('me/cones', 'vocabulary/shapes/Cone.blend', repo_type='dataset', revision='v1.0.0'); "
            "print(json.dumps([release_spec_words('me/cones', revision='v1.0.0'), open(cone, 'rb').read(7).decode()]))"
        )
        result = subprocess.run([sys.executable, "-c", read_back], env=env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-3000:]
        words, magic = json.loads(result.stdout.strip().splitlines()[-1])
        assert words["shapes"] == ["cube", "sphere", "cylinder", "cone"] and magic == "BLENDER"
    finally:
        server.stop()


def test_export_of_the_own_release_asks_its_own_vocabulary(release, tmp_path, capsys):
    """``conceptforge export`` of the own release (issue 46, item 8): a choice set per config and
    split, each item the row's stored candidates (the by-answer protocol's items), so the options
    speak the spec's words — the cone and the orange colour among them — and no CLEVR word it dropped."""
    import shutil

    from conceptforge.commands import main
    from conceptforge.loaders.binding.data import load_binding
    from conceptforge.loaders.harness.by_answer import binding_choice_items, render_choice_prompt

    folder = shutil.copytree(release, tmp_path / "release")
    assert main(["export", str(folder), "--repo-id", "me/cones", "--version", "v1.0.0"]) == 0
    capsys.readouterr()
    items_dir = folder / "exports" / "items"
    configs = ("single-object", "two-object", "relational")
    expected = {f"binding_clip_{c.replace('-', '_')}_{s}.jsonl" for c in configs for s in ("train", "val", "gen")}
    assert {p.name for p in items_dir.iterdir()} == expected
    words: set[str] = set()
    for config in configs:
        splits = load_binding(str(folder), config=config)
        for name in ("train", "val", "gen"):
            exported = [
                json.loads(line)
                for line in (items_dir / f"binding_clip_{config.replace('-', '_')}_{name}.jsonl")
                .read_text()
                .splitlines()
            ]
            questions = list(binding_choice_items({name: splits[name]}))
            assert [i["prompt"] for i in exported] == [render_choice_prompt(q) for q in questions]
            assert [i["options"] for i in exported] == [list(splits[name].candidates[n]) for n in range(len(questions))]
            assert [i["answer"] for i in exported] == ["ABCDE"[i] for i in splits[name].label_index]
            words |= {w for i in exported for option in i["options"] for w in option.split()}
    shapes, colours = {"cube", "sphere", "cylinder", "cone"}, {"red", "blue", "orange"}
    assert {"cone", "orange"} <= words
    assert words <= shapes | colours | set(OPPOSITE)  # the spec's words only (CLEVR's purple never appears)
    assert (folder / "exports" / "vlmevalkit" / "Conceptforge_binding_clip_two_object_gen.tsv").is_file()
    assert (folder / "exports" / "inspect-ai" / "conceptforge_tasks.py").is_file()
