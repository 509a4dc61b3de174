#!/usr/bin/env python
"""Time per pair of TDG vs plain FLUX batch-of-2 generation, same model, steps and size.

Baseline: ``FluxPipeline.__call__`` on [c_R, c_G] from the same noise (what TDG costs without the
tie); also our own loop with the tie switched off. TDG: ``TDGFlux.generate`` with the paper's colour schedule, decoding both images too, so
the only difference is the tie. Times are the minimum over interleaved repeats (other
processes on a shared machine only ever add time). Also reports the tie's share of a denoising step, timed on the
prediction tensor of that size at eta = 0.5 (the kthvalue path; eta = 1 and 0 are cheaper).

Sizes: ``tiny`` (1+1 blocks, 64 px); ``latent4096`` (a small random transformer at FLUX.1-dev's
latent length: 4096 image tokens x 64 channels, 512 text tokens); ``full`` (CUDA only: the
full-size FLUX.1-dev transformer, randomly initialised, bf16 - no weights needed for timing).

    python benchmarks/tdg.py --sizes tiny latent4096
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from conceptforge.generators.sub.flux_tdg import TDGFlux
from conceptforge.testing.random_flux import FLUX_DEV_TRANSFORMER, build_random_flux_pipeline
from conceptforge.generators.sub.tdg import TDGParams, tie_pair

C_R = "A photo of a Blue Jay with black colored feathers on the crown of its head"
C_G = "A photo of a bird with black colored feathers on the crown of its head"

SIZES = {
    # name: (transformer overrides, vae blocks, resolution, steps, max_sequence_length, repeats)
    "tiny": ({}, (8, 8), 64, 8, 64, 7),
    "latent4096": (
        {"in_channels": 64, "num_layers": 1, "num_single_layers": 2, "attention_head_dim": 64,
         "num_attention_heads": 4, "joint_attention_dim": 64, "pooled_projection_dim": 64,
         "axes_dims_rope": [16, 24, 24]},
        (8, 8), 256, 4, 512, 3,
    ),
    "full": (FLUX_DEV_TRANSFORMER, (8, 8), 256, 28, 512, 3),
}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def bench(name: str, device: torch.device) -> dict:
    overrides, vae_blocks, resolution, steps, max_len, repeats = SIZES[name]
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    pipe = build_random_flux_pipeline(transformer_config=overrides, vae_blocks=vae_blocks, dtype=dtype, device=device)
    pipe.set_progress_bar_config(disable=True)
    flux = TDGFlux(pipe, max_sequence_length=max_len)
    params = TDGParams(k=10.0, tmin=0.2, tmax=0.9)
    size = dict(height=resolution, width=resolution, num_inference_steps=steps)

    def plain(seed: int):
        noise, _ = flux.initial_noise(seed, resolution, resolution, dtype)
        return pipe([C_R, C_G], latents=noise.repeat(2, 1, 1), guidance_scale=3.5, max_sequence_length=max_len, **size).images

    def tdg(seed: int):
        return flux.generate(prompt_reference=C_R, prompt_guidance=C_G, seed=seed, params=params, return_guidance=True, **size)

    def untied(seed: int):
        with torch.no_grad():
            result = flux.denoise([C_R, C_G], seed=seed, eta=None, **size)
            return flux.decode(result.latents, resolution, resolution)

    plain(0), tdg(0), untied(0)  # warm-up
    plain_times, tdg_times, untied_times = [], [], []
    for r in range(repeats):  # interleaved, so load changes hit all alike
        for fn, bucket in ((plain, plain_times), (untied, untied_times), (tdg, tdg_times)):
            _sync(device)
            start = time.perf_counter()
            fn(r + 1)
            _sync(device)
            bucket.append(time.perf_counter() - start)

    # The tie's share of a step: tie_pair at eta = 0.5 vs one transformer forward of the batch.
    tokens = (resolution // (pipe.vae_scale_factor * 2)) ** 2
    channels = pipe.transformer.config.in_channels
    pred = torch.randn(2, tokens, channels, device=device, dtype=dtype)
    for _ in range(3):
        tie_pair(pred[0:1], pred[1:2], 0.5)
    _sync(device)
    start = time.perf_counter()
    for _ in range(20):
        tie_pair(pred[0:1], pred[1:2], 0.5)
    _sync(device)
    tie_time = (time.perf_counter() - start) / 20
    # Minimum over repeats: on a shared machine other processes only ever add time.
    plain_s, untied_s, tdg_s = min(plain_times), min(untied_times), min(tdg_times)
    step_time = plain_s / steps  # whole pair time per step (includes text encoding and decoding)
    return {
        "size": name,
        "device": str(device),
        "tokens": tokens,
        "steps": steps,
        "plain_s": plain_s,
        "untied_s": untied_s,
        "tdg_s": tdg_s,
        "ratio": tdg_s / plain_s,
        "ratio_untied": tdg_s / untied_s,
        "tie_ms": tie_time * 1000,
        "tie_share": tie_time / step_time,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["tiny", "latent4096"], choices=sorted(SIZES))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, device {device}")
    print("| size | image tokens | steps | FluxPipeline batch-of-2 s/pair | our loop untied s/pair | TDG s/pair "
          "| TDG / FluxPipeline | TDG / untied | tie ms (eta=0.5) | tie / step |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in args.sizes:
        if name == "full" and device.type != "cuda":
            print("| full | - | - | skipped: needs CUDA | | | | | | |")
            continue
        r = bench(name, device)
        print(
            f"| {r['size']} | {r['tokens']} | {r['steps']} | {r['plain_s']:.3f} | {r['untied_s']:.3f} | {r['tdg_s']:.3f} | "
            f"{r['ratio']:.3f}x | {r['ratio_untied']:.3f}x | {r['tie_ms']:.2f} | {100 * r['tie_share']:.2f}% |"
        )


if __name__ == "__main__":
    main()
