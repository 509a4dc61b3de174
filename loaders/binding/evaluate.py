"""The pieces the binding tasks (``loaders/binding/tasks.py``) share: zero-shot scores, one
trained model and seed, and the paper-style report over seeds.

Why no end-to-end function here: the tasks ``binding-clip`` and ``binding-cdsm`` are the one
wiring of the protocol; from Python, run them with
:func:`conceptforge.loaders.harness.runner.run_task` (what ``conceptforge evaluate`` runs).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from conceptforge.loaders.binding.data import ADJ_NOUN, BindingSplit
from conceptforge.loaders.binding.models import CDSM_KINDS, MODEL_KINDS, PROMPT, Vocabulary
from conceptforge.loaders.binding.scoring import ADJ_NOUN_ERRORS, RELATION_ERRORS
from conceptforge.loaders.binding.train import RunResult, TrainConfig, train_run
from conceptforge.loaders.harness.reports import markdown_table, mean_se, pct, pct_se

logger = logging.getLogger(__name__)

ALL_MODELS = ("clip", *MODEL_KINDS)
CDSM_SCORE_TEXT = {
    "dot": "dot product image·phrase, no scale (paper Algorithm 1)",
    "scaled-cosine": "logit_scale × cosine (conceptforge v1 variant)",
}


@dataclass
class ModelSummary:
    """Mean ± standard error over seeds (a single deterministic run for frozen CLIP)."""

    model: str
    accuracy: dict[str, tuple[float, float]]
    breakdown: dict[str, tuple[float, float]]
    kinds: dict[str, tuple[float, float]]
    runs: list[RunResult] = field(default_factory=list)

    @classmethod
    def from_runs(cls, model: str, runs: Sequence[RunResult]) -> ModelSummary:
        def agg(dicts: list[dict[str, float]]) -> dict[str, tuple[float, float]]:
            keys = list(dict.fromkeys(k for d in dicts for k in d))
            return {k: mean_se([d[k] for d in dicts if k in d]) for k in keys}

        return cls(
            model,
            agg([r.accuracy for r in runs]),
            agg([r.breakdown for r in runs]),
            agg([r.kinds for r in runs]),
            list(runs),
        )


@dataclass
class BindingReport:
    dataset: str
    setting: str
    embedding_model: str
    embedding_revision: str
    models: list[ModelSummary]
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self, model: str) -> ModelSummary:
        return next(m for m in self.models if m.model == model)

    def format(self) -> str:
        calibrated = any("gen-calibrated" in m.accuracy for m in self.models)
        headers = ["Model", "Train", "Val", "Gen"] + (["Gen (calib.)"] if calibrated else [])

        def cell(m: ModelSummary, key: str) -> str:
            if key not in m.accuracy:
                return "–"
            mean, se = m.accuracy[key]
            return pct(mean) if len(m.runs) <= 1 else pct_se(mean, se)

        rows = [
            [m.model.upper() if m.model != "clip-ft" else "CLIP-FT"]
            + [cell(m, k) for k in ("train", "val", "gen")]
            + ([cell(m, "gen-calibrated")] if calibrated else [])
            for m in self.models
        ]
        errors = ADJ_NOUN_ERRORS if self.setting == ADJ_NOUN else RELATION_ERRORS
        error_rows = []
        for m in self.models:
            row = [m.model.upper() if m.model != "clip-ft" else "CLIP-FT"]
            for key in errors:
                mean, se = m.breakdown.get(key, (float("nan"), float("nan")))
                row.append(pct(mean) if len(m.runs) <= 1 else pct_se(mean, se))
            error_rows.append(row)
        score = self.settings.get("cdsm_score")
        scoring = (
            f"; CDSM score: {CDSM_SCORE_TEXT.get(score, score)}"
            if score and any(m.model in CDSM_KINDS for m in self.models)
            else ""
        )
        return (
            f"Accuracy (%) — {self.dataset} ({self.setting}), epoch selected on val, mean ± s.e. over seeds{scoring}\n\n"
            + markdown_table(headers, rows)
            + "\n\nShare of errors (%) on the generalisation split\n\n"
            + markdown_table(["Model", *errors], error_rows)
        )


def zero_shot_scores(embedder: Any, split: BindingSplit, *, template: str = PROMPT) -> torch.Tensor:
    """[N, K] cosine similarity of each image with ``template`` filled with each of its candidates,
    in the stored (shuffled) order."""
    phrases = sorted({p for row in split.candidates for p in row})
    position = {p: i for i, p in enumerate(phrases)}
    text = embedder.embed_texts([template.format(label=p) for p in phrases])
    images = embedder.embed_images(split.images)
    index = torch.tensor([[position[p] for p in row] for row in split.candidates])
    return torch.einsum("nd,nkd->nk", images, text[index])


def train_on_frozen(
    kind: str,
    splits: dict[str, BindingSplit],
    frozen: dict[str, torch.Tensor],
    *,
    vocab: Vocabulary,
    embedder: Any,
    seed: int,
    config: TrainConfig,
) -> RunResult:
    """One trained model and seed (Algorithm 1) on the frozen image embeddings ``frozen``
    (CLIP-FT trains the image tower too, so it gets the splits' images)."""
    images = {name: split.images for name, split in splits.items()} if kind == "clip-ft" else frozen
    return train_run(
        kind,
        splits,
        images,
        vocab=vocab,
        embedder=embedder,
        dim=int(next(iter(frozen.values())).shape[1]),
        logit_scale=embedder.logit_scale,
        seed=seed,
        config=config,
        device=str(embedder.device),
    )
