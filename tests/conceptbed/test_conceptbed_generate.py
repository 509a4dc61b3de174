"""End to end: learn -> sample -> assemble, resume, sharding and the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from datasets import ClassLabel, load_dataset

from conceptforge.engine.workitems import ShardSpec
from conceptforge.generators.conceptbed.learners import LearnerConfig
from conceptforge.generators.conceptbed.spec import load_spec
from conceptforge.generators.conceptbed.stage import ConceptBedGenerator, GenerateOptions
from tests.cli_errors import last_error_line

REPO = Path(__file__).resolve().parents[2]


def _options(tiny_sd, out, learner="textual-inversion", **kw):
    config = LearnerConfig(
        learner=learner,
        model_id=str(tiny_sd),
        steps=2,
        num_inference_steps=2,
        resolution=32,
        num_class_images=2,
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
    assert beagle["image"].size == (32, 32)
    # References by id only: the user's ImageNet/CUB/PACS images are not redistributed (issue 20.8).
    assert len(beagle["reference_ids"]) == 3 and all(r.count("/") == 1 for r in beagle["reference_ids"])
    assert all(row["reference_images"] == [] for split in ds.values() for row in split)
    comp = ds["composition"]
    assert comp.num_rows == 2  # the caption without "dog" is skipped
    first = comp[0]
    assert first["prompt"] == "the <object> has a black nose"
    assert first["caption"] == "the dog has a black nose"
    assert first["category"] == "attribute" and first["categories"] == ["attribute"]
    assert first["questions"] == ["is there the dog?", "is there a black nose?"]
    assert comp[1]["prompt"] == "two <object>s standing on grass"
    for split in (concept, comp):  # the closed concept set as a ClassLabel, names through the features
        label = split.features["concept_label"]
        assert isinstance(label, ClassLabel) and label.num_classes == 284
        assert [label.int2str(v) for v in split["concept_label"]] == split["concept"]
    card = (out / "README.md").read_text()
    assert (out / "grid.png").exists() and "ConceptBed" in card
    assert "_Not written yet._" not in card and "## Annotations" in card and "- en" in card
    assert "local-sha256:" in card and '"learner": "textual-inversion"' in card  # provenance
    assert "reference images (ImageNet, CUB-200-2011, PACS) are not included" in card
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
    # (a run of 0 images is refused now, issue 24: it fixed the settings for nothing)
    ConceptBedGenerator(spec, _options(tiny_sd, out, num_images=1)).run()
    with pytest.raises(ConceptforgeError, match="other settings"):
        ConceptBedGenerator(spec, _options(tiny_sd, out, num_images=2)).run()


#: LearnerConfig's fields before the LDM family: what a Stable Diffusion run started by an older
#: release recorded in run.json, and must still match on resume.
_RECORDED_BEFORE_LDM = {
    "learner", "model_id", "revision", "steps", "learning_rate", "placeholder_token", "initializer_token",
    "preset", "dreambooth_mode", "lora_rank", "num_class_images", "prior_loss_weight", "resolution",
    "train_batch_size", "num_inference_steps", "guidance_scale", "mixed_precision", "seed",
}  # fmt: skip


def test_a_stable_diffusion_run_records_what_older_releases_did(tmp_path, tiny_sd, tiny_ldm, datasets_root, write_spec):
    """The pipeline family and eta are recorded only off their defaults: a run started before they
    existed resumes instead of being refused for "other settings"."""
    spec = load_spec(write_spec(tmp_path, datasets_root, ["beagle"]))
    sd = ConceptBedGenerator(spec, _options(tiny_sd, tmp_path / "sd"))
    assert set(sd.run_settings()["learner"]) == _RECORDED_BEFORE_LDM
    ldm = ConceptBedGenerator(spec, _options(tiny_ldm, tmp_path / "ldm", config={"pipeline": "ldm", "eta": 0.5}))
    recorded = ldm.run_settings()["learner"]
    assert (recorded["pipeline"], recorded["eta"]) == ("ldm", 0.5)


def _script(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "generate_conceptbed.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )


def test_cli_dreambooth_end_to_end(tmp_path, tiny_sd, datasets_root, write_spec, run_script, tiny_run_args):
    spec = write_spec(tmp_path, datasets_root, ["001.Black_footed_Albatross"])
    out = tmp_path / "db"
    code, stdout, err = run_script(
        "generate_conceptbed.py",
        *tiny_run_args("dreambooth", spec, out, tiny_sd, "--steps", "2", "--num-class-images", "2", "--preset", "lora"),
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


def test_cli_dreambooth_paper_preset_is_the_default(
    tmp_path, tiny_sd, datasets_root, write_spec, run_script, tiny_run_args
):
    """Table 5: full UNet fine-tuning at 5e-6; the card and the artifact record it."""
    spec = write_spec(tmp_path, datasets_root, ["001.Black_footed_Albatross"])
    out = tmp_path / "db-paper"
    code, stdout, err = run_script(
        "generate_conceptbed.py",
        *tiny_run_args("dreambooth", spec, out, tiny_sd, "--steps", "2", "--num-class-images", "2"),
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


def test_embedded_references_are_an_opt_in_with_one_copy_per_concept(
    tmp_path, tiny_sd, datasets_root, write_spec, captions_file
):
    """Before: every row embedded the concept's reference thumbnails under the model licence."""
    spec = load_spec(write_spec(tmp_path, datasets_root, ["art_painting", "beagle"], captions_file))
    out = tmp_path / "embedded"  # another name than the other tests' "out": datasets caches by it
    ConceptBedGenerator(spec, _options(tiny_sd, out, embed_references=True)).run()
    ds = load_dataset(str(out))
    for split in ds.values():
        carriers = [row["concept"] for row in split if row["reference_images"]]
        assert sorted(carriers) == sorted(set(split["concept"]))  # exactly one row per concept
    beagle = next(row for row in ds["concept"] if row["concept"] == "beagle" and row["reference_images"])
    assert len(beagle["reference_images"]) == 3
    card = (out / "README.md").read_text()
    license_section = card.split("## License", 1)[1].split("## Citation", 1)[0]
    assert "embedded on request (`--embed-references`)" in license_section and "not this license" in license_section


