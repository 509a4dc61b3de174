"""Sweeps (``conceptforge evaluate --models``): the models file, stable item ids, the plan and what
each item needs, a GPU item refused on a CPU-only process, the flags that do not mix, and the
``status`` lines (missing pairs; GPU array tasks resubmitted with ``--gres``).

The sweeps that run models on Slurm, Ray and locally, byte for byte, are in tests/cluster/test_sweep.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
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
