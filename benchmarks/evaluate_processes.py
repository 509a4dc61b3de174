"""One task over 2 processes (``accelerate launch``) vs 1 process, timed from the shell.

What a user runs: ``conceptforge evaluate --model M --tasks binding-clip:DATA`` in a fresh process
(the baseline), and the same under ``accelerate launch --multi_gpu --num_processes 2`` (ours: two
ranks over gloo, each scoring half the chunks, rank 0 writing). Cold starts both: the launcher,
the second interpreter and the process group are part of what a user pays. The model is the tiny
LLaVA scoring by VQAScore (one forward per image and candidate) on the synthetic single-object
binding data; ``--batch-size 4``. Also printed: whether every run's files are byte-identical to
the first one-process run's (``SOURCE_DATE_EPOCH`` set).

    python -m benchmarks evaluate_processes [--quick]

Full: the single-object data at n_per_label=4, 3 repeats; quick: n_per_label=2 (48 images), 2 repeats.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._harness import Result, interleave


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _digest(work: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(work.rglob("*")):
        if path.is_file() and "cache" not in path.relative_to(work).parts:
            digest.update(str(path.relative_to(work)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def run(quick: bool) -> list[Result]:
    from conceptforge.testing.synthetic import write_single_object
    from conceptforge.testing.tiny_vlms import build_tiny_llava

    root = Path(tempfile.mkdtemp(prefix="bench-evaluate-processes-"))
    model = build_tiny_llava(root / "tiny-llava", words=("Yes", "No"))
    data = write_single_object(root / "single-object", n_per_label=2 if quick else 4)
    import datasets

    images = sum(len(split) for split in datasets.load_dataset(str(data)).values())
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "SOURCE_DATE_EPOCH": "1700000000",
        "CUDA_VISIBLE_DEVICES": "",
        "CONCEPTFORGE_DISABLE_PROGRESS_BARS": "1",
    }
    argv = ["evaluate", "--model", str(model), "--tasks", f"binding-clip:{data}", "--device", "cpu"]
    argv += ["--batch-size", "4", "--cache-dir", "cache", "--output", "run.json"]
    digests: dict[int, set[str]] = {1: set(), 2: set()}

    def side(processes: int):
        def call(round_: int) -> None:
            work = root / f"p{processes}-r{round_}"
            work.mkdir()
            launcher = [sys.executable, "-m", "conceptforge"]
            if processes > 1:
                launcher = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes"]
                launcher += [str(processes), "--num_machines", "1", "--mixed_precision", "no"]
                launcher += ["--dynamo_backend", "no", "--main_process_port", str(_port()), "-m", "conceptforge"]
            subprocess.run([*launcher, *argv], cwd=work, env=env, check=True, capture_output=True)
            digests[processes].add(_digest(work))
            shutil.rmtree(work)

        return call

    repeats = 2 if quick else 3
    try:
        ours, baseline = interleave(side(2), side(1), repeats)
    except subprocess.CalledProcessError as error:
        raise RuntimeError(f"conceptforge evaluate failed: {error.stderr.decode(errors='replace')[-2000:]}") from None
    finally:
        shutil.rmtree(root, ignore_errors=True)
    same = len(digests[1] | digests[2]) == 1
    return [
        Result(
            name="evaluate: one task over 2 processes (issue 42)",
            ours_label="ours: accelerate launch --multi_gpu --num_processes 2 (gloo)",
            ours=ours,
            baseline_label="one process",
            baseline=baseline,
            work=(
                f"binding-clip by VQAScore, tiny LLaVA, {images} images x 5 candidates, "
                f"cold start, on {os.cpu_count()} CPUs"
            ),
            extra={"files byte-identical across every run, both sides": "yes" if same else "NO"},
        )
    ]
