"""GPU device check: SUB's TDG vs a plain FLUX batch, the VQA filter and ConceptBed steps at real shapes.

What a GPU hour buys, measured with random weights at the real shapes (no download, no network):

* **SUB**: TDG (``TDGFlux.generate``, the project's loop: two prompts from one noise, tied every
  step, R decoded) on a FLUX.1-dev-shaped transformer at 1024 px, 28 steps, bf16, against what a
  user would otherwise run, ``FluxPipeline.__call__`` on the same two prompts as a batch of 2
  (both decoded), interleaved. Prompt embeddings are precomputed random tensors (no tokenizer,
  no text encoder: they cost <1% of a pair). Seconds per pair, peak memory, achieved TFLOP/s and
  the GPU-hours of the paper plan (1,056 pairs x 500 images). Then the fast paths of
  ``generate sub``, each against the plain TDG path in the same run with the PSNR of its images:
  ``--pairs-per-batch 2``, ``--attention-backend _native_cudnn`` / ``_native_flash``,
  ``--quantize int8-weight`` / ``fp8-weight`` (torchao; fp8 skipped below compute capability 8.9), ``--compile``.
* **SUB --fast** (``--sections sub_fast``, what ``gpu_check.sh`` runs by default): plain bf16
  against each part of ``generate sub --fast`` alone and the whole recipe (benchmarks/_gpu_fast.py).
* **VQA filter**: the scorer's forward (``filters.vqa.next_token_logits``) at InternVL-2.5-8B's
  shape (InternViT-300M + a 7B Llama-shaped decoder), one 448 px tile per image: images/s in
  batches of 8 (``filter sub``'s default) against one image at a time; then 10 tiles per image.
* **ConceptBed**: one DreamBooth (full UNet, prior preservation) and one Custom Diffusion
  training step of the project's ``ConceptTrainer`` at SD-1.5's shape, 512 px, and one UNet pass
  of classifier-free-guided sampling.

Everything goes to one folder: ``gpu-check.json`` (all numbers), ``gpu-check.md`` (the tables for
BENCHMARKS.md), ``measured-costs.json`` (figures in the format of conceptforge/gpu_costs.json) and
``log.txt``. Each section is saved as soon as it ends, so a run cut short keeps what it measured;
optional parts are skipped once ``--budget`` seconds have passed.

    bash benchmarks/gpu_check.sh OUT             # on the GPU machine: installs .whl/, then runs this
    python -m benchmarks.gpu --out OUT           # the same, packages already installed
    python -m benchmarks.gpu --tiny --out OUT    # tiny shapes on the CPU in seconds (tests/benchmarks)
    python -m benchmarks gpu                     # from the benchmark runner (skips without CUDA)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks._gpu_shapes import REAL, TINY, Shapes

logger = logging.getLogger("conceptforge.benchmarks.gpu")

#: The paper plan of ``generate sub --dry-run``: 33 birds x 32 substitutions x 500 images.
PAPER_PAIRS = 1056
PAPER_IMAGES_PER_PAIR = 500
C_R = "A photo of a Blue Jay with black colored feathers on the crown of its head"
C_G = "A photo of a bird with black colored feathers on the crown of its head"


@dataclass
class Settings:
    """How big and how long: the real check, or the tiny one the test suite runs on the CPU."""

    shapes: Shapes
    device: torch.device
    dtype: torch.dtype
    flux_steps: int
    repeats: int
    vqa_batch: int
    vqa_rounds: int
    train_steps: int
    compile: bool
    budget: float

    @property
    def tiny(self) -> bool:
        return self.shapes is TINY


@dataclass
class Check:
    """The report being filled in, saved after every section."""

    out: Path
    settings: Settings
    started: float = field(default_factory=time.perf_counter)
    report: dict[str, Any] = field(default_factory=dict)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def over_budget(self) -> bool:
        return self.elapsed() > self.settings.budget

    def save(self) -> None:
        self.report["elapsed_s"] = round(self.elapsed(), 1)
        (self.out / "gpu-check.json").write_text(json.dumps(self.report, indent=1) + "\n")
        (self.out / "gpu-check.md").write_text(markdown(self.report))
        (self.out / "measured-costs.json").write_text(json.dumps(cost_figures(self.report), indent=1) + "\n")


# -- measuring --------------------------------------------------------------------------------------


def significant(value: float, digits: int = 4) -> float:
    """``value`` to ``digits`` significant digits: timings from 1e-4 s (tiny shapes on a CPU) to
    minutes (real shapes on a GPU) keep the same relative precision in the report."""
    return float(f"{value:.{digits}g}")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def peak_gib(device: torch.device) -> float | None:
    """Peak GPU memory allocated since the last :func:`reset_peak`; None on the CPU (not tracked)."""
    if device.type != "cuda":
        return None
    return round(torch.cuda.max_memory_allocated(device) / 2**30, 2)


def timed(fn: Callable[[], Any], device: torch.device) -> tuple[float, Any]:
    sync(device)
    start = time.perf_counter()
    value = fn()
    sync(device)
    return time.perf_counter() - start, value


def interleaved(a: Callable[[], Any], b: Callable[[], Any], repeats: int, device: torch.device) -> tuple[list, list]:
    """Seconds of ``a`` and ``b`` run alternately (A B, B A, ...), both warmed up by the caller."""
    times: tuple[list[float], list[float]] = ([], [])
    for round_ in range(repeats):
        order = ((0, a), (1, b)) if round_ % 2 == 0 else ((1, b), (0, a))
        for slot, fn in order:
            times[slot].append(timed(fn, device)[0])
    return times


def psnr(a: Any, b: Any) -> float:
    """PSNR in dB of two 8-bit images (inf when identical)."""
    x, y = (np.asarray(image, dtype=np.float64) for image in (a, b))
    mse = float(np.mean((x - y) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def summary(values: list[float]) -> dict[str, float]:
    return {"min": significant(min(values)), "median": significant(statistics.median(values)), "n": len(values)}


def matmul_tflops(settings: Settings) -> float:
    """Achieved dense matmul rate in the run's dtype (the FLOP floor's denominator, measured here)."""
    n = 256 if settings.tiny else 8192
    device, dtype = settings.device, settings.dtype
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    for _ in range(3):
        a @ b
    iterations = 3 if settings.tiny else 50
    seconds, _ = timed(lambda: [a @ b for _ in range(iterations)], device)
    return 2 * n**3 * iterations / seconds / 1e12


# -- SUB ---------------------------------------------------------------------------------------------
class RandomPrompts:
    """``encode_prompt`` without text encoders: one fixed random embedding per prompt string."""

    def __init__(self, shapes: Shapes, device: torch.device, dtype: torch.dtype) -> None:
        self.shapes, self.device, self.dtype = shapes, device, dtype
        self.cache: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def one(self, prompt: str) -> tuple[torch.Tensor, torch.Tensor]:
        if prompt not in self.cache:
            generator = torch.Generator(device="cpu").manual_seed(len(self.cache))
            text = self.shapes.flux_text_tokens
            embeds = torch.randn(1, text, self.shapes.flux["joint_attention_dim"], generator=generator)
            pooled = torch.randn(1, self.shapes.flux["pooled_projection_dim"], generator=generator)
            self.cache[prompt] = (embeds.to(self.device, self.dtype), pooled.to(self.device, self.dtype))
        return self.cache[prompt]

    def __call__(self, prompt=None, prompt_2=None, device=None, prompt_embeds=None, pooled_prompt_embeds=None, **_):
        if prompt_embeds is None:
            prompts = [prompt] if isinstance(prompt, str) else list(prompt)
            pairs = [self.one(p) for p in prompts]
            prompt_embeds = torch.cat([e for e, _ in pairs])
            pooled_prompt_embeds = torch.cat([p for _, p in pairs])
        text_ids = torch.zeros(prompt_embeds.shape[1], 3, device=self.device, dtype=self.dtype)
        return prompt_embeds, pooled_prompt_embeds, text_ids


def build_flux(settings: Settings):
    """A FluxPipeline of the real (or tiny) transformer and VAE with random weights, built on the
    device in the run's dtype, and no text encoders (:class:`RandomPrompts` stands in)."""
    from benchmarks._gpu_shapes import build_flux_transformer, build_flux_vae
    from conceptforge.testing.random_flux import flux_pipeline

    previous = torch.get_default_dtype()
    torch.set_default_dtype(settings.dtype)
    try:
        with torch.device(settings.device):
            transformer = build_flux_transformer(settings.shapes)
            vae = build_flux_vae(settings.shapes)
    finally:
        torch.set_default_dtype(previous)
    pipe = flux_pipeline(transformer, vae)
    pipe.encode_prompt = RandomPrompts(settings.shapes, settings.device, settings.dtype)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def check_sub(check: Check) -> None:
    from conceptforge.generators.sub.flux_tdg import PairRequest, TDGFlux
    from conceptforge.generators.sub.tdg import TDGParams
    from conceptforge.gpu_costs import load_table

    settings, device = check.settings, check.settings.device
    resolution, steps = settings.shapes.flux_resolution, settings.flux_steps
    section: dict[str, Any] = {"resolution": resolution, "steps": steps, "dtype": str(settings.dtype).split(".")[-1]}
    check.report["sub"] = section
    build_s, pipe = timed(lambda: build_flux(settings), device)
    section["build_random_model_s"] = round(build_s, 1)
    flux = TDGFlux(pipe, max_sequence_length=settings.shapes.flux_text_tokens)
    params = TDGParams(k=10.0, tmin=0.2, tmax=0.9)
    size = dict(height=resolution, width=resolution, num_inference_steps=steps)
    seeds = iter(range(10**6))

    def tdg():
        return flux.generate_batch([PairRequest(C_R, C_G, next(seeds), params)], **size)

    def plain():
        noise, _ = flux.initial_noise(next(seeds), resolution, resolution, settings.dtype)
        return pipe(
            [C_R, C_G],
            latents=noise.repeat(2, 1, 1),
            guidance_scale=3.5,
            max_sequence_length=settings.shapes.flux_text_tokens,
            **size,
        ).images

    reset_peak(device)
    tdg(), plain()  # warm-up (kernels, allocator)
    ours, baseline = interleaved(tdg, plain, settings.repeats, device)
    section["tdg_pair_s"] = summary(ours)
    section["plain_batch_of_2_s"] = summary(baseline)
    section["ratio_tdg_vs_plain"] = round(statistics.median(a / b for a, b in zip(ours, baseline)), 4)
    section["peak_memory_gib"] = peak_gib(device)
    per_pair = statistics.median(ours)
    if not settings.tiny:
        flops = load_table()["workloads"]["sub/tdg-pair"]["flops"]
        section["achieved_tflops"] = round(flops / per_pair / 1e12, 1)
    images = PAPER_PAIRS * PAPER_IMAGES_PER_PAIR
    section["paper_plan"] = {
        "pairs": PAPER_PAIRS,
        "images_per_pair": PAPER_IMAGES_PER_PAIR,
        "tdg_pairs": images,
        "gpu_hours": round(images * per_pair / 3600, 2),
    }
    check.save()
    flux = pipe = None  # free the GPU for the next section
    release(device)


