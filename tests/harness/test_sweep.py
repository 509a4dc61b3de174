"""Sweeps (``conceptforge evaluate --models``): the models file, stable item ids, the plan and what
each item needs, a GPU item refused on a CPU-only process, the flags that do not mix, and the
``status`` lines (missing pairs; GPU array tasks resubmitted with ``--gres``).

The sweeps that run models on Slurm, Ray and locally, byte for byte, are in tests/cluster/test_sweep.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conceptforge.errors import DeviceUnavailableError, InvalidArgumentError
from conceptforge.loaders.sweep import ModelSpec, SweepConfig, build_stage, parse_models, plan_items, plan_lines


def test_models_file_lines_yaml_json_and_list(tmp_path):
    lines = tmp_path / "models.txt"
    lines.write_text("# comment\norg/a\n\norg/b revision=v2 device=cuda:1 batch_size=8 dtype=bf16 name=bee  # note\n")
    assert parse_models(str(lines)) == [
        ModelSpec("org/a"),
        ModelSpec("org/b", revision="v2", device="cuda:1", dtype="bfloat16", batch_size=8, name="bee"),
    ]
    yaml_file = tmp_path / "models.yaml"
    yaml_file.write_text("- org/a\n- model: org/b\n  needs: gpu\n  batch_size: 4\n")
    assert parse_models(str(yaml_file)) == [ModelSpec("org/a"), ModelSpec("org/b", batch_size=4, needs="gpu")]
    json_file = tmp_path / "models.json"
    json_file.write_text(json.dumps({"models": ["org/a", {"model": "org/c", "dtype": "auto"}]}))
    assert parse_models(str(json_file)) == [ModelSpec("org/a"), ModelSpec("org/c")]
    assert parse_models("org/a, org/b") == [ModelSpec("org/a"), ModelSpec("org/b")]


@pytest.mark.parametrize(
    "text, message",
    [
        ("org/a colour=red", "unknown option 'colour' of org/a"),
        ("org/a batch_size=0", "org/a batch_size:"),
        ("org/a needs=tpu", "expected one of gpu, cpu, any, got 'tpu'"),
        ("org/a batchsize", "'batchsize' is not KEY=VALUE"),
        ("org/a\norg/a", "org/a is listed twice"),
        ("org/a name=../x", "is not a safe file name"),
        ("# nothing\n", "no models"),
    ],
)
def test_models_file_errors_are_one_line(tmp_path, text, message):
    path = tmp_path / "models.txt"
    path.write_text(text)
    with pytest.raises(InvalidArgumentError, match=message) as error:
        parse_models(str(path))
    assert "\n" not in str(error.value)


def test_a_missing_models_file_is_one_line(tmp_path):
    with pytest.raises(InvalidArgumentError, match="models.txt: no such file"):
        parse_models(str(tmp_path / "models.txt"))


def _config(models, **overrides) -> SweepConfig:
    values = {"tasks": "binding-clip,sub-vlm", "datasets": ["binding-clip=/data/single-object", "sub-vlm=/data/sub"]}
    return SweepConfig(models=models, **{**values, **overrides})


class _Ref:  # what plan_items reads of a resolved model
    def __init__(self, id: str, sha: str) -> None:
        self.id, self.sha, self.revision = id, sha, None


def test_item_ids_are_stable_and_change_with_what_decides_the_numbers():
    models = [ModelSpec("org/a"), ModelSpec("org/b", name="bee")]
    refs = [_Ref("org/a", "1" * 40), _Ref("org/b", "2" * 40)]
    first = plan_items(_config(models), refs)
    assert [(i.model, i.task) for i in first] == [
        (0, "binding-clip"),
        (0, "sub-vlm"),
        (1, "binding-clip"),
        (1, "sub-vlm"),
    ]
    assert [i.item_id.rsplit(".", 1)[0] for i in first] == [
        "a.binding-clip",
        "a.sub-vlm",
        "bee.binding-clip",
        "bee.sub-vlm",
    ]
    assert [i.item_id for i in plan_items(_config(models), refs)] == [i.item_id for i in first]
    # the device says where it runs, not what it measures: same ids
    assert [i.item_id for i in plan_items(_config(models, device="cpu"), refs)] == [i.item_id for i in first]
    changed = {
        "model revision": plan_items(_config(models), [_Ref("org/a", "3" * 40), refs[1]]),
        "task option": plan_items(_config(models, options=["binding-clip.template=an image of {label}"]), refs),
        "dataset revision": plan_items(
            _config(models, datasets=["binding-clip=/data/single-object@v2", "sub-vlm=/data/sub"]), refs
        ),
        "batch size": plan_items(_config(models, batch_size=8), refs),
    }
    for what, items in changed.items():
        assert items[0].item_id != first[0].item_id, what
    assert changed["model revision"][2].item_id == first[2].item_id  # the other model's items keep theirs


def test_plan_says_what_each_item_needs_and_the_arrays_to_submit():
    models = [ModelSpec("org/a", device="cuda"), ModelSpec("org/b", device="cpu"), ModelSpec("org/c", needs="gpu")]
    refs = [_Ref(m.model, str(i) * 40) for i, m in enumerate(models)]
    items = plan_items(_config(models), refs)
    assert [i.needs for i in items] == ["gpu", "gpu", "cpu", "cpu", "gpu", "gpu"]
    assert [i.needs for i in plan_items(_config([ModelSpec("org/a")]), refs[:1])] == ["any", "any"]
    lines = plan_lines(items, script="sweep.sh")
    assert lines[0] == "6 items (array task id = item index with --num-shards 6):"
    assert lines[-2:] == [
        "GPU items: sbatch --array=0-1,4-5 --gres=gpu:1 sweep.sh",
        "CPU items: sbatch --array=2-3 sweep.sh",
    ]


def test_a_gpu_item_on_a_process_without_a_gpu_is_refused_before_the_model_loads(tiny_clip_dir, single_object_dir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from conceptforge.engine.failures import is_item_failure

    config = SweepConfig(
        models=[ModelSpec(str(tiny_clip_dir), needs="gpu")],
        tasks="binding-clip",
        datasets=[f"binding-clip={single_object_dir}"],
    )
    stage = build_stage(config)
    with pytest.raises(DeviceUnavailableError, match="needs a GPU and this process sees none") as error:
        stage.make_item(stage.items[0])
    assert not is_item_failure(error.value)  # it stops the shard: no retries, no failed-item record
    assert stage.make_item._session is None  # nothing was loaded


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "conceptforge", "evaluate", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--models", "a,b", "--tasks", "binding-clip"], "--models needs --out DIR"),
        (["--models", "a,b", "--out", "o"], "--models needs --tasks"),
        (
            ["--models", "a,b", "--tasks", "binding-clip", "--out", "o", "--output", "x.json"],
            "--output does not go with --models",
        ),
        (["--model", "a", "--tasks", "binding-clip", "--out", "o"], "--out goes with --models"),
        (["--model", "a", "--tasks", "binding-clip", "--executor", "ray"], "--executor/--ray-address go with --models"),
    ],
)
def test_sweep_flags_that_do_not_mix_are_one_line(tmp_path, args, message):
    result = _cli(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr.strip().splitlines()[-1] == f"error: {message}"
        or message in result.stderr.strip().splitlines()[-1]
    )
    assert not (tmp_path / "o").exists()


def test_status_resubmits_gpu_array_tasks_with_gres():
    from conceptforge.commands.status import resubmission_lines

    reports = {
        (6, 0): {"num_shards": 6, "slurm": {"job": "77_0", "array_task": 0, "world": 1, "script": "/h/sweep.sh"}}
    }
    lines = resubmission_lines("OUT", 6, [1, 2, 4], reports, gpu_shards={0, 1, 4})
    assert lines == [
        "missing array tasks: --array=1-2,4 (of 6 shards)",
        "resubmit them: sbatch --array=1,4 --gres=gpu:1 /h/sweep.sh",
        "resubmit them: sbatch --array=2 /h/sweep.sh",
    ]
    assert (
        resubmission_lines("OUT", 6, [2], reports, gpu_shards={0, 1, 4})[-1]
        == "resubmit them: sbatch --array=2 /h/sweep.sh"
    )


def _published(out: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and ".work" not in p.relative_to(out).parts
    }


def test_a_sweep_cut_short_and_resumed_publishes_the_bytes_of_one_run(tiny_clip_dir, single_object_dir, tmp_path):
    """Two models × binding-clip through the engine here: one run, and one stopped after its
    first item (the second item is not written, as when a process is killed) then resumed: the
    same results files and leaderboard, each item made once, one assembly."""
    from conceptforge.engine.runner import run_stage
    from conceptforge.testing.tiny_models import build_tiny_clip

    other = build_tiny_clip(tmp_path / "models" / "tiny-clip-7", seed=7, max_length=77)
    config = SweepConfig(
        models=[ModelSpec(str(tiny_clip_dir)), ModelSpec(str(other), batch_size=4)],
        tasks="binding-clip",
        datasets=[f"binding-clip={single_object_dir}"],
        device="cpu",
        bootstrap_resamples=20,
    )
    whole = run_stage(build_stage(config), tmp_path / "whole")
    assert whole.made == 2 and whole.assembly.status == "assembled"
    first = run_stage(build_stage(config), tmp_path / "cut", max_items=1)
    assert first.made == 1 and first.assembly is None and not (tmp_path / "cut" / "leaderboard.md").exists()
    again = run_stage(build_stage(config), tmp_path / "cut")
    assert (again.made, again.skipped) == (1, 1) and again.assembly.status == "assembled"
    published = _published(tmp_path / "whole")
    assert _published(tmp_path / "cut") == published
    assert sorted(published)[:3] == ["leaderboard.html", "leaderboard.json", "leaderboard.md"]
    payload = json.loads(published["results/tiny-clip-7.json"])
    assert payload["settings"]["batch_size"] == 4 and [t["task"] for t in payload["tasks"]] == ["binding-clip"]
    assert payload["created"] == "" and payload["tasks"][0]["seconds"] is None
    board = published["leaderboard.md"].decode()
    assert board.splitlines()[0].startswith("| model ") and str(other) in board and str(tiny_clip_dir) in board


def test_a_shard_with_gpu_items_on_a_cpu_only_process_is_refused_before_anything_is_written(
    tiny_clip_dir, single_object_dir
):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from conceptforge.commands.evaluate.sweep import refuse_gpu_items_without_gpu
    from conceptforge.engine.workitems import ShardSpec

    config = SweepConfig(
        models=[
            ModelSpec(str(tiny_clip_dir), needs="gpu"),
            ModelSpec(str(tiny_clip_dir), revision=None, device="cpu", name="cpu-copy"),
        ],
        tasks="binding-clip",
        datasets=[f"binding-clip={single_object_dir}"],
    )
    with pytest.raises(InvalidArgumentError):  # the same model twice: refused (one line)
        parse_models(f"{tiny_clip_dir},{tiny_clip_dir}")
    stage = build_stage(config)
    with pytest.raises(
        DeviceUnavailableError, match=r"1 item\(s\) of this process need a GPU .* sbatch --array=0 --gres=gpu:1"
    ):
        refuse_gpu_items_without_gpu(stage, ShardSpec())
    refuse_gpu_items_without_gpu(stage, ShardSpec(2, 1))  # the CPU item's shard runs


def test_a_sweep_of_one_model_writes_the_bytes_evaluate_output_writes(
    tiny_clip_dir, single_object_dir, sub_dir, fake_cub, tmp_path, monkeypatch
):
    """Issue 45 item 5: the sweep's results file, its table, breakdowns and samples are the files
    `evaluate --output` writes for the same model and tasks. The sweep's item store keeps metadata
    as key-sorted JSON: its results used to come back from there, with binding-clip's
    ``error_breakdown`` (and every other object) in sorted key order."""
    from conceptforge.cli import run_cli
    from conceptforge.commands import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # evaluate's file then carries no clock
    common = [
        "--tasks",
        "binding-clip,sub-vlm",
        "--dataset",
        f"binding-clip={single_object_dir}",
        "--dataset",
        f"sub-vlm={sub_dir}",
        "--cub-dir",
        str(fake_cub),
        "--device",
        "cpu",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--bootstrap-resamples",
        "20",
    ]
    alone = tmp_path / "alone" / "tiny-clip.json"
    assert (
        run_cli(
            lambda argv: main(["evaluate", *argv]), ["--model", str(tiny_clip_dir), *common, "--output", str(alone)]
        )
        == 0
    )
    assert (
        run_cli(
            lambda argv: main(["evaluate", *argv]),
            ["--models", str(tiny_clip_dir), *common, "--out", str(tmp_path / "sweep")],
        )
        == 0
    )
    swept = tmp_path / "sweep" / "results"
    for name in ("tiny-clip.json", "tiny-clip.md", "tiny-clip.breakdowns.json"):
        assert (swept / name).read_bytes() == alone.with_name(name).read_bytes(), name
    for task in ("binding-clip", "sub-vlm"):
        assert (swept / "tiny-clip.samples" / f"{task}.parquet").read_bytes() == (
            alone.with_name("tiny-clip.samples") / f"{task}.parquet"
        ).read_bytes()
    payload = json.loads(alone.read_text())
    # the order the binding protocol reports its errors in (loaders/binding/scoring.error_breakdown)
    assert list(payload["tasks"][0]["details"]["error_breakdown"]) == ["Adj", "Noun", "Both"]
    assert [t["task"] for t in payload["tasks"]] == ["binding-clip", "sub-vlm"]
    assert payload["created"] == "2023-11-14T22:13:20Z"  # 1700000000 s after 1970-01-01, by hand
    assert [t["seconds"] for t in payload["tasks"]] == [None, None]


# -- issue 45.8: served names, models that fail, two sweeps on one --out, kill -9 and status -------
def test_a_served_models_results_file_is_named_from_its_served_name_and_host():
    from conceptforge.loaders.sweep import results_name

    # by hand: the served name's last segment, then the host (and port) of the base URL
    assert results_name(ModelSpec("endpoint:Qwen/Qwen2-VL-2B-Instruct@http://127.0.0.1:8000/v1")) == (
        "Qwen2-VL-2B-Instruct.127.0.0.1-8000"
    )
    assert results_name(ModelSpec("endpoint:tiny@https://gpu1.example.org/v1")) == "tiny.gpu1.example.org"
    assert results_name(ModelSpec("openai:gpt-4o")) == "gpt-4o.openai"
    assert results_name(ModelSpec("endpoint:a b@http://h:1/v1")) == "a_b.h-1"  # safe as a file name
    assert results_name(ModelSpec("endpoint:m@http://h:1/v1", name="mine")) == "mine"  # name= wins
    # two servers of one model: two files (both were results/v1.json)
    served = parse_models("endpoint:m@http://a:8000/v1,endpoint:m@http://b:8000/v1")
    config = _config(served, tasks="binding-clip", datasets=["binding-clip=/data/single-object"])
    items = plan_items(config, [_Ref(spec.model, None) for spec in served])
    assert [item.item_id.split(".binding-clip.")[0] for item in items] == ["m.a-8000", "m.b-8000"]


def _odd_model(tiny_clip_dir, folder: Path, model_type: str) -> Path:
    import shutil

    odd = shutil.copytree(tiny_clip_dir, folder)
    config = json.loads((odd / "config.json").read_text())
    config["model_type"], config["architectures"] = model_type, ["ZebraModel"]
    (odd / "config.json").write_text(json.dumps(config))
    return odd


def test_an_unknown_family_names_the_model_and_its_line_in_the_models_file(
    tiny_clip_dir, single_object_dir, tmp_path, capsys
):
    from conceptforge.commands import main

    odd = _odd_model(tiny_clip_dir, tmp_path / "odd", "zebra")
    models = tmp_path / "models.txt"
    models.write_text(f"{tiny_clip_dir}\n# the odd one\n{odd} batch_size=4\n")
    argv = ["evaluate", "--models", str(models), "--tasks", "binding-clip", "--out", str(tmp_path / "out")]
    assert main([*argv, "--dataset", f"binding-clip={single_object_dir}", "--device", "cpu"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    # line 3 of the file (line 2 is a comment), the model as written, then the adapter registry's reason
    assert last.startswith(f"error: --models {models}:3: {odd}: no adapter for a 'zebra' model (ZebraModel); "), last
    assert not (tmp_path / "out").exists()


def test_a_model_that_does_not_load_fails_once_and_the_others_are_published(
    tiny_clip_dir, single_object_dir, tmp_path, capsys
):
    """A cut-short weights file: its item fails at its first attempt with the one line that names
    the file, the other model's results and the leaderboard are written, the sweep exits 1."""
    import shutil

    from conceptforge.commands import main

    bad = shutil.copytree(tiny_clip_dir, tmp_path / "bad-clip")
    weights = bad / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # a download stopped half-way
    models = tmp_path / "models.txt"
    models.write_text(f"{tiny_clip_dir}\n{bad}\n")
    out = tmp_path / "out"
    argv = ["evaluate", "--models", str(models), "--tasks", "binding-clip", "--out", str(out), "--device", "cpu"]
    argv += ["--dataset", f"binding-clip={single_object_dir}", "--bootstrap-resamples", "20"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    cause = (
        f"cannot load {bad} ({models}:2): {weights} is damaged or incomplete (Error while deserializing header: "
        "incomplete metadata, file not fully covered): delete it and copy or save the model folder again (a "
        "download cut short, or a full disk while saving?)"
    )
    err = captured.err.strip().splitlines()
    assert err[-2:] == [
        f"failed: {bad} × binding-clip: {cause}",
        "error: 1 of 2 sweep item(s) failed; the results and leaderboard hold the others: fix the cause and "
        "rerun the same command (only the failed items run again)",
    ]
    assert "attempt 2" not in captured.err and "SafetensorError" not in captured.err  # tried once, in our words
    assert captured.out.strip() == f"{out}: results/ (1 models), leaderboard.md, leaderboard.html, leaderboard.json"
    assert (out / "results" / "tiny-clip.json").is_file() and not (out / "results" / "bad-clip.json").exists()
    board = (out / "leaderboard.md").read_text()
    assert str(tiny_clip_dir) in board and str(bad) not in board
    payload = json.loads((out / "results" / "tiny-clip.json").read_text())
    assert [t["task"] for t in payload["tasks"]] == ["binding-clip"]


@pytest.fixture(scope="module")
def three_models(tmp_path_factory, tiny_clip_dir):
    """A models file of three tiny CLIPs: three binding-clip items, one chunk each."""
    from conceptforge.testing.tiny_models import build_tiny_clip

    root = tmp_path_factory.mktemp("three")
    others = [build_tiny_clip(root / f"tiny-clip-{seed}", seed=seed, max_length=77) for seed in (5, 6)]
    models = root / "models.txt"
    models.write_text("".join(f"{path}\n" for path in (tiny_clip_dir, *others)))
    return models


def _sweep_argv(models: Path, data: Path) -> list[str]:
    return ["evaluate", "--models", str(models), "--tasks", "binding-clip", "--dataset", f"binding-clip={data}",
            "--device", "cpu", "--bootstrap-resamples", "20", "--out", "out"]  # fmt: skip


def _start(argv: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "conceptforge", *argv],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path: Path, process: subprocess.Popen) -> None:
    """Until ``path`` exists (the process has claimed that chunk), or the process ended."""
    while not path.exists():
        assert process.poll() is None, process.communicate()[1][-3000:]
        time.sleep(0.02)


