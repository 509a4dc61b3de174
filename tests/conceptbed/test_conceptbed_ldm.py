"""Textual Inversion on a Latent Diffusion Model (ConceptBed Table 1, "Textual Inversion (LDM)"):
the family read from model_index.json, what the learner trains, the command line end to end,
resume, evaluation of the result, and the learners that do not run on an LDM."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from datasets import load_dataset

from conceptforge.errors import ConceptforgeError
from conceptforge.generators.conceptbed.artifacts import AppliedArtifact, save_artifact, write_artifact_atomically
from conceptforge.generators.conceptbed.learners import ConceptTrainer, LearnerConfig, load_components
from conceptforge.generators.conceptbed.pipelines import detect_family
from conceptforge.generators.conceptbed.sampling import generate_image, load_pipeline
from conceptforge.generators.conceptbed.spec import Concept


def _concept(datasets_root):
    folder = datasets_root / "imagenet" / "train" / "n02088364"
    return Concept(name="beagle", kind="object", parent="dog", reference_images=tuple(sorted(folder.glob("*.JPEG"))))


def _params(module):
    return {n: p.detach().clone() for n, p in module.named_parameters()}


def _unchanged(before, module):
    return all(torch.equal(before[n], p.detach()) for n, p in module.named_parameters())


def test_the_family_comes_from_model_index_not_the_name(tmp_path, tiny_ldm, tiny_sd):
    misnamed = shutil.copytree(tiny_ldm, tmp_path / "stable-diffusion-v1-5")
    assert detect_family(str(misnamed)).name == "ldm"
    assert detect_family(str(tiny_sd)).name == "stable-diffusion"
    other = tmp_path / "ldm-but-not"
    other.mkdir()
    (other / "model_index.json").write_text(json.dumps({"_class_name": "DDPMPipeline"}))
    with pytest.raises(ConceptforgeError, match="is a DDPMPipeline: ConceptBed's learners train on"):
        detect_family(str(other))
    with pytest.raises(ConceptforgeError, match="cannot read the model_index.json"):
        detect_family(str(tmp_path / "nothing-here"))


def test_table5_ldm_column_and_learners_it_refuses():
    ti = LearnerConfig(learner="textual-inversion", pipeline="ldm")
    assert (ti.steps, ti.learning_rate, ti.placeholder_token, ti.eta) == (3000, 5e-4, "*", 0.0)
    with pytest.raises(ConceptforgeError, match="--eta is DDIM's, for an LDM's sampling; a StableDiffusionPipeline"):
        LearnerConfig(learner="textual-inversion", eta=0.5)
    assert LearnerConfig(learner="textual-inversion", pipeline="ldm", eta=0.5).eta == 0.5
    for learner in ("dreambooth", "custom-diffusion"):
        with pytest.raises(ConceptforgeError, match=f"{learner} cannot run on a latent-diffusion model"):
            LearnerConfig(learner=learner, pipeline="ldm")


def test_textual_inversion_on_ldm_learns_only_the_placeholder_row(tiny_ldm, datasets_root):
    comps = load_components(str(tiny_ldm))
    assert comps.family.name == "ldm" and type(comps.text_encoder).__name__ == "LDMBertModel"
    config = LearnerConfig(
        learner="textual-inversion", pipeline="ldm", model_id=str(tiny_ldm), steps=2, resolution=32, learning_rate=1e-2
    )
    rows = comps.text_encoder.get_input_embeddings().weight.detach().clone()
    star = comps.tokenizer.convert_tokens_to_ids("*")
    unet, vqvae = _params(comps.unet), _params(comps.vae)
    bert = {n: p for n, p in _params(comps.text_encoder).items() if "embed_tokens" not in n}
    state = ConceptTrainer(config, comps).train(_concept(datasets_root))
    weight = comps.text_encoder.get_input_embeddings().weight.detach()
    # "*" is in BERT's vocabulary (Table 5's LDM placeholder): its row is learned, no row is added
    assert state.token_id == star and weight.shape == rows.shape
    keep = torch.ones(rows.shape[0], dtype=torch.bool)
    keep[star] = False
    assert torch.equal(weight[keep], rows[keep]) and not torch.equal(weight[star], rows[star])
    assert _unchanged(unet, comps.unet) and _unchanged(vqvae, comps.vae)
    assert all(torch.equal(bert[n], p.detach()) for n, p in comps.text_encoder.named_parameters() if n in bert)
    assert len(state.history) == 2 and all(np.isfinite(state.history))


def test_vq_autoencoder_and_a_new_token(tmp_path, datasets_root):
    """A VQModel autoencoder (zero-spread latents) and a placeholder BERT does not know: a row is added."""
    from conceptforge.testing.tiny_conceptbed import build_tiny_ldm

    model = build_tiny_ldm(tmp_path / "vq", autoencoder="vq")
    comps = load_components(str(model))
    assert type(comps.vae).__name__ == "VQModel"
    vocab = len(comps.tokenizer)
    config = LearnerConfig(
        learner="textual-inversion",
        pipeline="ldm",
        model_id=str(model),
        steps=1,
        resolution=32,
        learning_rate=1e-2,
        placeholder_token="<beagle>",
    )
    before = comps.text_encoder.get_input_embeddings().weight.detach().clone()
    state = ConceptTrainer(config, comps).train(_concept(datasets_root))
    weight = comps.text_encoder.get_input_embeddings().weight.detach()
    assert state.token_id == vocab and weight.shape[0] == vocab + 1
    assert torch.equal(weight[:vocab], before[:vocab])
    assert comps.tokenizer.tokenize("a photo of <beagle>")[-1] == "<beagle>"


def test_the_learned_row_changes_ldm_sampling_and_is_undone(tmp_path, tiny_ldm, datasets_root):
    comps = load_components(str(tiny_ldm))
    config = LearnerConfig(
        learner="textual-inversion", pipeline="ldm", model_id=str(tiny_ldm), steps=1, resolution=32, learning_rate=1.0
    )
    concept = _concept(datasets_root)
    state = ConceptTrainer(config, comps).train(concept)
    artifact = tmp_path / "artifact"
    write_artifact_atomically(artifact, lambda tmp: save_artifact(tmp, config, comps, state, concept))
    pipe = load_pipeline(str(tiny_ldm), device="cpu")
    assert type(pipe).__name__ == "LDMTextToImagePipeline" and type(pipe.scheduler).__name__ == "DDIMScheduler"
    kwargs = {"num_inference_steps": 2, "guidance_scale": 7.5, "resolution": 32, "eta": 0.0}
    base = np.asarray(generate_image(pipe, "A photo of *", 7, **kwargs), dtype=np.int16)
    with AppliedArtifact(pipe, artifact):
        learned = np.asarray(generate_image(pipe, "A photo of *", 7, **kwargs), dtype=np.int16)
    restored = np.asarray(generate_image(pipe, "A photo of *", 7, **kwargs), dtype=np.int16)
    assert learned.shape == (32, 32, 3) and np.abs(learned - base).max() > 0
    assert np.array_equal(restored, base)
    noisy = np.asarray(generate_image(pipe, "A photo of *", 7, **{**kwargs, "eta": 1.0}), dtype=np.int16)
    assert not np.array_equal(noisy, base)  # eta reaches the DDIM step


def test_cli_ldm_end_to_end_resume_and_evaluate(
    tmp_path, tiny_ldm, datasets_root, write_spec, captions_file, run_script, tiny_run_args, oracle_flags
):
    spec = write_spec(tmp_path, datasets_root, ["art_painting", "beagle"], captions_file)
    out = tmp_path / "ti-ldm"

    def generate(folder, *extra):
        args = tiny_run_args("textual-inversion", spec, folder, tiny_ldm, "--steps", "2", *extra, num_images=2)
        return run_script("generate_conceptbed.py", *args)

    code, _, err = generate(out, "--max-items", "3")  # stopped mid-run
    assert code == 0, err[-2000:]
    assert not (out / "README.md").exists()
    code, stdout, err = generate(out)  # resumed
    assert code == 0 and "wrote" in stdout, err[-2000:]
    ds = load_dataset(str(out))
    beagle = [r for r in ds["concept"] if r["concept"] == "beagle"]
    assert [r["prompt"] for r in beagle] == ["A photo of *", "A photo of *"]
    assert beagle[0]["image"].size == (32, 32) and beagle[0]["learner"] == "textual-inversion-ldm"
    assert ds["composition"][0]["prompt"] == "the * has a black nose"
    artifact = out / ".work" / "artifacts" / "beagle"
    learned = json.loads((artifact / "learner.json").read_text())
    assert (learned["config"]["pipeline"], learned["phrase"], learned["config"]["eta"]) == ("ldm", "*", 0.0)
    from safetensors.torch import load_file

    assert list(load_file(str(artifact / "learned_embeds.safetensors"))) == ["*"]
    assert "trained per concept on .../ldm (LDMTextToImagePipeline; ConceptBed" in (out / "README.md").read_text()
    # One uninterrupted run writes the same bytes.
    clean = tmp_path / "clean"
    assert generate(clean)[0] == 0
    parquet = sorted(p.relative_to(out) for p in (out / "data").glob("*.parquet"))
    assert parquet and parquet == sorted(p.relative_to(clean) for p in (clean / "data").glob("*.parquet"))
    assert all((out / p).read_bytes() == (clean / p).read_bytes() for p in parquet)
    # The result is scored by `evaluate conceptbed` as any learner's.
    code, text, err = run_script(
        "evaluate.py", "conceptbed", "--generated", str(out), "--concepts", str(spec), *oracle_flags
    )
    assert code == 0, err[-3000:]
    assert "Domain (PACS)" in text and "Objects (ImageNet)" in text and "| textual-inversion-ldm |" in text
    # `verify` samples the release again from its record on the LDM with the learned rows.
    code, text, err = run_script(
        "verify.py", str(out), "--all", "--weights", f"diffusion={tiny_ldm}", "--weights", f"learners={out / '.work'}"
    )
    assert code == 0 and "verified: 6 of 6 item(s)" in text, err[-2000:] + text


@pytest.mark.parametrize("learner", ["dreambooth", "custom-diffusion"])
def test_cli_learners_without_an_ldm_form_are_refused(
    tmp_path, tiny_ldm, datasets_root, write_spec, run_script, tiny_run_args, learner
):
    spec = write_spec(tmp_path, datasets_root, ["beagle"])
    out = tmp_path / "out"
    code, _, err = run_script("generate_conceptbed.py", *tiny_run_args(learner, spec, out, tiny_ldm))
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[-1].startswith(f"error: {learner} cannot run on a latent-diffusion model (LDMTextToImagePipeline)")
    assert "use --learner textual-inversion" in lines[-1]
    assert not out.exists()


def test_a_python_config_for_the_wrong_family_is_refused_before_writing(tmp_path, tiny_ldm, datasets_root, write_spec):
    from conceptforge.generators.conceptbed.spec import load_spec
    from conceptforge.generators.conceptbed.stage import ConceptBedGenerator, GenerateOptions

    spec = load_spec(write_spec(tmp_path, datasets_root, ["beagle"]))
    config = LearnerConfig(learner="textual-inversion", model_id=str(tiny_ldm), steps=1)  # pipeline left at SD
    with pytest.raises(ConceptforgeError, match="is a LDMTextToImagePipeline, but the learner config says"):
        ConceptBedGenerator(spec, GenerateOptions(config=config, out=tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_dry_run_names_the_ldm_pipeline(tmp_path, tiny_ldm, datasets_root, write_spec, run_script, tiny_run_args):
    spec = write_spec(tmp_path, datasets_root, ["beagle"])
    args = tiny_run_args("textual-inversion", spec, tmp_path / "plan", tiny_ldm, "--steps", "2", "--dry-run")
    code, stdout, err = run_script("generate_conceptbed.py", *args)
    assert code == 0, err[-2000:]
    assert "pipeline: LDMTextToImagePipeline" in stdout and "training steps: 2 (2 per concept)" in stdout
    assert not (tmp_path / "plan").exists()