def check_sub_fast_paths(check: Check) -> None:
    """The fast paths, last: the numbers above matter more, and these stop at the budget."""
    from conceptforge.generators.sub.flux_tdg import PairRequest, TDGFlux
    from conceptforge.generators.sub.tdg import TDGParams

    settings = check.settings
    resolution = settings.shapes.flux_resolution
    flux = TDGFlux(build_flux(settings), max_sequence_length=settings.shapes.flux_text_tokens)
    params = TDGParams(k=10.0, tmin=0.2, tmax=0.9)
    size = dict(height=resolution, width=resolution, num_inference_steps=settings.flux_steps)
    fast_paths(check, flux, [PairRequest(C_R, C_G, 1000 + i, params) for i in range(2)], size)
    flux = None
    release(settings.device)


@dataclass(frozen=True)
class FastPaths:
    """The fast-path settings ``apply_fast_paths`` reads (its ``FastPathSettings`` protocol). Not
    ``stage.GenerationSettings``: the stage imports the card code and with it ``datasets``, which
    the GPU image lacks (the first GPU run of this section failed on that import)."""

    attention_backend: str | None = None
    quantize: str | None = None
    compile: bool = False


def fast_paths(check: Check, flux: Any, requests: list, size: dict[str, int]) -> None:
    """Each fast path of ``generate sub`` against the plain TDG path, interleaved: seconds per
    pair and the PSNR of its R images against the plain path's for the same seeds. Each side sets
    the transformer's state it needs before it runs (attention backend, compiled or eager)."""
    from conceptforge.generators.sub.fast_paths import QUANTIZE_MODES, apply_fast_paths

    settings, device = check.settings, check.settings.device
    results: dict[str, Any] = {}
    check.report.setdefault("sub", {})["fast_paths"] = results
    transformer = flux.pipe.transformer
    state: dict[str, Any] = {"compiled": None, "backend": None}

    def set_backend(backend: str | None) -> None:
        if backend != state["backend"]:
            apply_fast_paths(flux, FastPaths(attention_backend=backend or "native"))
            state["backend"] = backend

    def plain_path() -> None:
        flux.pipe.transformer = transformer  # not a quantised copy
        set_backend(None)
        transformer._compiled_call_impl = None  # eager

    def one_at_a_time(pairs: int = 1) -> list:
        return [flux.generate_batch([r], **size)[0].reference for r in requests[:pairs]]

    reference = one_at_a_time(len(requests))
    last: dict[str, list] = {}

    def record(name: str, run: Callable[[], list], note: str, pairs: int = 1, warm: bool = True) -> None:
        """``run`` makes the first ``pairs`` requests' images; 2 interleaved rounds at 28 steps
        (each pair ~10 s on an H100): enough for a speed-up, and the images of its last round
        give the PSNR."""

        def ours() -> list:
            last["images"] = run()
            return last["images"]

        def baseline() -> list:
            plain_path()
            return one_at_a_time(pairs)

        if warm:
            run()
        times, base = interleaved(ours, baseline, 2, device)
        images = last["images"]
        plain_path()
        results[name] = {
            "s_per_pair": significant(statistics.median(times) / pairs),
            "plain_s_per_pair": significant(statistics.median(base) / pairs),
            "speedup": significant(statistics.median(b / a for a, b in zip(times, base))),
            "psnr_db_vs_plain": min(psnr(a, b) for a, b in zip(images, reference)),
            "note": note,
        }
        check.save()

    def skip_reason(cuda_only: bool) -> str | None:
        if cuda_only and device.type != "cuda":
            return "CUDA kernels (tiny run on the CPU)"
        if check.over_budget():
            return f"over the {settings.budget:.0f} s budget"
        return None

    def batched() -> list:
        plain_path()
        return [p.reference for p in flux.generate_batch(requests, **size)]

    reason = skip_reason(cuda_only=False)
    if reason:
        results["pairs_per_batch_2"] = {"skipped": reason}
    else:
        record("pairs_per_batch_2", batched, "--pairs-per-batch 2: both pairs in one transformer batch of 4", pairs=2)
    for backend in ("_native_cudnn", "_native_flash"):
        name = f"attention{backend}"
        reason = skip_reason(cuda_only=True)
        if reason:
            results[name] = {"skipped": reason}
            continue

        def with_backend(backend=backend) -> list:
            plain_path()
            set_backend(backend)
            return one_at_a_time()

        try:
            record(name, with_backend, f"--attention-backend {backend}")
        except Exception as error:  # a kernel this GPU/torch lacks: recorded, not fatal
            results[name] = {"failed": f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200]}"}
            plain_path()
    for mode in QUANTIZE_MODES:
        quantized_path(check, flux, mode, {"record": record, "plain_path": plain_path, "one_at_a_time": one_at_a_time})
    reason = "--no-compile (compiling takes minutes on a CPU)" if not settings.compile else skip_reason(False)
    if reason:
        results["compile"] = {"skipped": reason}
    else:
        try:
            start = time.perf_counter()
            apply_fast_paths(flux, FastPaths(compile=True))  # nn.Module.compile: in place
            state["compiled"] = transformer._compiled_call_impl
            transformer._compiled_call_impl = state["compiled"]
            one_at_a_time()  # compiles
            compile_s = time.perf_counter() - start

            def compiled() -> list:
                plain_path()
                transformer._compiled_call_impl = state["compiled"]
                return one_at_a_time()

            record("compile", compiled, "--compile (warm; compile time apart)", warm=False)
            results["compile"]["compile_and_first_pairs_s"] = round(compile_s, 1)
        except Exception as error:
            results["compile"] = {"failed": f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200]}"}
            plain_path()
    check.save()


