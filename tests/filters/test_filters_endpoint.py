"""``filter sub --vqa-model endpoint:NAME@URL``: the SUB filter's option-letter probabilities
through a real server on 127.0.0.1 (ours, serving the tiny VLM the local filter tests load)."""

from __future__ import annotations

import pytest
from datasets import load_dataset

from conceptforge.commands import main
from conceptforge.testing.logprob_server import LogprobServer
from tests.filters.filter_helpers import filter_sub_args
from tests.filters.test_filters_pipeline import _pairs_the_model_accepts


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CONCEPTFORGE_EMBEDDING_CACHE", str(tmp_path / "cache"))  # the endpoint response cache


def test_the_filter_through_a_server_keeps_what_the_local_filter_keeps(
    tiny_vlm, tiny_scorer, mini_cub, candidates_factory, tmp_path, capsys
):
    candidates = candidates_factory(pairs=_pairs_the_model_accepts(tiny_scorer, mini_cub), per_pair=3)
    extra = ("--keep-fraction", "0.5", "--batch-size", "4")
    assert main(["filter", "sub", *filter_sub_args(candidates, tmp_path / "local", mini_cub, tiny_vlm, *extra)]) == 0
    with LogprobServer(tiny_vlm, name="tiny") as running:
        spec = f"endpoint:tiny@{running.base_url}"
        argv = filter_sub_args(candidates, tmp_path / "served", mini_cub, spec, *extra, "--endpoint-concurrency", "3")
        assert main(["filter", "sub", *argv]) == 0
    local = load_dataset(str(tmp_path / "local"), split="test").to_list()
    served = load_dataset(str(tmp_path / "served"), split="test").to_list()
    assert [r["item_id"] for r in served] == [r["item_id"] for r in local] and served
    for a, b in zip(served, local):
        assert a["rank"] == b["rank"] and a["vqa_options"] == b["vqa_options"]
        assert a["vqa_probs"] == pytest.approx(b["vqa_probs"], rel=1e-4)
        assert a["vqa_raw_mass"] == pytest.approx(b["vqa_raw_mass"], rel=1e-4)
    card = (tmp_path / "served" / "README.md").read_text()
    assert "endpoint-sha256:" in card  # the server's identity is the VQA model's pinned revision


@pytest.mark.heavy
def test_a_server_without_log_probabilities_is_refused_before_anything_runs(
    tiny_vlm, mini_cub, candidates_factory, tmp_path, capsys
):
    candidates = candidates_factory(per_pair=1)
    with LogprobServer(tiny_vlm, name="tiny", extra=("--no-logprobs",)) as running:
        argv = filter_sub_args(candidates, tmp_path / "out", mini_cub, f"endpoint:tiny@{running.base_url}")
        assert main(["filter", "sub", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "returns no token log-probabilities; the SUB filter ranks candidates" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()
