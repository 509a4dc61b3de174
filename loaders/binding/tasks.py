"""The binding tasks of ``conceptforge evaluate`` (the task table), next to the binding protocol.

``binding-clip``: frozen CLIP zero-shot over each image's 5 stored candidates. ``binding-cdsm``:
CSP and the CDSMs trained on frozen image embeddings, best epoch on val, mean ± s.e. over seeds.
Each image (per model and seed for the trained ones) is one sample row: its candidates, their
scores, the tie-aware credit of the true label (``value``), and the grouping columns ``dataset``,
``split``, ``relation`` (relational sets) and ``swap_kind`` (the kinds of its distractors).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from conceptforge import argtypes
from conceptforge.errors import InvalidArgumentError
from conceptforge.loaders.binding import breakdowns
from conceptforge.loaders.binding.clip_task import run_binding_clip, score_binding_clip
from conceptforge.loaders.binding.task_rows import _breakdowns_of, _splits, check_binding_rows, sample_rows
from conceptforge.loaders.harness.adapters.base import ANSWER_TEXT, EMBED, MATCH
from conceptforge.loaders.harness.allowed_tokens import LOW_ALLOWED_MASS, NO_ALLOWED_MASS
from conceptforge.loaders.harness.by_answer import BY_ANSWER_COLUMNS, UNPARSED_ANSWERS
from conceptforge.loaders.harness.sample_columns import ALLOWED_MASS_COLUMN
from conceptforge.loaders.harness.task import (
    Metric,
    Option,
    Task,
    TaskContext,
    TaskOutcome,
    by_answer_option,
    check_match_options,
    choice,
    flag,
    mean_metric,
    option_spelling,
    over_runs,
    template,
    vqascore_option,
)
from conceptforge.loaders.harness.units import PERCENT, MetricSpec

logger = logging.getLogger(__name__)

DEFAULT_ORG = "conceptforge"  # where our releases are published (publish.py --repo-id)
COLUMNS = (
    ("dataset", "string"),
    ("split", "string"),
    ("relation", "string"),
    ("swap_kind", "string"),
    ("label_index", "int64"),
    ("candidate_kinds", "list<string>"),
    ("score_scale", "string"),  # binding.scoring: ties are decided on it (log-probabilities: exactly)
    (ALLOWED_MASS_COLUMN, "float64"),  # VQAScore: the least P(Yes)+P(No) over the row's candidates
)
CDSM_COLUMNS = (*COLUMNS, ("binding_model", "string"), ("seed", "int64"))
CLIP_COLUMNS = (*COLUMNS, *BY_ANSWER_COLUMNS)  # binding-clip by answer: raw answer, parsed letter, flag


# ----------------------------------------------------------------------------------- binding-cdsm
def run_binding_cdsm(ctx: TaskContext) -> TaskOutcome:
    from conceptforge.loaders.binding.evaluate import BindingReport, ModelSummary, train_on_frozen
    from conceptforge.loaders.binding.models import Vocabulary
    from conceptforge.loaders.binding.train import RunResult, TrainConfig

    options = ctx.options
    models, seeds = list(options["models"]), list(options["seeds"])
    if not models or "clip" in models:
        raise InvalidArgumentError(
            "binding-cdsm.models: list trained models (csp, add, mult, conv, tl, rf, clip-ft); "
            "zero-shot CLIP is task binding-clip"
        )
    if not seeds:
        raise InvalidArgumentError("binding-cdsm.seeds needs at least one seed")
    if options["epochs"] < 1:
        raise InvalidArgumentError("binding-cdsm.epochs must be at least 1")
    config = TrainConfig(
        epochs=options["epochs"],
        batch_size=ctx.batch_size,
        lr=options["lr"],
        weight_decay=options["weight_decay"],
        calibrate=options["calibrate"],
        cdsm_score=options["cdsm_score"],
    )
    splits, config_name = _splits(ctx, "binding-cdsm")
    setting = splits["train"].setting
    if config.calibrate and setting != "adjective-noun":
        raise InvalidArgumentError(
            "calibrated stacking applies to the single-object (adjective-noun) setting only (Appendix C)"
        )
    check_cdsm_options(options, model=ctx.model, inputs={})  # a library caller's options too
    embedder = ctx.session.embedder()
    units = [(kind, seed) for kind in models for seed in seeds]
    prepared: dict[str, Any] = {}

    def train(positions: list[int]) -> list[dict[str, Any]]:
        if not prepared:
            prepared["frozen"] = {name: embedder.embed_images(split.images) for name, split in splits.items()}
            from conceptforge.loaders.binding.data import release_spec_words

            spec_words = release_spec_words(ctx.dataset.repo, revision=ctx.dataset.load_revision)
            prepared["vocab"] = Vocabulary.from_release(list(splits.values()), spec_words)
        out = []
        for position in positions:
            kind, seed = units[position]
            logger.info("training %s seed %d", kind, seed)
            result = train_on_frozen(
                kind, splits, prepared["frozen"], vocab=prepared["vocab"], embedder=embedder, seed=seed, config=config
            )
            used, scores = result.scored
            rows = [  # every scored split, so every metric comes from rows (calibration: seen-val too)
                row
                for name, s in scores.items()
                for row in sample_rows(
                    "binding-cdsm",
                    ctx.dataset.repo,
                    used[name],
                    s,
                    prefix=f"{kind}/seed{seed}/",
                    split_name=name,
                    extra={"binding_model": kind, "seed": seed},
                )
            ]
            out.append({"rows": rows, "run": asdict(result)})
        return out

    done = ctx.samples.collect([f"{kind}/seed{seed}" for kind, seed in units], train, chunk=1)
    rows = [row for unit in done for row in unit["rows"]]
    runs: dict[str, list[RunResult]] = defaultdict(list)
    for (kind, _), unit in zip(units, done):
        runs[kind].append(RunResult(**unit["run"]))
    report = BindingReport(
        ctx.dataset.repo,
        setting,
        embedder.model_id,
        embedder.revision,
        [ModelSummary.from_runs(kind, runs[kind]) for kind in models],
        settings={
            "seeds": seeds,
            "epochs": config.epochs,
            "batch_size": config.batch_size,
            "lr": config.lr,
            "weight_decay": config.weight_decay,
            "calibrate": config.calibrate,
            "template": "a photo of {label}",
            "cdsm_score": config.cdsm_score,
        },
    )
    metrics = {
        f"{m.model}.{split}_accuracy": over_runs([r.accuracy[split] for r in m.runs])
        for m in report.models
        for split in m.accuracy
    }
    return TaskOutcome(
        rows,
        f"{models[0]}.gen_accuracy",
        metrics=metrics,
        seeds=seeds,
        variant=f"{','.join(models)} on frozen image embeddings, {setting}, CDSM score "
        f"{options['cdsm_score']}, epoch chosen on val",
        details={
            "setting": setting,
            "settings": report.settings,
            "error_breakdown": {m.model: m.breakdown for m in report.models},
            "runs": {
                m.model: [
                    {
                        k: v
                        for k, v in asdict(r).items()
                        if k in ("seed", "best_epoch", "losses", "val_history", "calibration")
                    }
                    for r in m.runs
                ]
                for m in report.models
            },
        },
        table=report.format(),
        dataset_config=config_name,
    )


def score_binding_cdsm(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> dict[str, Metric]:
    """Per model and split: each seed's accuracy (mean credit), then mean ± s.e. over seeds."""
    per_run: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        per_run[(row["binding_model"], row["split"])][row["seed"]].append(row["value"])
    return {
        f"{model}.{split}_accuracy": over_runs([mean_metric(v).value for _, v in sorted(seeds.items())])
        for (model, split), seeds in per_run.items()
    }


