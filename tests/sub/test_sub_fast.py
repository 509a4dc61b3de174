"""``generate sub --fast`` and its parts on the CPU, on the tiny FLUX, against the plain path.

What runs on a CPU is checked here: fused q/k/v projections (exact: the same latents bit for
bit), the VAE decode in channels-last, ``torch.compile`` with a full graph and the ahead-of-time
compiled package (``--aot``: exported, compiled, cached, loaded again by another process's
generator) within a stated tolerance, with TDG's tie exact in every path. What needs an
Ada/Hopper GPU (fp8 matmuls, CUDA graphs, FA3) is refused on the CPU in one line before anything
is written; its speed and images are the GPU device check's (benchmarks/_gpu_fast.py).
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from conceptforge.commands import main as conceptforge
from conceptforge.generators.sub.tdg import TDGParams, eta_schedule
from tests.cli_errors import one_line_error
from tests.sub import test_sub_script as script
from tests.sub.sub_helpers import TDG_PROMPTS

_args = script._args
candidate_spec = script.candidate_spec  # the fixture: two birds x two attributes

SIZE = dict(height=32, width=32, num_inference_steps=4)
#: k = 1 with tmax 0.9 and tmin 0.2: over 4 steps (t = 1, 0.83, 0.67, 0.5 after FLUX's shift, about)
#: the schedule gives eta 1 at the first step, fractions in between and 0 at the end once t < tmin
#: would be reached; the test asserts the first step ties everything and the etas equal the plain path's.
PARAMS = TDGParams(k=1.0, tmin=0.2, tmax=0.9)
#: How far a compiled pass may move the final latents (values of order 1) from eager fp32: inductor
#: fuses and reorders float32 sums, each reordering changes a result by up to a few ulps (1.2e-7
#: relative); through the tiny transformer's ~12 matmul/normalisation stages per pass and 4 steps
#: the errors add up to well under 1e-4 (measured here: ~2e-6 for one AOT pass). 1e-4 is ~25
#: 8-bit grey levels' worth of nothing: the images are the same to the byte or within 1 level.
COMPILED_LATENT_TOLERANCE = 1e-4


def _trace(flux, seed: int) -> tuple[list[tuple[float, bool, float]], torch.Tensor]:
    """Per step: eta, whether R's and G's latents are identical, the share of tied prediction
    elements; and the final latents."""
    trace = []

    def on_step(i, t, eta, noise_pred, latents):
        tied = (noise_pred[0] == noise_pred[1]).float().mean().item()
        trace.append((eta, torch.equal(latents[0], latents[1]), tied))

    with torch.no_grad():
        result = flux.denoise(
            TDG_PROMPTS,
            seed=seed,
            eta=lambda t: eta_schedule(t, PARAMS.tmin, PARAMS.tmax, PARAMS.k),
            on_step=on_step,
            **SIZE,
        )
    return trace, result.latents


def _assert_tie_exact(plain_trace, trace) -> None:
    """The etas are the plain path's (floats computed before the loop, outside any compiled code);
    R and G are identical at the same steps; every step ties at least its eta share."""
    assert [eta for eta, _, _ in trace] == [eta for eta, _, _ in plain_trace]
    assert [same for _, same, _ in trace] == [same for _, same, _ in plain_trace]
    assert trace[0][:2] == (1.0, True)
    for eta, _, tied in trace:
        assert tied >= eta - 1e-6


def _fresh(tiny_flux_dir):
    """The tiny pipeline loaded again: the session's ``tiny_flux`` stays plain (the reference)."""
    from conceptforge.generators.sub.flux_tdg import TDGFlux

    return TDGFlux.from_pretrained(str(tiny_flux_dir), device="cpu", max_sequence_length=16)


