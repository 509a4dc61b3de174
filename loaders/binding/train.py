"""Algorithm 1 of Binding paper (Appendix B): train a phrase model against frozen CLIP image
embeddings with cross-entropy over each image's true label and its distractors.

Each step: for a batch of images, encode the phrases among their candidates, score every
candidate and minimise the cross-entropy of the true label (``−log p(y|x)``) with Adam and
weight decay λ. Scores: CDSMs use Algorithm 1's raw dot product ``x · T(a, n)`` (unit image
vector, unnormalised phrase vector, no temperature) by default, or ``logit_scale · cos`` with
``TrainConfig(cdsm_score="scaled-cosine")``; CSP and CLIP-FT use ``logit_scale · cos``. After every epoch all splits are scored;
the epoch with the best validation accuracy is the selected model (ties: the earliest).

The distractors are the dataset's own stored candidates (true label + 4 distractors, including
the hard ones of the two-object and relational sets), not a fresh sample, so training sees the
same confusions the evaluation measures.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from conceptforge.loaders.binding.calibration import calibrate, seen_mask
from conceptforge.loaders.binding.data import BindingSplit
from conceptforge.loaders.binding.models import (
    CDSM_KINDS,
    CDSM_SCORES,
    DEFAULT_LR,
    PhraseModel,
    Vocabulary,
    build_model,
)
from conceptforge.loaders.binding.scoring import accuracy, error_breakdown, kind_breakdown

logger = logging.getLogger(__name__)


@dataclass
class TrainConfig:
    epochs: int = 20
    batch_size: int = 32
    lr: float | None = None  # None: Appendix A's rate for the model
    weight_decay: float = 1e-5
    calibrate: bool = False  # Appendix C calibrated stacking (hold out 10% of train as seen-val)
    seen_val_fraction: float = 0.1
    # CDSM steps are tiny (32 x 768): on CPU one intra-op thread is 10-100x faster than several
    # fighting over a busy machine. None keeps torch's setting.
    cdsm_cpu_threads: int | None = 1
    cdsm_score: str = "dot"  # "dot" (Algorithm 1, default) | "scaled-cosine" (logit_scale x cosine)

    def __post_init__(self) -> None:
        if self.cdsm_score not in CDSM_SCORES:
            raise ValueError(f"unknown CDSM score {self.cdsm_score!r} (choose from {', '.join(CDSM_SCORES)})")


@dataclass
class RunResult:
    """One seed of one model, at the epoch selected on validation."""

    model: str
    seed: int
    best_epoch: int
    accuracy: dict[str, float]
    breakdown: dict[str, float]  # gen split error shares
    kinds: dict[str, float]
    losses: list[float] = field(default_factory=list)  # mean train loss per epoch
    val_history: list[float] = field(default_factory=list)
    calibration: dict[str, float] | None = None
    seconds: float = 0.0
    examples_per_second: float = 0.0


def candidate_scores(
    model: PhraseModel,
    images: torch.Tensor,
    candidates: Sequence[Sequence[str]],
    *,
    text: tuple[list[str], torch.Tensor] | None = None,
) -> torch.Tensor:
    """[N, K] scores of each image with its own K candidates: the cosine similarity, or for a
    CDSM with ``score="dot"`` the dot product of the unit image vector with the raw phrase vector.

    ``text`` = (phrases, their encodings) to reuse; otherwise the batch's phrases are encoded.
    """
    if text is None:
        phrases = sorted({p for row in candidates for p in row})
        text = (phrases, model.encode(phrases))
    position = {p: i for i, p in enumerate(text[0])}
    encoded = text[1] if uses_dot(model) else F.normalize(text[1], dim=-1)
    image = F.normalize(images, dim=-1)
    index = torch.tensor([[position[p] for p in row] for row in candidates], device=encoded.device)
    return torch.einsum("nd,nkd->nk", image.to(encoded.device), encoded[index])


def uses_dot(model: PhraseModel) -> bool:
    """Whether ``model`` scores by Algorithm 1's raw dot product (then no logit scale applies)."""
    return getattr(model, "score", None) == "dot"


def score_split(model: PhraseModel, split: BindingSplit, images: Any, *, batch_size: int = 512) -> torch.Tensor:
    """Scores of a whole split; its phrases are encoded once (a few dozen labels at most)."""
    model.eval()
    chunks = []
    with torch.no_grad():
        phrases = sorted({p for row in split.candidates for p in row})
        text = (phrases, model.encode(phrases))
        for start in range(0, len(split), batch_size):
            batch = model.encode_images(images[start : start + batch_size])
            chunks.append(candidate_scores(model, batch, split.candidates[start : start + batch_size], text=text).cpu())
    return torch.cat(chunks) if chunks else torch.zeros((0, 5))