def _json(value: Any) -> Any:
    import json

    return json.loads(json.dumps(value))


def binding_clip_details(rows: Sequence[dict[str, Any]], options: dict[str, Any], details: dict[str, Any]) -> dict:
    breakdown, kinds = _breakdowns_of(rows, "clip", [None])
    return {**details, "error_breakdown": _json(breakdown), "kinds": _json(kinds)}


def binding_cdsm_details(rows: Sequence[dict[str, Any]], options: dict[str, Any], details: dict[str, Any]) -> dict:
    models = list(dict.fromkeys(r["binding_model"] for r in rows))
    found = {}
    for model in models:
        seeds = sorted({r["seed"] for r in rows if r["binding_model"] == model})
        found[model] = _breakdowns_of([r for r in rows if r["binding_model"] == model], model, seeds)[0]
    return {**details, "error_breakdown": _json(found)}


# ----------------------------------------------------------------------------------- table
def _config_option() -> Option:
    from conceptforge.generators.binding.compositions import DATASETS

    return Option(
        "config",
        DATASETS[0],
        choice(DATASETS),
        "config of the binding repo: single-object | two-object | relational (a one-config repo: its config)",
    )


def _models_option() -> Option:
    from conceptforge.loaders.binding.models import MODEL_KINDS

    return Option(
        "models",
        ("csp", "add", "mult", "conv", "tl", "rf"),
        argtypes.ChoiceList(
            MODEL_KINDS, refused={"clip": "zero-shot CLIP is task binding-clip, not a trained model"}, name="models"
        ),
        f"trained models: {', '.join(MODEL_KINDS)} (clip-ft: full fine-tuning, slow)",
    )


