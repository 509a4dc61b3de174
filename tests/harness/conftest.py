"""The harness tests are evaluation tests: offline, one torch thread, the shared fixtures."""

import pytest

from tests.evaluation_fixtures import (  # noqa: F401 (fixtures)
    embedder,
    fake_cub,
    offline_single_thread,
    published_sub_dir,
    relational_dir,
    single_object_dir,
    sub_dir,
    tiny_blip_dir,
    tiny_clip_dir,
    tiny_llava_dir,
    tiny_open_clip_dir,
)


@pytest.fixture(autouse=True)
def _evaluation(request):
    """Every test here runs offline with one torch thread."""
    request.getfixturevalue("offline_single_thread")
