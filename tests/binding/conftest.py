import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# The default path (Open Image Denoise on): these tests check the pipeline's byte-identity across
# reruns, resume, shards, workers (other render thread counts); see docs/binding.md.
SMALL = ["--resolution", "64x48", "--samples", "2"]


def run_script(*args: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "generate_binding.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        **kwargs,
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
