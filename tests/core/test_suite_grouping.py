"""`make test` runs pytest-xdist with ``--dist loadgroup`` and tests/conftest.py groups each module
(all of tests/cluster together), so module fixtures are built once and one private Slurm runs at a
time. With pytest 9.2 and pytest-xdist 3.8 the groups were dropped without a word (xdist tags a
group by rewriting ``item._nodeid``, which pytest 9.2 no longer reads): every test became its own
unit, modules were split over both workers and their fixtures built twice. This test fails when the
tag is missing again."""

from __future__ import annotations

import os

import pytest


def test_xdist_keeps_this_module_on_one_worker(request):
    if not os.environ.get("PYTEST_XDIST_WORKER") or not request.config.getoption("loadgroup", default=False):
        pytest.skip("checks `make test`'s run (pytest-xdist, --dist loadgroup)")
    assert request.node.nodeid.endswith("@tests/core/test_suite_grouping.py"), request.node.nodeid
