"""Evaluation sweeps (``conceptforge evaluate --models``) on the real schedulers: 3 tiny CLIPs × 3
tasks as a Slurm array from docs/cluster.md's script (one task cancelled with ``scancel``, one
killed with SIGKILL, then what ``conceptforge status`` prints resubmitted) and on Ray; each
publishes the bytes of one uninterrupted local sweep (docs/evaluation-scale.md's command), assembled once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conceptforge.testing.slurm import HANG_GUARD
from tests.cluster.conftest import BIN, JOB_ENV, REPO, adapt, bash_blocks, doc_script, published

#: The 3 × 3 sweeps run 9 evaluations and a leaderboard each: minutes on 2 shared cores.
heavy = pytest.mark.heavy

TASKS = "--tasks binding-clip,sub-vlm,binding-cdsm"
DOC_TASKS = "--tasks sub-vlm,binding-clip,binding-cdsm"


@pytest.fixture(scope="module")
def sweep_inputs(tmp_path_factory, tiny_clip_dir, single_object_dir, sub_dir, fake_cub):
    """The models file (3 tiny CLIPs, one with its own batch size, one with its own name) and the
    flags every run of the sweep adds to the docs' command."""
    from conceptforge.testing.tiny_models import build_tiny_clip

    root = tmp_path_factory.mktemp("sweep-models")
    others = [build_tiny_clip(root / f"tiny-clip-{seed}", seed=seed, max_length=77) for seed in (1, 2)]
    models = root / "models.txt"
    models.write_text(f"# three tiny CLIPs\n{tiny_clip_dir}\n{others[0]} batch_size=16\n{others[1]} name=third\n")
    extra = (
        f"--dataset binding-clip={single_object_dir} --dataset binding-cdsm={single_object_dir} "
        f"--dataset sub-vlm={sub_dir} --task-option binding-cdsm.models=add --task-option binding-cdsm.seeds=0 "
        "--task-option binding-cdsm.epochs=1 --device cpu --bootstrap-resamples 50"
    )
    return models, str(fake_cub), extra


def _sweep_doc_command(models: Path, cub: str, out: Path, extra: str, cache: Path) -> str:
    blocks = [b for b in bash_blocks((REPO / "docs" / "evaluation-scale.md").read_text()) if "--models models.txt" in b]
    assert len(blocks) == 1, "docs/evaluation-scale.md has no single sweep block"
    text = blocks[0]
    for old, new in {
        "models.txt": str(models),
        '"$CUB_DIR"': cub,
        "--out sweep": f"--out {out}",
        DOC_TASKS: TASKS,
    }.items():
        assert old in text, f"{old!r} is no longer in docs/evaluation-scale.md's sweep:\n{blocks[0]}"
        text = text.replace(old, new)
    return text.rstrip("\n") + f" {extra} --cache-dir {cache}\n"


def _run(script: str, *, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RAY_"))} | JOB_ENV | (extra_env or {})
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=HANG_GUARD)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, sweep_inputs) -> dict[str, bytes]:
    """One uninterrupted local sweep, run from docs/evaluation-scale.md's command."""
    models, cub, extra = sweep_inputs
    root = tmp_path_factory.mktemp("sweep-ref")
    result = _run(_sweep_doc_command(models, cub, root / "sweep", extra, root / "cache"))
    assert result.returncode == 0, result.stderr[-3000:]
    files = published(root / "sweep")
    names = sorted(files)
    assert [n for n in names if not n.startswith("results/")] == [
        "leaderboard.html",
        "leaderboard.json",
        "leaderboard.md",
    ]
    assert {n for n in names if n.endswith(".json") and n.count("/") == 1} == {
        "results/tiny-clip.json",
        "results/tiny-clip-1.json",
        "results/third.json",
        "results/tiny-clip.breakdowns.json",
        "results/tiny-clip-1.breakdowns.json",
        "results/third.breakdowns.json",
    }
    payload = json.loads(files["results/tiny-clip-1.json"])
    assert [t["task"] for t in payload["tasks"]] == ["binding-clip", "sub-vlm", "binding-cdsm"]
    assert payload["settings"]["batch_size"] == 16 and payload["created"] == ""
    board = json.loads(files["leaderboard.json"])
    assert len(files["leaderboard.md"].decode().splitlines()[2:5]) == 3  # a row per model
    assert board  # the numbers of the HTML page
    return files


