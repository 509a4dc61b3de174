"""The models SUB and ConceptBed run, at their real shapes (or tiny), and their FLOPs.

Why one module: the GPU device check (:mod:`benchmarks.gpu`) times these models with random
weights, and the cost table that every ``--dry-run`` reads (``conceptforge/gpu_costs.json``)
holds their FLOPs; both must describe the same architectures. FLOPs are counted by
``torch.utils.flop_counter.FlopCounterMode`` over a forward (and backward) pass of the model
built on the ``meta`` device: the count is exact for matmuls, convolutions and attention (the
operations that cost anything on a GPU), needs no memory and takes seconds on a CPU.

    python -m benchmarks._gpu_shapes           # print the FLOP table as it goes into gpu_costs.json
    python -m benchmarks._gpu_shapes --write   # and write it there (the figures are kept)

Shapes (public configs): FLUX.1-dev's transformer (19 double- + 38 single-stream blocks) and VAE
decoder; InternVL-2.5-8B = InternViT-300M-448px (24 layers, width 1024) + InternLM2.5-7B
(32 layers, width 4096, 8 KV heads, MLP 14336, vocabulary 92,553; InternLM2 is a Llama-shaped
decoder, so a Llama config stands in for it); Stable Diffusion 1.5's UNet (320/640/1280/1280,
cross-attention 768) and CLIP ViT-L/14 text encoder.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from conceptforge.testing.random_flux import FLUX_DEV_TRANSFORMER, TINY_TRANSFORMER

#: FLUX's text sequence (T5 tokens) that every image token attends with.
FLUX_TEXT_TOKENS = 512
FLUX_POOLED = 768

FLUX_VAE: dict[str, Any] = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "block_out_channels": [128, 256, 512, 512],
    "layers_per_block": 2,
    "latent_channels": 16,
    "use_quant_conv": False,
    "use_post_quant_conv": False,
    "scaling_factor": 0.3611,
    "shift_factor": 0.1159,
}
TINY_VAE: dict[str, Any] = {
    **FLUX_VAE,
    "block_out_channels": [8, 8],
    "layers_per_block": 1,
    "latent_channels": 4,
    "norm_num_groups": 8,
}
TINY_VAE["down_block_types"] = ["DownEncoderBlock2D"] * 2
TINY_VAE["up_block_types"] = ["UpDecoderBlock2D"] * 2

#: The tiny models' width and depth (InternVL's vision tower and decoder alike).
TINY_LAYERS: dict[str, Any] = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
}
#: InternVL-2.5-8B: InternViT-300M-448px + InternLM2.5-7B (as a Llama-shaped decoder).
INTERNVL_8B: dict[str, Any] = {
    "vision_config": {
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "image_size": [448, 448],
        "patch_size": [14, 14],
    },
    "text_config": {
        "model_type": "llama",
        "vocab_size": 92553,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
    },
    "downsample_ratio": 0.5,
    "image_token_id": 92546,
}
TINY_INTERNVL: dict[str, Any] = {
    **INTERNVL_8B,
    "vision_config": {**INTERNVL_8B["vision_config"], **TINY_LAYERS, "image_size": [28, 28]},
    "text_config": {**INTERNVL_8B["text_config"], **TINY_LAYERS, "vocab_size": 128, "num_key_value_heads": 2},
    "image_token_id": 100,
}
#: Question and chat template around the image tokens (SUB's multiple-choice question, ~60 tokens).
VQA_TEXT_TOKENS = 64
#: Tiles per image: 1 (one 448 px tile) or InternVL's dynamic tiling of a 1024 px square (3x3 + thumbnail).
VQA_TILES = (1, 10)

SD15_UNET: dict[str, Any] = {
    "sample_size": 64,
    "in_channels": 4,
    "out_channels": 4,
    "layers_per_block": 2,
    "block_out_channels": [320, 640, 1280, 1280],
    "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
    "cross_attention_dim": 768,
    "attention_head_dim": 8,
}
TINY_UNET: dict[str, Any] = {
    "sample_size": 8,
    "in_channels": 4,
    "out_channels": 4,
    "layers_per_block": 1,
    "block_out_channels": [32, 64],
    "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"],
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"],
    "cross_attention_dim": 32,
    "attention_head_dim": 8,
    "norm_num_groups": 32,
}
SD15_TEXT: dict[str, Any] = {
    "vocab_size": 49408,
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "max_position_embeddings": 77,
    "hidden_act": "quick_gelu",
}
TINY_TEXT: dict[str, Any] = {
    "vocab_size": 1000,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "max_position_embeddings": 77,
}
SD_TEXT_TOKENS = 77


@dataclass(frozen=True)
class Shapes:
    """One size of every model: ``real()`` for the GPU, ``tiny()`` for the CPU suite."""

    name: str
    flux: dict[str, Any]
    flux_vae: dict[str, Any]
    internvl: dict[str, Any]
    unet: dict[str, Any]
    text: dict[str, Any]
    flux_resolution: int  # the paper's 1024 px
    sd_resolution: int  # SD-1.5's 512 px

    @property
    def flux_text_tokens(self) -> int:
        return FLUX_TEXT_TOKENS if self.name == "real" else 8

    @property
    def vqa_text_tokens(self) -> int:
        return VQA_TEXT_TOKENS if self.name == "real" else 8

    def flux_image_tokens(self, resolution: int) -> int:
        """Packed latent tokens: VAE factor 8, then 2x2 patches."""
        factor = 2 ** (len(self.flux_vae["block_out_channels"]) - 1) * 2
        return (resolution // factor) ** 2

    def sd_latent_pixels(self, resolution: int) -> int:
        return (resolution // 8) ** 2


REAL = Shapes("real", FLUX_DEV_TRANSFORMER, FLUX_VAE, INTERNVL_8B, SD15_UNET, SD15_TEXT, 1024, 512)
TINY = Shapes("tiny", TINY_TRANSFORMER, TINY_VAE, TINY_INTERNVL, TINY_UNET, TINY_TEXT, 32, 32)


# -- builders (random weights; on the device given by the caller's ``torch.device`` context) -------
def build_flux_transformer(shapes: Shapes):
    from diffusers import FluxTransformer2DModel

    return FluxTransformer2DModel(**shapes.flux).eval()


def build_flux_vae(shapes: Shapes):
    from diffusers import AutoencoderKL

    return AutoencoderKL(**shapes.flux_vae).eval()


def build_internvl(shapes: Shapes):
    from transformers import InternVLConfig, InternVLForConditionalGeneration

    return InternVLForConditionalGeneration(InternVLConfig(**shapes.internvl)).eval()


def build_unet(shapes: Shapes):
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(**shapes.unet)


def build_text_encoder(shapes: Shapes):
    from transformers import CLIPTextConfig, CLIPTextModel

    return CLIPTextModel(CLIPTextConfig(**shapes.text))


# -- inputs ----------------------------------------------------------------------------------------
def flux_inputs(shapes: Shapes, batch: int, resolution: int, dtype: torch.dtype, device) -> dict[str, Any]:
    """The transformer's keyword arguments for ``batch`` images: precomputed random prompt
    embeddings (no tokenizer or text encoder), packed latents, ids, timestep and guidance."""
    n = shapes.flux_image_tokens(resolution)
    text = shapes.flux_text_tokens
    generator = torch.Generator(device="cpu").manual_seed(0)

    def rand(*size):
        return torch.randn(*size, generator=generator).to(device=device, dtype=dtype)

    side = int(round(n**0.5))
    img_ids = torch.zeros(side, side, 3)
    img_ids[..., 1] = torch.arange(side)[:, None]
    img_ids[..., 2] = torch.arange(side)[None, :]
    return {
        "hidden_states": rand(batch, n, shapes.flux["in_channels"]),
        "encoder_hidden_states": rand(batch, text, shapes.flux["joint_attention_dim"]),
        "pooled_projections": rand(batch, shapes.flux["pooled_projection_dim"]),
        "timestep": torch.full((batch,), 0.5, device=device, dtype=dtype),
        "guidance": torch.full((batch,), 3.5, device=device, dtype=torch.float32),
        "txt_ids": torch.zeros(text, 3, device=device, dtype=dtype),
        "img_ids": img_ids.reshape(-1, 3).to(device=device, dtype=dtype),
        "joint_attention_kwargs": {},
        "return_dict": False,
    }


def vqa_inputs(shapes: Shapes, batch: int, tiles: int, dtype: torch.dtype, device) -> dict[str, torch.Tensor]:
    """``input_ids`` with the image's context tokens, ``attention_mask`` and ``pixel_values`` (tiles
    of every image stacked, as InternVL's processor gives them)."""
    vision = shapes.internvl["vision_config"]
    size = vision["image_size"][0]
    per_tile = int((size // vision["patch_size"][0]) ** 2 * shapes.internvl["downsample_ratio"] ** 2)
    image_token = shapes.internvl["image_token_id"]
    text = shapes.vqa_text_tokens
    generator = torch.Generator(device="cpu").manual_seed(0)
    words = torch.randint(10, 90, (batch, text), generator=generator)
    ids = torch.cat([words[:, :4], torch.full((batch, per_tile * tiles), image_token), words[:, 4:]], dim=1)
    return {
        "input_ids": ids.to(device),
        "attention_mask": torch.ones_like(ids).to(device),
        "pixel_values": torch.randn(batch * tiles, 3, size, size, generator=generator).to(device=device, dtype=dtype),
    }


# -- FLOPs ---------------------------------------------------------------------------------------
def count_flops(run: Callable[[], Any]) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        run()
    return int(counter.get_total_flops())


def flux_pass_flops(shapes: Shapes, resolution: int, model=None) -> int:
    """FLOPs of one transformer pass of one image (batch 1) at ``resolution``."""
    with torch.device("meta"):
        model = model or build_flux_transformer(shapes)
        inputs = flux_inputs(shapes, 1, resolution, torch.float32, "meta")
    with torch.no_grad():
        return count_flops(lambda: model(**inputs))


def flux_decode_flops(shapes: Shapes, resolution: int) -> int:
    """FLOPs of decoding one image's latents with FLUX's VAE."""
    with torch.device("meta"):
        vae = build_flux_vae(shapes)
        factor = 2 ** (len(shapes.flux_vae["block_out_channels"]) - 1)
        latents = torch.zeros(1, shapes.flux_vae["latent_channels"], resolution // factor, resolution // factor)
    with torch.no_grad():
        return count_flops(lambda: vae.decode(latents))


def vqa_image_flops(shapes: Shapes, tiles: int) -> int:
    """FLOPs of scoring one image (one forward to the answer token's hidden state + LM head row)."""
    with torch.device("meta"):
        model = build_internvl(shapes)
        inputs = vqa_inputs(shapes, 1, tiles, torch.float32, "meta")
        text = model.config.text_config
        embeds = torch.zeros(1, inputs["input_ids"].shape[1], text.hidden_size)
    # The merged forward checks its image-token count with .item(), which meta tensors refuse:
    # count the vision tower + projector and the language model on the merged sequence apart.
    with torch.no_grad():
        vision = count_flops(lambda: model.model.get_image_features(inputs["pixel_values"]))
        language = count_flops(lambda: model.model.language_model(inputs_embeds=embeds))
    return vision + language + 2 * text.hidden_size * text.vocab_size


def unet_pass_flops(shapes: Shapes, resolution: int, batch: int = 1) -> int:
    with torch.device("meta"):
        unet = build_unet(shapes)
        side = resolution // 8
        sample = torch.zeros(batch, 4, side, side)
        context = torch.zeros(batch, SD_TEXT_TOKENS, shapes.unet["cross_attention_dim"])
        timestep = torch.full((batch,), 500)
    with torch.no_grad():
        return count_flops(lambda: unet(sample, timestep, context))


def train_step_flops(shapes: Shapes, learner: str, resolution: int) -> int:
    """One ConceptBed training step: text encoder + UNet forward and backward, batch 2 (instance +
    prior image) for DreamBooth and Custom Diffusion, 1 for Textual Inversion; gradients only
    where the learner needs them (Custom Diffusion: attn2 keys/values; Textual Inversion: the
    token embedding, through the whole UNet and text encoder)."""
    from conceptforge.generators.conceptbed.learners import cross_attention_kv

    batch = 1 if learner == "textual-inversion" else 2
    with torch.device("meta"):
        unet, text = build_unet(shapes), build_text_encoder(shapes)
        unet.requires_grad_(learner == "dreambooth")  # full DreamBooth trains the whole UNet
        text.requires_grad_(False)
        if learner == "custom-diffusion":
            for name, parameter in unet.named_parameters():
                parameter.requires_grad_(cross_attention_kv(name))
        if learner == "textual-inversion":
            text.get_input_embeddings().weight.requires_grad_(True)
        side = resolution // 8
        ids = torch.zeros(batch, SD_TEXT_TOKENS, dtype=torch.long)
        sample = torch.zeros(batch, 4, side, side)
        timestep = torch.full((batch,), 500)
    if learner == "dreambooth-lora":
        # LoRA: gradients flow back through every layer to the adapters, whose own weight
        # gradients are negligible (rank 4): counted as the activation backward alone.
        sample.requires_grad_(True)

    def step() -> None:
        hidden = text(ids)[0]
        unet(sample, timestep, hidden).sample.float().pow(2).mean().backward()

    return count_flops(step)


def quadratic_fit(points: list[tuple[int, int]]) -> list[float]:
    """``[c0, c1, c2]`` with ``flops = c0 + c1*n + c2*n^2`` through three (n, flops) points: the
    exact form of a pass whose matmuls grow with the token count ``n`` and attention with ``n^2``."""
    (x0, y0), (x1, y1), (x2, y2) = points
    import numpy as np

    a = np.array([[1, x, x * x] for x in (x0, x1, x2)], dtype=np.float64)
    return [float(c) for c in np.linalg.solve(a, np.array([y0, y1, y2], dtype=np.float64))]


def flop_table(shapes: Shapes = REAL) -> dict[str, Any]:
    """The ``workloads`` section of ``gpu_costs.json``: FLOPs per unit at the reference settings
    and how a pass's FLOPs grow with its tokens (for scaling to other resolutions)."""
    resolutions = (256, 512, 1024) if shapes is REAL else (16, 32, 64)
    with torch.device("meta"):
        flux = build_flux_transformer(shapes)
    flux_points = [
        (shapes.flux_image_tokens(r) + shapes.flux_text_tokens, flux_pass_flops(shapes, r, flux)) for r in resolutions
    ]
    sd_resolutions = (256, 512, 768) if shapes is REAL else (32, 64, 96)
    unet_points = [(shapes.sd_latent_pixels(r), unet_pass_flops(shapes, r)) for r in sd_resolutions]
    ref, sd_ref, steps = shapes.flux_resolution, shapes.sd_resolution, 28
    flux_pass = flux_pass_flops(shapes, ref, flux)
    decode = flux_decode_flops(shapes, ref)
    unet_pass = unet_pass_flops(shapes, sd_ref)
    flux_scaling = {
        "tokens": "flux",
        "text_tokens": shapes.flux_text_tokens,
        "coefficients": quadratic_fit(flux_points),
    }
    sd_scaling = {"tokens": "sd-latent", "coefficients": quadratic_fit(unet_points)}
    table: dict[str, Any] = {
        "sub/tdg-pair": {
            "unit": "TDG pair (one kept image)",
            "reference": {"resolution": ref, "steps": steps},
            "flops": 2 * steps * flux_pass + decode,
            "counted": f"2 transformer passes per step (batch [R, G]) x {steps} steps + 1 VAE decode; prompt encoding (<1%) not counted",
            "scaling": flux_scaling,
        },
        "sub/prompt-only-image": {
            "unit": "prompt-only image",
            "reference": {"resolution": ref, "steps": steps},
            "flops": steps * flux_pass + decode,
            "counted": f"1 transformer pass per step x {steps} steps + 1 VAE decode",
            "scaling": flux_scaling,
        },
    }
    pair = table["sub/tdg-pair"]
    table = {  # generate sub --fast: the same work, so only a measured figure (benchmarks/_gpu_fast.py) is shown for it
        "sub/tdg-pair": pair,
        "sub/tdg-pair-fast": {
            **pair,
            "unit": "TDG pair with generate sub --fast (one kept image)",
            "counted": pair["counted"]
            + "; the same FLOPs as the plain pair (fp8 matmuls count as matmuls): only a measured figure tells the speed-up",
        },
        "sub/prompt-only-image": table["sub/prompt-only-image"],
    }
    for tiles in VQA_TILES:
        table[f"filter/vqa-image-{tiles}-tile{'s' if tiles > 1 else ''}"] = {
            "unit": "image scored",
            "reference": {"tiles": tiles},
            "flops": vqa_image_flops(shapes, tiles),
            "counted": f"InternVL-2.5-8B forward over {tiles} x 448 px tile(s) + {shapes.vqa_text_tokens} text tokens, one LM-head row",
        }
    for learner in ("dreambooth", "dreambooth-lora", "custom-diffusion", "textual-inversion"):
        table[f"conceptbed/{learner}-step"] = {
            "unit": "training step",
            "reference": {"resolution": sd_ref},
            "flops": train_step_flops(shapes, learner, sd_ref),
            "counted": "SD-1.5 UNet + CLIP text encoder forward and backward, batch "
            + ("1" if learner == "textual-inversion" else "2 (instance + prior)")
            + ("; LoRA: activation gradients only" if learner == "dreambooth-lora" else ""),
            "scaling": sd_scaling,
        }
    table["conceptbed/sample-image"] = {
        "unit": "sampled image",
        "reference": {"resolution": sd_ref, "steps": 50},
        "flops": 2 * 50 * unet_pass,
        "counted": "SD-1.5 UNet, 2 passes per step (classifier-free guidance) x 50 steps; VAE decode not counted",
        "scaling": sd_scaling,
    }
    return table


COSTS_FILE = Path(__file__).resolve().parents[1] / "conceptforge" / "gpu_costs.json"


def write_workloads(path: Path = COSTS_FILE) -> None:
    """Replace the ``workloads`` section of the cost table (its figures are kept)."""
    table = json.loads(path.read_text(encoding="utf-8"))
    table["workloads"] = flop_table()
    path.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    import sys

    if "--write" in sys.argv[1:]:
        write_workloads()
        print(f"wrote the workloads of {COSTS_FILE}")
    else:
        print(json.dumps(flop_table(), indent=1))
