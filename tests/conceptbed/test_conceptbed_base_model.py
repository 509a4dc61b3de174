"""``--learner none``: the base model with no learned concept (ConceptBed Table 2's "Stable
Diffusion" row): V* is the concept's class noun, nothing is trained, the dataset is like a learner's."""

from __future__ import annotations

import pytest
from datasets import load_dataset

from conceptforge.errors import ConceptforgeError
from conceptforge.generators.conceptbed.learners import LearnerConfig


def test_cli_base_model_samples_the_class_noun_and_trains_nothing(
    tmp_path, tiny_sd, datasets_root, write_spec, captions_file, run_script, tiny_run_args
):
    spec = write_spec(tmp_path, datasets_root, ["art_painting", "beagle", "001.Black_footed_Albatross"], captions_file)
    out = tmp_path / "base"
    code, stdout, err = run_script("generate_conceptbed.py", *tiny_run_args("none", spec, out, tiny_sd))
    assert code == 0 and "wrote" in stdout, err[-2000:]
    ds = load_dataset(str(out))
    prompts = {r["concept"]: r["prompt"] for r in ds["concept"]}
    assert prompts == {
        "art_painting": "A photo of a dog in the style of art painting",
        "beagle": "A photo of beagle",
        "001.Black_footed_Albatross": "A photo of Black footed Albatross",
    }
    assert set(ds["concept"]["learner"]) == {"none"}
    assert ds["composition"]["prompt"] == ["the beagle has a black nose", "two beagles standing on grass"]
    assert not (out / ".work" / "artifacts").exists()  # nothing learned
    card = (out / "README.md").read_text()
    assert "base model, no learner" in card and "with no learned concept" in card
    # the same prompts and seeds give the same bytes in a second output folder
    again = tmp_path / "again"
    assert run_script("generate_conceptbed.py", *tiny_run_args("none", spec, again, tiny_sd))[0] == 0
    files = sorted(p.name for p in (out / "data").glob("*.parquet"))
    assert files == sorted(p.name for p in (again / "data").glob("*.parquet"))
    assert all((out / "data" / f).read_bytes() == (again / "data" / f).read_bytes() for f in files)
    # `verify` needs only the base model: there are no learned weights to give
    code, text, err = run_script("verify.py", str(out), "--all", "--weights", f"diffusion={tiny_sd}")
    assert code == 0 and "verified: 5 of 5 item(s)" in text, err[-2000:] + text


def test_training_flags_with_no_learner_are_refused(
    tmp_path, tiny_sd, datasets_root, write_spec, run_script, tiny_run_args
):
    spec = write_spec(tmp_path, datasets_root, ["beagle"])
    out = tmp_path / "x"
    code, _, err = run_script("generate_conceptbed.py", *tiny_run_args("none", spec, out, tiny_sd, "--steps", "5"))
    assert code == 2 and err.strip().splitlines()[-1] == "error: --learner none trains nothing: drop --steps"
    assert not out.exists()
    with pytest.raises(ConceptforgeError, match="drop --learning-rate, --placeholder-token"):
        LearnerConfig(learner="none", learning_rate=1e-3, placeholder_token="<x>")
    assert LearnerConfig(learner="none", pipeline="ldm").steps == 0  # an LDM base model too


def test_dry_run_has_no_training(tmp_path, tiny_sd, datasets_root, write_spec, run_script, tiny_run_args):
    spec = write_spec(tmp_path, datasets_root, ["beagle", "tabby"])
    code, stdout, err = run_script(
        "generate_conceptbed.py", *tiny_run_args("none", spec, tmp_path / "plan", tiny_sd, "--dry-run")
    )
    assert code == 0, err[-2000:]
    assert "learner: none, the base model, nothing trained, 32 px" in stdout
    assert "training steps: 0" in stdout and "  train:" not in stdout and "sampled images: 2 (2 concept" in stdout
