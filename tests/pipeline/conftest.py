"""Fixtures for the end-to-end pipeline tests: every tiny model the stages need, one CUB folder
that all stages read, and the local Hub server the publish tests use."""

from __future__ import annotations

import secrets

import pytest

from tests.pipeline.pipeline_helpers import write_full_mini_cub


@pytest.fixture(scope="session")
def pipeline_cub_folder(tmp_path_factory):
    """The ``CUB_200_2011`` folder of the tarball layout (attributes.txt lies beside it)."""
    return write_full_mini_cub(tmp_path_factory.mktemp("pipeline-cub"))


@pytest.fixture(scope="session")
def pipeline_cub(pipeline_cub_folder):
    """``--cub-dir`` as the docs write it: the ``CUB_200_2011`` folder itself (attributes.txt lies
    beside it, as in the tarball; test_pipeline_cub_dir.py checks both forms)."""
    return pipeline_cub_folder


@pytest.fixture(scope="session")
def pipeline_flux(tmp_path_factory):
    from conceptforge.testing.random_flux import build_random_flux_pipeline

    path = tmp_path_factory.mktemp("pipeline-flux")
    build_random_flux_pipeline(seed=0).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def pipeline_vlm(tmp_path_factory):
    from conceptforge.testing.tiny_vlms import build_tiny_llava

    return build_tiny_llava(tmp_path_factory.mktemp("pipeline-vlm"))


@pytest.fixture(scope="session")
def pipeline_clip(tmp_path_factory):
    from conceptforge.testing.tiny_models import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("pipeline-clip") / "tiny-clip", max_length=32)


@pytest.fixture(scope="session")
def hub(tmp_path_factory):
    """The publish area's local Hub-compatible server (commits, tags, resolve, parquet downloads)."""
    from conceptforge.testing.hub_server import HubServer

    token = "hf_" + secrets.token_hex(16)
    server = HubServer(tmp_path_factory.mktemp("pipeline-hub"), token=token).start()
    server.token = token
    yield server
    server.stop()


@pytest.fixture(scope="session")
def hub_env(hub, tmp_path_factory):
    """A user's environment whose Hub client talks to the local server (online, token set)."""
    from tests.pipeline.pipeline_helpers import script_env

    env = script_env(
        HF_ENDPOINT=hub.url,
        HF_TOKEN=hub.token,
        HF_HUB_DISABLE_XET="1",
        HF_HOME=str(tmp_path_factory.mktemp("pipeline-hf-home")),
    )
    env.pop("HF_HUB_OFFLINE")  # the published revision is fetched from the (local) Hub
    return env
