"""The harness tests are evaluation tests: offline, one torch thread, the shared fixtures."""

import pytest


@pytest.fixture(autouse=True)
def _evaluation(request):
    """Every test here runs offline with one torch thread."""
    request.getfixturevalue("offline_single_thread")
