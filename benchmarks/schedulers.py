"""Scale-out on real schedulers: a 2-task Slurm array and Ray with 2 workers, each vs one process.

What a user pays for scaling out on one 2-core machine, timed end to end from the shell:

- **Slurm array** (ours): ``sbatch --array=0-1`` of ``exec conceptforge generate binding ...
  --num-shards 2`` on a private single-node Slurm (:mod:`conceptforge.testing.slurm`), from
  submission until both tasks have finished (the last one assembles); baseline: the same
  command as one process (what a user runs without a scheduler);
- **Ray** (ours): the same command with ``--executor ray`` (a local Ray cluster started by
  ``ray.init()`` in the command, 2 CPUs: two workers); baseline: one process;
- **scheduling overhead per chunk**: a stage of one-item chunks that do no work
  (``benchmarks/_empty_stage.py``), so all that is timed is the scheduler. Slurm: 8 array tasks
  (quick: 4), one chunk each, vs the same processes started here 2 at a time (the difference /
  tasks is Slurm's cost per task); Ray: 200 (quick: 100) chunks through
  :class:`conceptforge.engine.ray_executor.RayExecutor` on a warm local cluster vs the engine's own
  loop in this process (the difference / chunks is Ray's cost per chunk).

Both sides of the binding comparisons make the same dataset (checked: identical bytes). Needs root with Debian's
``slurm-wlm`` and ``munge`` for the Slurm parts, ``ray`` for the Ray parts; otherwise skipped.

    python -m benchmarks schedulers [--quick]

Full: binding demo, all three configs at 160x120 (24 images); quick: single-object at 96x72
(8 images). 3 interleaved repeats (2 quick).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._harness import Result, Skip, compare

REPO = Path(__file__).resolve().parents[1]
BIN = str(Path(sys.executable).parent)


def _binding_args(quick: bool) -> list[str]:
    size = (
        ["--dataset", "single-object", "--resolution", "96x72"]
        if quick
        else ["--dataset", "all", "--resolution", "160x120"]
    )
    return ["generate", "binding", "--preset", "demo", "--samples", "4", "--chunk-size", "2", *size]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "PMI_"))}
    return env | {"PATH": f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}"}


def _digest(out: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(out.rglob("*")):
        if path.is_file() and ".work" not in path.relative_to(out).parts:
            digest.update(str(path.relative_to(out)).encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _one_process(args: list[str], out: Path, *extra: str) -> None:
    result = subprocess.run(
        [f"{BIN}/conceptforge", *args, "--out", str(out), *extra],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-2000:])


def _versus_one_process(name: str, ours, single, repeats: int, args: list[str], same: bool, note: str) -> Result:
    """The binding demo under a scheduler vs the same command in one process. The work runs in
    other processes, so no CPU figures (this process's CPU seconds are not the work's)."""
    extra = {"same dataset bytes": str(same), "note": note}
    work = " ".join(args[2:])
    return compare(
        f"binding demo: {name} vs one process", ours, ("one process", single), repeats, work, extra, cpu=False
    )


def _slurm_results(quick: bool, repeats: int, workdir: Path) -> list[Result]:
    from conceptforge.testing.slurm import start_cluster, unavailable_reason

    reason = unavailable_reason()
    if reason:
        return []
    args = _binding_args(quick)
    cluster = start_cluster(cpus=2)
    try:

        def array(round_: int, tag: str = "array") -> Path:
            out = workdir / f"{tag}-{round_}"
            script = workdir / "binding.sh"
            script.write_text(f'#!/bin/bash\nexec conceptforge {" ".join(args)} --out "$OUT" --num-shards 2\n')
            job = cluster.sbatch(
                script,
                "--array=0-1",
                "--cpus-per-task=1",
                f"--output={workdir}/%A_%a.out",
                env={**_env(), "OUT": str(out)},
            )
            states = cluster.wait(job, timeout=3600, poll=0.1)
            if set(states.values()) != {"COMPLETED"}:
                raise RuntimeError(f"Slurm array {job}: {states}")
            return out

        def single(round_: int) -> None:
            _one_process(args, workdir / f"single-{round_}")

        warm_array, warm_single = array(-1, "warm"), workdir / "single-warm"
        _one_process(args, warm_single)
        same = _digest(warm_array) == _digest(warm_single)
        note = "submission to last task finished; tasks share the 2 cores"
        binding = _versus_one_process(
            "2-task Slurm array", ("sbatch --array=0-1", array), single, repeats, args, same, note
        )

        # scheduling overhead: 8 tasks of a stage that does no work
        tasks = 4 if quick else 8
        stage = [sys.executable, "-m", "benchmarks._empty_stage"]  # run from the repository root

        def trivial_array(round_: int) -> None:
            script = workdir / "trivial.sh"
            script.write_text(f'#!/bin/bash\nexec {" ".join(stage)} "$OUT" {tasks} --num-shards {tasks}\n')
            job = cluster.sbatch(
                script,
                f"--array=0-{tasks - 1}",
                "--cpus-per-task=1",
                "--output=/dev/null",
                env={**_env(), "OUT": str(workdir / f"trivial-array-{round_}")},
                cwd=str(REPO),
            )
            cluster.wait(job, timeout=600, poll=0.1)

        def trivial_local(round_: int) -> None:
            out = workdir / f"trivial-local-{round_}"
            pending = list(range(tasks))
            running: list[subprocess.Popen] = []
            while pending or running:
                while pending and len(running) < 2:
                    index = pending.pop(0)
                    running.append(
                        subprocess.Popen(
                            [*stage, str(out), str(tasks), "--num-shards", str(tasks), "--shard-index", str(index)],
                            env=_env(),
                            cwd=REPO,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                    )
                running[0].wait()
                running.pop(0)

        trivial_array(-1)
        trivial_local(-1)
        overhead = compare(
            f"Slurm scheduling overhead: {tasks} one-chunk array tasks vs the same processes started here, 2 at a time",
            (f"sbatch --array=0-{tasks - 1}", trivial_array),
            ("local processes", trivial_local),
            repeats,
            f"{tasks} tasks x 1 chunk of 1 empty item",
            cpu=False,
        )
        per_task = [(a - b) / tasks for a, b in zip(overhead.ours, overhead.baseline)]
        overhead.extra["overhead per task (= per chunk here), s"] = ", ".join(f"{v:.3f}" for v in per_task)
        return [binding, overhead]
    finally:
        cluster.stop()


def _ray_results(quick: bool, repeats: int, workdir: Path) -> list[Result]:
    try:
        import ray
    except ImportError:
        return []
    args = _binding_args(quick)

    def on_ray(round_: int) -> None:
        _one_process(args, workdir / f"ray-{round_}", "--executor", "ray")

    def single(round_: int) -> None:
        _one_process(args, workdir / f"ray-single-{round_}")

    on_ray(-1)
    single(-1)
    same = _digest(workdir / "ray--1") == _digest(workdir / "ray-single--1")
    note = "each run starts its own local Ray cluster (ray.init in the command)"
    name = "--executor ray (local cluster, 2 workers)"
    binding = _versus_one_process(name, ("--executor ray", on_ray), single, repeats, args, same, note)

    from benchmarks import _empty_stage
    from conceptforge.engine.ray_executor import RayExecutor
    from conceptforge.engine.runner import run_stage

    ray.cloudpickle.register_pickle_by_value(_empty_stage)  # Ray workers need not import benchmarks/
    _empty = _empty_stage.empty_stage
    chunks = 100 if quick else 200
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:

        def ray_chunks(round_: int) -> None:
            run_stage(_empty(chunks), workdir / f"ray-chunks-{round_}", executor=RayExecutor())

        def local_chunks(round_: int) -> None:
            run_stage(_empty(chunks), workdir / f"local-chunks-{round_}")

        ray_chunks(-1)
        local_chunks(-1)
        overhead = compare(
            f"Ray scheduling overhead: {chunks} one-item chunks as Ray tasks vs the engine's loop here",
            ("RayExecutor", ray_chunks),
            ("local loop", local_chunks),
            repeats,
            f"{chunks} chunks of 1 empty item (warm cluster, 2 CPUs)",
            cpu=False,
        )
    finally:
        ray.shutdown()
    per_chunk = [(a - b) / chunks * 1000 for a, b in zip(overhead.ours, overhead.baseline)]
    overhead.extra["overhead per chunk, ms"] = ", ".join(f"{v:.2f}" for v in per_chunk)
    return [binding, overhead]


def run(quick: bool) -> list[Result]:
    try:
        import bpy  # noqa: F401
    except ImportError as error:
        raise Skip(f"bpy is not installed ({error}); pip install -e '.[blender]'") from None
    from conceptforge.testing.slurm import unavailable_reason

    try:
        import ray  # noqa: F401

        ray_missing = None
    except ImportError:
        ray_missing = "ray is not installed"
    slurm_missing = unavailable_reason()
    if slurm_missing and ray_missing:
        raise Skip(f"{slurm_missing}; {ray_missing}")
    repeats = 2 if quick else 3
    workdir = Path(tempfile.mkdtemp(prefix="bench-schedulers-"))
    workdir.chmod(0o755)
    try:
        started = time.perf_counter()
        results = _slurm_results(quick, repeats, workdir) + _ray_results(quick, repeats, workdir)
        if results:
            results[-1].extra["benchmark wall s"] = f"{time.perf_counter() - started:.0f}"
        return results
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