def quantized_path(check: Check, flux: Any, mode: str, paths: dict[str, Callable[..., Any]]) -> None:
    """``--quantize MODE`` against the plain path: a copy of the transformer quantised the way
    ``generate sub`` does it (the plain one stays for the baseline; a 12B copy fits beside it on an
    80 GB card), swapped in for its side. Skipped with the reason ``generate sub`` would give where
    the mode cannot run (fp8 on a CPU or a GPU older than compute capability 8.9, no torchao)."""
    import copy

    from conceptforge.errors import ConceptforgeError
    from conceptforge.generators.sub.fast_paths import check_quantize, quantize_transformer

    settings, device = check.settings, check.settings.device
    record, plain_path, one_at_a_time = paths["record"], paths["plain_path"], paths["one_at_a_time"]
    results = check.report["sub"]["fast_paths"]
    name = f"quantize_{mode.replace('-', '_')}"
    try:
        check_quantize(mode, device)
    except ConceptforgeError as error:
        results[name] = {"skipped": str(error)}
        return
    if check.over_budget():
        results[name] = {"skipped": f"over the {settings.budget:.0f} s budget"}
        return
    plain_path()
    before = torch.cuda.memory_allocated(device) if device.type == "cuda" else None
    quantized: Any = None
    try:
        start = time.perf_counter()
        quantized = copy.deepcopy(flux.pipe.transformer)
        quantize_transformer(quantized, mode)
        quantize_s = time.perf_counter() - start
        weights = (torch.cuda.memory_allocated(device) - before) / 2**30 if before is not None else None

        def with_quantized() -> list:
            plain_path()
            flux.pipe.transformer = quantized
            return one_at_a_time()

        record(name, with_quantized, f"--quantize {mode} (torchao weight-only, Linear layers)")
        results[name]["quantize_s"] = round(quantize_s, 2)
        if weights is not None:
            results[name]["quantized_transformer_gib"] = round(weights, 2)
    except Exception as error:  # a kernel this GPU/torch/torchao lacks: recorded, not fatal
        results[name] = {"failed": f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200]}"}
    finally:
        plain_path()
        quantized = None
        release(device)
    check.save()