def _status(out: Path, slurm) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")} | JOB_ENV | slurm.env
    result = subprocess.run(
        [f"{BIN}/conceptforge", "status", str(out)], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _outputs(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("*.out")))


def _sweep_job_script(jobs: Path, replacements: dict[str, str], *, append: str) -> Path:
    """docs/cluster.md's sweep array script, made to run here (``replacements``, ``append``), written
    as ``jobs/sweep.sh`` in a new ``jobs`` folder (the jobs' logs go there too)."""
    jobs.mkdir()
    script = jobs / "sweep.sh"
    script.write_text(adapt(doc_script("--job-name=sweep\n"), replacements, append=append))
    return script


@heavy
def test_slurm_sweep_cancelled_and_killed_items_resubmitted_as_status_prints(slurm, tmp_path, sweep_inputs, reference):
    models, cub, extra = sweep_inputs
    out, jobs = tmp_path / "sweep", tmp_path / "jobs"
    script = _sweep_job_script(
        jobs,
        {
            "--array=0-8": "--array=0-2",
            "--mem=32G --time=04:00:00": "--mem=300M --time=10",  # 8 CPUs a task: one task at a time
            "models.txt": str(models),
            DOC_TASKS: TASKS,
            '"$CUB_DIR"': cub,
            "/shared/sweep": str(out),
            "--num-shards 9": "--num-shards 3",
        },
        append=f"{extra} --cache-dir {tmp_path / 'cache'}",
    )
    job = slurm.sbatch(script, f"--output={jobs}/%A_%a.out", env=JOB_ENV, cwd=str(jobs))
    # task 2 waits for the node (each task takes its 8 CPUs): cancelled before it starts, like a
    # pre-empted job; task 1 is killed with SIGKILL once it runs, like the OOM killer
    slurm.run("scancel", f"{job}_2")
    report = out / ".work" / "shards" / "3-1.json"
    deadline = time.monotonic() + HANG_GUARD
    while not (report.is_file() and json.loads(report.read_text()).get("state") == "running"):
        assert time.monotonic() < deadline, _outputs(jobs)
        time.sleep(0.1)
    os.kill(json.loads(report.read_text())["pid"], signal.SIGKILL)
    states = slurm.wait(job)
    assert states[f"{job}_0"] == "COMPLETED" and states[f"{job}_1"] == "FAILED", states
    # a pending task cancelled is dropped from scontrol's list (or shown CANCELLED); it never ran
    assert states.get(f"{job}_2", "CANCELLED") == "CANCELLED", states
    assert not (out / ".work" / "shards" / "3-2.json").exists()
    text = _status(out, slurm)
    assert "sweep: 6 of 9 (model, task) items missing:" in text, text
    assert f"stopped (Slurm job {job}_1 is no longer queued or running)" in text, text
    assert "missing array tasks: --array=1-2 (of 3 shards)" in text, text
    assert not (out / "leaderboard.html").exists()
    command = next(line for line in text.splitlines() if line.startswith("resubmit them: "))[len("resubmit them: ") :]
    assert command == f"sbatch --array=1-2 {script}", text
    argv = command.split()
    again = slurm.sbatch(argv[-1], *argv[1:-1], f"--output={jobs}/%A_%a.out", env=JOB_ENV, cwd=str(jobs))
    states = slurm.wait(again)
    assert set(states.values()) == {"COMPLETED"}, _outputs(jobs)
    assert published(out) == reference
    assert len(re.findall(r"; assembled \S+ \(", _outputs(jobs))) == 1, _outputs(jobs)  # exactly one assembly
    assert "assembled: yes" in _status(out, slurm)


