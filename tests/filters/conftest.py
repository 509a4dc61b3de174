"""Fixtures for the filters tests: tiny VLM/classifier, a miniature CUB directory, candidate dirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from conceptforge.testing.sub_inputs import make_candidates_dir, make_mini_cub
from conceptforge.testing.tiny_vlms import build_tiny_classifier, build_tiny_llava

# Models are saved to and loaded from local folders, which never touches the network. HF_HUB_OFFLINE
# is set only for the script subprocesses: setting it here would leak into other areas' tests
# (the local Hub server tests) that share this pytest session.


@pytest.fixture(scope="session")
def tiny_vlm(tmp_path_factory) -> Path:
    return build_tiny_llava(tmp_path_factory.mktemp("tiny-llava"))


@pytest.fixture(scope="session")
def tiny_vlm_no_k(tmp_path_factory) -> Path:
    """A tiny LLaVA whose tokenizer has no single token for the letter K (or k)."""
    return build_tiny_llava(tmp_path_factory.mktemp("tiny-llava-no-k"), drop_symbols=("K",))


@pytest.fixture(scope="session")
def tiny_scorer(tiny_vlm):
    from conceptforge.filters.vqa.scorer import VQAScorer

    return VQAScorer.from_pretrained(str(tiny_vlm), device="cpu")


@pytest.fixture(scope="session")
def mini_cub(tmp_path_factory) -> Path:
    return make_mini_cub(tmp_path_factory.mktemp("cub") / "CUB_200_2011")


@pytest.fixture(scope="session")
def tiny_classifier(tmp_path_factory) -> Path:
    labels = ["001.Black_footed_Albatross", "017.Cardinal", "073.Blue_Jay", "094.White_breasted_Nuthatch"]
    return build_tiny_classifier(tmp_path_factory.mktemp("tiny-cls"), labels)


@pytest.fixture
def candidates_factory(tmp_path):
    def build(name: str = "candidates", **kwargs) -> Path:
        return make_candidates_dir(tmp_path / name, **kwargs)

    return build
