"""The ``--fast`` section of the GPU device check (``python -m benchmarks.gpu --sections sub_fast``).

What it answers (issue 47): how much faster a TDG pair is with ``generate sub --fast`` than the
plain bf16 path on the same GPU in the same run, what each part alone brings, and how far the
images move (PSNR of the R image against the plain path's, same seeds). Each variant is a copy of
the plain random FLUX.1-dev-shaped transformer (and VAE) with :func:`apply_fast_paths` applied the
way ``generate sub`` applies it, timed interleaved with the plain path (A B, B A), after one
warm-up run that pays its compile or graph recording (reported apart, as ``warmup_s``).

Sized for one short loan (8 minutes for the whole check on one H100/H200): pairs of
``--fast-steps`` steps (10 by default; a pair's cost is linear in steps, the VAE decode is ~0.25%
of it, so the ratio to the plain path is the 28-step ratio and seconds are scaled to 28 steps with
that said), cheap parts first, the compiling ones last, every part after the ``--budget`` skipped
with that reason. The whole recipe comes right after the cheap parts: it is the number the issue
asks for. On the CPU (``--tiny``) the parts that run there are measured and the others are
skipped with the one-line reason ``generate sub`` gives.
"""

from __future__ import annotations

import copy
import statistics
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import torch

from benchmarks.gpu import C_G, C_R, Check, build_flux, interleaved, psnr, release, significant, timed

#: The steps of a timed pair in this section on a GPU (the tiny run uses its own 2).
FAST_STEPS = 10
#: The steps the paper (and gpu_costs.json's sub workloads) generate with.
PAPER_STEPS = 28


@dataclass(frozen=True)
class FastPaths:
    """The fast-path settings ``apply_fast_paths`` and ``check_fast_paths`` read (their protocol).
    Not ``stage.GenerationSettings``: the stage imports the card code and with it ``datasets``,
    which the GPU image lacks."""

    attention_backend: str | None = None
    quantize: str | None = None
    compile: bool = False
    fuse_qkv: bool = False
    aot: bool = False
    compile_mode: str | None = None
    cuda_graphs: bool = False
    vae_channels_last: bool = False


#: (name, settings or None for the whole recipe, note, compiles): cheap parts, the whole recipe,
#: then the parts whose warm-up is a compile.
PARTS: list[tuple[str, FastPaths | None, str, bool]] = [
    ("fuse_qkv", FastPaths(fuse_qkv=True), "--fuse-qkv", False),
    ("attention_best", FastPaths(attention_backend="best"), "--attention-backend best", False),
    ("vae_channels_last", FastPaths(vae_channels_last=True), "--vae-channels-last", False),
    ("quantize_fp8_dynamic", FastPaths(quantize="fp8-dynamic"), "--quantize fp8-dynamic (per-row scales)", False),
    ("cuda_graphs", FastPaths(cuda_graphs=True), "--cuda-graphs (eager pass recorded)", False),
    ("fast", None, "--fast (the whole recipe)", True),
    ("aot", FastPaths(aot=True), "--aot (inductor default mode)", True),
    (
        "compile_max_autotune",
        FastPaths(compile=True, compile_mode="max-autotune"),
        "--compile --compile-mode max-autotune",
        True,
    ),
]


def check_sub_fast(check: Check) -> None:
    """Each part of ``--fast`` and the whole recipe against the plain path (see the module doc)."""
    from conceptforge.errors import ConceptforgeError
    from conceptforge.generators.sub.fast_paths import check_fast_paths, fast_recipe, resolve_attention_backend
    from conceptforge.generators.sub.flux_tdg import PairRequest, TDGFlux
    from conceptforge.generators.sub.tdg import TDGParams

    settings, device = check.settings, check.settings.device
    steps = settings.flux_steps if settings.tiny else FAST_STEPS
    resolution = settings.shapes.flux_resolution
    section: dict[str, Any] = {"resolution": resolution, "steps": steps, "parts": {}}
    check.report["sub_fast"] = section
    pipe = build_flux(settings)
    plain = TDGFlux(pipe, max_sequence_length=settings.shapes.flux_text_tokens)
    params = TDGParams(k=10.0, tmin=0.2, tmax=0.9)
    size = dict(height=resolution, width=resolution, num_inference_steps=steps)
    request = PairRequest(C_R, C_G, 2000, params)  # one pair per timed run: ~4 s at 10 steps on an H100

    def images(flux: Any) -> list:
        return [flux.generate_batch([request], **size)[0].reference]

    reference = images(plain)  # also the plain path's warm-up
    cache = tempfile.TemporaryDirectory(prefix="gpu-check-aot-")
    for name, part, note, compiles in PARTS:
        results = section["parts"]
        try:
            wanted = FastPaths(**fast_recipe(device)) if part is None else part
            wanted = FastPaths(
                **{**wanted.__dict__, "attention_backend": resolve_attention_backend(wanted.attention_backend, device)}
            )
            check_fast_paths(wanted, device)
        except ConceptforgeError as error:  # what generate sub would refuse here, in its words
            results[name] = {"skipped": str(error)}
            continue
        if compiles and not settings.compile:
            results[name] = {"skipped": "--no-compile (compiling takes minutes on a CPU)"}
            continue
        if check.over_budget():
            results[name] = {"skipped": f"over the {settings.budget:.0f} s budget"}
            continue
        try:
            results[name] = {**_measure(pipe, plain, wanted, images, reference, cache.name, device), "note": note}
        except Exception as error:  # a kernel this GPU/torch/torchao lacks: recorded, not fatal
            results[name] = {"failed": f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200]}"}
        finally:
            release(device)
        check.save()
    whole = section["parts"].get("fast", {})
    if "s_per_pair" in whole:
        section["fast_s_per_pair_at_28_steps"] = significant(whole["s_per_pair"] * PAPER_STEPS / steps)
        section["plain_s_per_pair_at_28_steps"] = significant(whole["plain_s_per_pair"] * PAPER_STEPS / steps)
    cache.cleanup()
    plain = pipe = None  # free the GPU for a section after this one
    release(device)
    check.save()


