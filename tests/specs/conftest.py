"""The synthetic "mugs" SUB chain shared by the spec tests (issue 46): a mug attribute dataset
saved with ``datasets`` -> ``generate sub --spec`` -> ``filter sub`` -> publish to the local Hub.

Why session-scoped here: building it (a tiny FLUX run, a tiny VLM filter, a publish) is the
expensive part of tests/specs/test_sub_own_benchmark.py and test_sub_exports.py; both read the
same folders and none writes into them, so it is built once for the run.
"""

from __future__ import annotations

import shutil

import pytest

from tests.specs.sub_synthetic import mug_spec_text, save_mug_dataset
from tests.sub.sub_helpers import TINY_FLUX_ARGS

MUGS_REPO = "conceptforge-e2e/sub-mugs"


@pytest.fixture(scope="session")
def mugs(tmp_path_factory):
    root = tmp_path_factory.mktemp("mugs")
    save_mug_dataset(root / "mugs")
    (root / "spec.yaml").write_text(mug_spec_text())
    return root


@pytest.fixture(scope="session")
def chain(mugs, tmp_path_factory, random_flux_seed0):
    from conceptforge.commands import invoke
    from conceptforge.testing.tiny_vlms import build_tiny_llava

    flux = shutil.copytree(random_flux_seed0, mugs / "flux")
    vlm = build_tiny_llava(tmp_path_factory.mktemp("mugs-vlm"))
    candidates, filtered = mugs / "candidates", mugs / "filtered"
    spec = ["--spec", str(mugs / "spec.yaml")]
    invoke(
        ["generate", "sub", *spec, "--out", str(candidates), "--model", str(flux), "--pairs", "Diner_Mug"]
        + ["--images-per-pair", "2", *TINY_FLUX_ARGS]
    )
    invoke(
        ["filter", "sub", "--candidates", str(candidates), "--out", str(filtered), "--vqa-model", str(vlm)]
        + ["--keep-fraction", "0.5", "--min-survivor-fraction", "0", "--device", "cpu"]
    )
    return {"candidates": candidates, "filtered": filtered, "spec": mugs / "spec.yaml"}


@pytest.fixture(scope="session")
def released(chain, hub_env):
    """The filtered mugs published as ``conceptforge-e2e/sub-mugs`` v1.0.0, no --cub-dir, as a Hub
    benchmark (``eval.yaml`` for inspect-ai's sub-vlm tasks, which the release's exports define)."""
    from tests.user_shell import check, run_script

    argv = [chain["filtered"], "--repo-id", MUGS_REPO, "--version", "v1.0.0"]
    done = run_script("publish.py", *argv, "--eval-framework", "inspect-ai", "--eval-tasks", "sub-vlm", env=hub_env)
    check(done, f"publish {MUGS_REPO} v1.0.0")
    return MUGS_REPO
