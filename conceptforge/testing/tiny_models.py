"""Shared pieces for tiny random models built from configs (offline tests and benchmarks).

Why: tests and benchmarks must exercise the real ``from_pretrained`` code paths without the Hub.
Several builders (the tiny CLIP of the eval/CompMap/pipeline tests, the FLUX pipeline of
``conceptforge.testing.random_flux``, the SD-1.5 pipeline of ``conceptforge.testing.tiny_conceptbed``) all need
the same byte-level CLIP tokenizer; it lives here once. The tokenizer is built in memory from the
256 byte-level symbols (and their ``</w>`` word-final forms) with no merges, so every character
is one token and nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

CLIP_BOS = "<|startoftext|>"
CLIP_EOS = "<|endoftext|>"


def byte_symbols(*, byte_order: bool = False) -> list[str]:
    """GPT-2/CLIP's reversible byte -> printable-character table, as its 256 values.

    Default order is the table's own (printable bytes first, as CLIP's vocab lists them);
    ``byte_order=True`` lists them by byte value 0..255 (the tiny SD pipeline's vocab order).
    """
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    table = bytes_to_unicode()
    return [table[byte] for byte in range(256)] if byte_order else list(table.values())


def clip_byte_vocab(*, byte_order: bool = False) -> dict[str, int]:
    """Byte-level symbols, their ``</w>`` forms, then CLIP's start/end tokens (ids in that order)."""
    symbols = byte_symbols(byte_order=byte_order)
    vocab: dict[str, int] = {}
    for symbol in symbols + [s + "</w>" for s in symbols] + [CLIP_BOS, CLIP_EOS]:
        vocab.setdefault(symbol, len(vocab))
    return vocab


def clip_special_ids(vocab: dict[str, int]) -> dict[str, int]:
    """``bos/eos/pad_token_id`` for a CLIP text config over ``vocab`` (CLIP pads with its end token)."""
    return {"bos_token_id": vocab[CLIP_BOS], "eos_token_id": vocab[CLIP_EOS], "pad_token_id": vocab[CLIP_EOS]}


def clip_byte_tokenizer(*, vocab: dict[str, int] | None = None, model_max_length: int = 77):
    """A merge-free ``CLIPTokenizer`` over :func:`clip_byte_vocab` (or the given ``vocab``)."""
    from transformers import CLIPTokenizer

    return CLIPTokenizer(
        vocab=vocab if vocab is not None else clip_byte_vocab(), merges=[], model_max_length=model_max_length
    )


def build_tiny_clip(
    out_dir: str | Path,
    *,
    seed: int = 0,
    hidden: int = 32,
    projection: int = 16,
    image_size: int = 32,
    max_length: int = 77,
    layers: int = 2,
    heads: int = 2,
    mlp_ratio: int = 2,
    vision_hidden: int | None = None,
    vision_layers: int | None = None,
    vision_heads: int | None = None,
    patch_size: int = 8,
) -> Path:
    """Save a random ``CLIPModel`` + ``CLIPProcessor`` (PIL image processor) in Hub layout.

    Defaults: 2-layer towers of width 32, 32 px images, 77 text positions. The vision tower
    follows the text tower unless ``vision_*`` say otherwise; MLPs are ``mlp_ratio`` wide.
    """
    import torch
    from transformers import CLIPConfig, CLIPImageProcessorPil, CLIPModel, CLIPProcessor

    out_dir = Path(out_dir)
    vocab = clip_byte_vocab()
    tokenizer = clip_byte_tokenizer(vocab=vocab, model_max_length=max_length)
    vision_hidden = vision_hidden or hidden
    config = CLIPConfig(
        text_config=dict(
            vocab_size=len(vocab),
            hidden_size=hidden,
            intermediate_size=mlp_ratio * hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            max_position_embeddings=max_length,
            **clip_special_ids(vocab),
        ),
        vision_config=dict(
            hidden_size=vision_hidden,
            intermediate_size=mlp_ratio * vision_hidden,
            num_hidden_layers=vision_layers or layers,
            num_attention_heads=vision_heads or heads,
            image_size=image_size,
            patch_size=patch_size,
        ),
        projection_dim=projection,
    )
    torch.manual_seed(seed)
    model = CLIPModel(config)
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    )
    model.save_pretrained(out_dir)
    CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(out_dir)
    return out_dir


def check_distinct_token_ids(model_dir: str | Path, prompts: Sequence[str]) -> None:
    """Refuse a tiny model whose tokenizer gives two distinct ``prompts`` the same ids (as the
    embedding cache tokenises them: truncated to the model's length). Why: a byte-level tokenizer
    at 16 or 32 positions cuts "a photo of a bird whose bill shape is …" before the value, so every
    option scores the same and an argmax test on such a fixture cannot fail."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    seen: dict[tuple[int, ...], str] = {}
    for prompt in dict.fromkeys(prompts):
        ids = tuple(tokenizer(prompt, truncation=True)["input_ids"])
        if ids in seen:
            raise ValueError(
                f"tiny model {model_dir}: prompts {seen[ids]!r} and {prompt!r} tokenise to the same ids "
                f"(truncated at {tokenizer.model_max_length} tokens); build it with a longer max_length"
            )
        seen[ids] = prompt


def build_tiny_siglip(out_dir: str | Path, *, seed: int = 0, image_size: int = 32, max_length: int = 64) -> Path:
    """Save a random 2-layer ``SiglipModel`` + ``SiglipProcessor`` (the byte-level CLIP tokenizer:
    SigLIP's own is a SentencePiece model that cannot be built offline; the model pads to
    ``max_length`` as SigLIP was trained)."""
    import torch
    from transformers import SiglipConfig, SiglipModel, SiglipProcessor
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    out_dir = Path(out_dir)
    vocab = clip_byte_vocab()
    tokenizer = clip_byte_tokenizer(vocab=vocab, model_max_length=max_length)
    towers = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)
    config = SiglipConfig(
        text_config=dict(
            vocab_size=len(vocab),
            max_position_embeddings=max_length,
            projection_size=32,
            **towers,
            **clip_special_ids(vocab),
        ),
        vision_config=dict(image_size=image_size, patch_size=8, **towers),
    )
    torch.manual_seed(seed)
    SiglipModel(config).save_pretrained(out_dir)
    SiglipProcessor(
        image_processor=SiglipImageProcessorPil(size={"height": image_size, "width": image_size}), tokenizer=tokenizer
    ).save_pretrained(out_dir)
    return out_dir
