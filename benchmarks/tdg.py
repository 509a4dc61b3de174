"""SUB generation: Tied Diffusion Guidance vs a plain ``FluxPipeline`` batch of 2, same random FLUX.

Ours: ``TDGFlux.generate`` (paper colour schedule k=10, tmin=0.2, tmax=0.9; both images decoded).
Baseline, what a user would otherwise run: ``FluxPipeline.__call__`` on [c_R, c_G] from the same
noise, same steps and size. The ratio is what the tie costs. Models are random FLUX transformers
built from configs: ``tiny`` (1+1 blocks, 64 px, 8 steps) and, in full mode, ``latent4096`` (FLUX.1-dev's
latent length: 4096 image tokens x 64 channels, 512 text tokens, 4 steps).
"""

from __future__ import annotations

import torch

from benchmarks._harness import Result, compare
from conceptforge.generators.sub.flux_tdg import TDGFlux
from conceptforge.generators.sub.tdg import TDGParams
from conceptforge.testing.random_flux import build_random_flux_pipeline

C_R = "A photo of a Blue Jay with black colored feathers on the crown of its head"
C_G = "A photo of a bird with black colored feathers on the crown of its head"
SIZES = {
    # name: (transformer overrides, resolution, steps, max_sequence_length)
    "tiny": ({}, 64, 8, 64),
    "latent4096": (
        {
            "in_channels": 64,
            "num_layers": 1,
            "num_single_layers": 2,
            "attention_head_dim": 64,
            "num_attention_heads": 4,
            "joint_attention_dim": 64,
            "pooled_projection_dim": 64,
            "axes_dims_rope": [16, 24, 24],
        },
        256,
        4,
        512,
    ),
}


def bench(name: str, repeats: int, pairs: int) -> Result:
    overrides, resolution, steps, max_len = SIZES[name]
    pipe = build_random_flux_pipeline(
        transformer_config=overrides, vae_blocks=(8, 8), dtype=torch.float32, device=torch.device("cpu")
    )
    pipe.set_progress_bar_config(disable=True)
    flux = TDGFlux(pipe, max_sequence_length=max_len)
    params = TDGParams(k=10.0, tmin=0.2, tmax=0.9)
    size = dict(height=resolution, width=resolution, num_inference_steps=steps)

    def plain(round_: int) -> None:
        for seed in range(pairs):
            noise, _ = flux.initial_noise(round_ * pairs + seed, resolution, resolution, torch.float32)
            pipe([C_R, C_G], latents=noise.repeat(2, 1, 1), guidance_scale=3.5, max_sequence_length=max_len, **size)

    def tdg(round_: int) -> None:
        for seed in range(pairs):
            flux.generate(
                prompt_reference=C_R,
                prompt_guidance=C_G,
                seed=round_ * pairs + seed,
                params=params,
                return_guidance=True,
                **size,
            )

    plain(0), tdg(0)  # warm-up
    work = f"{pairs} pair(s) per round, {(resolution // 16) ** 2} image tokens, {steps} steps, fp32 CPU"
    return compare(f"TDG pair ({name})", ("ours: TDG pair", tdg), ("FluxPipeline batch of 2", plain), repeats, work)


def run(quick: bool) -> list[Result]:
    if quick:
        return [bench("tiny", 15, 2)]
    return [bench("tiny", 7, 16), bench("latent4096", 3, 1)]