def test_fused_qkv_projections_are_exact(tiny_flux, tiny_flux_dir):
    """Fused q/k/v computes the same dot products in the same order per output element: the
    latents of every step are the unfused model's bit for bit, so are the tie and the images."""
    from conceptforge.generators.sub.flux_tdg import PairRequest
    from conceptforge.generators.sub.stage import GenerationSettings, apply_fast_paths

    fused = _fresh(tiny_flux_dir)
    apply_fast_paths(fused, GenerationSettings(fuse_qkv=True))
    apply_fast_paths(fused, GenerationSettings(fuse_qkv=True))  # a reused generator: no-op
    attention = fused.pipe.transformer.transformer_blocks[0].attn
    assert attention.fused_projections and attention.to_qkv.weight.shape[0] == 3 * attention.to_q.weight.shape[0]
    for seed in (2, 3):
        (plain_trace, plain), (fused_trace, latents) = _trace(tiny_flux, seed), _trace(fused, seed)
        assert torch.equal(plain, latents)
        assert fused_trace == plain_trace
    request = [PairRequest(*TDG_PROMPTS, 5, PARAMS)]
    a = tiny_flux.generate_batch(request, mode="prompt-only", **SIZE)[0].reference
    b = fused.generate_batch(request, mode="prompt-only", **SIZE)[0].reference
    assert np.array_equal(np.asarray(a), np.asarray(b))


def test_vae_channels_last_decodes_the_same_image(tiny_flux, tiny_flux_dir):
    """Channels-last changes how the VAE's activations are laid out, not what is computed: the same
    convolutions, summed in another order by another kernel, so a value may round one grey level
    the other way (seen under two pytest workers, whose thread counts differ) and never more."""
    from conceptforge.generators.sub.flux_tdg import PairRequest
    from conceptforge.generators.sub.stage import GenerationSettings, apply_fast_paths

    flux = _fresh(tiny_flux_dir)
    apply_fast_paths(flux, GenerationSettings(vae_channels_last=True))
    conv = next(
        m for m in flux.pipe.vae.decoder.modules() if isinstance(m, torch.nn.Conv2d) and m.kernel_size != (1, 1)
    )
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    request = [PairRequest(*TDG_PROMPTS, 7, PARAMS)]
    a = tiny_flux.generate_batch(request, **SIZE)[0].reference
    b = flux.generate_batch(request, **SIZE)[0].reference
    # by hand: at most one grey level apart everywhere, so the MSE is at most 1 and the PSNR at
    # least 10·log10(255²/1) = 48.13 dB
    assert np.abs(np.asarray(a).astype(int) - np.asarray(b).astype(int)).max() <= 1


@pytest.mark.heavy
def test_compile_full_graph_keeps_the_tie_exact(tiny_flux, tiny_flux_dir):
    """``--compile`` (full graph: a graph break would raise) gives the eager latents within the
    stated tolerance, and the tie exactly as the plain path has it."""
    from conceptforge.generators.sub.stage import GenerationSettings, apply_fast_paths

    flux = _fresh(tiny_flux_dir)
    apply_fast_paths(flux, GenerationSettings(compile=True, fuse_qkv=True))
    assert flux.pipe.transformer._compiled_call_impl is not None
    (plain_trace, plain), (trace, latents) = _trace(tiny_flux, 2), _trace(flux, 2)
    _assert_tie_exact(plain_trace, trace)
    assert (plain - latents).abs().max().item() < COMPILED_LATENT_TOLERANCE


@pytest.mark.heavy
def test_aot_package_matches_eager_and_is_loaded_again(tiny_flux, tiny_flux_dir, tmp_path, caplog):
    """``--aot``: the package built into the cache gives the eager latents within the tolerance and
    the tie exactly; another generator (another rank, a resumed task) loads it without building,
    and gives the same latents bit for bit; a package whose record is stale is named as such."""
    from conceptforge.generators.sub.aot import ABSENT, stale_reason
    from conceptforge.generators.sub.stage import GenerationSettings, apply_fast_paths

    cache = tmp_path / "compiled"
    settings = GenerationSettings(aot=True)
    first = _fresh(tiny_flux_dir)
    apply_fast_paths(first, settings, compile_cache=cache)
    (plain_trace, plain), (trace, latents) = _trace(tiny_flux, 3), _trace(first, 3)
    _assert_tie_exact(plain_trace, trace)
    assert (plain - latents).abs().max().item() < COMPILED_LATENT_TOLERANCE
    [package] = first.transformer_forward.built
    assert package.parent == cache and package.suffix == ".pt2"
    assert package.stat().st_size < 20 * 2**20  # the weights stay in the model, not in the package

    second = _fresh(tiny_flux_dir)
    apply_fast_paths(second, settings, compile_cache=cache)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="conceptforge"):
        _, again = _trace(second, 3)
    assert second.transformer_forward.built == [] and second.transformer_forward.loaded == [package]
    assert torch.equal(again, latents)
    assert not [r for r in caplog.records if r.name.startswith("conceptforge")]  # no build, no refusal

    record = json.loads(package.with_suffix(".json").read_text())
    key = {name: record[name] for name in ("format", "device", "torch", "model", "transforms", "inputs")}
    assert stale_reason(package, key) is None and record["device"] == "cpu" and record["torch"] == torch.__version__
    assert (
        stale_reason(package, {**key, "torch": "2.0.0"}) == f"built for torch {torch.__version__}, this run has 2.0.0"
    )
    assert stale_reason(package, {**key, "model": "other@main"}).startswith("built for model ")
    assert stale_reason(tmp_path / "none.pt2", key) == ABSENT