def test_s3_output_is_byte_identical_to_local(tmp_path, tiny_sd, datasets_root, write_spec, s3_server):
    """`--out s3://bucket/x` on a real S3-compatible server (moto, 127.0.0.1): the store, the
    reference thumbnails and the assembled dataset live there, the learned weights in a local
    work folder; data bytes equal a local run's (embedded references included)."""
    spec = load_spec(write_spec(tmp_path, datasets_root, ["beagle"]))
    local = tmp_path / "local"
    ConceptBedGenerator(spec, _options(tiny_sd, local, embed_references=True)).run()
    s3_server.make_bucket("conceptbed")
    work = tmp_path / "work"
    summary = ConceptBedGenerator(
        spec, _options(tiny_sd, "s3://conceptbed/ti", embed_references=True, work_dir=work)
    ).run()
    assert summary["assembled"], summary["message"]
    assert (work / "artifacts" / "beagle" / "learned_embeds.safetensors").exists()  # weights stay local
    fs = s3_server.filesystem()
    assert not fs.find("conceptbed/ti/.work/artifacts")  # ... and never go to the bucket
    assert len([f for f in fs.find("conceptbed/ti/.work/references/beagle") if f.endswith(".png")]) == 3
    remote = {f.removeprefix("conceptbed/ti/"): fs.cat_file(f) for f in fs.find("conceptbed/ti/data")}
    expected = {str(p.relative_to(local)): p.read_bytes() for p in (local / "data").rglob("*") if p.is_file()}
    assert remote == expected and remote
    assert fs.exists("conceptbed/ti/README.md") and fs.exists("conceptbed/ti/grid.png")


def test_default_work_dir_is_local_for_a_url_out(tmp_path, monkeypatch):
    from conceptforge.generators.conceptbed.stage import default_work_dir

    assert default_work_dir(str(tmp_path / "out")) == tmp_path / "out" / ".work"
    monkeypatch.setenv("CONCEPTFORGE_WORK_DIR", str(tmp_path / "cache"))
    first, second = default_work_dir("s3://a/run1"), default_work_dir("s3://a/run2/")
    assert first.parent == tmp_path / "cache" and second.parent == first.parent and first != second
    assert default_work_dir("s3://a/run1/") == first  # a trailing slash names the same output


def test_a_work_dir_that_is_a_file_is_one_line(tmp_path, datasets_root, write_spec):
    spec = write_spec(tmp_path, datasets_root, ["beagle"])
    (tmp_path / "weights").write_text("not a folder")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "conceptforge",
            "generate",
            "conceptbed",
            "--learner",
            "textual-inversion",
            "--concepts",
            str(spec),
            "--out",
            str(tmp_path / "out"),
            "--work-dir",
            str(tmp_path / "weights"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=300,
    )
    assert last_error_line(result).startswith(
        f"error: conceptforge generate conceptbed: argument --work-dir: {tmp_path / 'weights'} is a file, not a folder"
    )
    assert not (tmp_path / "out").exists()


