"""CLIPScore as Hessel et al.'s released ``clipscore.py`` computes it: every caption prefixed with
"A photo depicts ", then 2.5 · max(cos, 0); checked against a plain transformers CLIP forward."""

from __future__ import annotations

import pytest

CAPTIONS = ["a dog on a sofa", "two red apples", "a cat", "a bird in the sky", "a blue car", "a wooden chair"]


def _hand(model_dir, images, texts: list[str]) -> list[float]:
    """What a user would write: CLIPModel's projected features, cosine, 2.5 · max(cos, 0)."""
    import torch
    from transformers import CLIPModel, CLIPProcessor

    model, processor = (
        CLIPModel.from_pretrained(model_dir).eval(),
        CLIPProcessor.from_pretrained(model_dir, backend="pil"),
    )
    with torch.no_grad():
        i = model.get_image_features(**processor(images=images, return_tensors="pt"))
        t = model.get_text_features(**processor.tokenizer(texts, return_tensors="pt", padding=True))
    i, t = (getattr(x, "pooler_output", x) for x in (i, t))
    return [2.5 * max(float(c), 0.0) for c in torch.nn.functional.cosine_similarity(i, t)]


def test_clipscore_prefixes_every_caption_as_the_reference_does(tmp_path, hub_offline):
    import numpy as np
    from PIL import Image

    from conceptforge.loaders.conceptbed.similarity import clipscore, clipscore_text
    from conceptforge.loaders.harness.embeddings import EmbeddingModel
    from conceptforge.testing.tiny_models import build_tiny_clip

    path = build_tiny_clip(tmp_path / "clip", seed=2)  # a seed whose random towers give cos > 0 here
    images = [Image.fromarray(np.random.default_rng(s).integers(0, 255, (40, 40, 3), dtype=np.uint8)) for s in range(6)]
    reference = _hand(path, images, ["A photo depicts " + c for c in CAPTIONS])
    plain = _hand(path, images, CAPTIONS)
    assert all(reference) and reference != pytest.approx(plain, abs=1e-3)  # the prefix moves the number
    embedder = EmbeddingModel.from_pretrained(str(path), cache_dir=tmp_path / "cache", device="cpu")
    try:
        assert clipscore(embedder, images, CAPTIONS) == pytest.approx(reference, rel=1e-5, abs=1e-6)
        assert clipscore(embedder, images, CAPTIONS, prefix="") == pytest.approx(plain, rel=1e-5, abs=1e-6)
    finally:
        embedder.close()
    assert clipscore_text("a cat", "A photo depicts") == "A photo depicts a cat"  # the reference adds the space
