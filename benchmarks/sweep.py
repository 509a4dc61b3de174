"""Evaluation sweep: ``conceptforge evaluate --models`` vs a shell loop of ``conceptforge evaluate`` calls.

What a user pays for running many models × tasks as one engine stage (an item per pair, the
item store, one assembly) instead of the loop they would write themselves:

- **ours**: ``conceptforge evaluate --models models.txt --tasks ... --out DIR`` in one process
  (local executor): every (model, task) item, then the assembly of ``results/`` and the
  leaderboard (markdown, HTML, JSON);
- **baseline**: ``for m in models; do conceptforge evaluate --model $m --tasks ... --output
  results/$m.json; done`` then ``conceptforge leaderboard results/*.json --html ... --json ...``
  (the same outputs: a results file per model with samples, breakdowns and charts, and the
  leaderboard), from ``bash``.

Both start from an empty cache (a fresh ``--cache-dir`` per run): every item is really scored.
The overhead per item is (ours − baseline) / items, same rounds; negative means the sweep is
cheaper (one process loads the libraries once where the loop starts one per model). Tiny random
CLIPs on synthetic data (``conceptforge.testing``): the model work is small, so the figures are
mostly orchestration — the point of the comparison.

    python -m benchmarks sweep [--quick]

Full: 3 models × 3 tasks (binding-clip, sub-vlm, binding-cdsm), 3 interleaved repeats after a
warm-up of each side; quick: 2 models × binding-clip, 1 repeat after the warm-up.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._harness import Result, compare

BIN = str(Path(sys.executable).parent)
RESAMPLES = "200"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "PMI_"))}
    return env | {"PATH": f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def _inputs(root: Path, models: int, *, sub_vlm: bool, cdsm: bool) -> tuple[list[Path], list[str]]:
    from conceptforge.testing.synthetic import (
        sub_features,
        sub_rows,
        write_dataset,
        write_fake_cub,
        write_single_object,
    )
    from conceptforge.testing.tiny_models import build_tiny_clip

    clips = [build_tiny_clip(root / f"tiny-clip-{seed}", seed=seed, max_length=77) for seed in range(models)]
    cub = write_fake_cub(root / "cub")
    sub = write_dataset(root / "sub", {"test": sub_rows()}, sub_features())
    single = write_single_object(root / "single-object", n_per_label=2)
    flags = [f"--dataset=binding-clip={single}", "--device=cpu"]
    if sub_vlm:
        flags += [f"--dataset=sub-vlm={sub}", f"--cub-dir={cub}"]
    if cdsm:
        flags += [
            f"--dataset=binding-cdsm={single}",
            "--task-option=binding-cdsm.models=add",
            "--task-option=binding-cdsm.seeds=0",
            "--task-option=binding-cdsm.epochs=1",
        ]
    return clips, flags


def run(quick: bool) -> list[Result]:
    models, repeats = (2, 1) if quick else (3, 3)
    tasks = "binding-clip" if quick else "binding-clip,sub-vlm,binding-cdsm"
    items = models * len(tasks.split(","))
    work = Path(tempfile.mkdtemp(prefix="cf-bench-sweep-"))
    clips, flags = _inputs(work / "inputs", models, sub_vlm="sub-vlm" in tasks, cdsm="binding-cdsm" in tasks)
    models_file = work / "models.txt"
    models_file.write_text("".join(f"{clip}\n" for clip in clips))

    def sweep(round_: int) -> None:
        out = work / f"sweep-{round_}"
        command = [
            f"{BIN}/conceptforge", "evaluate", "--models", str(models_file), "--tasks", tasks, *flags,
            f"--cache-dir={work / f'cache-sweep-{round_}'}", "--out", str(out), "--bootstrap-resamples", RESAMPLES,
        ]  # fmt: skip
        result = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=3600)
        if result.returncode != 0:
            raise RuntimeError(result.stderr[-2000:])

    def loop(round_: int) -> None:
        out = work / f"loop-{round_}"
        common = " ".join(shlex.quote(f) for f in flags)
        cache = shlex.quote(str(work / f"cache-loop-{round_}"))
        results = " ".join(shlex.quote(str(out / "results" / f"{clip.name}.json")) for clip in clips)
        script = (
            f"set -e\nfor m in {' '.join(shlex.quote(str(c)) for c in clips)}; do\n"
            f'  conceptforge evaluate --model "$m" --tasks {tasks} {common} --cache-dir {cache} '
            f'--output {shlex.quote(str(out))}/results/"$(basename "$m")".json >/dev/null\n'
            "done\n"
            f"conceptforge leaderboard {results} --output {shlex.quote(str(out))}/leaderboard.md "
            f"--html {shlex.quote(str(out))}/leaderboard.html --json {shlex.quote(str(out))}/leaderboard.json "
            f"--bootstrap-resamples {RESAMPLES} >/dev/null\n"
        )
        result = subprocess.run(["bash", "-c", script], env=_env(), capture_output=True, text=True, timeout=3600)
        if result.returncode != 0:
            raise RuntimeError(result.stderr[-2000:])

    sweep(-1)  # warm-up: file caches, matplotlib font cache; also the rows compared below
    loop(-1)
    # the same per-sample rows (the results files differ only by created/seconds, the sweep's being empty)
    same_rows = all(
        _rows(work / "sweep--1" / "results" / f"{clip.name}.samples")
        == _rows(work / "loop--1" / "results" / f"{clip.name}.samples")
        for clip in clips
    )
    result = compare(
        f"evaluation sweep: {models} models x {len(tasks.split(','))} tasks, one `evaluate --models` vs a shell loop",
        ("evaluate --models (one process)", sweep),
        ("shell loop + leaderboard", loop),
        repeats,
        f"{items} (model, task) items, tiny CLIPs, CPU, fresh caches, leaderboard with {RESAMPLES} resamples",
        cpu=False,  # the work runs in child processes
    )
    per_item = [(a - b) / items for a, b in zip(result.ours, result.baseline)]
    result.extra["sweep overhead per item (ours - loop) / items, s"] = ", ".join(f"{v:+.2f}" for v in per_item)
    result.extra["same per-sample rows as the loop"] = str(same_rows)
    return [result]


def _rows(folder: Path) -> list[str]:
    """Each samples file's rows as JSON text (NaN written as NaN, so equal rows compare equal)."""
    import json

    import pyarrow.parquet as pq

    return [json.dumps(pq.read_table(path).to_pylist(), sort_keys=True) for path in sorted(folder.glob("*.parquet"))]
