"""``generate sub --quantize``: int8 weight-only quantisation of the tiny FLUX transformer on the CPU.

What is checked: the Linear weights really are quantised (the images differ from the plain path,
so the PSNR bound below can fail both ways), TDG's tie is as exact as on the plain path, the
images stay within the bound of the plain path's, the option is a stored setting (resume with
another value refused, ``verify``'s rebuild quantises again), and a machine that cannot run a
mode is told so in one line before anything is written. fp8 needs a GPU of compute capability
>= 8.9; its refusal is tested here, its images by the device check (benchmarks/gpu.py).
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("torchao")

from conceptforge.commands import invoke  # noqa: E402
from conceptforge.commands import main as conceptforge  # noqa: E402
from conceptforge.errors import ConceptforgeError, DependencyMissingError, DeviceUnavailableError  # noqa: E402
from conceptforge.generators.sub.tdg import TDGParams, eta_schedule  # noqa: E402
from tests.cli_errors import one_line_error
from tests.sub import test_sub_script as script  # noqa: E402
from tests.sub.sub_helpers import TDG_PROMPTS  # noqa: E402

_args = script._args
candidate_spec = script.candidate_spec  # the fixture: two birds x two attributes

SIZE = dict(height=32, width=32, num_inference_steps=8)
#: The bound, and why: int8 weight-only quantisation is per output channel, symmetric: each
#: weight moves by at most half a step, max|w_row| / 254 (0.4% of the row's largest weight; about
#: 0.1% of a random row's rms on average, as rounding errors are uniform and largest weights are ~3
#: rms). Through the tiny transformer's ~10 Linear layers in a row and 8 steps that stays well under
#: 1% of the image range, i.e. < 2.55 grey levels of RMS error: PSNR > 20*log10(255/2.55) = 40 dB,
#: the same 40 dB that ``verify`` takes for "the same image up to floating point". Measured on
#: this tiny model: 56.3-57.1 dB (4 seeds, 8 steps, 32 px).
PSNR_BOUND_DB = 40.0


def psnr(a, b) -> float:
    x, y = (np.asarray(image, dtype=np.float64) for image in (a, b))
    mse = float(np.mean((x - y) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


@pytest.fixture(scope="module")
def quantized_flux(tiny_flux_dir):
    """The tiny pipeline loaded again (the session's ``tiny_flux`` stays plain), then int8-quantised."""
    from conceptforge.generators.sub.flux_tdg import TDGFlux
    from conceptforge.generators.sub.stage import GenerationSettings, apply_fast_paths

    flux = TDGFlux.from_pretrained(str(tiny_flux_dir), device="cpu", max_sequence_length=16)
    apply_fast_paths(flux, GenerationSettings(quantize="int8-weight"))
    return flux


def test_int8_weights_are_quantised_once(quantized_flux):
    from torchao.quantization import Int8Tensor

    from conceptforge.generators.sub.stage import GenerationSettings, apply_fast_paths

    transformer = quantized_flux.pipe.transformer
    linears = [m for m in transformer.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 30 and all(isinstance(m.weight, Int8Tensor) for m in linears)
    before = [m.weight for m in linears]
    apply_fast_paths(quantized_flux, GenerationSettings(quantize="int8-weight"))  # a reused generator: no-op
    assert [m.weight for m in linears] == before
    with pytest.raises(ConceptforgeError, match="already quantised"):
        apply_fast_paths(quantized_flux, GenerationSettings(quantize="fp8-weight"))


def _tie_trace(flux, seed: int, params: TDGParams) -> list[tuple[float, bool, float]]:
    """Per step: eta, whether R and G latents are identical, and the share of tied prediction elements."""
    trace = []

    def on_step(i, t, eta, noise_pred, latents):
        tied = (noise_pred[0] == noise_pred[1]).float().mean().item()
        trace.append((eta, torch.equal(latents[0], latents[1]), tied))

    with torch.no_grad():
        flux.denoise(
            TDG_PROMPTS,
            seed=seed,
            eta=lambda t: eta_schedule(t, params.tmin, params.tmax, params.k),
            on_step=on_step,
            **SIZE,
        )
    return trace


def test_tie_stays_exact_and_images_stay_close(tiny_flux, quantized_flux):
    """Where the plain path's R and G latents are identical (eta = 1 steps) so are the quantised
    path's, and every step ties at least the eta share of elements; the R images differ from the
    plain path's (the weights changed) by less than the bound."""
    from conceptforge.generators.sub.flux_tdg import PairRequest

    params = TDGParams(k=1.0, tmin=0.2, tmax=0.9)
    for seed in (2, 3):
        plain, quantized = _tie_trace(tiny_flux, seed, params), _tie_trace(quantized_flux, seed, params)
        assert [eta for eta, _, _ in plain] == [eta for eta, _, _ in quantized]
        assert [same for _, same, _ in plain] == [same for _, same, _ in quantized]
        assert quantized[0][:2] == (1.0, True)  # tied early ...
        assert quantized[-1][0] == 0.0 and not quantized[-1][1]  # ... free at the end
        for eta, _, tied in quantized:
            assert tied >= eta - 1e-6

    requests = [PairRequest(*TDG_PROMPTS, seed, params) for seed in range(4)]
    plain = [tiny_flux.generate_batch([r], **SIZE)[0].reference for r in requests]
    quantized = [quantized_flux.generate_batch([r], **SIZE)[0].reference for r in requests]
    figures = [psnr(a, b) for a, b in zip(plain, quantized)]
    print(
        f"int8-weight vs plain, tiny FLUX, 32 px, {SIZE['num_inference_steps']} steps: PSNR {', '.join(f'{v:.1f}' for v in figures)} dB"
    )
    assert all(PSNR_BOUND_DB < value < math.inf for value in figures), figures


@pytest.fixture
def generate_sub(mini_cub, tiny_flux_dir, candidate_spec):
    """``generate sub`` argv for the tiny FLUX and the miniature CUB, writing to ``out``."""
    return lambda out, *extra: ["generate", "sub", *_args(out, mini_cub, tiny_flux_dir, candidate_spec, *extra)]


def test_quantize_is_a_bound_setting_and_verify_quantises_again(
    tmp_path, generate_sub, tiny_flux_dir, capsys, monkeypatch
):
    from conceptforge.generators.sub import fast_paths

    out = tmp_path / "int8"
    assert invoke(generate_sub(out, "--quantize", "int8-weight")) == 0
    assert "wrote 8 images (4 pairs)" in capsys.readouterr().out
    assert json.loads((out / ".work" / "run.json").read_text())["settings"]["quantize"] == "int8-weight"
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["configs"]["default"]["rebuild"]["settings"]["quantize"] == "int8-weight"
    with pytest.raises(ConceptforgeError, match="other settings"):
        invoke(generate_sub(out, "--max-items", "1"))

    calls = []
    real = fast_paths.quantize_transformer
    monkeypatch.setattr(fast_paths, "quantize_transformer", lambda t, mode: (calls.append(mode), real(t, mode)))
    assert conceptforge(["verify", str(out), "--all", "--weights", f"diffusion={tiny_flux_dir}"]) == 0
    assert calls == ["int8-weight"] and "verified: 8 of 8 item(s)" in capsys.readouterr().out


def test_a_mode_this_machine_cannot_run_is_one_line_before_anything_is_written(
    tmp_path, generate_sub, capsys, monkeypatch
):
    out = tmp_path / "o"
    fp8 = one_line_error(generate_sub(out, "--quantize", "fp8-weight"), capsys)
    assert fp8.startswith("error: --quantize fp8-weight needs a CUDA GPU of compute capability >= 8.9")
    assert "this run is on cpu: use --quantize int8-weight" in fp8 and not out.exists()
    unknown = one_line_error(generate_sub(out, "--quantize", "int4"), capsys)
    assert "argument --quantize: invalid choice: 'int4'" in unknown and not out.exists()
    for name in ("torchao", "torchao.quantization"):  # as if torchao were not installed
        monkeypatch.setitem(sys.modules, name, None)
    missing = one_line_error(generate_sub(out, "--quantize", "int8-weight"), capsys)
    assert missing.strip() == (
        "error: --quantize int8-weight needs torchao: pip install 'conceptforge[quantize]' (or pip install torchao)"
    )
    assert not out.exists()


def test_settings_and_older_gpus_are_refused(monkeypatch):
    from conceptforge.generators.sub.fast_paths import check_quantize
    from conceptforge.generators.sub.stage import GenerationSettings

    with pytest.raises(ConceptforgeError, match="unknown --quantize 'int4'; use one of int8-weight, fp8-weight"):
        GenerationSettings(quantize="int4")
    assert "quantize" not in GenerationSettings().to_config()  # runs without it keep their settings
    assert GenerationSettings(quantize="int8-weight").to_config()["quantize"] == "int8-weight"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-80GB")
    with pytest.raises(DeviceUnavailableError, match=r"NVIDIA A100-SXM4-80GB has 8\.0: use --quantize int8-weight"):
        check_quantize("fp8-weight", "auto")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    check_quantize("fp8-weight", "cuda:0")  # an H100: accepted (torchao imports)
    monkeypatch.setitem(sys.modules, "torchao.quantization", None)  # installed, but does not import
    with pytest.raises(DependencyMissingError, match=r"torchao does not import beside torch .*: install the torchao"):
        check_quantize("fp8-weight", "cuda:0")
    monkeypatch.setitem(sys.modules, "torchao", None)  # not installed
    with pytest.raises(DependencyMissingError, match=r"needs torchao: pip install 'conceptforge\[quantize\]'"):
        check_quantize("int8-weight", "cpu")
