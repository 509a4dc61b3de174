"""CompMap fixtures: a tiny offline CLIP, a miniature CUB and a miniature MIT-States."""

from __future__ import annotations

import pytest

from conceptforge.testing.tiny_models import build_tiny_clip
from tests.compmap.synthetic import write_fake_cub, write_fake_mit_states


@pytest.fixture(autouse=True)
def _offline(hub_offline):
    """Tiny models load from local folders; offline mode makes a wrong path fail without a request."""


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory):
    return build_tiny_clip(tmp_path_factory.mktemp("compmap-models") / "tiny-clip")


@pytest.fixture(scope="session")
def fake_cub(tmp_path_factory):
    return write_fake_cub(tmp_path_factory.mktemp("compmap-cub") / "CUB_200_2011")


@pytest.fixture(scope="session")
def fake_mit(tmp_path_factory):
    return write_fake_mit_states(tmp_path_factory.mktemp("compmap-mit") / "mit-states")
