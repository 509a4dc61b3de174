"""Randomly initialised FluxPipelines built from configs, for tests and timing benchmarks.

Why: FLUX.1-dev is gated and 24 GB; tests and speed measurements need no trained weights, only
the real component classes. Tokenizers are built in memory (byte-level CLIP BPE without merges,
a character-level T5 unigram), so nothing is downloaded. ``save_pretrained`` the result and load
it back through ``FluxPipeline.from_pretrained`` to exercise the real loading path.
"""

from __future__ import annotations

from typing import Any

import torch

from conceptforge.testing.tiny_models import clip_byte_tokenizer

#: The transformer of FLUX.1-dev (19 double-stream + 38 single-stream blocks, ~12B parameters).
FLUX_DEV_TRANSFORMER: dict[str, Any] = {
    "patch_size": 1,
    "in_channels": 64,
    "num_layers": 19,
    "num_single_layers": 38,
    "attention_head_dim": 128,
    "num_attention_heads": 24,
    "joint_attention_dim": 4096,
    "pooled_projection_dim": 768,
    "guidance_embeds": True,
    "axes_dims_rope": [16, 56, 56],
}

TINY_TRANSFORMER: dict[str, Any] = {
    "patch_size": 1,
    "in_channels": 16,
    "num_layers": 1,
    "num_single_layers": 1,
    "attention_head_dim": 16,
    "num_attention_heads": 2,
    "joint_attention_dim": 32,
    "pooled_projection_dim": 32,
    "guidance_embeds": True,
    "axes_dims_rope": [4, 4, 8],
}


def tiny_clip_tokenizer():
    """The byte-level CLIP tokenizer (no merges, 77 positions) of :mod:`conceptforge.testing.tiny_models`."""
    return clip_byte_tokenizer(model_max_length=77)


def tiny_t5_tokenizer():
    from transformers import T5Tokenizer

    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -1.0)]
    pieces += [(chr(code), -2.0) for code in range(32, 127)]
    return T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=512)


#: FLUX.1-dev's scheduler: flow matching with the timestep shift growing with the image's tokens.
FLUX_SCHEDULER: dict[str, Any] = {
    "base_image_seq_len": 256,
    "max_image_seq_len": 4096,
    "base_shift": 0.5,
    "max_shift": 1.15,
    "use_dynamic_shifting": True,
}


def flux_pipeline(transformer, vae, text: dict[str, Any] | None = None, **scheduler: Any):
    """A FluxPipeline of these components and FLUX.1-dev's scheduler (``scheduler`` overrides its
    config). ``text``: the two text encoders and tokenizers by their pipeline names; none given,
    the pipeline has none (the device check feeds it prompt embeddings)."""
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxPipeline

    text = text or dict.fromkeys(("text_encoder", "tokenizer", "text_encoder_2", "tokenizer_2"))
    flow = FlowMatchEulerDiscreteScheduler(**{**FLUX_SCHEDULER, **scheduler})
    return FluxPipeline(scheduler=flow, vae=vae, transformer=transformer, **text)


def build_random_flux_pipeline(
    *,
    transformer_config: dict[str, Any] | None = None,
    vae_blocks: tuple[int, ...] = (8, 8),
    latent_channels: int | None = None,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
):
    """A FluxPipeline with random weights; tiny by default.

    ``transformer_config`` overrides :data:`TINY_TRANSFORMER` (pass :data:`FLUX_DEV_TRANSFORMER`
    for a full-size transformer to time on a GPU). The VAE's latent channels follow the
    transformer's ``in_channels / 4`` (2x2 packing), as in FLUX.
    """
    from diffusers import AutoencoderKL, FluxTransformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    config = {**TINY_TRANSFORMER, **(transformer_config or {})}
    latent_channels = latent_channels or config["in_channels"] // 4
    torch.manual_seed(seed)
    clip_tokenizer = tiny_clip_tokenizer()
    t5_tokenizer = tiny_t5_tokenizer()
    clip = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(clip_tokenizer),
            hidden_size=32,
            intermediate_size=37,
            num_attention_heads=4,
            num_hidden_layers=2,
            projection_dim=config["pooled_projection_dim"],
            max_position_embeddings=77,
            bos_token_id=clip_tokenizer.bos_token_id,
            eos_token_id=clip_tokenizer.eos_token_id,
            pad_token_id=clip_tokenizer.pad_token_id,
            hidden_act="gelu",
        )
    )
    if clip.config.hidden_size != config["pooled_projection_dim"]:
        # FLUX pools CLIP's final hidden state (not the projection): widths must agree.
        clip = CLIPTextModel(
            clip.config.__class__(**{**clip.config.to_dict(), "hidden_size": config["pooled_projection_dim"]})
        )
    t5 = T5EncoderModel(
        T5Config(
            vocab_size=len(t5_tokenizer),
            d_model=config["joint_attention_dim"],
            d_kv=8,
            d_ff=37,
            num_layers=2,
            num_heads=2,
            relative_attention_num_buckets=8,
            pad_token_id=t5_tokenizer.pad_token_id,
            eos_token_id=t5_tokenizer.eos_token_id,
            decoder_start_token_id=0,
        )
    )
    with torch.device(device):  # a full-size transformer is initialised on the GPU directly
        transformer = FluxTransformer2DModel(**config)
    if dtype != torch.float32:
        transformer = transformer.to(dtype)
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * len(vae_blocks),
        up_block_types=("UpDecoderBlock2D",) * len(vae_blocks),
        block_out_channels=vae_blocks,
        layers_per_block=1,
        latent_channels=latent_channels,
        norm_num_groups=min(vae_blocks),
        use_quant_conv=False,
        use_post_quant_conv=False,
        shift_factor=0.0609,
        scaling_factor=1.5035,
    )
    for module in (clip, t5, transformer, vae):
        module.eval()  # from_pretrained would do this; dropout in train mode breaks determinism
    text = {"text_encoder": clip, "tokenizer": clip_tokenizer, "text_encoder_2": t5, "tokenizer_2": t5_tokenizer}
    pipe = flux_pipeline(transformer, vae, text, shift=3.0)
    if dtype != torch.float32:
        pipe.to(dtype=dtype)
    return pipe.to(device) if torch.device(device).type != "cpu" else pipe