def release(device: torch.device) -> None:
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


# -- VQA filter -----------------------------------------------------------------------------------------
def check_vqa(check: Check) -> None:
    from benchmarks._gpu_shapes import build_internvl, vqa_inputs
    from conceptforge.filters.vqa.scorer import next_token_logits

    settings, device = check.settings, check.settings.device
    section: dict[str, Any] = {"model": "InternVL-2.5-8B shape" if not settings.tiny else "tiny InternVL"}
    check.report["vqa"] = section
    previous = torch.get_default_dtype()
    torch.set_default_dtype(settings.dtype)
    try:
        with torch.device(device):
            build_s, model = timed(lambda: build_internvl(settings.shapes), device)
    finally:
        torch.set_default_dtype(previous)
    section["build_random_model_s"] = round(build_s, 1)
    batch = settings.vqa_batch
    for tiles in (1, 10):
        if tiles > 1 and check.over_budget():
            section[f"tiles_{tiles}"] = {"skipped": f"over the {settings.budget:.0f} s budget"}
            continue
        batched_inputs = vqa_inputs(settings.shapes, batch, tiles, settings.dtype, device)
        single_inputs = vqa_inputs(settings.shapes, 1, tiles, settings.dtype, device)
        reset_peak(device)

        def batched(inputs=batched_inputs):
            return next_token_logits(model, inputs)

        def one_at_a_time(inputs=single_inputs):
            return [next_token_logits(model, inputs) for _ in range(batch)]

        batched(), one_at_a_time()
        ours, base = interleaved(batched, one_at_a_time, settings.vqa_rounds, device)
        section[f"tiles_{tiles}"] = {
            "batch": batch,
            "batched_images_per_s": significant(batch / statistics.median(ours)),
            "one_at_a_time_images_per_s": significant(batch / statistics.median(base)),
            "speedup": significant(statistics.median(b / a for a, b in zip(ours, base))),
            "peak_memory_gib": peak_gib(device),
        }
        check.save()
    model = None
    release(device)


