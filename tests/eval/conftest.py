"""Fixtures for the eval tests: a tiny offline CLIP and small synthetic datasets."""

from __future__ import annotations

import os

import pytest

from tests.eval.tiny_clip import build_tiny_clip


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory):
    os.environ["HF_HUB_OFFLINE"] = "1"
    return build_tiny_clip(tmp_path_factory.mktemp("models") / "tiny-clip")


@pytest.fixture()
def embedder(tiny_clip_dir, tmp_path):
    from loaders.embeddings import EmbeddingModel

    model = EmbeddingModel.from_pretrained(str(tiny_clip_dir), cache_dir=tmp_path / "emb-cache", device="cpu")
    yield model
    model.close()
