"""Fixtures for the end-to-end pipeline tests: every tiny model the stages need, one CUB folder
that all stages read. The local Hub server (``hub``, ``hub_env``) is tests/user_shell.py's."""

from __future__ import annotations

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
def pipeline_flux(tmp_path_factory, random_flux_seed0):
    """The tiny random FLUX (a copy of the session's one build: tests/conftest.py)."""
    import shutil

    return shutil.copytree(random_flux_seed0, tmp_path_factory.mktemp("pipeline-flux"), dirs_exist_ok=True)


@pytest.fixture(scope="session")
def pipeline_vlm(tmp_path_factory):
    from conceptforge.testing.tiny_vlms import build_tiny_llava

    return build_tiny_llava(tmp_path_factory.mktemp("pipeline-vlm"))


@pytest.fixture(scope="session")
def pipeline_clip(tmp_path_factory):
    from conceptforge.testing.tiny_models import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("pipeline-clip") / "tiny-clip")  # 77: SUB prompts stay distinct
