"""The random CLIP the evaluation benchmarks (eval, rescore) time: built from a config, no download.

Quick: 2 layers of width 64 on 64 px images (seconds). Full: the shapes of
``openai/clip-vit-base-patch32`` (ViT-B/32 vision tower, 12-layer 512-wide text tower), so the
timed work costs what the real model's would.
"""

from __future__ import annotations

from pathlib import Path


def random_clip(path: Path, quick: bool, max_length: int | None = None) -> Path:
    """Save the random CLIP to ``path``; ``max_length``: its text length (default 32 quick, 77 full)."""
    from conceptforge.testing.tiny_models import build_tiny_clip

    if quick:
        return build_tiny_clip(path, hidden=64, projection=32, image_size=64, max_length=max_length or 32)
    text = {"hidden": 512, "heads": 8, "layers": 12, "mlp_ratio": 4, "max_length": max_length or 77}
    vision = {"vision_hidden": 768, "vision_heads": 12, "image_size": 224, "patch_size": 32}
    return build_tiny_clip(path, projection=512, **text, **vision)
