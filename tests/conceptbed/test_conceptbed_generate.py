"""End to end: learn -> sample -> assemble, resume, sharding and the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from datasets import load_dataset

from conceptforge.generators.conceptbed.generate import ConceptBedGenerator, GenerateOptions
from conceptforge.generators.conceptbed.learners import LearnerConfig
from conceptforge.generators.conceptbed.spec import load_spec
from conceptforge.workitems import ShardSpec


REPO = Path(__file__).resolve().parents[2]


def _options(tiny_sd, out, learner="textual-inversion", **kw):
    config = LearnerConfig(
        learner=learner, model_id=str(tiny_sd), steps=2, num_inference_steps=2, resolution=32, num_class_images=2,
        **kw.pop("config", {}),
    )
    return GenerateOptions(config=config, out=out, num_images=kw.pop("num_images", 2), **kw)


def test_generate_assembles_schema_dataset(tmp_path, tiny_sd, datasets_root, write_spec, captions_file):
    spec = load_spec(write_spec(tmp_path, datasets_root, ["art_painting", "beagle"], captions_file))
    out = tmp_path / "out"
    summary = ConceptBedGenerator(spec, _options(tiny_sd, out)).run()
    assert summary["assembled"] and summary["missing"] == 0
    ds = load_dataset(str(out))
    assert set(ds) == {"concept", "composition"}
    concept = ds["concept"]
    assert concept.num_rows == 4
    assert sorted(set(concept["concept"])) == ["art_painting", "beagle"]
    style_rows = [r for r in concept if r["concept"] == "art_painting"]
    assert style_rows[0]["prompt"] == "A photo of a dog in the style of <object>"
    assert style_rows[1]["prompt"] == "A photo of an elephant in the style of <object>"
    beagle = [r for r in concept if r["concept"] == "beagle"][0]
    assert beagle["prompt"] == "A photo of <object>" and beagle["concept_kind"] == "object"
    assert beagle["learner"] == "textual-inversion" and beagle["caption"] == "" and beagle["questions"] == []
    assert len(beagle["reference_images"]) == 3 and beagle["image"].size == (32, 32)
    comp = ds["composition"]
    assert comp.num_rows == 2  # the caption without "dog" is skipped
    first = comp[0]
    assert first["prompt"] == "the <object> has a black nose"
    assert first["caption"] == "the dog has a black nose"
    assert first["category"] == "attribute" and first["categories"] == ["attribute"]
    assert first["questions"] == ["is there the dog?", "is there a black nose?"]
    assert comp[1]["prompt"] == "two <object>s standing on grass"
    card = (out / "README.md").read_text()
    assert (out / "grid.png").exists() and "ConceptBed" in card
    assert "local-sha256:" in card and '"learner": "textual-inversion"' in card  # provenance
    assert (out / ".work" / "artifacts" / "beagle" / "learned_embeds.safetensors").exists()


def test_resume_per_concept_and_identical_output(tmp_path, tiny_sd, datasets_root, write_spec):
    spec = load_spec(write_spec(tmp_path, datasets_root, ["beagle", "tabby"]))
    out = tmp_path / "out"
    first = ConceptBedGenerator(spec, _options(tiny_sd, out, max_items=2)).run()
    assert first["made"] == 2 and not first["assembled"]
    artifacts = out / ".work" / "artifacts"
    assert (artifacts / "beagle" / "learner.json").exists() and not (artifacts / "tabby").exists()
    stamp = (artifacts / "beagle" / "learned_embeds.safetensors").stat().st_mtime_ns
    second = ConceptBedGenerator(spec, _options(tiny_sd, out)).run()
    assert second["made"] == 2 and second["assembled"]
    assert (artifacts / "beagle" / "learned_embeds.safetensors").stat().st_mtime_ns == stamp  # not retrained
    clean = tmp_path / "clean"
    ConceptBedGenerator(spec, _options(tiny_sd, clean)).run()
    a = sorted((out / "data").glob("*.parquet"))
    b = sorted((clean / "data").glob("*.parquet"))
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]


def test_shards_split_concepts(tmp_path, tiny_sd, datasets_root, write_spec):
    spec = load_spec(write_spec(tmp_path, datasets_root, ["beagle", "tabby"]))
    out = tmp_path / "out"
    s0 = ConceptBedGenerator(spec, _options(tiny_sd, out, num_images=1, shard=ShardSpec(2, 0))).run()
    assert not s0["assembled"] and s0["missing"] == 1
    s1 = ConceptBedGenerator(spec, _options(tiny_sd, out, num_images=1, shard=ShardSpec(2, 1))).run()
    assert s1["assembled"]
    assert sorted(load_dataset(str(out), split="concept")["concept"]) == ["beagle", "tabby"]


def test_resume_with_other_settings_is_refused(tmp_path, tiny_sd, datasets_root, write_spec):
    from conceptforge.errors import ConceptforgeError

    spec = load_spec(write_spec(tmp_path, datasets_root, ["beagle"]))
    out = tmp_path / "out"
    ConceptBedGenerator(spec, _options(tiny_sd, out, num_images=0)).run()
    with pytest.raises(ConceptforgeError, match="other settings"):
        ConceptBedGenerator(spec, _options(tiny_sd, out, num_images=1)).run()


def _script(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(REPO / "scripts" / "generate_conceptbed.py"), *args], capture_output=True, text=True, env=env, cwd=cwd)


def test_cli_dreambooth_end_to_end(tmp_path, tiny_sd, datasets_root, write_spec, run_script):
    spec = write_spec(tmp_path, datasets_root, ["001.Black_footed_Albatross"])
    out = tmp_path / "db"
    code, stdout, err = run_script("generate_conceptbed.py",
        "--learner", "dreambooth", "--concepts", str(spec), "--out", str(out), "--model-id", str(tiny_sd),
        "--steps", "2", "--num-images", "1", "--num-inference-steps", "2", "--resolution", "32",
        "--num-class-images", "2", "--preset", "lora",
    )
    assert code == 0, err[-2000:]
    assert "wrote" in stdout
    row = load_dataset(str(out), split="concept")[0]
    assert row["prompt"] == "A photo of sks Black footed Albatross" and row["concept_kind"] == "cub"
    artifact = out / ".work" / "artifacts" / "001.Black_footed_Albatross"
    assert (artifact / "pytorch_lora_weights.safetensors").exists() and not (artifact / "unet").exists()
    assert len(list((out / ".work" / "class-images" / "001.Black_footed_Albatross").glob("*.png"))) == 2
    learner = json.loads((artifact / "learner.json").read_text())["config"]
    assert (learner["preset"], learner["dreambooth_mode"], learner["learning_rate"]) == ("lora", "lora", 1e-4)
    assert "`lora` preset (DreamBooth LoRA rank 4, lr 0.0001" in (out / "README.md").read_text()


def test_cli_dreambooth_paper_preset_is_the_default(tmp_path, tiny_sd, datasets_root, write_spec, run_script):
    """Table 5: full UNet fine-tuning at 5e-6; the card and the artifact record it."""
    spec = write_spec(tmp_path, datasets_root, ["001.Black_footed_Albatross"])
    out = tmp_path / "db-paper"
    code, stdout, err = run_script("generate_conceptbed.py",
        "--learner", "dreambooth", "--concepts", str(spec), "--out", str(out), "--model-id", str(tiny_sd),
        "--steps", "2", "--num-images", "1", "--num-inference-steps", "2", "--resolution", "32", "--num-class-images", "2",
    )
    assert code == 0, err[-2000:]
    artifact = out / ".work" / "artifacts" / "001.Black_footed_Albatross"
    assert (artifact / "unet").is_dir() and not (artifact / "pytorch_lora_weights.safetensors").exists()
    learner = json.loads((artifact / "learner.json").read_text())["config"]
    assert (learner["preset"], learner["dreambooth_mode"], learner["learning_rate"]) == ("paper", "full", 5e-6)
    card = (out / "README.md").read_text()
    assert "`paper` preset (DreamBooth full UNet fine-tuning, lr 5e-06, 2 steps)" in card
    assert '"preset": "paper"' in card or "preset: paper" in card or "'preset': 'paper'" in card


def test_cli_bad_input_subprocess(tmp_path, datasets_root, write_spec):
    bad = write_spec(tmp_path, datasets_root, ["not_a_concept"])
    result = _script("--learner", "dreambooth", "--concepts", str(bad), "--out", str(tmp_path / "x"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: unknown ConceptBed concept 'not_a_concept'")


def test_foreign_out_folder_is_refused_untouched(tmp_path, tiny_sd, datasets_root, write_spec):
    from tests.foreign_out import assert_refused_untouched, make_foreign_folder

    spec = write_spec(tmp_path, datasets_root, ["beagle"])
    out = tmp_path / "mine"
    before = make_foreign_folder(out)
    result = _script("--learner", "textual-inversion", "--concepts", str(spec), "--out", str(out), "--model-id", str(tiny_sd),
                     "--steps", "1", "--num-images", "1", "--num-inference-steps", "1", "--resolution", "32", cwd=tmp_path)
    assert_refused_untouched(out, before, result.returncode, result.stderr)