@pytest.mark.heavy
def test_a_stale_or_damaged_cache_is_refused_in_one_line_and_rebuilt(tiny_flux_dir, tmp_path, caplog):
    """A package built by another torch, or whose bytes changed, is refused in one warning line and
    rebuilt; the rebuilt one is whole (a third generator loads it)."""
    from conceptforge.generators.sub.stage import GenerationSettings, apply_fast_paths

    cache = tmp_path / "compiled"
    first = _fresh(tiny_flux_dir)
    apply_fast_paths(first, GenerationSettings(aot=True), compile_cache=cache)
    _, latents = _trace(first, 1)
    [package] = first.transformer_forward.built
    record_path = package.with_suffix(".json")
    record = json.loads(record_path.read_text())
    for damage, reason in (
        (lambda: record_path.write_text(json.dumps({**record, "torch": "2.0.0"})), "built for torch 2.0.0"),
        (lambda: package.write_bytes(package.read_bytes()[:-10]), "its bytes do not match its record"),
    ):
        damage()
        caplog.clear()
        flux = _fresh(tiny_flux_dir)
        apply_fast_paths(flux, GenerationSettings(aot=True), compile_cache=cache)
        with caplog.at_level(logging.WARNING, logger="conceptforge"):
            _, again = _trace(flux, 1)
        refusals = [
            r.getMessage() for r in caplog.records if r.name.startswith("conceptforge") and "refused" in r.getMessage()
        ]
        assert len(refusals) == 1 and reason in refusals[0] and "\n" not in refusals[0], refusals
        assert flux.transformer_forward.built == [package] and torch.equal(again, latents)


@pytest.mark.heavy
def test_aot_of_a_quantised_fused_transformer_reads_its_inner_weights(tiny_flux_dir, tmp_path):
    """torchao's int8 weights are tensor subclasses: the package names their inner tensors
    (``…parametrizations.weight.original<i>``), which the loader maps from the live model. The AOT
    path then gives the quantised eager path's latents within the tolerance (the CPU check of what
    ``--fast`` does with fp8 on a GPU)."""
    pytest.importorskip("torchao")
    from conceptforge.generators.sub.stage import GenerationSettings, apply_fast_paths

    settings = dict(quantize="int8-weight", fuse_qkv=True)
    eager, compiled = _fresh(tiny_flux_dir), _fresh(tiny_flux_dir)
    apply_fast_paths(eager, GenerationSettings(**settings))
    apply_fast_paths(compiled, GenerationSettings(**settings, aot=True), compile_cache=tmp_path)
    (eager_trace, expected), (trace, latents) = _trace(eager, 4), _trace(compiled, 4)
    _assert_tie_exact(eager_trace, trace)
    assert (expected - latents).abs().max().item() < COMPILED_LATENT_TOLERANCE


