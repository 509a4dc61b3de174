"""Session-wide test settings. Area-specific fixtures live in tests/<area>/conftest.py.

The suite must pass whatever Hugging Face variables the caller has set (a cluster node often has
``HF_HUB_OFFLINE=1``, a laptop a token and ``HF_HOME``). So every such variable is removed before
any library reads it, a fixed baseline is set, and an autouse fixture puts that baseline back for
every test, including the flags that ``huggingface_hub`` and ``datasets`` read once at import.
Script subprocesses inherit ``os.environ`` and so the same baseline. Tests that want offline mode
in-process use the ``hub_offline`` fixture; script subprocesses get ``HF_HUB_OFFLINE=1`` in their env.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

# Fixtures shared across folders, each built only where a test asks for it: the evaluation tests'
# tiny models and synthetic datasets, the page tests' headless Chromium, the local Hub server.
pytest_plugins = ["tests.evaluation_fixtures", "tests.browser", "tests.user_shell"]

HF_PREFIXES = ("HF_", "HUGGINGFACE_", "HUGGING_FACE_", "TRANSFORMERS_", "DIFFUSERS_")

if "huggingface_hub" in sys.modules:  # would have read the caller's variables already
    raise RuntimeError("tests/conftest.py must run before huggingface_hub is imported")
for _key in [key for key in os.environ if key.startswith(HF_PREFIXES)]:
    del os.environ[_key]

# Nothing in the tests may reach the real Hub; tiny models are saved and loaded locally, and the
# publish tests talk to the local server in tests/publish/hub_server.py.
HF_BASELINE = {
    "HF_HOME": tempfile.mkdtemp(prefix="conceptforge-hf-home-"),
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_XET": "1",
}
os.environ.update(HF_BASELINE)
os.environ["TOKENIZERS_PARALLELISM"] = "false"
# Nor may a test read or write the user's caches (~/.cache/conceptforge: embeddings, CompMap
# activations, sample caches): a command run without --cache-dir, as the tutorial runs them, would
# share entries across runs and processes. One private cache per session.
os.environ.pop("CONCEPTFORGE_EMBEDDING_CACHE", None)
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="conceptforge-xdg-cache-")


def set_hub_offline(monkeypatch: pytest.MonkeyPatch, offline: bool) -> None:
    """Offline mode in this process: the variable and the flags read at import time."""
    if offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    if "huggingface_hub" in sys.modules:
        import huggingface_hub.constants

        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", offline)
    if "datasets" in sys.modules:
        import datasets.config

        monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", offline)
        monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", offline)


@pytest.fixture(autouse=True)
def _isolated_hf_environment(monkeypatch):
    """Every test starts from the baseline, whatever an earlier test or fixture left behind."""
    for key in [key for key in os.environ if key.startswith(HF_PREFIXES) and key not in HF_BASELINE]:
        monkeypatch.delenv(key)
    for key, value in HF_BASELINE.items():
        monkeypatch.setenv(key, value)
    set_hub_offline(monkeypatch, False)
    if "conceptforge.external_errors" in sys.modules:  # whether an earlier test's probe switched offline
        monkeypatch.setattr(sys.modules["conceptforge.external_errors"], "_SWITCHED_OFFLINE", False)


@pytest.fixture
def hub_offline(monkeypatch):
    """Offline mode for an in-process test (model names resolve from the local cache only)."""
    set_hub_offline(monkeypatch, True)


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible server (moto) on 127.0.0.1; fsspec reaches it through FSSPEC_S3_* variables."""
    pytest.importorskip("s3fs", reason="the store's S3 tests need the test extra: pip install '.[test]'")
    from tests.engine.s3_server import S3Server

    server = S3Server()
    saved = {key: os.environ.get(key) for key in server.env}
    os.environ.update(server.env)
    import fsspec.config

    fsspec.config.conf.setdefault("s3", {}).update(
        {"endpoint_url": server.endpoint, "key": "testing", "secret": "testing"}
    )
    try:
        yield server
    finally:
        fsspec.config.conf.get("s3", {}).clear()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()


@pytest.fixture(scope="session")
def random_flux_seed0(tmp_path_factory):
    """The tiny random FLUX pipeline (seed 0), built once per session.

    Building it costs seconds of CPU (minutes on a loaded machine), and five areas (sub, pipeline,
    verify, Ray, Slurm) each built the same one. A user copies it (``shutil.copytree``, 1 MB) to a
    folder of its own under the name it expects, so that no test can change another's model."""
    from conceptforge.testing.random_flux import build_random_flux_pipeline

    path = tmp_path_factory.mktemp("random-flux-seed0") / "flux"
    build_random_flux_pipeline(seed=0).save_pretrained(path)
    return path


ROOT = Path(__file__).resolve().parents[1]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Group the tests for pytest-xdist (`make test` runs `-n 2 --dist loadgroup`): a module stays on
    one worker, so its module-scoped models and servers are built once, and every test of
    tests/cluster shares one worker, so one private Slurm and one Ray run at a time on the machine.
    Without xdist the marks change nothing.

    ``tryfirst``: xdist reads the marks in its own collection hook (it appends ``@group`` to each
    node id), so they must be there before it runs. With pytest 9.2 that tag is lost whatever the
    order (9.2 moved ``Node.nodeid``; pyproject.toml keeps pytest < 9.2): every test was its own
    unit, modules were split over both workers (their module fixtures built twice: 30-40 s each for
    the SUB pipeline, evaluation and export modules) and two private Slurms could run at once (the
    requeue test's job was cancelled in full runs only). tests/core/test_suite_grouping.py checks it."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        parts = Path(item.path).resolve().relative_to(ROOT).parts
        group = "cluster" if parts[:2] == ("tests", "cluster") else "/".join(parts)
        item.add_marker(pytest.mark.xdist_group(group))