def _measure(
    pipe: Any, plain: Any, wanted: FastPaths, images: Any, reference: list, cache: str, device: torch.device
) -> dict[str, Any]:
    """One variant: a copy of the plain pipeline with ``wanted`` applied, warmed up once, then timed
    interleaved with the plain path; the PSNR of its last images against the plain path's."""
    from conceptforge.generators.sub.fast_paths import apply_fast_paths
    from conceptforge.generators.sub.flux_tdg import TDGFlux

    variant = TDGFlux(_copy_pipeline(pipe), max_sequence_length=plain.max_sequence_length)
    variant.model_id, variant.model_revision = "random-flux", "gpu-check"
    setup_s, _ = timed(lambda: apply_fast_paths(variant, wanted, compile_cache=cache), device)
    warmup_s, _ = timed(lambda: images(variant), device)  # compiles, records graphs, tunes
    last: dict[str, list] = {}

    def ours() -> list:
        last["images"] = images(variant)
        return last["images"]

    fast_s, plain_s = interleaved(ours, lambda: images(plain), 2, device)
    result = {
        "s_per_pair": significant(statistics.median(fast_s)),
        "plain_s_per_pair": significant(statistics.median(plain_s)),
        "ratio_vs_plain": significant(statistics.median(a / b for a, b in zip(fast_s, plain_s))),
        "psnr_db_vs_plain": min(psnr(a, b) for a, b in zip(last["images"], reference)),
        "setup_s": round(setup_s, 2),
        "warmup_s": round(warmup_s, 2),
        "settings": {k: v for k, v in wanted.__dict__.items() if v},
    }
    if wanted.aot:
        result["load_s"] = _reload_seconds(variant, wanted, cache, images, device)
    return result


def _copy_pipeline(pipe: Any) -> Any:
    """The plain pipeline with its own copy of the transformer and VAE (fast paths change them in
    place) and the same prompt embeddings, scheduler config and noise."""
    from conceptforge.testing.random_flux import flux_pipeline

    twin = flux_pipeline(copy.deepcopy(pipe.transformer), copy.deepcopy(pipe.vae))
    twin.scheduler = type(pipe.scheduler).from_config(pipe.scheduler.config)
    twin.encode_prompt = pipe.encode_prompt  # the same random embedding per prompt
    twin.set_progress_bar_config(disable=True)
    return twin


def _reload_seconds(variant: Any, wanted: FastPaths, cache: str, images: Any, device: torch.device) -> float:
    """What another rank or a resumed task pays instead of the compile: a new generator over the
    same transformer loading the package just built, and its first pair (which checks it)."""
    from conceptforge.generators.sub.fast_paths import apply_fast_paths
    from conceptforge.generators.sub.flux_tdg import TDGFlux

    again = TDGFlux(variant.pipe, max_sequence_length=variant.max_sequence_length)
    again.model_id, again.model_revision = variant.model_id, variant.model_revision
    start = time.perf_counter()
    apply_fast_paths(again, wanted, compile_cache=cache)
    images(again)
    torch.cuda.synchronize(device) if device.type == "cuda" else None
    loaded = getattr(again.transformer_forward, "forward", again.transformer_forward)
    if getattr(loaded, "built", None):
        raise RuntimeError("the second generator rebuilt the package instead of loading it")
    return round(time.perf_counter() - start, 2)  # load, (record,) and one pair
