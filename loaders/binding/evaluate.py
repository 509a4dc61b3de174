"""Binding evaluation end to end: frozen CLIP zero-shot and the trained models over seeds."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from conceptforge.errors import DataNotFoundError, InvalidArgumentError
from conceptforge.loaders.binding.data import ADJ_NOUN, SPLITS, BindingSplit, load_binding
from conceptforge.loaders.binding.models import CDSM_KINDS, MODEL_KINDS, PROMPT, Vocabulary
from conceptforge.loaders.binding.scoring import (
    ADJ_NOUN_ERRORS,
    RELATION_ERRORS,
    accuracy,
    error_breakdown,
    kind_breakdown,
)
from conceptforge.loaders.binding.train import RunResult, TrainConfig, train_run
from conceptforge.loaders.harness.reports import markdown_table, mean_se, pct, pct_se

logger = logging.getLogger(__name__)

PAPER_CLIP = "openai/clip-vit-large-patch14"  # the binding paper's ViT-L/14 (the `evaluate binding` default)
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
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


def evaluate_clip_zero_shot(embedder: Any, splits: dict[str, BindingSplit], *, template: str = PROMPT) -> ModelSummary:
    scores = {
        name: zero_shot_scores(embedder, split, template=template) for name, split in splits.items() if len(split)
    }
    run = RunResult(
        model="clip",
        seed=0,
        best_epoch=0,
        accuracy={name: accuracy(s, splits[name].label_index) for name, s in scores.items()},
        breakdown=error_breakdown(scores["gen"], splits["gen"]) if "gen" in scores else {},
        kinds=kind_breakdown(scores["gen"], splits["gen"]) if "gen" in scores else {},
    )
    return ModelSummary.from_runs("clip", [run])


def evaluate_binding(
    dataset: str | dict[str, BindingSplit],
    *,
    models: Sequence[str] = ("clip", "csp", "add", "mult", "conv", "tl", "rf"),
    embedding_model: str | Any = PAPER_CLIP,
    revision: str | None = None,
    dataset_revision: str | None = None,
    dataset_config: str | None = None,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    config: TrainConfig | None = None,
    cache_dir: str | None = None,
    device: str | None = None,
    template: str = PROMPT,
) -> BindingReport:
    """Evaluate ``models`` on one binding dataset (local dir / Hub id, or loaded splits)."""
    from conceptforge.loaders.harness.embeddings import EmbeddingModel

    unknown = [m for m in models if m not in ALL_MODELS]
    if unknown:
        raise InvalidArgumentError(
            f"unknown binding model(s) {', '.join(unknown)} (choose from {', '.join(ALL_MODELS)})"
        )
    config = config or TrainConfig()
    splits = (
        dataset
        if isinstance(dataset, dict)
        else load_binding(str(dataset), revision=dataset_revision, config=dataset_config)
    )
    missing = [s for s in SPLITS if s not in splits]
    if missing:
        raise DataNotFoundError(f"binding dataset lacks split(s) {', '.join(missing)}")
    setting = splits["train"].setting
    if config.calibrate and setting != ADJ_NOUN:
        raise InvalidArgumentError(
            "calibrated stacking applies to the single-object (adjective-noun) setting only (Appendix C)"
        )
    embedder = (
        embedding_model
        if isinstance(embedding_model, EmbeddingModel)
        else EmbeddingModel.from_pretrained(embedding_model, revision=revision, cache_dir=cache_dir, device=device)
    )
    vocab = Vocabulary.from_splits(list(splits.values()))
    summaries = []
    if "clip" in models:
        summaries.append(evaluate_clip_zero_shot(embedder, splits, template=template))
    trainable = [m for m in models if m != "clip"]
    if trainable:
        frozen = {name: embedder.embed_images(split.images) for name, split in splits.items()}
        raw = {name: split.images for name, split in splits.items()}
        dim = int(next(iter(frozen.values())).shape[1])
        for kind in trainable:
            runs = []
            for seed in seeds:
                logger.info("training %s seed %d", kind, seed)
                runs.append(
                    train_run(
                        kind,
                        splits,
                        raw if kind == "clip-ft" else frozen,
                        vocab=vocab,
                        embedder=embedder,
                        dim=dim,
                        logit_scale=embedder.logit_scale,
                        seed=seed,
                        config=config,
                        device=str(embedder.device),
                    )
                )
            summaries.append(ModelSummary.from_runs(kind, runs))
    name = dataset if isinstance(dataset, str) else "<splits>"
    return BindingReport(
        dataset=name,
        setting=setting,
        embedding_model=embedder.model_id,
        embedding_revision=embedder.revision,
        models=summaries,
        settings={
            "seeds": list(seeds),
            "epochs": config.epochs,
            "batch_size": config.batch_size,
            "lr": config.lr,
            "weight_decay": config.weight_decay,
            "calibrate": config.calibrate,
            "template": template,
            "cdsm_score": config.cdsm_score,
        },
    )