# -- ConceptBed -------------------------------------------------------------------------------------
def sd_components(shapes: Shapes):
    """SD-1.5-shaped components with random weights (CPU; the trainer moves them), byte-level tokenizer."""
    from diffusers import AutoencoderKL, DDPMScheduler

    from benchmarks._gpu_shapes import build_text_encoder, build_unet
    from conceptforge.generators.conceptbed.learners import Components
    from conceptforge.testing.tiny_models import clip_byte_tokenizer

    channels = [128, 256, 512, 512] if shapes is REAL else [32, 32, 32, 32]
    vae = AutoencoderKL(
        down_block_types=["DownEncoderBlock2D"] * 4,
        up_block_types=["UpDecoderBlock2D"] * 4,
        block_out_channels=channels,
        layers_per_block=2 if shapes is REAL else 1,
        latent_channels=4,
    )
    return Components(
        tokenizer=clip_byte_tokenizer(model_max_length=77),
        text_encoder=build_text_encoder(shapes),
        vae=vae,
        unet=build_unet(shapes),
        noise_scheduler=DDPMScheduler(num_train_timesteps=1000, beta_schedule="scaled_linear"),
    )


def check_conceptbed(check: Check) -> None:
    from PIL import Image

    from conceptforge.generators.conceptbed.learners import ConceptTrainer, LearnerConfig
    from conceptforge.generators.conceptbed.spec import Concept

    settings, device = check.settings, check.settings.device
    resolution = settings.shapes.sd_resolution
    section: dict[str, Any] = {"resolution": resolution}
    check.report["conceptbed"] = section
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        paths = []
        for index in range(4):
            path = Path(tmp) / f"{index}.png"
            rng = np.random.default_rng(index)
            Image.fromarray(rng.integers(0, 255, (resolution, resolution, 3), dtype=np.uint8)).save(path)
            paths.append(path)
        concept = Concept(name="beagle", kind="object", parent="dog", reference_images=tuple(paths[:2]))
        for learner, mode in (("dreambooth", "full"), ("custom-diffusion", None)):
            if learner == "custom-diffusion" and check.over_budget():
                section[learner] = {"skipped": f"over the {settings.budget:.0f} s budget"}
                continue
            config = LearnerConfig(
                learner=learner,
                model_id="random-sd15-shape",
                steps=settings.train_steps,
                resolution=resolution,
                num_class_images=2,
                **({"dreambooth_mode": mode} if mode else {}),
            )
            components = sd_components(settings.shapes)
            trainer = ConceptTrainer(config, components)
            marks: list[float] = []
            reset_peak(device)
            start = time.perf_counter()
            trainer.train(
                concept,
                class_images=paths[2:],
                step_callback=lambda step, loss, marks=marks: marks.append(time.perf_counter()),
            )
            steps = np.diff([start, *marks]).tolist()[1:]  # the first step pays for warm-up
            section[learner] = {
                "mode": mode or "attn2 k/v + token",
                "precision": trainer.accelerator.mixed_precision,
                "s_per_step": summary(steps),
                "peak_memory_gib": peak_gib(device),
            }
            del trainer, components
            release(device)
            check.save()
        sampling_pass(check, section)


