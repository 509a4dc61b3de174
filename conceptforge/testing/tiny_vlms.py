"""Tiny random models built from configs for the filters tests (saved, then loaded offline).

Why: the real checkpoints (InternVL-2.5-8B, the CUB Swin classifier) are gigabytes and need the
Hub; the code paths under test (``from_pretrained``, chat templates, processors, next-token
logits, label mapping) are the same for a model with a handful of random weights.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

from conceptforge.testing.tiny_models import byte_symbols

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def byte_level_vocab(drop: Sequence[str] = ()) -> dict[str, int]:
    """The 256 byte-level symbols (GPT-2 mapping) plus chat specials; ``drop`` removes symbols."""
    symbols = [s for s in byte_symbols() if s not in set(drop)]
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"]
    return {token: index for index, token in enumerate(specials + symbols)}


def build_tiny_llava(
    path: Path,
    *,
    drop_symbols: Sequence[str] = (),
    words: Sequence[str] = (),
    seed: int = 0,
    image_size: int = 32,
    patch: int = 8,
    hidden: int = 32,
    layers: int = 2,
    heads: int = 4,
) -> Path:
    """Save a CLIP-vision + Llama LLaVA (2+2 layers of width 32 by default) with processor and chat template.

    ``words`` become single tokens (merges of their characters), e.g. ``("Yes", "No")`` for
    VQAScore; by default every character is its own token."""
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        Qwen2Tokenizer,
    )

    vocab = byte_level_vocab(drop_symbols)
    merges: list[tuple[str, str]] = []
    for word in words:  # left to right: "Y e" -> "Ye", "Ye s" -> "Yes"
        for end in range(2, len(word) + 1):
            merges.append((word[: end - 1], word[end - 1]))
            vocab.setdefault(word[:end], len(vocab))
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=merges, unk_token="<|endoftext|>")
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<image>"]})
    vision = CLIPVisionConfig(
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        image_size=image_size,
        patch_size=patch,
        projection_dim=hidden,
    )
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy="full",
    )
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": image_size},
        crop_size={"height": image_size, "width": image_size},
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch,
        vision_feature_select_strategy="full",
        chat_template=CHAT_TEMPLATE,
        image_token="<image>",
        num_additional_image_tokens=1,
    )
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def make_letter_answerer(path: Path, letters: str = "ABCD") -> Path:
    """Make a saved tiny LLaVA answer with one option letter, then stop, under plain greedy ``generate``.

    Why: a random model's greedy words are byte soup that no parser reads, so every by-answer
    accuracy is 0 and a parity test between harnesses could not tell a right score from a wrong
    one. The model's ``generation_config.json`` (read by every caller's ``model.generate``:
    ours, lmms-eval's, a user's loop) suppresses every token but the letters and the
    end-of-sequence token and biases the end of sequence right after a letter: the first token,
    chosen by the random weights from the image and the prompt, is a letter (or the end: an
    empty, unparsed answer), the second ends the answer. Nothing else of the model changes."""
    import json

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    eos = tokenizer.eos_token_id
    if eos is None:
        eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    letter_ids = [tokenizer.convert_tokens_to_ids(letter) for letter in letters]
    keep = {eos, *letter_ids}
    config_path = path / "generation_config.json"
    config = json.loads(config_path.read_text()) if config_path.exists() else {}
    config.update(
        {
            "eos_token_id": eos,
            "pad_token_id": tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos,
            "suppress_tokens": [i for i in range(len(tokenizer)) if i not in keep],
            "sequence_bias": [[[letter, eos], 100.0] for letter in letter_ids],
        }
    )
    config_path.write_text(json.dumps(config, indent=2))
    return path


def build_tiny_classifier(path: Path, labels: Sequence[str], *, seed: int = 0) -> Path:
    """Save a tiny random Swin image classifier whose ``id2label`` is ``labels``."""
    from transformers import SwinConfig, SwinForImageClassification
    from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

    config = SwinConfig(
        image_size=32,
        patch_size=4,
        num_channels=3,
        embed_dim=8,
        depths=[1, 1],
        num_heads=[1, 2],
        window_size=4,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={name: i for i, name in enumerate(labels)},
    )
    torch.manual_seed(seed)
    model = SwinForImageClassification(config).eval()
    model.save_pretrained(path)
    ViTImageProcessorPil(size={"height": 32, "width": 32}).save_pretrained(path)
    return path


def build_tiny_internvl(path: Path, *, seed: int = 0) -> Path:
    """Save a tiny native InternVL (InternViT-style vision + Qwen2) with its processor.

    Its processor class insists on a video processor that needs torchvision, so it is built
    (and later loaded) through :func:`filters.vqa.without_video_processor`.
    """
    from transformers import InternVLConfig, InternVLForConditionalGeneration, InternVLProcessor, Qwen2Tokenizer
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

    from conceptforge.filters.vqa.scorer import without_video_processor

    specials = {
        "start_image_token": "<img>",
        "end_image_token": "</img>",
        "context_image_token": "<IMG_CONTEXT>",
        "video_token": "<video>",
    }
    vocab = byte_level_vocab()
    for token in specials.values():
        vocab[token] = len(vocab)
    tokenizer = Qwen2Tokenizer(
        vocab=vocab, merges=[], unk_token="<|endoftext|>", model_specific_special_tokens=specials
    )
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>", *specials.values()]})
    config = InternVLConfig(
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 4,
            "image_size": [32, 32],
            "patch_size": [8, 8],
        },
        text_config={
            "model_type": "qwen2",
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
        },
        image_token_id=tokenizer.convert_tokens_to_ids("<IMG_CONTEXT>"),
        downsample_ratio=0.5,
    )
    torch.manual_seed(seed)
    model = InternVLForConditionalGeneration(config).eval()
    image_processor = GotOcr2ImageProcessorPil(size={"height": 32, "width": 32}, crop_to_patches=False)
    template = CHAT_TEMPLATE.replace("<image>\n", "<IMG_CONTEXT>\n")
    # The processor cannot save itself without a video processor: save its parts and its config
    # in the layout of a real checkpoint.
    without_video_processor(InternVLProcessor)(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=None,
        chat_template=template,
        image_seq_length=4,
    )
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    image_processor.save_pretrained(path)
    (path / "processor_config.json").write_text(
        json.dumps({"processor_class": "InternVLProcessor", "image_seq_length": 4}, indent=1)
    )
    (path / "chat_template.jinja").write_text(template)
    return path
