"""CompMap fixtures: a miniature CUB and a miniature MIT-States (the tiny offline CLIP is the
session's ``tiny_clip_dir`` of tests/evaluation_fixtures.py, built once for every benchmark)."""

from __future__ import annotations

import pytest

from tests.compmap.synthetic import write_fake_cub, write_fake_mit_states


@pytest.fixture(autouse=True)
def _offline(hub_offline):
    """Tiny models load from local folders; offline mode makes a wrong path fail without a request."""


@pytest.fixture(scope="session")
def fake_cub(tmp_path_factory):
    return write_fake_cub(tmp_path_factory.mktemp("compmap-cub") / "CUB_200_2011")


@pytest.fixture(scope="session")
def fake_mit(tmp_path_factory):
    return write_fake_mit_states(tmp_path_factory.mktemp("compmap-mit") / "mit-states")