def test_a_missing_model_is_one_line_without_library_noise(tmp_path, datasets_root, write_spec):
    """Before: torchvision warnings, "Couldn't connect to the Hub… local cache" and "see the stacktrace above"."""
    spec = write_spec(tmp_path, datasets_root, ["beagle"])
    result = _script(
        "--learner",
        "textual-inversion",
        "--concepts",
        str(spec),
        "--out",
        str(tmp_path / "x"),
        "--model-id",
        "org/not-a-model",
        cwd=tmp_path,
    )
    assert result.returncode == 2
    lines = [line for line in result.stderr.strip().splitlines() if " INFO conceptforge." not in line]  # our own log
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: cannot read the model_index.json of 'org/not-a-model' (a diffusers pipeline ")
    assert not any(
        noise in result.stderr for noise in ("stacktrace", "torchvision", "Will try to load from local cache")
    )


def test_foreign_out_folder_is_refused_untouched(tmp_path, tiny_sd, datasets_root, write_spec, tiny_run_args):
    from tests.foreign_out import assert_refused_untouched, make_foreign_folder

    spec = write_spec(tmp_path, datasets_root, ["beagle"])
    out = tmp_path / "mine"
    before = make_foreign_folder(out)
    result = _script(*tiny_run_args("textual-inversion", spec, out, tiny_sd, "--steps", "1"), cwd=tmp_path)
    assert_refused_untouched(out, before, result.returncode, result.stderr)


def test_dry_run_prints_steps_images_and_gpu_hours_from_the_cost_table(
    tmp_path, datasets_root, write_spec, captions_file, run_script
):
    from conceptforge import gpu_costs

    spec = write_spec(tmp_path, datasets_root, ["art_painting", "beagle"], captions_file)
    out = tmp_path / "cb"
    args = ["--learner", "custom-diffusion", "--concepts", str(spec), "--out", str(out), "--dry-run"]
    code, stdout, err = run_script("generate_conceptbed.py", *args, "--num-images", "10")
    assert code == 0, err[-2000:]
    # Table 5: Custom Diffusion trains 250 steps and samples 200 class images per concept; beagle's
    # captions give 2 composition prompts (the cat caption is skipped), art_painting has none.
    assert "concepts: 2" in stdout and "training steps: 500 (250 per concept)" in stdout
    assert "class (prior) images: 400 (200 per concept)" in stdout
    assert "sampled images: 22 (20 concept, 2 composition), 50 steps" in stdout
    table = gpu_costs.load_table()["workloads"]
    step = table["conceptbed/custom-diffusion-step"]["flops"] / 790e12
    image = table["conceptbed/sample-image"]["flops"] / 790e12
    hours = (500 * step + 422 * image) / 3600
    assert f"estimated GPU-hours: at least {gpu_costs.format_hours(hours)} on one H100" in stdout
    assert f"  train: 500 x {step:.3g} s per training step" in stdout
    assert f"  sample: 22 x {image:.3g} s per sampled image" in stdout
    assert "source: floor from FLOPs on H100, not a measurement" in stdout
    # measured times given on the command line replace the table
    code, stdout, _ = run_script(
        "generate_conceptbed.py", *args, "--num-images", "10", "--seconds-per-step", "0.5", "--seconds-per-image", "2"
    )
    assert code == 0 and f"estimated GPU-hours: {gpu_costs.format_hours((500 * 0.5 + 422 * 2) / 3600)}\n" in stdout
    assert "source: --seconds-per-step, as given" in stdout and "floor" not in stdout
    assert not out.exists()


def test_a_spec_without_captions_gives_a_dataset_that_loads(tmp_path, tiny_sd, datasets_root, write_spec):
    """Issue 32: no captions -> a 0-row composition split, which load_dataset refuses (and publish accepted)."""
    from conceptforge.cards.validate import dataset_dir_problems

    spec = load_spec(write_spec(tmp_path, datasets_root, ["beagle"]))
    out = tmp_path / "out"
    summary = ConceptBedGenerator(spec, _options(tiny_sd, out)).run()
    assert summary["assembled"]
    assert set(load_dataset(str(out))) == {"concept"}
    assert not list((out / "data").glob("composition-*")) and not dataset_dir_problems(out)
