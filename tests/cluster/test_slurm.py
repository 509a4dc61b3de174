"""The docs' Slurm scripts, submitted to a real single-node Slurm: arrays, srun, array x srun,
scancel + resubmission of exactly the missing tasks, requeue on preemption, a dependency chain.

Every run must give the bytes of one uninterrupted single process, assembled once.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conceptforge.testing.slurm import FINAL_STATES, HANG_GUARD
from tests.cluster.conftest import JOB_ENV, REPO, SMALL_JOB, adapt, doc_script

BINDING_SMALL = "--resolution 64x48 --samples 2 --chunk-size 2"
ENGINE_STAGE = REPO / "tests" / "engine" / "engine_stage.py"


def dataset_bytes(out: Path) -> dict[str, bytes]:
    """Every published file of a dataset folder (the store under .work is not the dataset)."""
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and ".work" not in p.relative_to(out).parts
    }


def assemblies(text: str) -> list[str]:
    """The 'assembled OUT (N files)' log lines (one per assembly actually done)."""
    return re.findall(r"conceptforge\.assembly: assembled (\S+) \(", text)


def run_local(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")} | JOB_ENV
    result = subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=600, cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def outputs(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("*.out")))


@pytest.fixture(scope="module")
def binding_reference(tmp_path_factory):
    """The binding demo at a tiny size, one process: (dataset bytes, assembly log lines)."""
    out = tmp_path_factory.mktemp("binding-ref") / "out"
    result = run_local(
        f"{JOB_ENV['PATH'].split(':')[0]}/conceptforge",
        "generate",
        "binding",
        "--dataset",
        "all",
        "--preset",
        "demo",
        "--out",
        str(out),
        *BINDING_SMALL.split(),
    )
    return dataset_bytes(out), assemblies(result.stderr)


def submit_and_wait(slurm, script_text: str, folder: Path, *options: str) -> tuple[str, dict[str, str]]:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "job.sh"
    script.write_text(script_text)
    job = slurm.sbatch(script, f"--output={folder}/%A_%a.out", *options, env=JOB_ENV, cwd=str(folder))
    states = slurm.wait(job)
    return job, states


# -- job arrays, srun, array x srun, from docs/cluster.md -----------------------------------------
def test_slurm_binding_docs_array_gives_one_dataset(slurm, tmp_path, binding_reference):
    out = tmp_path / "binding"
    script = adapt(
        doc_script("--job-name=binding\n"),
        {
            "--array=0-31": "--array=0-3",
            "--preset paper": "--preset demo",
            "s3://my-bucket/binding": str(out),
            "--num-shards 32": "--num-shards 4",
            "--num-workers 4": "--num-workers 1",
        },
        append=BINDING_SMALL,
    )
    job, states = submit_and_wait(slurm, script, tmp_path / "jobs", *SMALL_JOB)
    log = outputs(tmp_path / "jobs")
    assert sorted(states) == [f"{job}_{i}" for i in range(4)] and set(states.values()) == {"COMPLETED"}, log
    reference, reference_assemblies = binding_reference
    assert dataset_bytes(out) == reference
    # as many assemblies as one process does (each config, the card): none twice
    assert len(assemblies(log)) == len(reference_assemblies), log
    shards = sorted(p.name for p in (out / ".work" / "relational" / "shards").iterdir())
    assert shards == ["4-0.json", "4-1.json", "4-2.json", "4-3.json"]


@pytest.mark.heavy
def test_slurm_srun_inside_a_batch_job(slurm, tmp_path, binding_reference):
    out = tmp_path / "binding"
    script = adapt(
        doc_script("--job-name=binding-srun\n"),
        {
            "--nodes=4 --ntasks-per-node=4 --cpus-per-task=8 --mem-per-cpu=1G --time=04:00:00": (
                "--ntasks=2 --cpus-per-task=1 --mem-per-cpu=150M --time=10"
            ),
            "--preset paper": "--preset demo",
            "/shared/binding": str(out),
        },
        append=BINDING_SMALL,
    )
    job, states = submit_and_wait(slurm, script, tmp_path / "jobs")
    log = outputs(tmp_path / "jobs")
    assert set(states.values()) == {"COMPLETED"}, log
    assert dataset_bytes(out) == binding_reference[0]
    reports = [json.loads(p.read_text()) for p in sorted((out / ".work" / "two-object" / "shards").iterdir())]
    assert [(r["num_shards"], r["shard_index"], r["state"]) for r in reports] == [
        (2, 0, "finished"),
        (2, 1, "finished"),
    ]


@pytest.mark.heavy
def test_slurm_array_times_srun(slurm, tmp_path, binding_reference):
    out = tmp_path / "binding"
    script = adapt(
        doc_script("--job-name=binding-array-srun\n"),
        {
            "--array=0-7": "--array=0-1",
            "--ntasks=4 --cpus-per-task=8 --mem-per-cpu=1G --time=04:00:00": "--ntasks=2 --cpus-per-task=1 --mem-per-cpu=150M --time=10",
            "--preset paper": "--preset demo",
            "/shared/binding": str(out),
            "--num-shards 8": "--num-shards 2",
        },
        append=BINDING_SMALL,
    )
    job, states = submit_and_wait(slurm, script, tmp_path / "jobs")
    log = outputs(tmp_path / "jobs")
    assert sorted(states) == [f"{job}_0", f"{job}_1"] and set(states.values()) == {"COMPLETED"}, log
    assert dataset_bytes(out) == binding_reference[0]
    # 2 array tasks x 2 srun tasks = 4 disjoint shards; array task 1 ran shards 2 and 3
    reports = {p.name: json.loads(p.read_text()) for p in (out / ".work" / "relational" / "shards").iterdir()}
    assert sorted(reports) == ["4-0.json", "4-1.json", "4-2.json", "4-3.json"]
    assert {name: r["slurm"]["array_task"] for name, r in reports.items()} == {
        "4-0.json": 0,
        "4-1.json": 0,
        "4-2.json": 1,
        "4-3.json": 1,
    }
    assert all(r["slurm"]["world"] == 2 for r in reports.values())


# -- scancel, status, resubmission of exactly the missing tasks ---------------------------------
@pytest.fixture(scope="module")
def engine_reference(tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("engine-ref") / "out"
    run_local(sys.executable, str(ENGINE_STAGE), str(out), "--count", "40", "--chunk-size", "4")
    return dataset_bytes(out)


def engine_script(out: Path, log: Path, num_shards: int) -> str:
    """A batch script like the docs' (exec, --num-shards); DELAY slows each item (seconds)."""
    return (
        f"#!/bin/bash\nexec python {ENGINE_STAGE} {out} --count 40 --chunk-size 4 --log {log} "
        f"--delay ${{DELAY:-0}} --num-shards {num_shards}\n"
    )