@heavy
def test_ray_sweep_gives_the_bytes_of_the_local_sweep(tmp_path, sweep_inputs, reference):
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'conceptforge[ray]'")
    models, cub, extra = sweep_inputs
    out = tmp_path / "sweep"
    command = _sweep_doc_command(models, cub, out, extra, tmp_path / "cache").rstrip("\n") + " --executor ray\n"
    result = _run(command, extra_env={"RAY_DISABLE_USAGE_STATS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert published(out) == reference
    assert len(re.findall(r"; assembled \S+ \(", result.stderr)) == 1


# -- the default suite: 2 tiny models × binding-clip, one item per Slurm task / Ray task ----------
@pytest.fixture(scope="module")
def small(tmp_path_factory, tiny_clip_dir, single_object_dir):
    """A 2-item sweep: its models file, the flags, and the bytes one local process publishes
    (run like the jobs: a fresh process with one thread, not this one)."""
    from conceptforge.testing.tiny_models import build_tiny_clip

    root = tmp_path_factory.mktemp("small-sweep")
    other = build_tiny_clip(root / "tiny-clip-3", seed=3, max_length=77)
    models = root / "models.txt"
    models.write_text(f"{tiny_clip_dir}\n{other}\n")
    extra = f"--dataset binding-clip={single_object_dir} --device cpu --bootstrap-resamples 20"
    result = _run(
        f"{BIN}/conceptforge evaluate --models {models} --tasks binding-clip {extra} --cache-dir {root / 'cache'} "
        f"--out {root / 'reference'}"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return models, extra, published(root / "reference")


@pytest.mark.heavy
def test_slurm_small_sweep_one_item_per_array_task(slurm, tmp_path, small):
    models, extra, expected = small
    out, jobs = tmp_path / "sweep", tmp_path / "jobs"
    script = _sweep_job_script(
        jobs,
        {
            "--array=0-8": "--array=0-1",
            "--cpus-per-task=8 --mem=32G --time=04:00:00": "--cpus-per-task=1 --mem=300M --time=10",
            "models.txt": str(models),
            DOC_TASKS: "--tasks binding-clip",
            '--cub-dir "$CUB_DIR" ': "",
            "/shared/sweep": str(out),
            "--num-shards 9": "--num-shards 2",
        },
        append=f"{extra} --cache-dir {tmp_path / 'cache'}",
    )
    job = slurm.sbatch(script, f"--output={jobs}/%A_%a.out", env=JOB_ENV, cwd=str(jobs))
    states = slurm.wait(job)
    assert set(states.values()) == {"COMPLETED"} and len(states) == 2, _outputs(jobs)
    assert published(out) == expected
    assert len(re.findall(r"; assembled \S+ \(", _outputs(jobs))) == 1, _outputs(jobs)
    reports = {p.name: json.loads(p.read_text()) for p in (out / ".work" / "shards").iterdir()}
    assert sorted(reports) == ["2-0.json", "2-1.json"] and {r["slurm"]["array_task"] for r in reports.values()} == {
        0,
        1,
    }


@heavy  # 85–205 s here at load 7–10 (a local Ray cluster, 2 workers importing torch); the Slurm one 52–75 s
def test_ray_small_sweep_gives_the_bytes_of_one_process(tmp_path, small):
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'conceptforge[ray]'")
    models, extra, expected = small
    out = tmp_path / "sweep"
    result = _run(
        f"{BIN}/conceptforge evaluate --models {models} --tasks binding-clip {extra} --cache-dir {tmp_path / 'cache'} "
        f"--out {out} --executor ray",
        extra_env={"RAY_DISABLE_USAGE_STATS": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert published(out) == expected
    assert len(re.findall(r"; assembled \S+ \(", result.stderr)) == 1
