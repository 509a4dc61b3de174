import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# --no-denoise: these tests check the pipeline's byte-identity (reruns, resume, shards, workers).
# Cycles' float output itself varies at the last-bit level between runs (even on one thread), and
# Open Image Denoise can turn that into a 1/255 step on a pixel or two; see docs/binding.md.
SMALL = ["--resolution", "64x48", "--samples", "2", "--no-denoise"]


def run_script(*args: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "generate_binding.py"), *args],
        capture_output=True, text=True, env=env, timeout=600, **kwargs,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}\n{result.stderr[-3000:]}")
    return result


@pytest.fixture(scope="session")
def run_binding():
    """The generate_binding.py command line, run in a subprocess like a user would."""
    return run_script


@pytest.fixture(scope="session")
def small_args():
    return list(SMALL)


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory) -> Path:
    """All three demo datasets at 64x48, 2 samples: rendered once per test session."""
    out = tmp_path_factory.mktemp("binding-demo")
    run_script("--dataset", "all", "--preset", "demo", "--out", str(out), *SMALL)
    return out