@contextlib.contextmanager
def _torch_threads(count: int | None):
    before = torch.get_num_threads()
    if count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_run(
    kind: str,
    splits: dict[str, BindingSplit],
    images: dict[str, Any],
    *,
    vocab: Vocabulary,
    embedder: Any,
    dim: int,
    logit_scale: float,
    seed: int,
    config: TrainConfig,
    device: str = "cpu",
) -> RunResult:
    """Train one model with one seed (Algorithm 1) and evaluate it at the best validation epoch.

    ``images[split]`` holds frozen embeddings [N, D] (or raw images for CLIP-FT).
    """
    threads = config.cdsm_cpu_threads if kind in CDSM_KINDS and str(device).startswith("cpu") else None
    with _torch_threads(threads):
        torch.manual_seed(seed)
        generator = torch.Generator().manual_seed(seed)
        splits, images = dict(splits), dict(images)
        if config.calibrate:
            order = torch.randperm(len(splits["train"]), generator=generator).tolist()
            held = max(1, int(round(config.seen_val_fraction * len(order))))
            seen_idx, train_idx = sorted(order[:held]), sorted(order[held:])
            splits["seen-val"] = splits["train"].subset(seen_idx, "seen-val")
            images["seen-val"] = _take(images["train"], seen_idx)
            splits["train"] = splits["train"].subset(train_idx, "train")
            images["train"] = _take(images["train"], train_idx)
        train = splits["train"]
        model = build_model(kind, vocab, embedder=embedder, dim=dim, seed=seed, cdsm_score=config.cdsm_score).to(device)
        scale = 1.0 if uses_dot(model) else logit_scale
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.Adam(params, lr=config.lr or DEFAULT_LR[kind], weight_decay=config.weight_decay)
        best: tuple[float, int, dict[str, torch.Tensor]] | None = None
        losses, val_history = [], []
        started = time.perf_counter()
        seen = 0
        try:
            for epoch in range(1, config.epochs + 1):
                model.train()
                order = torch.randperm(len(train), generator=generator).tolist()
                total = 0.0
                for start in range(0, len(order), config.batch_size):
                    rows = order[start : start + config.batch_size]
                    batch_images = model.encode_images(_take(images["train"], rows))
                    logits = scale * candidate_scores(model, batch_images, [train.candidates[r] for r in rows])
                    target = torch.tensor([train.label_index[r] for r in rows], device=logits.device)
                    loss = F.cross_entropy(logits, target)
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    optimizer.step()
                    total += float(loss.detach()) * len(rows)
                    seen += len(rows)
                losses.append(total / max(1, len(train)))
                scores = {name: score_split(model, split, images[name]) for name, split in splits.items() if len(split)}
                val = accuracy(scores["val"], splits["val"].label_index) if "val" in scores else 0.0
                val_history.append(val)
                logger.debug("%s seed %d epoch %d: loss %.4f val %.4f", kind, seed, epoch, losses[-1], val)
                if best is None or val > best[0]:
                    best = (val, epoch, scores)
        finally:
            if hasattr(model, "remove_hook"):
                model.remove_hook()
        elapsed = time.perf_counter() - started
        assert best is not None, "epochs must be >= 1"
        _, best_epoch, scores = best
        result = RunResult(
            model=kind,
            seed=seed,
            best_epoch=best_epoch,
            accuracy={name: accuracy(s, splits[name].label_index) for name, s in scores.items()},
            breakdown=error_breakdown(scores["gen"], splits["gen"]) if "gen" in scores else {},
            kinds=kind_breakdown(scores["gen"], splits["gen"]) if "gen" in scores else {},
            losses=losses,
            val_history=val_history,
            seconds=elapsed,
            examples_per_second=seen / elapsed if elapsed > 0 else 0.0,
        )
        if config.calibrate and "gen" in scores:
            seen_labels = set(splits["train"].labels) | set(splits["seen-val"].labels)
            coefficient, harmonic = calibrate(
                scores["seen-val"], splits["seen-val"], scores["val"], splits["val"], seen_labels
            )
            adjusted = scores["gen"] - coefficient * seen_mask(splits["gen"], seen_labels)
            result.calibration = {
                "coefficient": coefficient,
                "val_harmonic_mean": harmonic,
                "gen_accuracy": accuracy(adjusted, splits["gen"].label_index),
            }
            result.accuracy["gen-calibrated"] = result.calibration["gen_accuracy"]
            scores = {**scores, "gen-calibrated": adjusted}
        # The best epoch's score rows and the splits they belong to, for the per-sample
        # predictions (a plain attribute, not a field: reports never serialise tensors or images).
        result.scored = ({name: splits["gen" if name == "gen-calibrated" else name] for name in scores}, scores)
        return result


def _take(values: Any, rows: Sequence[int]) -> Any:
    if isinstance(values, torch.Tensor):
        return values[torch.as_tensor(list(rows), dtype=torch.long)]
    return [values[r] for r in rows]
