"""Tiny random BLIP and ViLT retrieval models saved in Hub layout for offline CompMap tests.

The tiny CLIP (77 positions hold the CompMap prompts) comes from :mod:`conceptforge.testing.tiny_models`.
"""

from __future__ import annotations

from pathlib import Path

_WORDPIECES = (
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    + list("abcdefghijklmnopqrstuvwxyz0123456789()-,.")
    + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    + ["this", "is", "a", "photo", "of", "bird", "whose", "the"]
)


def _bert_tokenizer(out_dir: Path):
    from transformers import BertTokenizer

    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = out_dir / "vocab.txt"
    vocab.write_text("\n".join(_WORDPIECES) + "\n")
    return BertTokenizer(str(vocab)), len(_WORDPIECES)


#: The size of every tiny transformer here (BLIP's text and vision towers, ViLT): one small layer.
_LAYERS = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2)


def build_tiny_blip(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A 1-layer ``BlipForImageTextRetrieval`` (ITM head) with a PIL image processor."""
    import torch
    from transformers import BlipConfig, BlipForImageTextRetrieval, BlipImageProcessorPil, BlipProcessor

    out_dir = Path(out_dir)
    tokenizer, vocab_size = _bert_tokenizer(out_dir.with_name(out_dir.name + "-tok"))
    config = BlipConfig(
        text_config=dict(
            vocab_size=vocab_size,
            **_LAYERS,
            max_position_embeddings=64,
            encoder_hidden_size=32,
            bos_token_id=2,
            sep_token_id=3,
            pad_token_id=0,
        ),
        vision_config=dict(**_LAYERS, image_size=32, patch_size=8),
        projection_dim=16,
    )
    torch.manual_seed(seed)
    BlipForImageTextRetrieval(config).save_pretrained(out_dir)
    BlipProcessor(
        image_processor=BlipImageProcessorPil(size={"height": 32, "width": 32}), tokenizer=tokenizer
    ).save_pretrained(out_dir)
    return out_dir


def build_tiny_vilt(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A 1-layer ``ViltForImageAndTextRetrieval`` with a PIL image processor."""
    import torch
    from transformers import ViltConfig, ViltForImageAndTextRetrieval, ViltImageProcessorPil, ViltProcessor

    out_dir = Path(out_dir)
    tokenizer, vocab_size = _bert_tokenizer(out_dir.with_name(out_dir.name + "-tok"))
    config = ViltConfig(
        vocab_size=vocab_size,
        **_LAYERS,
        image_size=32,
        patch_size=8,
        max_position_embeddings=64,
        max_image_length=-1,
    )
    torch.manual_seed(seed)
    ViltForImageAndTextRetrieval(config).save_pretrained(out_dir)
    ViltProcessor(
        image_processor=ViltImageProcessorPil(size={"shortest_edge": 32}, size_divisor=8), tokenizer=tokenizer
    ).save_pretrained(out_dir)
    return out_dir
