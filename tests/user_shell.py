"""Scripts and commands run the way a user runs them, each in a fresh process, and a local Hub for
them to talk to (the pipeline, verify and Hub evaluation tests).

The process environment is a user's shell: the checkout on PYTHONPATH, offline, CPU only, one
thread (the machine's 2 cores are shared). tests/conftest.py loads this module as a plugin for the
``hub`` and ``hub_env`` fixtures: one local Hub server a session, each test folder its own repo ids.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"


def script_env(**extra: str) -> dict[str, str]:
    """A user's shell (see the module docstring); ``extra`` variables on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_ENDPOINT", "HF_TOKEN"))}
    env.update(
        {
            "PYTHONPATH": str(REPO),
            "HF_HUB_OFFLINE": "1",
            "CUDA_VISIBLE_DEVICES": "",
            "TQDM_DISABLE": "1",
            "OMP_NUM_THREADS": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "HF_HUB_DISABLE_TELEMETRY": "1",
        }
    )
    env.update(extra)
    return env


def hub_client_env(url: str, token: str, hf_home: Path) -> dict[str, str]:
    """A user's shell whose Hub client talks to the server at ``url``: online, token set."""
    env = script_env(HF_ENDPOINT=url, HF_TOKEN=token, HF_HUB_DISABLE_XET="1", HF_HOME=str(hf_home))
    env.pop("HF_HUB_OFFLINE")
    return env


def run_script(name: str, *args, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python scripts/NAME ARGS``."""
    argv = [sys.executable, str(SCRIPTS / name), *map(str, args)]
    return subprocess.run(argv, env=env or script_env(), capture_output=True, text=True, timeout=timeout)


def check(done: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    """``done`` itself, once it exited 0; else the failure with the ends of its output."""
    assert done.returncode == 0, (
        f"{what} failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    )
    return done


def publish(directory: Path, repo_id: str, version: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``python scripts/publish.py DIRECTORY --repo-id REPO_ID --version VERSION``, which must succeed."""
    done = run_script("publish.py", directory, "--repo-id", repo_id, "--version", version, env=env)
    return check(done, f"publish {repo_id} {version}")


def plain_python_json(code: str, *args: str, env: dict[str, str], drop=(), timeout: int = 300):
    """``python -c CODE ARGS`` where conceptforge cannot be imported (no PYTHONPATH, run from /),
    without the variables in ``drop`` too; the JSON its last line prints."""
    env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", *drop)}
    argv = [sys.executable, "-c", code, *args]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def hub(tmp_path_factory):
    """The local Hub-compatible server (commits, tags, resolve, parquet downloads); ``hub.token``."""
    from conceptforge.testing.hub_server import HubServer

    token = "hf_" + secrets.token_hex(16)
    server = HubServer(tmp_path_factory.mktemp("local-hub"), token=token).start()
    server.token = token
    yield server
    server.stop()


@pytest.fixture(scope="session")
def hub_env(hub, tmp_path_factory) -> dict[str, str]:
    """A user's environment whose Hub client talks to the local server (online, token set)."""
    return hub_client_env(hub.url, hub.token, tmp_path_factory.mktemp("hf-home"))
