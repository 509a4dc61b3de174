"""The GPU device check (benchmarks/gpu.py) at tiny size on the CPU: its outputs are well formed,
positive and consistent with each other, and its start script parses.

The real check runs on a GPU machine (BENCHMARKS.md, "GPU device check"); this is the same code
with tiny shapes, so a check that would crash there, or write numbers that do not add up, fails
here first.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("diffusers")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_check(tmp_path_factory) -> Path:
    from benchmarks.gpu import main

    out = tmp_path_factory.mktemp("gpu-check")
    assert main(["--tiny", "--out", str(out)]) == 0
    return out


def test_tiny_check_writes_a_consistent_report(tiny_check):
    report = json.loads((tiny_check / "gpu-check.json").read_text())
    assert report["tiny"] is True and not report.get("errors")
    assert report["sections"] == ["sub", "vqa", "conceptbed", "sub_fast_paths", "sub_fast"]
    assert report["environment"]["gpu_model"] == "cpu-tiny" and report["environment"]["matmul_tflops"] > 0

    sub = report["sub"]
    for key in ("tdg_pair_s", "plain_batch_of_2_s"):
        assert 0 < sub[key]["min"] <= sub[key]["median"] and sub[key]["n"] == 2
    assert sub["ratio_tdg_vs_plain"] > 0
    plan = sub["paper_plan"]
    assert plan["tdg_pairs"] == 1056 * 500 == plan["pairs"] * plan["images_per_pair"]
    # reported to 2 decimals: within 0.005 h, whatever the machine's speed (a fast one gives ~1 h)
    assert plan["gpu_hours"] == pytest.approx(528_000 * sub["tdg_pair_s"]["median"] / 3600, rel=2e-3, abs=0.005)
    batched = sub["fast_paths"]["pairs_per_batch_2"]
    assert batched["s_per_pair"] > 0 and batched["plain_s_per_pair"] > 0 and batched["speedup"] > 0
    # on the CPU two pairs in one batch give exactly the images of one pair at a time
    assert batched["psnr_db_vs_plain"] == math.inf
    assert "CUDA" in sub["fast_paths"]["attention_native_cudnn"]["skipped"]
    # --quantize int8-weight runs on the CPU: measured, its images close to the plain path's but not
    # equal (the weights changed; 40 dB: the bound of tests/sub/test_sub_quantize.py); fp8 needs a GPU
    int8 = sub["fast_paths"]["quantize_int8_weight"]
    if importlib.util.find_spec("torchao") is None:  # the test extra has it; without it, the reason is stated
        assert int8["skipped"].startswith("--quantize int8-weight needs torchao")
    else:
        assert int8["s_per_pair"] > 0 and int8["plain_s_per_pair"] > 0 and 40 < int8["psnr_db_vs_plain"] < math.inf
    assert sub["fast_paths"]["quantize_fp8_weight"]["skipped"].startswith(
        "--quantize fp8-weight needs a CUDA GPU of compute capability >= 8.9"
    )
    assert "skipped" in sub["fast_paths"]["compile"]

    for tiles in (1, 10):
        vqa = report["vqa"][f"tiles_{tiles}"]
        assert vqa["batch"] == 4 and vqa["batched_images_per_s"] > 0 and vqa["one_at_a_time_images_per_s"] > 0
    conceptbed = report["conceptbed"]
    for learner in ("dreambooth", "custom-diffusion"):
        step = conceptbed[learner]["s_per_step"]
        assert step["n"] == 2 and 0 < step["min"] <= step["median"]  # 3 steps, the first one not timed
    sampling = conceptbed["sampling"]
    assert sampling["image_s_at_50_steps"] == pytest.approx(
        50 * sampling["cfg_pass_s"]["median"], rel=5e-3
    )  # both rounded to 3 significant digits


def test_measured_figures_match_the_report_and_the_cost_table_format(tiny_check):
    from conceptforge import gpu_costs

    report = json.loads((tiny_check / "gpu-check.json").read_text())
    figures = {f["workload"]: f for f in json.loads((tiny_check / "measured-costs.json").read_text())}
    workloads = gpu_costs.load_table()["workloads"]
    assert set(figures) <= set(workloads)
    assert set(figures) == {
        "sub/tdg-pair",
        "filter/vqa-image-1-tile",
        "filter/vqa-image-10-tiles",
        "conceptbed/dreambooth-step",
        "conceptbed/custom-diffusion-step",
        "conceptbed/sample-image",
    }
    assert all(f["kind"] == "measured" and f["gpu"] == "cpu-tiny" and f["seconds"] > 0 for f in figures.values())
    assert figures["sub/tdg-pair"]["seconds"] == pytest.approx(
        report["sub"]["tdg_pair_s"]["median"], rel=5e-3
    )  # 3 significant digits
    rate = report["vqa"]["tiles_1"]["batched_images_per_s"]
    assert figures["filter/vqa-image-1-tile"]["seconds"] == pytest.approx(1 / rate, rel=5e-3)
    # a figure in this format is what the table reads: measured wins over the floor
    table = {**gpu_costs.load_table()}
    table["figures"] = [*table["figures"], {**figures["sub/tdg-pair"], "gpu": "H100"}]
    estimate = gpu_costs.estimate("sub/tdg-pair", table=table)
    assert estimate.kind == "measured" and estimate.seconds == figures["sub/tdg-pair"]["seconds"]

    text = (tiny_check / "gpu-check.md").read_text()
    assert text.startswith("GPU device check (tiny shapes, CPU)") and "| measurement | value |" in text
    assert "TDG pair, 32 px, 2 steps" in text and "fast path: pairs_per_batch_2" in text
    assert "fast path: quantize_int8_weight" in text and "fast path: quantize_fp8_weight | --quantize fp8" in text


@pytest.mark.heavy
def test_fast_section_times_what_runs_here_and_names_what_does_not(tiny_check):
    """``--fast``'s parts on the CPU: fused q/k/v and the channels-last VAE are measured against the
    plain path with identical images (both exact on the CPU: tests/sub/test_sub_fast.py); the
    GPU-only parts and the whole recipe are skipped with ``generate sub``'s own one-line refusal;
    the compiling parts are skipped in the tiny run (minutes of compile on a CPU)."""
    report = json.loads((tiny_check / "gpu-check.json").read_text())
    fast = report["sub_fast"]
    assert fast["steps"] == 2 and fast["resolution"] == 32
    parts = fast["parts"]
    assert list(parts) == [
        "fuse_qkv",
        "attention_best",
        "vae_channels_last",
        "quantize_fp8_dynamic",
        "cuda_graphs",
        "fast",
        "aot",
        "compile_max_autotune",
    ]
    for name in ("fuse_qkv", "vae_channels_last", "attention_best"):
        part = parts[name]
        assert part["s_per_pair"] > 0 and part["plain_s_per_pair"] > 0 and part["ratio_vs_plain"] > 0
        assert part["psnr_db_vs_plain"] == math.inf and part["warmup_s"] >= 0
    assert parts["attention_best"]["settings"] == {"attention_backend": "native"}  # best on a CPU: SDPA's own choice
    assert parts["fast"]["skipped"].startswith("--fast needs a CUDA GPU of compute capability >= 8.9 (Ada, Hopper)")
    assert parts["quantize_fp8_dynamic"]["skipped"].startswith("--quantize fp8-dynamic needs a CUDA GPU")
    assert parts["cuda_graphs"]["skipped"].startswith("--cuda-graphs replays the transformer's GPU kernels")
    assert parts["aot"]["skipped"].startswith("--no-compile") and parts["compile_max_autotune"]["skipped"].startswith(
        "--no-compile"
    )
    assert "fast_s_per_pair_at_28_steps" not in fast  # the whole recipe was not measured: no --fast figure
    text = (tiny_check / "gpu-check.md").read_text()
    assert (
        "| --fast part: fuse_qkv, 32 px, 2 steps | " in text
        and "| --fast (whole recipe) | --fast needs a CUDA GPU" in text
    )


def test_measured_figures_go_into_the_cost_table_and_dry_runs_read_them(tiny_check, tmp_path):
    """``--merge-costs``: a check's figures replace the measured ones of the same GPU and workload
    (floors stay); a tiny CPU run's figures are refused; a measured --fast figure is what
    ``generate sub --dry-run --fast`` then uses, and without one it says it uses the plain figure."""
    from benchmarks.gpu import main, merge_figures
    from conceptforge import gpu_costs

    table = gpu_costs.load_table()
    figure = {"gpu": "H100", "workload": "sub/tdg-pair-fast", "kind": "measured", "seconds": 4.0, "source": "check A"}
    merged = merge_figures(table, [figure])
    again = merge_figures(merged, [{**figure, "seconds": 3.6, "source": "check B"}])
    mine = [f for f in again["figures"] if f["workload"] == "sub/tdg-pair-fast"]
    assert mine == [{**figure, "seconds": 3.6, "source": "check B"}]
    assert [f for f in again["figures"] if f["kind"] == "flop-floor"] == [
        f for f in table["figures"] if f["kind"] == "flop-floor"
    ]
    estimate = gpu_costs.estimate("sub/tdg-pair-fast", table=again, steps=14)
    assert estimate.kind == "measured" and estimate.seconds == pytest.approx(3.6 / 2)  # 14 of 28 steps

    copy = tmp_path / "gpu_costs.json"
    copy.write_text(json.dumps(again))
    from benchmarks.gpu import merge_costs

    measured = tmp_path / "measured.json"
    measured.write_text(json.dumps([{**figure, "gpu": "H200", "seconds": 3.1}]))
    merge_costs(measured, copy)
    written = json.loads(copy.read_text())
    assert {(f["gpu"], f["seconds"]) for f in written["figures"] if f["workload"] == "sub/tdg-pair-fast"} == {
        ("H100", 3.6),
        ("H200", 3.1),
    }
    assert main(["--merge-costs", str(tiny_check / "measured-costs.json")]) == 2  # cpu-tiny: not a GPU's cost


def test_dry_run_with_fast_says_which_figure_it_uses(capsys):
    from conceptforge.commands import main as conceptforge

    assert conceptforge(["generate", "sub", "--dry-run", "--fast", "--out", "unused"]) == 0
    out = capsys.readouterr().out
    assert "(--fast: no measured figure on H100 yet (benchmarks/gpu_check.sh): the plain path's figure above)" in out


def test_start_script_parses_and_names_its_output():
    script = REPO / "benchmarks" / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    text = script.read_text()
    assert "--no-index --find-links .whl" in text and "python -m benchmarks.gpu --out" in text.replace(
        '"$python" -m benchmarks.gpu --out', "python -m benchmarks.gpu --out"
    )
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=REPO)
    assert result.returncode != 0 and "usage: bash benchmarks/gpu_check.sh OUT" in result.stderr
    assert "--sections sub_fast" in text and '--merge-costs "$out/measured-costs.json"' in text
