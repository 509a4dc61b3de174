"""The GPU cost table behind every --dry-run: its FLOPs, its scaling and what a dry run says.

The FLOPs are checked against an independent count (torch's FlopCounterMode over FLUX.1-dev's
transformer built on the meta device) at a resolution the table was not fitted at, so a stale or
wrongly scaled table fails here.
"""

from __future__ import annotations

import pytest
import torch

from conceptforge import gpu_costs
from conceptforge.commands import invoke
from conceptforge.errors import InvalidArgumentError

pytest.importorskip("diffusers")


def _flux_pass_flops(resolution: int) -> int:
    from diffusers import FluxTransformer2DModel
    from torch.utils.flop_counter import FlopCounterMode

    from conceptforge.testing.random_flux import FLUX_DEV_TRANSFORMER

    with torch.device("meta"):
        model = FluxTransformer2DModel(**FLUX_DEV_TRANSFORMER)
        n = (resolution // 16) ** 2
        inputs = dict(
            hidden_states=torch.zeros(1, n, 64),
            encoder_hidden_states=torch.zeros(1, 512, 4096),
            pooled_projections=torch.zeros(1, 768),
            timestep=torch.ones(1),
            guidance=torch.ones(1),
            txt_ids=torch.zeros(512, 3),
            img_ids=torch.zeros(n, 3),
        )
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(**inputs, return_dict=False)
    return counter.get_total_flops()


def test_flux_flops_and_resolution_scaling_match_an_independent_count():
    table = gpu_costs.load_table()
    work = table["workloads"]["sub/tdg-pair"]
    at_1024, at_768 = _flux_pass_flops(1024), _flux_pass_flops(768)  # 768 px: not a fitted point
    # one pair = 2 images x 28 steps of transformer passes + one VAE decode (< 0.5%)
    assert 2 * 28 * at_1024 <= work["flops"] <= 2 * 28 * at_1024 * 1.005
    counted_ratio = at_768 / at_1024
    assert gpu_costs.pass_flops(work["scaling"], 768) / gpu_costs.pass_flops(work["scaling"], 1024) == pytest.approx(
        counted_ratio, rel=1e-9
    )
    floor = gpu_costs.estimate("sub/tdg-pair")  # H100, 1024 px, 28 steps
    assert floor.kind == "flop-floor" and floor.seconds == pytest.approx(work["flops"] / 790e12)
    half = gpu_costs.estimate("sub/tdg-pair", steps=14, resolution=768)
    assert half.seconds == pytest.approx(floor.seconds * 0.5 * counted_ratio, rel=1e-6)
    assert "768 px, 14 steps" in half.source and "not a measurement" in half.describe()


def _table(**measured) -> dict:
    table = gpu_costs.load_table()
    figures = list(table["figures"])
    if measured:
        figures.append({"gpu": "H100", "kind": "measured", **measured})
    return {**table, "figures": figures}


def test_a_measured_figure_wins_over_the_floor_and_is_scaled_by_steps():
    table = _table(workload="sub/tdg-pair", seconds=12.0, source="python -m benchmarks gpu, 2026-12-01")
    at_reference = gpu_costs.estimate("sub/tdg-pair", table=table)
    assert (at_reference.kind, at_reference.seconds) == ("measured", 12.0)
    assert at_reference.describe() == "measured on H100: python -m benchmarks gpu, 2026-12-01"
    fewer = gpu_costs.estimate("sub/tdg-pair", steps=7, table=table)
    assert (
        fewer.seconds == pytest.approx(3.0)
        and "scaled x0.25 from 1024 px, 28 steps to 1024 px, 7 steps" in fewer.source
    )
    # other workloads still come from the floor
    assert gpu_costs.estimate("conceptbed/sample-image", table=table).kind == "flop-floor"


def test_unknown_gpu_and_workload_are_one_clear_error():
    with pytest.raises(InvalidArgumentError, match="no cost figures for that GPU; choose from H100"):
        gpu_costs.estimate("sub/tdg-pair", gpu="Z80")
    with pytest.raises(InvalidArgumentError, match="no cost figures for workload 'sub/nothing'"):
        gpu_costs.estimate("sub/nothing")


def test_hours_are_printed_with_the_digits_they_need():
    assert [gpu_costs.format_hours(h) for h in (775.3, 12.34, 0.0042)] == ["775", "12.3", "0.0042"]


def test_generate_sub_dry_run_prints_gpu_hours_and_their_source(tmp_path, capsys):
    assert invoke(["generate", "sub", "--out", str(tmp_path / "x"), "--dry-run"]) == 0
    text = capsys.readouterr().out
    flops = gpu_costs.load_table()["workloads"]["sub/tdg-pair"]["flops"]
    hours = 528_000 * flops / 790e12 / 3600  # 1,056 pairs x 500 images, each one TDG pair
    assert f"estimated GPU-hours: at least {hours:,.0f} (for at most this many images) on one H100" in text
    assert "a floor from FLOPs: no GPU measurement yet" in text
    assert f"  generate: 528,000 x {flops / 790e12:.3g} s per TDG pair (one kept image) = {hours:,.0f} h" in text
    assert "source: floor from FLOPs on H100, not a measurement" in text and "790 TFLOP/s" in text
    assert "then filter sub (VQA, 1 tile per image)" in text
    # at 512 px and 14 steps: the same table, scaled
    assert (
        invoke(["generate", "sub", "--out", str(tmp_path / "x"), "--dry-run", "--resolution", "512", "--steps", "14"])
        == 0
    )
    scaled = gpu_costs.estimate("sub/tdg-pair", resolution=512, steps=14)
    assert f"x {scaled.seconds:.3g} s per TDG pair" in capsys.readouterr().out
    # 512 px: (512 / 16)^2 = 1,024 image tokens + 512 text tokens
    assert gpu_costs.pass_tokens(gpu_costs.load_table()["workloads"]["sub/tdg-pair"]["scaling"], 512) == 1536
    assert not (tmp_path / "x").exists()


def test_prompt_only_dry_run_costs_half_a_pair(tmp_path, capsys):
    argv = ["generate", "sub", "--out", str(tmp_path / "x"), "--dry-run", "--mode", "prompt-only"]
    assert invoke(argv) == 0
    single = gpu_costs.estimate("sub/prompt-only-image").seconds
    assert f"x {single:.3g} s per prompt-only image" in capsys.readouterr().out
    assert single == pytest.approx(gpu_costs.estimate("sub/tdg-pair").seconds / 2, rel=0.01)