def wait_for_chunks(out: Path, chunks: list[int], slurm=None, job: str | None = None) -> None:
    """Wait until ``chunks`` are written; with ``job``, fail as soon as it finished without them."""
    deadline = time.monotonic() + HANG_GUARD  # a hung daemon only: the wait is for the condition
    while not all(list((out / ".work" / "chunks").glob(f"c{c:06d}.*.done")) for c in chunks):
        if job is not None:
            states = slurm.states(job)
            assert not (states and all(s in FINAL_STATES for s in states.values())), f"{job} ended first: {states}"
        assert time.monotonic() < deadline, f"chunks {chunks} not written"
        time.sleep(0.1)


def status(out: Path, slurm=None) -> str:
    """`conceptforge status OUT`, in a shell that knows the cluster (SLURM_CONF) when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")} | JOB_ENV | (slurm.env if slurm else {})
    result = subprocess.run(
        [f"{JOB_ENV['PATH'].split(':')[0]}/conceptforge", "status", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_slurm_scancel_then_status_resubmits_exactly_the_missing_tasks(slurm, tmp_path, engine_reference):
    out, log, jobs = tmp_path / "out", tmp_path / "made.log", tmp_path / "jobs"
    jobs.mkdir()
    script = jobs / "job.sh"
    script.write_text(engine_script(out, log, 4))
    # 10 chunks of 4 items; task t owns chunks t, t+4, t+8. Tasks 1 and 3 are stopped mid-run:
    # task 1 by scancel (SIGTERM, it records its stop), task 3 by SIGKILL (it cannot record anything)
    job = slurm.sbatch(script, "--array=0-3", f"--output={jobs}/%A_%a.out", *SMALL_JOB, env={**JOB_ENV, "DELAY": "0.4"})
    wait_for_chunks(out, [1, 3], slurm, job)
    slurm.run("scancel", f"{job}_1")
    # what the OOM killer does: SIGKILL to the process (its pid is in its shard report)
    os.kill(json.loads((out / ".work" / "shards" / "4-3.json").read_text())["pid"], signal.SIGKILL)
    states = slurm.wait(job)
    assert states[f"{job}_0"] == "COMPLETED" and states[f"{job}_2"] == "COMPLETED", states
    assert states[f"{job}_1"] == "CANCELLED" and states[f"{job}_3"] == "FAILED", states
    cancelled = (jobs / f"{job}_1.out").read_text()
    assert "interrupted by SIGTERM" in cancelled and f"sbatch --array=1 {script}" in cancelled, cancelled
    assert "rerun the same command" not in cancelled
    text = status(out, slurm)
    lines = {line.split(":")[0].strip(): line for line in text.splitlines() if line.strip().startswith("shard ")}
    assert "last state: interrupted by SIGTERM" in lines["shard 1 of 4"], text
    assert f"last state: stopped (Slurm job {job}_3 is no longer queued or running)" in lines["shard 3 of 4"], text
    # a shell that cannot reach the scheduler still tells a dead process on this host
    assert "last state: stopped (process " in next(line for line in status(out).splitlines() if "shard 3 of 4" in line)
    assert "chunks done, 0 items left, last state: finished" in lines["shard 0 of 4"], text
    assert "missing array tasks: --array=1,3 (of 4 shards)" in text, text
    command = next(line for line in text.splitlines() if line.startswith("resubmit them: "))[len("resubmit them: ") :]
    assert command == f"sbatch --array=1,3 {script}"
    # the printed command, as a user would paste it (plus where its log goes)
    argv = command.split()
    again = slurm.sbatch(argv[-1], *argv[1:-1], f"--output={jobs}/%A_%a.out", *SMALL_JOB, env=JOB_ENV)
    states = slurm.wait(again)
    assert sorted(states) == [f"{again}_1", f"{again}_3"] and set(states.values()) == {"COMPLETED"}, outputs(jobs)
    assert dataset_bytes(out) == engine_reference
    made = collections.Counter(log.read_text().split())
    assert len(made) == 40 and max(made.values()) <= 2  # only items of the cut-short chunks were made twice
    assert len(re.findall(r"; assembled \S+ \(", outputs(jobs))) == 1  # the engine stage's own report line
    assert "assembled: yes" in status(out)


def requeue(slurm, task: str, *, bound: float = 600.0) -> None:
    """``scontrol requeue TASK``, then wait until the scheduler shows the task requeued.

    Under load the controller can still be finishing the task (its epilog) when the test asks:
    the request is refused as a transition, or the final state is read once more before the
    requeue took effect (seen twice). Both are waited out, polling for the condition; ``bound``
    (generous: minutes) only stops a controller that never gets there.
    """
    deadline = time.monotonic() + bound
    while True:
        answer = slurm.run("scontrol", "requeue", task, check=False)
        if answer.returncode == 0:
            break
        assert time.monotonic() < deadline, f"scontrol requeue {task}: {answer.stderr.strip()}"
        time.sleep(0.5)
    while True:
        state = slurm.states(task).get(task)
        if state is not None and state not in FINAL_STATES:  # REQUEUED, COMPLETING or PENDING
            return
        assert time.monotonic() < deadline, f"{task} still {state} after scontrol requeue"
        time.sleep(0.2)


def test_slurm_requeue_on_preemption_resumes(slurm, tmp_path, engine_reference):
    out, log, jobs = tmp_path / "out", tmp_path / "made.log", tmp_path / "jobs"
    preemptible = doc_script("--job-name=binding-preemptible\n")
    options = (
        re.search(r"#SBATCH (--array=\S+ --requeue --signal=\S+ --open-mode=append)", preemptible).group(1).split()
    )
    options = [o for o in options if not o.startswith("--array")] + ["--array=0"]
    jobs.mkdir()
    script = jobs / "job.sh"
    script.write_text(engine_script(out, log, 1))
    job = slurm.sbatch(script, *options, f"--output={jobs}/%A_%a.out", *SMALL_JOB, env={**JOB_ENV, "DELAY": "0.1"})
    wait_for_chunks(out, [1], slurm, job)
    # what --signal=B:TERM@120 sends before the time limit: SIGTERM to the batch shell only, which
    # `exec` made conceptforge; it stops (exit 143), then the scheduler requeues the task
    slurm.run("scancel", "--batch", "--signal=TERM", f"{job}_0")
    stopped = slurm.wait(job)
    assert stopped[f"{job}_0"] == "FAILED", stopped  # exit 143, not killed
    assert "interrupted by SIGTERM" in outputs(jobs)
    requeue(slurm, f"{job}_0")
    # Slurm holds a requeued batch job back ~2 minutes (its begin time); a test need not wait
    slurm.wait_for(job, ["PENDING"])
    slurm.run("scontrol", "update", f"JobId={job}_0", "StartTime=now")
    # the condition, not a time: the requeued task finished (a loaded machine only makes it later)
    states = slurm.wait(job)
    text = outputs(jobs)
    assert states[f"{job}_0"] == "COMPLETED" and "already done" in text, f"{states}\n{text}\n{slurm.log_tail(60)}"
    assert "interrupted by SIGTERM" in text, text
    done_before = int(re.search(r"already done (\d+)", text.split("interrupted by SIGTERM")[1]).group(1))
    assert 8 <= done_before < 40, text
    assert dataset_bytes(out) == engine_reference
    made = collections.Counter(log.read_text().split())
    assert len(made) == 40 and sum(made.values()) < 40 + 8, made  # resumed, not started over


@pytest.mark.heavy
def test_slurm_a_requeued_held_task_is_queued_not_resubmitted(slurm, tmp_path, engine_reference):
    """Issue 32: a task Slurm requeued (held, pending) was listed under "resubmit them": pasting the
    line ran it twice. It is listed as still queued, with the release command when held."""
    out, log, jobs = tmp_path / "out", tmp_path / "made.log", tmp_path / "jobs"
    jobs.mkdir()
    script = jobs / "job.sh"
    script.write_text(engine_script(out, log, 2))
    job = slurm.sbatch(
        script, "--array=0-1", "--requeue", f"--output={jobs}/%A_%a.out", *SMALL_JOB, env={**JOB_ENV, "DELAY": "0.3"}
    )
    wait_for_chunks(out, [1], slurm, job)  # task 1 has work done and more to do
    slurm.run("scontrol", "requeuehold", f"{job}_1")
    slurm.wait_for(job, ["PENDING"])
    slurm.wait_for(job, ["COMPLETED"])  # task 0 finishes its half
    text = status(out, slurm)
    assert "missing array tasks: --array=1 (of 2 shards)" in text, text
    queued = next(line for line in text.splitlines() if line.startswith("still queued in Slurm: "))
    assert queued.startswith("still queued in Slurm: --array=1 (1: pending); Slurm runs them, do not resubmit")
    assert queued.endswith(f"held ones start after `scontrol release {job}_1`"), queued
    assert "resubmit them" not in text, text
    slurm.run("scontrol", "release", f"{job}_1")
    slurm.run("scontrol", "update", f"JobId={job}_1", "StartTime=now")
    states = slurm.wait(job)
    assert set(states.values()) == {"COMPLETED"}, f"{states}\n{outputs(jobs)}"
    assert dataset_bytes(out) == engine_reference


# -- tiny-model SUB: the docs' array, then generate -> filter -> assemble with afterok ---------------
SUB_TINY = "--images-per-pair 2 --resolution 32 --steps 2 --max-sequence-length 16 --device cpu --license cc-by-nc-4.0 --chunk-size 2"


@pytest.mark.heavy
def test_slurm_sub_docs_array_and_dependency_chain(slurm, tmp_path, random_flux_seed0):
    import shutil

    from conceptforge.testing.tiny_vlms import build_tiny_llava
    from tests.sub.conftest import write_mini_cub

    model = shutil.copytree(random_flux_seed0, tmp_path / "flux", dirs_exist_ok=True)
    vlm = build_tiny_llava(tmp_path / "llava")
    cub = write_mini_cub(tmp_path / "cub")
    spec = json.dumps(
        {"birds": ["Blue_Jay", "Cardinal"], "attributes": ["has_crown_color::black", "has_tail_pattern::solid"]}
    )
    env = {**JOB_ENV, "CUB_DIR": str(cub)}
    generate = adapt(
        doc_script("--job-name=sub-candidates\n"),
        {
            # two tasks prove the array and the afterok on all of them: each more was a process
            # loading FLUX on the same 2 cores
            "--array=0-63": "--array=0-1",
            "/shared/sub-candidates": "sub-candidates",
            "--num-shards 64": "--num-shards 2",
        },
        append=f"--model {model} {SUB_TINY}",
    )
    filter_ = adapt(
        doc_script("--job-name=sub-filter\n"),
        {
            "--array=0-15": "--array=0-1",
            "/shared/sub-candidates": "sub-candidates",
            "--out /shared/sub ": "--out sub ",
            "--vqa-model OpenGVLab/InternVL2_5-8B --trust-remote-code": f"--vqa-model {vlm}",
            "--num-shards 16": "--num-shards 2",
        },
        append="--device cpu --keep-fraction 0.5 --chunk-size 2",
    )
    chain = adapt(
        doc_script("--dependency=afterok:$gen"), {"conceptforge assemble /shared/sub": "conceptforge assemble sub"}
    )
    jobs, single = tmp_path / "jobs", tmp_path / "single"
    for folder in (jobs, single):  # the same relative paths: cards record the command line
        folder.mkdir()
        (folder / "spec.json").write_text(spec)
    (jobs / "sub-candidates.sh").write_text(generate)
    (jobs / "sub-filter.sh").write_text(filter_)
    submitted = subprocess.run(
        ["bash", "-c", chain + 'echo "jobs $gen $filter"\n'],
        cwd=jobs,
        env=slurm.client_env(env),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert submitted.returncode == 0, submitted.stderr
    assemble_job = submitted.stdout.split()[0]
    gen, filt = submitted.stdout.split("jobs ")[1].split()
    # the filter and the assembly wait for every generation task (afterok on the array)
    assert set(slurm.states(filt).values()) <= {"PENDING", "RUNNING", "COMPLETED"}
    for job in (gen, filt, assemble_job):
        states = slurm.wait(job)
        assert set(states.values()) == {"COMPLETED"}, (job, states, outputs_of(jobs)[-6000:], slurm.log_tail())
    log = outputs_of(jobs)
    # one process, same relative paths, for the bytes to compare with
    script = f"{JOB_ENV['PATH'].split(':')[0]}/conceptforge"
    run_local(
        script,
        "generate",
        "sub",
        "--cub-dir",
        str(cub),
        "--candidate-spec",
        "spec.json",
        "--out",
        "sub-candidates",
        "--model",
        str(model),
        *SUB_TINY.split(),
        cwd=single,
    )
    assert dataset_bytes(jobs / "sub-candidates") == dataset_bytes(single / "sub-candidates")
    run_local(
        script,
        "filter",
        "sub",
        "--candidates",
        "sub-candidates",
        "--cub-dir",
        str(cub),
        "--out",
        "sub",
        "--vqa-model",
        str(vlm),
        "--device",
        "cpu",
        "--keep-fraction",
        "0.5",
        "--chunk-size",
        "2",
        cwd=single,
    )
    # the filtered rows are the same; the filter's card records the assembling process's command line
    data = lambda out: {k: v for k, v in dataset_bytes(out).items() if k.startswith("data/")}  # noqa: E731
    assert data(jobs / "sub") and data(jobs / "sub") == data(single / "sub")
    assert len(re.findall(r"^wrote 8 images", log, flags=re.M)) == 1, log  # the candidates assembled once
    assert "was already assembled" in (jobs / f"slurm-{assemble_job}.out").read_text()


def outputs_of(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("slurm-*.out")))


def test_slurm_subset_without_num_shards_is_one_error_line(slurm, tmp_path):
    """`sbatch --array=1` of a script without --num-shards cannot know the shard count: one line, exit 2."""
    out, jobs = tmp_path / "out", tmp_path / "jobs"
    jobs.mkdir()
    script = jobs / "job.sh"
    script.write_text(f"#!/bin/bash\nexec python {ENGINE_STAGE} {out} --count 8 --chunk-size 4\n")
    job = slurm.sbatch(script, "--array=1", f"--output={jobs}/%A_%a.out", *SMALL_JOB, env=JOB_ENV)
    assert slurm.wait(job) == {f"{job}_1": "FAILED"}
    text = (jobs / f"{job}_1.out").read_text()
    assert text.splitlines() == [
        "error: Slurm array task 1 (ids 1-1, 1 tasks) is not part of a whole array --array=0-(N-1): "
        "pass --num-shards N (task ids are shard indices)"
    ], text
    assert not out.exists()  # nothing written
