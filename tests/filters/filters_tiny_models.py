"""Tiny random models built from configs for the filters tests (saved, then loaded offline).

Why: the real checkpoints (InternVL-2.5-8B, the CUB Swin classifier) are gigabytes and need the
Hub; the code paths under test (``from_pretrained``, chat templates, processors, next-token
logits, label mapping) are the same for a model with a handful of random weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def byte_level_vocab(drop: Sequence[str] = ()) -> dict[str, int]:
    """The 256 byte-level symbols (GPT-2 mapping) plus chat specials; ``drop`` removes symbols."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    symbols = [s for s in bytes_to_unicode().values() if s not in set(drop)]
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"]
    return {token: index for index, token in enumerate(specials + symbols)}


def build_tiny_llava(
    path: Path,
    *,
    drop_symbols: Sequence[str] = (),
    seed: int = 0,
    image_size: int = 32,
    patch: int = 8,
    hidden: int = 32,
    layers: int = 2,
    heads: int = 4,
) -> Path:
    """Save a CLIP-vision + Llama LLaVA (2+2 layers of width 32 by default) with processor and chat template."""
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        Qwen2Tokenizer,
    )

    vocab = byte_level_vocab(drop_symbols)
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=[], unk_token="<|endoftext|>")
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<image>"]})
    vision = CLIPVisionConfig(
        hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers, num_attention_heads=heads,
        image_size=image_size, patch_size=patch, projection_dim=hidden,
    )
    text = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id,
    )
    config = LlavaConfig(
        vision_config=vision, text_config=text,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1, vision_feature_select_strategy="full",
    )
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size},
    )
    processor = LlavaProcessor(
        image_processor=image_processor, tokenizer=tokenizer, patch_size=patch,
        vision_feature_select_strategy="full", chat_template=CHAT_TEMPLATE, image_token="<image>",
        num_additional_image_tokens=1,
    )
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def build_tiny_classifier(path: Path, labels: Sequence[str], *, seed: int = 0) -> Path:
    """Save a tiny random Swin image classifier whose ``id2label`` is ``labels``."""
    from transformers import SwinConfig, SwinForImageClassification
    from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

    config = SwinConfig(
        image_size=32, patch_size=4, num_channels=3, embed_dim=8, depths=[1, 1], num_heads=[1, 2],
        window_size=4, num_labels=len(labels),
        id2label=dict(enumerate(labels)), label2id={name: i for i, name in enumerate(labels)},
    )
    torch.manual_seed(seed)
    model = SwinForImageClassification(config).eval()
    model.save_pretrained(path)
    ViTImageProcessorPil(size={"height": 32, "width": 32}).save_pretrained(path)
    return path