def check_cdsm_options(options: dict[str, Any], *, model: Any, inputs: dict[str, Any]) -> None:
    """Before any model loads: CSP and CLIP-FT fine-tune a transformers CLIP's own encoders, and
    calibrated stacking is defined for the single-object setting only (Appendix C)."""
    fine_tuned = [m for m in options["models"] if m in ("csp", "clip-ft")]
    if fine_tuned and model.kind != "clip":
        raise InvalidArgumentError(
            f"{option_spelling('binding-cdsm', 'models', ','.join(options['models']))}: csp and clip-ft fine-tune "
            "a transformers CLIP's own "
            f"encoders; {model.id} is a {model.kind} model (the CDSMs on frozen embeddings run with it)"
        )
    if options["calibrate"] and options["config"] != "single-object":
        raise InvalidArgumentError(
            f"{option_spelling('binding-cdsm', 'calibrate', True)}: calibrated stacking applies to the single-object setting only (Appendix C), "
            f"not config {options['config']}"
        )


def _cdsm_score_option() -> Option:
    from conceptforge.loaders.binding.models import CDSM_SCORES

    return Option(
        "cdsm_score",
        CDSM_SCORES[0],
        choice(CDSM_SCORES),
        "CDSM scores: dot = paper Algorithm 1 (raw dot product, N(0,1) init, no scale); "
        "scaled-cosine = CLIP's logit_scale x cosine, N(0,1/d) init",
    )


def tasks() -> list[Task]:
    """The binding rows of the task table."""
    # Both tasks read our published binding dataset (its three splits) and check its rows alike.
    release: dict[str, Any] = dict(
        check_rows=check_binding_rows, dataset=f"{DEFAULT_ORG}/binding", revision="v1.0.0", split="train,val,gen"
    )
    return [
        Task(
            "binding-clip",
            "binding",
            "concept binding: zero-shot accuracy over the 5 candidates, by cosine similarity (CLIP, Binding "
            "paper Tables 2-7) or the model's pair score (BLIP, Table 9; VQAScore for generative VLMs)",
            (EMBED, MATCH, ANSWER_TEXT),
            "binding/zero-shot",
            run_binding_clip,
            score_binding_clip,
            columns=CLIP_COLUMNS,
            check_options=check_match_options("binding-clip"),
            rescore_details=binding_clip_details,
            **release,
            leaderboard=lambda splits, options: [(f"{split}_accuracy", split) for split in splits],
            protocols=(
                (EMBED, "binding/zero-shot: argmax cosine(image, template(candidate)) (paper, CLIP)"),
                (MATCH, "binding/zero-shot-match: argmax of the pair score (paper Table 9, BLIP; VQAScore: ours)"),
                (ANSWER_TEXT, "binding/choose-by-answer: captions lettered A-E, answered in words, letter parsed"),
            ),
            options=(
                Option(
                    "template",
                    "a photo of {label}",
                    template(allowed={"label"}, required={"label"}),
                    "prompt with {label}",
                ),
                _config_option(),
                by_answer_option("binding/choose-by-answer, the captions lettered and answered in words"),
                vqascore_option(),
            ),
            breakdowns=breakdowns.BINDING,
            metrics=(
                MetricSpec("*_accuracy", PERCENT, "gen_accuracy"),
                LOW_ALLOWED_MASS,
                NO_ALLOWED_MASS,
                UNPARSED_ANSWERS,
            ),
        ),
        Task(
            "binding-cdsm",
            "binding",
            "concept binding: CDSMs trained on frozen CLIP image embeddings, mean ± s.e. over seeds "
            "(Binding paper Tables 2-7, 10)",
            (EMBED,),
            "binding/cdsm-frozen",
            run_binding_cdsm,
            score_binding_cdsm,
            columns=CDSM_COLUMNS,
            rescore_details=binding_cdsm_details,
            **release,
            seeded=True,
            check_options=check_cdsm_options,
            leaderboard=lambda splits, options: [
                (f"{model}.{split}_accuracy", split) for model in options["models"] for split in splits
            ],
            options=(
                _config_option(),
                _models_option(),
                Option("seeds", (0, 1, 2, 3, 4), argtypes.IntList(0, 2**32 - 1, name="seeds"), "training seeds"),
                Option("epochs", 20, argtypes.positive_int, "training epochs (best epoch chosen on val)"),
                _cdsm_score_option(),
                Option(
                    "lr",
                    None,
                    argtypes.Optional(argtypes.positive_float),
                    "learning rate (default: Appendix A's rate per model)",
                ),
                Option("weight_decay", 1e-5, argtypes.non_negative_float, "Adam weight decay"),
                Option("calibrate", False, flag, "calibrated stacking (Appendix C; single-object only)"),
            ),
            breakdowns=breakdowns.BINDING,
            metrics=(MetricSpec("*.*_accuracy", PERCENT, "add.gen_accuracy"),),  # model.split_accuracy
        ),
    ]
