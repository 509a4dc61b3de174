"""CompMap Table 5's "CLIP (zero-shot)" row and Table 6's image-embedding controls
(``T=compmap-mit-states.ablations=true``): scores checked by hand, the projections' definitions,
and the task end to end with ``--from-predictions`` reproducing it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from conceptforge.commands import main
from conceptforge.loaders.compmap.ablations import (
    IMAGE_EMBED,
    LEARNED_PROJECTION,
    RANDOM_PROJECTION,
    ZERO_SHOT,
    FixedProjection,
    random_projection,
    train_ablation_rows,
)
from conceptforge.loaders.compmap.contrastive import ContrastiveConfig
from conceptforge.loaders.compmap.metrics import generalized_czsl
from conceptforge.loaders.compmap.mit_states import load_mit_states
from conceptforge.loaders.compmap.protocols import MitProtocol, evaluate_mit_states

ROWS = (ZERO_SHOT, IMAGE_EMBED, LEARNED_PROJECTION, RANDOM_PROJECTION)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_zero_shot_scores_are_cosines_and_a_perfect_encoder_is_perfect(fake_mit):
    """Each image's embedding is its pair's prompt embedding plus noise: the zero-shot row's score
    of the true pair is the cosine worked out here, and top-1 is right for every image."""
    data = load_mit_states(fake_mit)
    rng = np.random.default_rng(0)
    closed = data.candidate_pairs("closed")
    texts = _unit(rng.normal(size=(len(closed), 16)))
    text_of = dict(zip(closed, texts))
    images = {
        split: _unit(np.stack([text_of[(s.attr, s.obj)] + 0.05 * rng.normal(size=16) for s in data.samples[split]]))
        for split in ("train", "val", "test")
    }
    keep: dict = {}
    results = evaluate_mit_states(
        data,
        {split: torch.as_tensor(data.gt_primitives(split)) for split in images},
        lambda pairs: torch.as_tensor(data.pair_primitives(list(pairs))),
        MitProtocol(("closed",), (1,), ContrastiveConfig(dim=8, epochs=2), czsl_curve="authors"),
        keep=keep,
        image_embeddings={split: torch.as_tensor(x, dtype=torch.float32) for split, x in images.items()},
        pair_texts=lambda pairs: torch.as_tensor(np.stack([text_of[p] for p in pairs]), dtype=torch.float32),
    )
    assert set(ROWS) <= set(results["worlds"]["closed"]["test"])
    stats = keep[("closed", ZERO_SHOT)]["stats"]
    by_hand = [float(images["test"][i] @ text_of[(s.attr, s.obj)]) for i, s in enumerate(data.samples["test"])]
    assert stats.gt.tolist() == pytest.approx(by_hand, abs=1e-6)
    scores = torch.as_tensor(images["test"] @ texts.T)
    labels = torch.as_tensor(data.labels("test", closed))
    assert bool((scores.argmax(1) == labels).all())  # the noise is small: the true pair wins
    seen = set(data.seen_pairs)
    reference = generalized_czsl(scores, labels, torch.tensor([p in seen for p in closed]), curve="authors")
    top1 = results["worlds"]["closed"]["test"][ZERO_SHOT]["top1"]
    assert top1["best_seen"] == reference.best_seen == 100.0 and top1["best_unseen"] == reference.best_unseen == 100.0
    assert top1["auc"] == pytest.approx(reference.auc)


def test_projections_are_what_table_6_describes():
    embeddings = torch.as_tensor(_unit(np.random.default_rng(1).normal(size=(24, 12))), dtype=torch.float32)
    labels = torch.arange(6).repeat(4)
    targets = torch.eye(6)
    rows = train_ablation_rows(
        embeddings, labels, targets, num_primitives=5, config=ContrastiveConfig(dim=4, epochs=1, seed=3)
    )
    assert list(rows) == list(ROWS)
    assert rows[IMAGE_EMBED].primitive_proj.weight.shape == (4, 12)  # the embedding itself, no projection
    learned = rows[LEARNED_PROJECTION].primitive_proj  # 12 -> 5 learned, then the model's own 5 -> 4
    assert isinstance(learned, nn.Sequential) and [layer.weight.shape for layer in learned] == [(5, 12), (4, 5)]
    frozen = rows[RANDOM_PROJECTION]
    assert isinstance(frozen, FixedProjection) and frozen.projection.shape == (12, 5)
    assert torch.equal(frozen.projection, random_projection(12, 5, seed=3))  # from the seed alone
    assert not torch.equal(frozen.projection, random_projection(12, 5, seed=4))
    big = random_projection(2000, 50, seed=0)
    assert float(big.var()) == pytest.approx(1 / 2000, rel=0.05)  # variance 1/in_dim keeps the scale
    with pytest.raises(TypeError, match="composition weights"):
        rows[LEARNED_PROJECTION].composition_weights(targets)


def _evaluate(model, data, out, cache, *options):
    argv = ["evaluate", "--model", str(model), "--tasks", "compmap-mit-states", "--mit-states-dir", str(data)]
    argv += ["--cache-dir", str(cache), "--output", str(out)]
    for option in ("epochs=3", "dim=8", "templates=a3:1", "targets=primitives", *options):
        argv += ["--task-option", f"compmap-mit-states.{option}"]
    return main(argv)


def test_ablation_rows_end_to_end_and_rescored_byte_for_byte(tiny_clip_dir, fake_mit, tmp_path, capsys):
    out = tmp_path / "mit.json"
    assert _evaluate(tiny_clip_dir, fake_mit, out, tmp_path / "cache", "ablations=true") == 0
    (task,) = json.loads(out.read_text())["tasks"]
    assert "Table 5's zero-shot and Table 6's image-embedding rows" in task["table"]
    assert "CLIP (zero-shot)" in task["table"] and "CLIP Image Embed. + Random Projection" in task["table"]
    for row in ROWS:
        assert 0.0 <= task["metrics"][f"closed.{row}.auc"]["value"] <= 1.0
    assert "ablation rows" in task["variant"]
    main_rows = {k: v for k, v in task["metrics"].items() if not any(row in k for row in ROWS)}
    plain = tmp_path / "plain.json"
    assert _evaluate(tiny_clip_dir, fake_mit, plain, tmp_path / "cache") == 0
    (without,) = json.loads(plain.read_text())["tasks"]
    assert without["metrics"] == main_rows  # the paper's rows do not move when the controls are added
    again = tmp_path / "again.json"
    assert main(["evaluate", "--from-predictions", str(tmp_path / "mit.samples"), "--output", str(again)]) == 0
    assert again.read_text() == out.read_text()


def test_ablations_need_a_dual_encoder(tiny_vilt_dir, fake_mit, tmp_path, capsys):
    out = tmp_path / "vilt.json"
    assert _evaluate(tiny_vilt_dir, fake_mit, out, tmp_path / "cache", "ablations=true") == 2
    err = capsys.readouterr().err.strip().splitlines()
    # by hand: the option as it was typed, the model's family (ViLT: itm), the fix
    assert err[-1] == (
        "error: --task-option compmap-mit-states.ablations=true needs a dual encoder's image embeddings (embed); "
        f"{tiny_vilt_dir} is a itm model: drop it"
    )
    assert not out.exists()


def test_the_alias_names_its_own_flag_when_ablations_need_a_dual_encoder(tiny_vilt_dir, fake_mit, tmp_path, capsys):
    """CM2: a user of `evaluate compmap --ablations` is told about --ablations, not a task option."""
    out = tmp_path / "vilt.json"
    argv = ["evaluate", "compmap", "--benchmark", "mit-states", "--model", str(tiny_vilt_dir)]
    argv += ["--data-dir", str(fake_mit), "--ablations", "--output", str(out), "--cache-dir", str(tmp_path / "cache")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"error: --ablations needs a dual encoder's image embeddings (embed); {tiny_vilt_dir} is a itm model: drop it"
    )
    assert not out.exists()


def test_an_uncached_target_model_of_an_itm_run_fails_before_the_first_task(
    tiny_vilt_dir, fake_mit, tmp_path, capsys, hub_offline, caplog
):
    """EV_viltitm: ViLT's pair texts need a dual encoder (target_model, default CLIP), which loaded
    after every activation was computed; the docs promise such a failure before the first task."""
    out = tmp_path / "vilt.json"
    argv = ["evaluate", "--model", str(tiny_vilt_dir), "--tasks", "binding-clip,compmap-mit-states"]
    argv += ["--mit-states-dir", str(fake_mit), "--output", str(out), "--cache-dir", str(tmp_path / "cache")]
    argv += ["--task-option", "compmap-mit-states.target_model=org/never-downloaded"]
    caplog.set_level("INFO", logger="conceptforge")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # by hand: the option as typed, what it is for, and that it is not cached (HF_HUB_OFFLINE=1)
    assert err[-1] == (
        "error: --task-option compmap-mit-states.target_model=org/never-downloaded (the dual encoder for pair texts "
        "of an ITM model): org/never-downloaded is not in the cache and HF_HUB_OFFLINE=1: download it where there "
        "is network (or unset HF_HUB_OFFLINE), or pass a local folder"
    )
    logged = [record.getMessage() for record in caplog.records]
    assert any(" itm (local-sha256:" in line for line in logged), logged  # the model was identified ...
    assert not any(line.startswith("[1/") for line in logged), logged  # ... but no task started (binding-clip first)
    assert not out.exists() and not (tmp_path / "cache").exists()
