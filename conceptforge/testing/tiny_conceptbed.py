"""Tiny random Stable-Diffusion-1.5-style and Latent-Diffusion pipelines, ViLT and image
classifiers built from configs.

Why: tests, benchmarks and smoke runs must exercise the real ``from_pretrained`` code paths
offline. These builders make models with the same classes and folder layout as
``runwayml/stable-diffusion-v1-5`` / ``CompVis/ldm-text2im-large-256`` /
``dandelin/vilt-b32-finetuned-vqa`` / timm-style classifiers, only a few hundred kilobytes large,
and save them to a local directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from conceptforge.testing.tiny_models import clip_byte_tokenizer, clip_byte_vocab, clip_special_ids

#: The noise schedule SD-1.x and CompVis/ldm-text2im-large-256 were trained with (their scheduler configs).
LATENT_DIFFUSION_BETAS = {
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "num_train_timesteps": 1000,
    "set_alpha_to_one": False,
}
#: LDMBert at width 32 (the real one: 32 layers of width 1280).
TINY_LDMBERT = {"d_model": 32, "encoder_layers": 2, "encoder_ffn_dim": 64, "encoder_attention_heads": 2, "head_dim": 16}


def tiny_unet(sample_size: int, block_out_channels: tuple[int, int] = (32, 64)):
    """The conditional UNet of the tiny SD and LDM pipelines: two blocks, cross-attention width 32."""
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        sample_size=sample_size,
        in_channels=4,
        out_channels=4,
        layers_per_block=1,
        block_out_channels=tuple(block_out_channels),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
        norm_num_groups=32,
    )


def build_tiny_sd(
    path: str | Path, *, seed: int = 0, sample_size: int = 16, block_out_channels: tuple[int, int] = (32, 64)
) -> Path:
    """Save a tiny SD-1.5-layout pipeline (UNet, VAE, CLIP text encoder, tokenizer, PNDM) to ``path``.

    ``sample_size`` is the latent size; images are ``8 * sample_size / 2`` pixels (one VAE
    down-sampling block pair gives a factor 2 here, so 16 latents -> 32 px images).
    ``block_out_channels`` widens the UNet (benchmarks use a wider one, closer to SD's
    parameter-to-activation balance).
    """
    from diffusers import AutoencoderKL, PNDMScheduler, StableDiffusionPipeline
    from transformers import CLIPTextConfig, CLIPTextModel

    path = Path(path)
    torch.manual_seed(seed)
    unet = tiny_unet(sample_size, block_out_channels)
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        block_out_channels=(32, 32),
        latent_channels=4,
        layers_per_block=1,
        norm_num_groups=32,
        sample_size=sample_size * 2,
    )
    vocab = clip_byte_vocab(byte_order=True)
    tokenizer = clip_byte_tokenizer(vocab=vocab, model_max_length=77)
    text_config = CLIPTextConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=77,
        projection_dim=32,
        **clip_special_ids(vocab),
    )
    text_encoder = CLIPTextModel(text_config)
    scheduler = PNDMScheduler(**LATENT_DIFFUSION_BETAS, skip_prk_steps=True, steps_offset=1)
    pipe = StableDiffusionPipeline(
        unet=unet,
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.save_pretrained(path, safe_serialization=True)
    return path


#: A WordPiece vocabulary that spells any lower-case word letter by letter (``a ##b ##c``), so
#: every prompt of the tests encodes differently; ``*`` is Table 5's LDM placeholder (in BERT's vocab).
TINY_BERT_CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789"
TINY_BERT_PUNCTUATION = "*<>.,'?!-_"


def tiny_bert_tokenizer(model_max_length: int = 77):
    """A ``BertTokenizer`` over :data:`TINY_BERT_CHARACTERS` (whole and ``##`` continuation) and punctuation."""
    from transformers import BertTokenizer

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words += list(TINY_BERT_CHARACTERS + TINY_BERT_PUNCTUATION) + ["##" + c for c in TINY_BERT_CHARACTERS]
    return BertTokenizer(vocab={word: index for index, word in enumerate(words)}, model_max_length=model_max_length)


def build_tiny_ldm(path: str | Path, *, seed: int = 0, autoencoder: str = "kl", sample_size: int = 4) -> Path:
    """Save a tiny ``LDMTextToImagePipeline`` (LDMBert, BERT tokenizer, conditional UNet, KL or VQ
    autoencoder, DDIM scheduler) in the layout of ``CompVis/ldm-text2im-large-256`` to ``path``.

    The autoencoder down-samples by 8 like the real one (the pipeline's latent size is
    ``height // 8`` whatever its autoencoder), so ``sample_size`` 4 latents are 32 px images.
    ``autoencoder="vq"`` builds a ``VQModel`` instead of the real model's ``AutoencoderKL``.
    """
    from diffusers import AutoencoderKL, DDIMScheduler, LDMTextToImagePipeline, VQModel
    from diffusers.pipelines.latent_diffusion.pipeline_latent_diffusion import LDMBertConfig, LDMBertModel

    if autoencoder not in ("kl", "vq"):
        raise ValueError(f"autoencoder must be kl or vq, got {autoencoder!r}")
    path = Path(path)
    torch.manual_seed(seed)
    tokenizer = tiny_bert_tokenizer()
    bert = LDMBertModel(LDMBertConfig(vocab_size=len(tokenizer), max_position_embeddings=77, **TINY_LDMBERT))
    unet = tiny_unet(sample_size)
    shape = {
        "in_channels": 3,
        "out_channels": 3,
        "down_block_types": ("DownEncoderBlock2D",) * 4,
        "up_block_types": ("UpDecoderBlock2D",) * 4,
        "block_out_channels": (8, 8, 8, 8),
        "latent_channels": 4,
        "layers_per_block": 1,
        "norm_num_groups": 8,
        "sample_size": sample_size * 8,
    }
    vqvae = AutoencoderKL(**shape) if autoencoder == "kl" else VQModel(**shape, num_vq_embeddings=16, vq_embed_dim=4)
    scheduler = DDIMScheduler(**LATENT_DIFFUSION_BETAS, clip_sample=False)  # the real model's config
    pipe = LDMTextToImagePipeline(vqvae=vqvae, bert=bert, tokenizer=tokenizer, unet=unet, scheduler=scheduler)
    pipe.save_pretrained(path, safe_serialization=True)
    return path


def build_tiny_classifier(
    path: str | Path, labels: Sequence[str], *, arch: str = "resnet", seed: int = 0, image_size: int = 32
) -> Path:
    """Save a tiny ResNet or ConvNeXt image classifier (+ its image processor) with ``labels``."""
    from transformers import ConvNextConfig, ConvNextForImageClassification, ResNetConfig, ResNetForImageClassification
    from transformers.models.convnext import ConvNextImageProcessorPil

    torch.manual_seed(seed)
    id2label = {i: name for i, name in enumerate(labels)}
    label2id = {name: i for i, name in id2label.items()}
    if arch == "resnet":
        config = ResNetConfig(
            embedding_size=8,
            hidden_sizes=[8, 16],
            depths=[1, 1],
            layer_type="basic",
            num_labels=len(labels),
            id2label=id2label,
            label2id=label2id,
        )
        model = ResNetForImageClassification(config)
    elif arch == "convnext":
        config = ConvNextConfig(
            hidden_sizes=[8, 16],
            depths=[1, 1],
            num_stages=2,
            num_labels=len(labels),
            id2label=id2label,
            label2id=label2id,
        )
        model = ConvNextForImageClassification(config)
    else:
        raise ValueError(f"unknown tiny classifier architecture {arch!r}")
    processor = ConvNextImageProcessorPil(size={"shortest_edge": image_size}, crop_pct=1.0)
    path = Path(path)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


VILT_WORDS = (
    "[PAD] [UNK] [CLS] [SEP] [MASK] is are there the a an dog dogs cat cats two bird birds black nose grass "
    "standing on in of has licking herself red bar ? '"
).split()


def build_tiny_vilt(path: str | Path, *, seed: int = 0, image_size: int = 32) -> Path:
    """Save a tiny ViltForQuestionAnswering (answers yes / no / 2) and its processor."""
    from transformers import BertTokenizer, ViltConfig, ViltForQuestionAnswering, ViltProcessor
    from transformers.models.vilt import ViltImageProcessorPil

    torch.manual_seed(seed)
    vocab = {word: index for index, word in enumerate(VILT_WORDS)}
    tokenizer = BertTokenizer(vocab=vocab)
    processor = ViltProcessor(
        image_processor=ViltImageProcessorPil(size={"shortest_edge": image_size}, size_divisor=16), tokenizer=tokenizer
    )
    answers = ["yes", "no", "2"]
    config = ViltConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        image_size=image_size,
        patch_size=16,
        max_position_embeddings=40,
        max_image_length=-1,
        id2label=dict(enumerate(answers)),
        label2id={a: i for i, a in enumerate(answers)},
    )
    model = ViltForQuestionAnswering(config)
    path = Path(path)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def build_tiny_dino(path: str | Path, *, seed: int = 0, image_size: int = 32) -> Path:
    """A 1-layer random ``ViTModel`` (DINO's architecture: its CLS token is the image embedding)."""
    import torch
    from transformers import ViTConfig, ViTModel
    from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

    path = Path(path)
    config = ViTConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        image_size=image_size,
        patch_size=8,
    )
    torch.manual_seed(seed)
    ViTModel(config, add_pooling_layer=False).save_pretrained(path)
    ViTImageProcessorPil(size={"height": image_size, "width": image_size}).save_pretrained(path)
    return path