def sampling_pass(check: Check, section: dict[str, Any]) -> None:
    """One classifier-free-guided UNet pass (batch 2) at the sampling resolution, in the run's dtype."""
    from benchmarks._gpu_shapes import SD_TEXT_TOKENS, build_unet

    settings, device = check.settings, check.settings.device
    with torch.device(device):
        unet = build_unet(settings.shapes).to(settings.dtype).eval()
    side = settings.shapes.sd_resolution // 8
    sample = torch.randn(2, 4, side, side, device=device, dtype=settings.dtype)
    context = torch.randn(
        2, SD_TEXT_TOKENS, settings.shapes.unet["cross_attention_dim"], device=device, dtype=settings.dtype
    )
    timestep = torch.full((2,), 500, device=device)

    def one() -> None:
        with torch.inference_mode():
            unet(sample, timestep, context)

    one()
    passes = [timed(one, device)[0] for _ in range(settings.repeats * 2)]
    section["sampling"] = {
        "cfg_pass_s": summary(passes),
        "image_s_at_50_steps": significant(50 * statistics.median(passes)),
        "note": "50 guided passes x the measured pass; VAE decode not included",
    }
    unet = None
    release(device)
    check.save()


# -- outputs ----------------------------------------------------------------------------------------
def gpu_model(name: str) -> str:
    for model in ("H200", "H100", "A100", "L40S", "B200"):
        if model in name:
            return model
    return name