def _holds_a_cache_write_lock(folder: Path) -> bool:
    """Whether some process holds the write lock of an SQLite cache under ``folder``."""
    import contextlib
    import sqlite3

    for path in folder.rglob("*.sqlite"):
        try:
            with contextlib.closing(sqlite3.connect(path, timeout=0)) as db:
                db.execute("BEGIN IMMEDIATE")
                db.rollback()
        except sqlite3.OperationalError:
            return True
    return False


def _stop_outside_cache_writes(process: subprocess.Popen) -> None:
    """SIGSTOP ``process`` at a moment it holds no cache's write lock. A process stopped inside a
    write (a few milliseconds, each commit) holds every other writer of that cache off until it
    continues: SQLite's rule, which this test is not about; on a fast machine the stop used to land
    in the caches' first writes, just after the claim, and the other sweep timed out on them."""
    import os
    import signal

    cache = Path(os.environ["XDG_CACHE_HOME"]) / "conceptforge"
    for _ in range(1000):
        os.kill(process.pid, signal.SIGSTOP)
        if not _holds_a_cache_write_lock(cache):
            return
        os.kill(process.pid, signal.SIGCONT)
        time.sleep(0.002)
    pytest.fail("the first sweep held a cache's write lock at every one of 1000 stops")


@pytest.mark.heavy
def test_two_sweeps_into_one_out_share_the_items(three_models, single_object_dir, tmp_path):
    """Two real processes on one --out: the first is stopped (SIGSTOP) while it holds item 0; the
    second skips that item and makes the other two; the first, continued, makes item 0 alone and
    assembles. Worked out by hand: 1 + 2 = the 3 items, each made once (each made every one)."""
    import os
    import signal
    import socket

    argv = _sweep_argv(three_models, single_object_dir)
    first = _start(argv, tmp_path)
    try:
        _wait_for(tmp_path / "out" / ".work" / "claims" / "c000000.json", first)
        _stop_outside_cache_writes(first)
        assert not list((tmp_path / "out" / ".work" / "chunks").glob("c000000.*.done"))  # inside item 0
        second = subprocess.run(
            [sys.executable, "-m", "conceptforge", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        from conceptforge.commands.status import status_lines

        lines = status_lines(str(tmp_path / "out"))
        assert f"being made now: chunk(s) 0 by process {first.pid} on {socket.gethostname()}" in lines, lines
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stderr.strip().splitlines()[-1] == (
        f"made 2, already done 0; 1 item(s) were being made by another process (process {first.pid} on "
        f"{socket.gethostname()}) on this --out: it assembles when it finishes (`conceptforge status out` shows them)"
    )
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("made 1, already done 0; assembled out ("), err[-2000:]
    assert (tmp_path / "out" / "leaderboard.md").is_file()
    assert not list((tmp_path / "out" / ".work" / "claims").iterdir())  # every claim released


@pytest.mark.heavy
def test_status_after_kill_9_prints_the_command_that_reruns_what_is_missing(three_models, single_object_dir, tmp_path):
    import os
    import shlex
    import signal

    from conceptforge.commands.status import status_lines

    argv = _sweep_argv(three_models, single_object_dir)
    process = _start(argv, tmp_path)
    _wait_for(tmp_path / "out" / ".work" / "claims" / "c000001.json", process)  # item 0 done, inside item 1
    os.kill(process.pid, signal.SIGKILL)
    process.communicate()
    lines = status_lines(str(tmp_path / "out"))
    command = f"cd {shlex.quote(str(tmp_path))} && {shlex.join(['conceptforge', *argv])}"
    assert lines[0] == f"{tmp_path / 'out'}: stage evaluate-sweep, 1 of 3 items done (1 of 3 chunks)"
    assert lines[1] == (
        f"  shard 0 of 1: 1/3 chunks done, 2 items left, last state: stopped (process {process.pid} on "
        f"{os.uname().nodename} is gone)"
    )
    assert f"rerun what is missing: {command}" in lines, lines
    # the printed command, run as printed, makes the 2 missing items (taking over the dead claim)
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    rerun = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert rerun.stderr.strip().splitlines()[-1].startswith("made 2, already done 1; assembled "), rerun.stderr[-2000:]


def test_a_shard_stopped_before_its_first_item_is_not_called_not_started(tiny_clip_dir, single_object_dir, tmp_path):
    """A Slurm task cancelled while it still loaded its libraries logged "interrupted by SIGTERM"
    and status said "not started"; now the stop is recorded (into a run that exists, never
    creating one), and a shard with no report at all is not called "not started" either."""
    from conceptforge.commands.status import status_lines
    from conceptforge.engine.runner import record_stop_before_start, run_stage
    from conceptforge.engine.workitems import ShardSpec

    config = SweepConfig(  # two items: chunk 0 in shard 0 of 3, chunk 1 in shard 1, none in shard 2
        models=[ModelSpec(str(tiny_clip_dir)), ModelSpec(str(tiny_clip_dir), batch_size=4, name="again")],
        tasks="binding-clip",
        datasets=[f"binding-clip={single_object_dir}"],
        device="cpu",
        bootstrap_resamples=20,
    )
    out = tmp_path / "out"
    record_stop_before_start(out, ShardSpec(2, 1), "interrupted by SIGTERM before its first item")
    assert not out.exists()  # no run there: nothing is created
    run_stage(build_stage(config), out, shard=ShardSpec(3, 0))
    record_stop_before_start(out, ShardSpec(3, 0), "interrupted by SIGTERM before its first item")  # ran here: kept
    record_stop_before_start(out, ShardSpec(3, 1), "interrupted by SIGTERM before its first item")
    lines = status_lines(str(out))
    assert lines[1:4] == [
        "  shard 0 of 3: 1/1 chunks done, 0 items left, last state: finished",
        "  shard 1 of 3: 0/1 chunks done, 1 items left, last state: interrupted by SIGTERM before its first item",
        "  shard 2 of 3: 0/0 chunks done, 0 items left, last state: no report (not started, or killed before its "
        "first item)",
    ]


def test_status_reruns_a_stopped_shard_by_hand_with_its_own_command_line():
    """Shards started by hand (``--shard-index``), not by Slurm: each stopped one gets the command
    line it ran, from its own folder; a running or finished one gets none; a Slurm task gets sbatch."""
    from conceptforge.commands.status import rerun_lines

    argv = ["conceptforge", "evaluate", "--models", "m.txt", "--out", "my sweep", "--num-shards", "3"]
    reports = {
        (3, 0): {"state": "finished", "command": [*argv, "--shard-index", "0"], "cwd": "/w"},
        (3, 1): {"state": "interrupted by SIGTERM", "command": [*argv, "--shard-index", "1"], "cwd": "/w"},
        (3, 2): {"state": "running", "command": [*argv, "--shard-index", "2"], "cwd": "/w", "slurm": {"job": "9_2"}},
    }
    assert rerun_lines(3, [1, 2], reports, gone={}) == [
        "rerun shard 1 of 3: cd /w && conceptforge evaluate --models m.txt --out 'my sweep' --num-shards 3 "
        "--shard-index 1"
    ]
