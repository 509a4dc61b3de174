import io
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from conceptforge.errors import ConceptforgeError
from conceptforge.loaders.harness.embeddings import EmbeddingModel, image_key


def _images(n, size=(40, 30)):
    return [
        Image.fromarray(np.random.RandomState(i).randint(0, 255, (size[1], size[0], 3), dtype=np.uint8))
        for i in range(n)
    ]


def _png(image):
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_embeddings_are_normalised_and_match_uncached(embedder):
    texts = ["a photo of red cube", "a photo of blue sphere"]
    cached = embedder.embed_texts(texts)
    assert cached.shape == (2, 16) and cached.dtype == torch.float32
    assert torch.allclose(cached.norm(dim=-1), torch.ones(2), atol=1e-5)
    with torch.no_grad():
        direct = torch.nn.functional.normalize(embedder.encode_texts_uncached(texts), dim=-1)
    assert torch.allclose(cached, direct, atol=1e-5)
    assert embedder.logit_scale == pytest.approx(float(embedder.model.logit_scale.detach().exp()))


def test_warm_cache_skips_the_encoder(embedder, monkeypatch):
    images = _images(3)
    first = embedder.embed_images(images)
    calls = []
    original = embedder.encode_images_uncached
    monkeypatch.setattr(embedder, "encode_images_uncached", lambda batch: calls.append(len(batch)) or original(batch))
    again = embedder.embed_images(images + _images(4)[3:])  # 3 cached + 1 new
    assert calls == [1]
    assert torch.equal(again[:3], first)


def test_image_forms_share_keys_and_duplicates_are_embedded_once(embedder, monkeypatch):
    image = _images(1)[0]
    png = _png(image)
    assert image_key(png) == image_key({"bytes": png, "path": None})
    calls = []
    original = embedder.encode_images_uncached
    monkeypatch.setattr(embedder, "encode_images_uncached", lambda batch: calls.append(len(batch)) or original(batch))
    out = embedder.embed_images([png, {"bytes": png, "path": None}, png])
    assert calls == [1] and torch.equal(out[0], out[2])


def test_cache_is_keyed_by_revision(tiny_clip_dir, tmp_path):
    other = tmp_path / "other-clip"
    shutil.copytree(tiny_clip_dir, other)
    a = EmbeddingModel.from_pretrained(str(tiny_clip_dir), cache_dir=tmp_path / "c", device="cpu")
    b = EmbeddingModel.from_pretrained(str(other), cache_dir=tmp_path / "c", device="cpu")
    assert a.revision == b.revision  # same content, same key
    with torch.no_grad():
        b.model.text_model.embeddings.token_embedding.weight.mul_(2.0)
    b.model.save_pretrained(other)
    c = EmbeddingModel.from_pretrained(str(other), cache_dir=tmp_path / "c", device="cpu")
    assert c.revision != a.revision and c.cache_namespace != a.cache_namespace


def test_unknown_model_is_a_one_line_error(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ConceptforgeError) as caught:
        EmbeddingModel.from_pretrained(str(missing), cache_dir=tmp_path, device="cpu")
    assert str(caught.value) == f"cannot load embedding model: no such local folder {missing}"