def cost_figures(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The measured figures in the format of ``conceptforge/gpu_costs.json``'s ``figures``."""
    env = report.get("environment", {})
    gpu = env.get("gpu_model", "?")
    source = f"python -m benchmarks gpu, {env.get('date', '?')}, torch {env.get('torch', '?')}, random weights"
    figures = []

    def add(workload: str, seconds: float | None, note: str = "") -> None:
        if seconds:
            figures.append(
                {
                    "gpu": gpu,
                    "workload": workload,
                    "kind": "measured",
                    "seconds": significant(seconds),
                    "source": source + note,
                }
            )

    sub, vqa, cb = report.get("sub", {}), report.get("vqa", {}), report.get("conceptbed", {})
    if "tdg_pair_s" in sub:
        add("sub/tdg-pair", sub["tdg_pair_s"]["median"], f", {sub['resolution']} px, {sub['steps']} steps, plain path")
    fast = report.get("sub_fast", {})
    if "fast_s_per_pair_at_28_steps" in fast:
        add(
            "sub/tdg-pair-fast",
            fast["fast_s_per_pair_at_28_steps"],
            f", {fast['resolution']} px, generate sub --fast, timed at {fast['steps']} steps and scaled to 28 "
            f"({fast['parts']['fast']['ratio_vs_plain']}x the plain pair in the same run)",
        )
    for tiles, workload in ((1, "filter/vqa-image-1-tile"), (10, "filter/vqa-image-10-tiles")):
        rate = vqa.get(f"tiles_{tiles}", {}).get("batched_images_per_s")
        add(workload, 1 / rate if rate else None, f", batches of {vqa.get(f'tiles_{tiles}', {}).get('batch')}")
    for learner in ("dreambooth", "custom-diffusion"):
        step = cb.get(learner, {}).get("s_per_step")
        add(f"conceptbed/{learner}-step", step["median"] if step else None)
    sampling = cb.get("sampling", {}).get("image_s_at_50_steps")
    add("conceptbed/sample-image", sampling, ", 50 x a measured guided UNet pass, VAE decode excluded")
    return figures


def _row(name: str, values: Any) -> str:
    return f"| {name} | {values} |"


def markdown(report: dict[str, Any]) -> str:
    env = report.get("environment", {})
    lines = [
        f"GPU device check ({'tiny shapes, CPU' if report.get('tiny') else 'real shapes'}): {env.get('gpu', '?')}, "
        f"torch {env.get('torch', '?')}, {env.get('date', '?')}, {report.get('elapsed_s', '?')} s",
        "",
        "| measurement | value |",
        "| --- | --- |",
    ]
    if "matmul_tflops" in env:
        lines.append(_row("dense matmul", f"{env['matmul_tflops']:.3g} TFLOP/s ({env.get('dtype')})"))
    sub = report.get("sub", {})
    if "tdg_pair_s" in sub:
        lines.append(
            _row(
                f"TDG pair, {sub['resolution']} px, {sub['steps']} steps",
                f"{sub['tdg_pair_s']['median']:.3f} s median ({sub['tdg_pair_s']['min']:.3f} min); "
                f"plain batch of 2 {sub['plain_batch_of_2_s']['median']:.3f} s; ratio {sub['ratio_tdg_vs_plain']:.3f}x; "
                f"peak {sub.get('peak_memory_gib')} GiB",
            )
        )
        plan = sub["paper_plan"]
        lines.append(_row("paper plan (1,056 pairs x 500)", f"{plan['gpu_hours']:,} GPU-hours at the measured s/pair"))
        for name, fast in sub.get("fast_paths", {}).items():
            if isinstance(fast, dict) and "s_per_pair" in fast:
                lines.append(
                    _row(
                        f"fast path: {name}",
                        f"{fast['s_per_pair']:.3f} s/pair vs {fast['plain_s_per_pair']:.3f} plain "
                        f"({fast['speedup']:.3f}x), PSNR {fast['psnr_db_vs_plain']:.1f} dB"
                        + (
                            f"; weights {fast['quantized_transformer_gib']} GiB"
                            if "quantized_transformer_gib" in fast
                            else ""
                        ),
                    )
                )
            elif isinstance(fast, dict):
                lines.append(_row(f"fast path: {name}", fast.get("skipped") or fast.get("failed")))
    lines.extend(fast_rows(report.get("sub_fast", {})))
    for key, value in report.get("vqa", {}).items():
        if key.startswith("tiles_") and "batched_images_per_s" in value:
            lines.append(
                _row(
                    f"VQA, {key.split('_')[1]} tile(s)",
                    f"{value['batched_images_per_s']} img/s in batches of {value['batch']} vs "
                    f"{value['one_at_a_time_images_per_s']} one at a time; peak {value['peak_memory_gib']} GiB",
                )
            )
    cb = report.get("conceptbed", {})
    for learner in ("dreambooth", "custom-diffusion"):
        if "s_per_step" in cb.get(learner, {}):
            value = cb[learner]
            lines.append(
                _row(
                    f"{learner} step ({value['mode']}, {value['precision']})",
                    f"{value['s_per_step']['median']:.3f} s; peak {value['peak_memory_gib']} GiB",
                )
            )
    if "sampling" in cb:
        lines.append(_row("SD-1.5 guided UNet pass", f"{cb['sampling']['cfg_pass_s']['median']:.4f} s"))
    for section, error in report.get("errors", {}).items():
        lines.append(_row(f"{section} failed", error))
    return "\n".join(lines) + "\n"


def fast_rows(section: dict[str, Any]) -> list[str]:
    """The ``sub_fast`` section's rows: each part (and ``--fast`` whole) against the plain path."""
    rows = []
    for name, part in section.get("parts", {}).items():
        label = f"--fast part: {name}" if name != "fast" else "--fast (whole recipe)"
        if "s_per_pair" in part:
            load = f"; load + first pair {part['load_s']} s" if "load_s" in part else ""
            rows.append(
                _row(
                    f"{label}, {section['resolution']} px, {section['steps']} steps",
                    f"{part['s_per_pair']:.3f} s/pair vs {part['plain_s_per_pair']:.3f} plain "
                    f"({part['ratio_vs_plain']:.3f}x), PSNR {part['psnr_db_vs_plain']:.1f} dB; warm-up {part['warmup_s']} s{load}",
                )
            )
        else:
            rows.append(_row(label, part.get("skipped") or part.get("failed")))
    if "fast_s_per_pair_at_28_steps" in section:
        rows.append(
            _row(
                "--fast TDG pair at 28 steps (scaled)",
                f"{section['fast_s_per_pair_at_28_steps']} s vs {section['plain_s_per_pair_at_28_steps']} s plain",
            )
        )
    return rows


def merge_figures(table: dict[str, Any], figures: list[dict[str, Any]]) -> dict[str, Any]:
    """``table`` (conceptforge/gpu_costs.json's content) with ``figures`` (a check's
    measured-costs.json) in it: a measured figure replaces the one of the same GPU model and
    workload, floors and other figures stay. Real-shape figures only: a tiny CPU run's are refused."""
    if any(f["gpu"] == "cpu-tiny" for f in figures):
        raise ValueError("these figures come from a tiny CPU run (--tiny): they are not a GPU's costs")
    unknown = sorted({f["workload"] for f in figures} - set(table["workloads"]))
    if unknown:
        raise ValueError(f"no such workload in the table: {', '.join(unknown)}")
    new = {(f["gpu"], f["workload"]) for f in figures}
    kept = [f for f in table["figures"] if not (f["kind"] == "measured" and (f["gpu"], f["workload"]) in new)]
    return {**table, "figures": kept + list(figures)}


def merge_costs(path: Path, table_path: Path | None = None) -> Path:
    """Write ``path``'s measured figures into conceptforge/gpu_costs.json (what every --dry-run reads)."""
    table_path = table_path or Path(__file__).resolve().parents[1] / "conceptforge" / "gpu_costs.json"
    table = json.loads(table_path.read_text(encoding="utf-8"))
    merged = merge_figures(table, json.loads(path.read_text(encoding="utf-8")))
    partial = table_path.with_name(f".{table_path.name}.partial")
    partial.write_text(json.dumps(merged, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    partial.replace(table_path)
    return table_path


def environment(settings: Settings) -> dict[str, Any]:
    import diffusers
    import transformers

    device = settings.device
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({platform.machine()})"
    env = {
        "gpu": name,
        "gpu_model": gpu_model(name) if device.type == "cuda" else "cpu-tiny",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "diffusers": diffusers.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "dtype": str(settings.dtype).split(".")[-1],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    if device.type == "cuda":
        env["memory_gib"] = round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1)
    env["matmul_tflops"] = round(matmul_tflops(settings), 4)
    return env


def check_sub_fast(check: Check) -> None:
    """``generate sub --fast`` and each of its parts (benchmarks/_gpu_fast.py)."""
    from benchmarks._gpu_fast import check_sub_fast as run_section

    run_section(check)


SECTIONS = {
    "sub": check_sub,
    "vqa": check_vqa,
    "conceptbed": check_conceptbed,
    "sub_fast_paths": check_sub_fast_paths,
    "sub_fast": check_sub_fast,
}


def run_check(out: Path, settings: Settings, sections: list[str]) -> dict[str, Any]:
    """Run the chosen sections into ``out``; a failing section is recorded and the next one runs."""
    out.mkdir(parents=True, exist_ok=True)
    check = Check(out, settings)
    check.report.update({"tiny": settings.tiny, "sections": sections, "environment": environment(settings)})
    check.save()
    for name in sections:
        logger.warning("gpu check: %s (%.0f s so far)", name, check.elapsed())
        try:
            SECTIONS[name](check)
        except Exception as error:  # keep the other sections' numbers
            logger.exception("section %s failed", name)
            check.report.setdefault("errors", {})[name] = f"{type(error).__name__}: {str(error).strip()[:300]}"
            release(settings.device)
        check.save()
    return check.report


def make_settings(tiny: bool, *, compile: bool = True, budget: float = 420.0) -> Settings:
    if tiny:
        return Settings(TINY, torch.device("cpu"), torch.float32, 2, 2, 4, 2, 3, compile=False, budget=budget)
    if not torch.cuda.is_available():
        from benchmarks._harness import Skip

        raise Skip("needs a CUDA GPU (python -m benchmarks.gpu --tiny runs it at tiny size on the CPU)")
    return Settings(REAL, torch.device("cuda"), torch.bfloat16, 28, 3, 8, 3, 6, compile=compile, budget=budget)


def run(quick: bool) -> list:
    """``python -m benchmarks gpu``: the real check on a CUDA GPU (output under outputs/gpu-check)."""
    from benchmarks._harness import Result

    settings = make_settings(False)
    report = run_check(Path("outputs/gpu-check"), settings, list(SECTIONS))
    sub = report.get("sub", {})
    if "tdg_pair_s" not in sub:
        return []
    return [
        Result(
            "TDG pair vs FluxPipeline batch of 2 (GPU)",
            "ours: TDG pair",
            [sub["tdg_pair_s"]["median"]],
            "FluxPipeline batch of 2",
            [sub["plain_batch_of_2_s"]["median"]],
            work=f"{sub['resolution']} px, {sub['steps']} steps, bf16, random FLUX.1-dev-shaped weights",
            extra={"details": "outputs/gpu-check/gpu-check.md"},
        )
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "outputs/gpu-check"))
    parser.add_argument("--tiny", action="store_true", help="tiny shapes on the CPU (seconds): the test suite's run")
    parser.add_argument("--sections", nargs="+", choices=list(SECTIONS), default=list(SECTIONS))
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile fast path")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds after which optional parts are skipped")
    parser.add_argument(
        "--merge-costs",
        type=Path,
        metavar="MEASURED",
        help="write a check's measured-costs.json into conceptforge/gpu_costs.json and exit (no check runs)",
    )
    args = parser.parse_args(argv)
    if args.merge_costs:
        try:
            print(f"wrote the measured figures of {args.merge_costs} into {merge_costs(args.merge_costs)}")
        except (OSError, ValueError, KeyError) as error:
            print(f"error: --merge-costs {args.merge_costs}: {error}")
            return 2
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")  # read when diffusers loads (after this)
    for noisy in ("diffusers", "transformers", "accelerate", "torch.utils._pytree"):  # _pytree: torchao's import
        logging.getLogger(noisy).setLevel(logging.ERROR)
    from benchmarks._harness import Skip

    try:
        settings = make_settings(args.tiny, compile=not args.no_compile, budget=args.budget)
    except Skip as reason:
        print(f"error: {reason}")
        return 2
    with contextlib.suppress(AttributeError):
        torch.backends.cuda.matmul.allow_tf32 = True
    report = run_check(args.out, settings, args.sections)
    print(markdown(report))
    print(f"wrote {args.out}/gpu-check.json, gpu-check.md, measured-costs.json")
    return 1 if report.get("errors") else 0


if __name__ == "__main__":
    raise SystemExit(main())
