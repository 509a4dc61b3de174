"""Fixtures of the evaluation tests (tests/harness, and each benchmark's evaluation tests in
tests/binding and tests/sub): a tiny offline CLIP and small synthetic datasets. A conftest imports
them; the evaluation test modules use ``offline_single_thread``."""

from __future__ import annotations

import pytest

from conceptforge.testing.tiny_models import build_tiny_clip


@pytest.fixture
def offline_single_thread(hub_offline):
    """Tiny models load from local folders; offline mode makes a wrong path fail without a request.
    Tiny tensors on a shared 2-core machine: intra-op threads cost 30x more than they save."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory):
    return build_tiny_clip(tmp_path_factory.mktemp("models") / "tiny-clip", max_length=32)


@pytest.fixture()
def embedder(tiny_clip_dir, tmp_path):
    from conceptforge.loaders.harness.embeddings import EmbeddingModel

    model = EmbeddingModel.from_pretrained(str(tiny_clip_dir), cache_dir=tmp_path / "emb-cache", device="cpu")
    yield model
    model.close()


@pytest.fixture(scope="session")
def fake_cub(tmp_path_factory):
    from conceptforge.testing.synthetic import write_fake_cub

    return write_fake_cub(tmp_path_factory.mktemp("cub"))


@pytest.fixture(scope="session")
def sub_dir(tmp_path_factory):
    from conceptforge.testing.synthetic import sub_features, sub_rows, write_dataset

    return write_dataset(tmp_path_factory.mktemp("sub") / "sub", {"test": sub_rows()}, sub_features())


@pytest.fixture(scope="session")
def published_sub_dir(tmp_path_factory):
    from conceptforge.testing.synthetic import sub_rows, write_published_sub

    return write_published_sub(tmp_path_factory.mktemp("pub") / "SUB", sub_rows())


@pytest.fixture(scope="session")
def single_object_dir(tmp_path_factory):
    from conceptforge.testing.synthetic import write_single_object

    return write_single_object(tmp_path_factory.mktemp("binding") / "single-object", n_per_label=2)


@pytest.fixture(scope="session")
def relational_dir(tmp_path_factory):
    from conceptforge.testing.synthetic import write_relational

    return write_relational(tmp_path_factory.mktemp("binding") / "relational")


@pytest.fixture(scope="session")
def tiny_llava_dir(tmp_path_factory):
    """A tiny LLaVA whose tokenizer has "Yes" and "No" as single tokens (VQAScore reads P("Yes"))."""
    from conceptforge.testing.tiny_vlms import build_tiny_llava

    return build_tiny_llava(tmp_path_factory.mktemp("models") / "tiny-llava", words=("Yes", "No"))


@pytest.fixture(scope="session")
def tiny_blip_dir(tmp_path_factory):
    from conceptforge.testing.tiny_compmap import build_tiny_blip

    return build_tiny_blip(tmp_path_factory.mktemp("models") / "tiny-blip")


@pytest.fixture(scope="session")
def tiny_open_clip_dir(tmp_path_factory):
    from conceptforge.testing.tiny_open_clip import build_tiny_open_clip

    return build_tiny_open_clip(tmp_path_factory.mktemp("models") / "tiny-open-clip")
