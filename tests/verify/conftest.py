"""Fixtures for the verify/diff tests: a small binding release and a tiny-model SUB release (the
local Hub server, ``hub`` and ``hub_env``, is tests/user_shell.py's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sub.sub_helpers import TINY_FLUX_ARGS, write_candidate_spec
from tests.user_shell import check, run_script
from tests.verify.verify_helpers import SMALL


@pytest.fixture(scope="session")
def binding_release(tmp_path_factory) -> Path:
    """One binding config (single-object, demo preset: 4/2/2 scenes) at 64x48, 2 samples."""
    out = tmp_path_factory.mktemp("verify-binding") / "binding"
    check(
        run_script("generate_binding.py", "--dataset", "single-object", "--preset", "demo", "--out", out, *SMALL),
        "generate_binding.py",
    )
    return out


@pytest.fixture(scope="session")
def tiny_flux(tmp_path_factory, random_flux_seed0) -> Path:
    """The tiny random FLUX (a copy of the session's one build: tests/conftest.py)."""
    import shutil

    return shutil.copytree(random_flux_seed0, tmp_path_factory.mktemp("verify-flux") / "tiny-flux", dirs_exist_ok=True)


@pytest.fixture(scope="session")
def sub_release(tmp_path_factory, tiny_flux) -> Path:
    """SUB candidates from the tiny FLUX: one bird, two substitutions, two images each."""
    from tests.pipeline.pipeline_helpers import write_full_mini_cub

    work = tmp_path_factory.mktemp("verify-sub")
    cub = write_full_mini_cub(work / "cub")
    spec = write_candidate_spec(
        work / "candidates.json", ["Blue_Jay"], ["has_crown_color::yellow", "has_tail_pattern::solid"]
    )
    out = work / "sub-candidates"
    check(
        run_script(
            "generate_sub.py",
            "--cub-dir",
            cub,
            "--out",
            out,
            "--model",
            tiny_flux,
            "--candidate-spec",
            spec,
            "--images-per-pair",
            2,
            *TINY_FLUX_ARGS,
        ),
        "generate_sub.py",
    )
    return out


@pytest.fixture(scope="session")
def conceptbed_release(tmp_path_factory) -> dict[str, Path]:
    """A textual-inversion ConceptBed release from the tiny SD: one concept, 2 concept + 1 composition images."""
    import numpy as np
    import torch
    from PIL import Image

    from conceptforge.generators.conceptbed.learners import LearnerConfig
    from conceptforge.generators.conceptbed.spec import load_spec
    from conceptforge.generators.conceptbed.stage import ConceptBedGenerator, GenerateOptions
    from conceptforge.testing.tiny_conceptbed import build_tiny_sd

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("verify-conceptbed")
    sd = build_tiny_sd(root / "tiny-sd")
    images = root / "imagenet" / "train" / "n02088364"
    images.mkdir(parents=True)
    for k in range(3):
        pixels = np.random.default_rng(k).integers(0, 160, size=(40, 40, 3)).astype(np.uint8)
        Image.fromarray(pixels).save(images / f"n02088364_{k}.JPEG")
    (root / "imagenet" / "LOC_synset_mapping.txt").write_text("n02088364 beagle\n")
    captions = root / "captions.jsonl"
    captions.write_text(json.dumps({"concept": "beagle", "caption": "the dog has a black nose"}) + "\n")
    spec = root / "spec.json"
    spec.write_text(
        json.dumps(
            {"imagenet_root": str(root / "imagenet" / "train"), "concepts": ["beagle"], "captions": str(captions)}
        )
    )
    config = LearnerConfig(learner="textual-inversion", model_id=str(sd), steps=2, num_inference_steps=2, resolution=32)
    out = root / "out"
    summary = ConceptBedGenerator(load_spec(spec), GenerateOptions(config=config, out=out, num_images=2)).run()
    assert summary["assembled"], summary
    return {"out": out, "sd": sd, "learners": out / ".work"}
