"""Shared by the assembly and publish benchmarks: run one side in a fresh worker process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # the worker runs as `python -m benchmarks._rows_worker` from here


def run_worker(mode: str, n: int, side: str, out: Path, env: dict[str, str], repo: str | None = None) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    command = [sys.executable, "-m", "benchmarks._rows_worker", mode, str(n), side, str(out)] + ([repo] if repo else [])
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"{side} {mode} worker failed:\n{result.stderr[-3000:]}")
    shutil.rmtree(out, ignore_errors=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def worker_env(work: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(
        {
            "HF_HOME": str(work / "hf-home"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "TQDM_DISABLE": "1",
            "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            **extra,
        }
    )
    return env