@pytest.mark.heavy
def test_generate_with_aot_caches_in_the_work_folder_and_a_resume_loads_it(
    tmp_path, mini_cub, tiny_flux_dir, candidate_spec, capsys
):
    out = tmp_path / "aot"
    argv = ["generate", "sub", *_args(out, mini_cub, tiny_flux_dir, candidate_spec, "--aot", "--chunk-size", "2")]
    assert conceptforge([*argv, "--max-items", "4"]) == 0  # an interrupted run: 4 of 8 images
    packages = sorted((out / ".work" / "compiled").glob("*.pt2"))
    assert len(packages) == 1
    built = packages[0].stat().st_mtime_ns
    assert json.loads((out / ".work" / "run.json").read_text())["settings"]["aot"] is True
    assert conceptforge(argv) == 0  # the resume loads the package: not rebuilt
    assert "wrote 8 images (4 pairs)" in capsys.readouterr().out
    assert packages[0].stat().st_mtime_ns == built


def test_what_needs_a_gpu_or_a_choice_is_refused_in_one_line_before_anything_is_written(
    tmp_path, mini_cub, tiny_flux_dir, candidate_spec, capsys
):
    out = tmp_path / "o"
    argv = ["generate", "sub", *_args(out, mini_cub, tiny_flux_dir, candidate_spec)]
    refusals = {
        ("--fast",): "error: --fast needs a CUDA GPU of compute capability >= 8.9 (Ada, Hopper); this run is on cpu: "
        "its parts that run here are --fuse-qkv, --compile or --aot, --vae-channels-last",
        ("--quantize", "fp8-dynamic"): "error: --quantize fp8-dynamic needs a CUDA GPU of compute capability >= 8.9",
        (
            "--cuda-graphs",
        ): "error: --cuda-graphs replays the transformer's GPU kernels: it needs a CUDA GPU; this run is on cpu",
        ("--attention-backend", "_flash_3"): "error: --attention-backend _flash_3 is a CUDA kernel; this run is on cpu",
        ("--compile", "--aot"): "error: --compile and --aot both compile the transformer: choose one",
        ("--compile-mode", "max-autotune"): "error: --compile-mode 'max-autotune' needs --compile or --aot",
        (
            "--compile-cache",
            str(tmp_path / "c"),
        ): "error: --compile-cache keeps --aot's packages: add --aot (or --fast)",
    }
    for extra, expected in refusals.items():
        err = one_line_error([*argv, *extra], capsys)
        assert err.startswith(expected), (extra, err)
        assert not out.exists() and not (tmp_path / "c").exists()


def test_fast_recipe_and_settings(monkeypatch):
    """``--fast`` stands for every part (FA3 only where installed, cuDNN SDPA otherwise); the
    settings are stored only when on; fp8-dynamic is torchao's dynamic float8 with per-row scales."""
    pytest.importorskip("torchao")
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow

    from conceptforge.generators.sub import fast_paths
    from conceptforge.generators.sub.stage import GenerationSettings

    config = fast_paths._quantize_config("fp8-dynamic")
    assert isinstance(config, Float8DynamicActivationFloat8WeightConfig)
    assert [type(g) for g in config.granularity] == [
        PerRow,
        PerRow,
    ]  # activations per token row, weights per output row
    assert fast_paths.resolve_attention_backend("best", "cpu") == "native"
    assert GenerationSettings().to_config() == GenerationSettings(fuse_qkv=False, aot=False).to_config()
    assert GenerationSettings(aot=True, compile_mode="max-autotune").to_config()["compile_mode"] == "max-autotune"

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(fast_paths, "flash_attention_3_installed", lambda: False)
    recipe = fast_paths.fast_recipe("cuda:0")
    assert recipe == {
        "fuse_qkv": True,
        "quantize": "fp8-dynamic",
        "aot": True,
        "compile_mode": "max-autotune",
        "cuda_graphs": True,
        "attention_backend": "_native_cudnn",
        "vae_channels_last": True,
    }
    monkeypatch.setattr(fast_paths, "flash_attention_3_installed", lambda: True)
    assert fast_paths.resolve_attention_backend("best", "cuda:0") == "_flash_3"
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 9))  # Ada: no FA3
    assert fast_paths.resolve_attention_backend("best", "cuda:0") == "_native_cudnn"
    stored = GenerationSettings(**recipe).to_config()
    assert {name: stored[name] for name in recipe} == recipe  # every part a stored setting of the run
