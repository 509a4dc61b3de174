"""A real headless Chromium for the page tests (the annotation app, the leaderboard page), driven
by Playwright with Debian's chromium binary. tests/conftest.py loads this module as a plugin, so a
test asks for the ``browser`` fixture and marks its module with ``needs_chromium``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium (make system-deps installs it)"
)
# No GPU, no sandbox (containers), and nothing the browser would fetch on its own.
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
LAUNCH_ARGS += ["--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield launched
        launched.close()


def keep_screenshot(path: Path, variable: str) -> None:
    """Copy a screenshot also to the folder ``$variable`` names, when set (to look at it)."""
    target = os.environ.get(variable)
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)
