"""Tiny random CLIP saved in Hub layout for offline tests (after tests/eval/tiny_clip.py of issue 6).

The tokenizer is built in memory from the 256 byte-level symbols (and their ``</w>`` forms) with
no merges, so every character is one token; 77 positions hold the CompMap prompts.
"""

from __future__ import annotations

from pathlib import Path


def _bytes_to_unicode() -> dict[int, str]:
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, chars)))


def byte_vocab() -> dict[str, int]:
    symbols = list(_bytes_to_unicode().values())
    vocab: dict[str, int] = {}
    for symbol in symbols + [s + "</w>" for s in symbols] + ["<|startoftext|>", "<|endoftext|>"]:
        vocab.setdefault(symbol, len(vocab))
    return vocab


def build_tiny_clip(out_dir: str | Path, *, seed: int = 0, hidden: int = 32, projection: int = 16, image_size: int = 32) -> Path:
    import torch
    from transformers import CLIPConfig, CLIPImageProcessorPil, CLIPModel, CLIPProcessor, CLIPTokenizer

    out_dir = Path(out_dir)
    vocab = byte_vocab()
    tokenizer = CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)
    config = CLIPConfig(
        text_config=dict(
            vocab_size=len(vocab), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
            num_attention_heads=2, max_position_embeddings=77,
            bos_token_id=vocab["<|startoftext|>"], eos_token_id=vocab["<|endoftext|>"], pad_token_id=vocab["<|endoftext|>"],
        ),
        vision_config=dict(hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2, num_attention_heads=2, image_size=image_size, patch_size=8),
        projection_dim=projection,
    )
    torch.manual_seed(seed)
    model = CLIPModel(config)
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size})
    CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(out_dir)
    model.save_pretrained(out_dir)
    return out_dir


_WORDPIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz0123456789()-,.") + [
    "##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"
] + ["this", "is", "a", "photo", "of", "bird", "whose", "the"]


def _bert_tokenizer(out_dir: Path):
    from transformers import BertTokenizer

    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = out_dir / "vocab.txt"
    vocab.write_text("\n".join(_WORDPIECES) + "\n")
    return BertTokenizer(str(vocab)), len(_WORDPIECES)


def build_tiny_blip(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A 1-layer ``BlipForImageTextRetrieval`` (ITM head) with a PIL image processor."""
    import torch
    from transformers import BlipConfig, BlipForImageTextRetrieval, BlipImageProcessorPil, BlipProcessor

    out_dir = Path(out_dir)
    tokenizer, vocab_size = _bert_tokenizer(out_dir.with_name(out_dir.name + "-tok"))
    config = BlipConfig(
        text_config=dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                         max_position_embeddings=64, encoder_hidden_size=32, bos_token_id=2, sep_token_id=3, pad_token_id=0),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=32, patch_size=8),
        projection_dim=16,
    )
    torch.manual_seed(seed)
    BlipForImageTextRetrieval(config).save_pretrained(out_dir)
    BlipProcessor(image_processor=BlipImageProcessorPil(size={"height": 32, "width": 32}), tokenizer=tokenizer).save_pretrained(out_dir)
    return out_dir


def build_tiny_vilt(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A 1-layer ``ViltForImageAndTextRetrieval`` with a PIL image processor."""
    import torch
    from transformers import ViltConfig, ViltForImageAndTextRetrieval, ViltImageProcessorPil, ViltProcessor

    out_dir = Path(out_dir)
    tokenizer, vocab_size = _bert_tokenizer(out_dir.with_name(out_dir.name + "-tok"))
    config = ViltConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                        image_size=32, patch_size=8, max_position_embeddings=64, max_image_length=-1)
    torch.manual_seed(seed)
    ViltForImageAndTextRetrieval(config).save_pretrained(out_dir)
    ViltProcessor(image_processor=ViltImageProcessorPil(size={"shortest_edge": 32}, size_divisor=8), tokenizer=tokenizer).save_pretrained(out_dir)
    return out_dir
