"""Fixtures for the publish tests: a local Hub-compatible server and a client environment."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from publish_helpers import REPO_ROOT  # noqa: E402

from conceptforge.testing.hub_server import HubServer  # noqa: E402


@pytest.fixture
def hub_token() -> str:
    return "hf_" + secrets.token_hex(16)


@pytest.fixture
def hub(tmp_path, hub_token):
    server = HubServer(tmp_path / "hub-storage", token=hub_token).start()
    yield server
    server.stop()


@pytest.fixture
def client_env(hub, hub_token, tmp_path):
    """Environment of a fresh process whose Hub client talks to the local server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(
        {
            "HF_ENDPOINT": hub.url,
            "HF_TOKEN": hub_token,
            "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HOME": str(tmp_path / "client-hf-home"),
            "PYTHONPATH": str(REPO_ROOT),
            "TQDM_DISABLE": "1",
        }
    )
    return env
