"""``conceptforge evaluate --dry-run``: items x forwards x seconds from the cost table, by hand.

The model folder holds its config and tokenizer but NO weights file: a dry run that tried to
load weights would fail. The numbers are worked out here independently: the parameters from the
real weights file's safetensors header (shapes multiplied out), the image tokens from the
config, the items and candidates from the dataset through ``datasets``, the rate from
``gpu_costs.json``.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import struct
from pathlib import Path

import pytest

from conceptforge.commands import main


def _parameters(safetensors: Path) -> int:
    """Sum of the tensors' sizes, read from the safetensors header (8-byte length, then JSON)."""
    with safetensors.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    return sum(math.prod(meta["shape"]) for name, meta in header.items() if name != "__metadata__")


@pytest.fixture
def config_only(tiny_llava_dir, tmp_path) -> Path:
    folder = tmp_path / "llava-config-only"
    shutil.copytree(tiny_llava_dir, folder, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    assert not list(folder.glob("*.safetensors"))
    return folder


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_dry_run_counts_items_forwards_and_hours_by_hand(
    gpu, config_only, tiny_llava_dir, single_object_dir, tmp_path, capsys
):
    import datasets

    data = datasets.load_dataset(str(single_object_dir))
    items = sum(len(data[s]) for s in ("train", "val", "gen"))
    candidates = sum(len(c) for s in ("train", "val", "gen") for c in data[s]["candidates"])
    forwards = candidates  # match (VQAScore): one forward per (image, candidate text)
    parameters = _parameters(tiny_llava_dir / "model.safetensors")
    vision = json.loads((tiny_llava_dir / "config.json").read_text())["vision_config"]
    tokens = (vision["image_size"] // vision["patch_size"]) ** 2 + 1 + 64
    table = json.loads((Path(__file__).parents[2] / "conceptforge" / "gpu_costs.json").read_text())
    (rate,) = [f["tflops"] for f in table["figures"] if f["gpu"] == gpu and f["workload"] == "*"]
    seconds = 2 * parameters * tokens / (rate * 1e12)
    hours = forwards * seconds / 3600

    out = tmp_path / "run.json"
    argv = ["evaluate", "--model", str(config_only), "--tasks", f"binding-clip:{single_object_dir}", "--dry-run"]
    assert main([*argv, "--gpu-model", gpu, "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"binding-clip: {items} items x {candidates / items:.3g} forwards = {forwards:,} forwards" in printed
    assert f"2 x {parameters:,} parameters" in printed and f"x {tokens} tokens" in printed
    assert f"{forwards:,} x {seconds:.3g} s per forward" in printed
    shown = re.search(r"estimated GPU-hours: at least (\S+) on one " + gpu, printed)
    assert shown and float(shown.group(1)) == pytest.approx(hours, rel=0.05), printed
    assert "gpu_costs.json" in printed and f"on {gpu}" in printed  # the source is named
    assert not out.exists() and not (tmp_path / "run.samples").exists()  # nothing written


def test_dry_run_with_a_measured_forward_time(config_only, single_object_dir, capsys):
    argv = ["evaluate", "--model", str(config_only), "--tasks", f"binding-clip:{single_object_dir}", "--dry-run"]
    assert main([*argv, "--seconds-per-forward", "0.5"]) == 0
    printed = capsys.readouterr().out
    # 48 items x 5 candidates = 240 forwards x 0.5 s = 120 s = 0.033 h
    assert "240 x 0.5 s per forward = 0.033 h" in printed and "--seconds-per-forward, as given" in printed


def test_seconds_per_forward_without_dry_run_is_one_line(config_only, single_object_dir, tmp_path, capsys):
    argv = ["evaluate", "--model", str(config_only), "--tasks", f"binding-clip:{single_object_dir}"]
    assert main([*argv, "--seconds-per-forward", "0.5", "--output", str(tmp_path / "r.json")]) == 2
    assert "--seconds-per-forward goes with --dry-run" in capsys.readouterr().err


def test_dry_run_of_a_hub_model_reads_its_config_from_the_local_hub_cache(
    tiny_llava_dir, single_object_dir, tmp_path, monkeypatch, capsys
):
    """Offline (the harness tests run with HF_HUB_OFFLINE=1): a Hub id is planned from the cached
    config alone, laid out by hand as huggingface_hub caches it; an uncached id is one line."""
    sha = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--someone--tiny-llava"
    snapshot = repo / "snapshots" / sha
    snapshot.mkdir(parents=True)
    for config in tiny_llava_dir.glob("*.json"):
        shutil.copy(config, snapshot / config.name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(sha)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    parameters = _parameters(tiny_llava_dir / "model.safetensors")
    argv = ["evaluate", "--tasks", f"binding-clip:{single_object_dir}", "--dry-run"]
    assert main([*argv, "--model", "someone/tiny-llava"]) == 0
    printed = capsys.readouterr().out
    assert "model someone/tiny-llava (vlm)" in printed and f"2 x {parameters:,} parameters" in printed
    assert main([*argv, "--model", "someone/not-cached"]) == 2
    err = capsys.readouterr().err
    assert "someone/not-cached has no config.json in the local Hub cache (a dry run opens no connection)" in err


def test_a_sweeps_dry_run_bills_every_model_and_writes_nothing(config_only, single_object_dir, tmp_path, capsys):
    """``--models A,B --dry-run``: the same bill per model, no weights loaded (neither folder has
    any), no --out needed and nothing written (it used to run the whole sweep)."""
    other = tmp_path / "second-config-only"
    shutil.copytree(config_only, other)
    out = tmp_path / "sweep"
    argv = ["evaluate", "--models", f"{config_only},{other}", "--tasks", f"binding-clip:{single_object_dir}"]
    assert main([*argv, "--dry-run", "--seconds-per-forward", "0.5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for folder in (config_only, other):
        assert f"model {folder} (vlm)" in printed
    assert printed.count("240 x 0.5 s per forward = 0.033 h") == 2  # 48 items x 5 candidates each
    assert not out.exists()


def test_a_served_models_dry_run_counts_requests_without_asking_the_server(single_object_dir, tmp_path, capsys):
    """An endpoint is billed in requests (one per forward: 48 items x 5 candidates for VQAScore
    match), with no GPU-hours; nothing listens on the port, so asking it would fail the run."""
    model = "endpoint:served-model@http://127.0.0.1:9/v1"
    argv = ["evaluate", "--model", model, "--tasks", f"binding-clip:{single_object_dir}", "--dry-run"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"model {model} (endpoint)" in printed
    assert "binding-clip: 48 items x 5 requests = 240 requests" in printed
    assert "requests in all: 240 at most" in printed and "GPU-hours: the server's" in printed
