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
from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError
from conceptforge.loaders.binding import breakdowns
from conceptforge.loaders.harness.adapters.base import ANSWER_TEXT, EMBED, MATCH
from conceptforge.loaders.harness.allowed_tokens import (
    LOW_ALLOWED_MASS,
    NO_ALLOWED_ANSWER,
    NO_ALLOWED_MASS,
    low_allowed_mass_metric,
    no_allowed_mass,
)
from conceptforge.loaders.harness.by_answer import (
    BY_ANSWER_COLUMNS,
    NO_ANSWER,
    UNPARSED_ANSWERS,
    is_by_answer,
    unparsed_metric,
)
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


def sample_rows(
    task: str,
    dataset: str,
    split: Any,
    scores: Any,
    *,
    prefix: str = "",
    split_name: str | None = None,
    extra: dict[str, Any] | None = None,
    scale: str = "similarity",
    allowed_mass: Sequence[float] | None = None,
) -> list[dict[str, Any]]:
    """One row per image of ``split`` from its [N, K] score rows (stored candidate order), ties
    decided on the scores' ``scale``; ``allowed_mass``: one per image (answer-token protocols)."""
    import torch

    from conceptforge.loaders.binding.data import parse_label
    from conceptforge.loaders.binding.scoring import prediction_mass

    scores = torch.as_tensor(scores)
    mass = prediction_mass(scores, scale=scale)
    name = split_name or split.name
    rows = []
    for i in range(len(split)):
        label_index = int(split.label_index[i])
        words = parse_label(split.labels[i])
        # no allowed answer had any probability (a served top-20 without Yes/No): unanswerable, 0 (EP05)
        unanswered = allowed_mass is not None and no_allowed_mass(allowed_mass[i])
        value = 0.0 if unanswered else float(mass[i, label_index])
        kinds = list(split.kinds[i])
        rows.append(
            {
                "task": task,
                "item_id": f"{prefix}{name}/{split.item_ids[i] if split.item_ids else i}",
                "candidates": list(split.candidates[i]),
                "scores": [float(x) for x in scores[i].double()],
                "prediction": NO_ALLOWED_ANSWER if unanswered else split.candidates[i][int(torch.argmax(scores[i]))],
                "label": split.labels[i],
                "correct": value == 1.0,
                "value": value,
                "dataset": dataset,
                "split": name,
                "relation": words[1] if len(words) == 3 else None,
                "swap_kind": "+".join(sorted({k for j, k in enumerate(kinds) if j != label_index})),
                "label_index": label_index,
                "candidate_kinds": kinds,
                "score_scale": scale,
                ALLOWED_MASS_COLUMN: None if allowed_mass is None else float(allowed_mass[i]),
                **(extra or {}),
            }
        )
    return rows


def _answered(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows whose allowed answers carried some probability: an unanswerable row (scored 0)
    chose no distractor, so it has no place in the error breakdowns."""
    return [r for r in rows if not no_allowed_mass(r.get(ALLOWED_MASS_COLUMN))]


def rows_as_split(rows: Sequence[dict[str, Any]], name: str):
    """The rows of one split back as a ``BindingSplit`` and its [N, K] scores (no images)."""
    import torch

    from conceptforge.loaders.binding.data import BindingSplit

    split = BindingSplit(
        name,
        [None] * len(rows),
        [r["label"] for r in rows],
        [list(r["candidates"]) for r in rows],
        [int(r["label_index"]) for r in rows],
        [list(r["candidate_kinds"]) for r in rows],
        score_scale=_scale_of(rows),
    )
    return split, torch.tensor([list(r["scores"]) for r in rows], dtype=torch.float64)


def _scale_of(rows: Sequence[dict[str, Any]]) -> str:
    """The score scale the rows were written with (files from before the column: similarity)."""
    from conceptforge.loaders.binding.scoring import SCORE_SCALES, SIMILARITY

    scales = {r.get("score_scale") or SIMILARITY for r in rows}
    if len(scales) > 1 or not scales <= set(SCORE_SCALES):
        raise DataFormatError(
            f"binding rows with score scales {sorted(scales)}: one of {', '.join(SCORE_SCALES)} per file"
        )
    return scales.pop() if scales else SIMILARITY


def _splits(ctx: TaskContext, task: str):
    """The splits of the config the task reads, and that config's name (for the results).

    A repo with one config is read whatever the ``config`` option says, unless the user set the
    option: then the rows must be that dataset (a one-config folder of single-object data asked
    for ``relational`` is refused, not scored and recorded as relational)."""
    from conceptforge.loaders.binding.data import dataset_kind, load_binding, resolve_config

    wanted = ctx.options["config"]
    try:
        choice = resolve_config(ctx.dataset.repo, wanted, revision=ctx.dataset.load_revision)
    except DataNotFoundError as error:
        raise DataNotFoundError(f"{error} with --task-option {task}.config=NAME") from None
    splits = load_binding(ctx.dataset.repo, revision=ctx.dataset.load_revision, config=choice.load)
    kind = dataset_kind(splits)
    if choice.only and "config" in ctx.given and kind is not None and kind != wanted:
        raise InvalidArgumentError(
            f"--task-option {task}.config={wanted}: dataset {ctx.dataset.repo} has one config ({choice.name}) and "
            f"its rows are {kind} data, not {wanted}; drop the option or pass a {wanted} dataset"
        )
    return splits, choice.name


# ----------------------------------------------------------------------------------- binding-clip
def run_binding_clip(ctx: TaskContext) -> TaskOutcome:
    from conceptforge.loaders.binding.evaluate import BindingReport, ModelSummary, zero_shot_scores
    from conceptforge.loaders.binding.scoring import error_breakdown, kind_breakdown
    from conceptforge.loaders.binding.train import RunResult

    template = ctx.options["template"]
    if "{label}" not in template:
        raise InvalidArgumentError("binding-clip.template must contain {label}")
    loaded, config = _splits(ctx, "binding-clip")
    splits = {name: split for name, split in loaded.items() if len(split)}
    if ctx.capability == ANSWER_TEXT:
        return run_binding_by_answer(ctx, splits, config)
    by_match = ctx.capability == MATCH
    scorer = ctx.session.matcher() if by_match else ctx.session.embedder()
    if by_match and hasattr(scorer, "with_vqascore"):  # a generative VLM: the variant the option names
        scorer = scorer.with_vqascore(ctx.options["vqascore"])

    scale = getattr(scorer, "score_scale", "similarity")  # VQAScore: log-probability

    def split_rows(part):
        if not by_match:
            return sample_rows(
                "binding-clip",
                ctx.dataset.repo,
                part,
                zero_shot_scores(scorer, part, template=template),
                extra=NO_ANSWER,
            )
        # the same zero-shot rule over the model's own pair scores (paper Table 9, BLIP)
        scores = match_scores(scorer, part, template=template, batch_size=ctx.batch_size)
        mass = None
        if hasattr(scorer, "match_allowed_mass"):
            texts = [[template.format(label=c) for c in row] for row in part.candidates]
            mass = [min(m) for m in scorer.match_allowed_mass(part.images, texts, batch_size=ctx.batch_size)]
        return sample_rows(
            "binding-clip", ctx.dataset.repo, part, scores, scale=scale, allowed_mass=mass, extra=NO_ANSWER
        )

    where = [(name, i) for name, split in splits.items() for i in range(len(split))]
    ids = [f"{name}/{splits[name].item_ids[i] if splits[name].item_ids else i}" for name, i in where]

    def score(positions: list[int]) -> list[dict[str, Any]]:
        by_split: dict[str, list[int]] = defaultdict(list)
        for position in positions:
            by_split[where[position][0]].append(position)
        rows: dict[int, dict[str, Any]] = {}
        for name, chosen in by_split.items():
            part = splits[name].subset([where[p][1] for p in chosen])
            for position, row in zip(chosen, split_rows(part)):
                rows[position] = row
        return [rows[p] for p in positions]

    rows = ctx.samples.collect(ids, score, chunk=ctx.batch_size)
    by_split = {name: [r for r in rows if r["split"] == name] for name in splits}
    accuracy = {name: float(sum(r["value"] for r in part) / len(part)) for name, part in by_split.items()}
    answered_gen = _answered(by_split.get("gen") or [])
    gen = rows_as_split(answered_gen, "gen") if answered_gen else None
    run = RunResult(
        "clip",
        0,
        0,
        accuracy,
        error_breakdown(gen[1], gen[0]) if gen else {},
        kind_breakdown(gen[1], gen[0]) if gen else {},
    )
    summary = ModelSummary.from_runs("clip", [run])
    setting = next(iter(splits.values())).setting
    report = BindingReport(ctx.dataset.repo, setting, scorer.model_id, scorer.revision, [summary])
    return TaskOutcome(
        rows,
        "gen_accuracy",
        protocol="binding/zero-shot-match" if by_match else "binding/zero-shot",
        variant=f"zero-shot by {ctx.capability or EMBED}"
        + (f" ({scorer.protocol})" if by_match else " (cosine similarity)")
        + f", {setting}",
        metrics={
            **{f"{name}_accuracy": Metric(value, None, len(by_split[name])) for name, value in accuracy.items()},
            **low_allowed_mass_metric(rows, what="binding-clip"),
        },
        details={
            "setting": setting,
            "error_breakdown": summary.breakdown,
            "kinds": summary.kinds,
            "template": template,
        },
        table=report.format(),
        dataset_config=config,
    )


def run_binding_by_answer(ctx: TaskContext, splits: dict[str, Any], config: str) -> TaskOutcome:
    """binding/choose-by-answer: each image with its stored candidate captions lettered in stored
    order (``by_answer.binding_choice_items``), answered in words, the letter parsed; the credit is
    1 for the true caption's letter, 0 otherwise (an unparsed answer: 0, its error mass spread over
    the distractors for the breakdowns). Why choose and not match-by-answer per caption: binding's
    metric is one choice among 5 candidates; five yes/no answers would tie whenever two say yes."""
    from conceptforge.loaders.binding.evaluate import BindingReport, ModelSummary
    from conceptforge.loaders.binding.scoring import error_breakdown, kind_breakdown
    from conceptforge.loaders.binding.train import RunResult
    from conceptforge.loaders.harness.by_answer import (
        DEFAULT_MAX_NEW_TOKENS,
        UNPARSED,
        answer_columns,
        answer_scores,
        binding_choice_items,
        parse_choice,
        render_choice_prompt,
    )

    questions = list(binding_choice_items(splits))
    where = [(name, i) for name, split in splits.items() for i in range(len(split))]
    answerer = ctx.session.answerer()

    def score(positions: list[int]) -> list[dict[str, Any]]:
        asked = [questions[p] for p in positions]
        answers = answerer.answer_text(
            [q.image for q in asked],
            [render_choice_prompt(q) for q in asked],
            max_new_tokens=DEFAULT_MAX_NEW_TOKENS,
            batch_size=ctx.batch_size,
        )
        out = []
        for position, question, answer in zip(positions, asked, answers):
            name, i = where[position]
            letter = parse_choice(answer, question.letters, question.options)
            index = question.index_of(letter)
            scores = answer_scores(len(question.options), index, label_index=question.answer_index)
            (row,) = sample_rows("binding-clip", ctx.dataset.repo, splits[name].subset([i]), [scores])
            row.update(answer_columns(answer, letter))
            if letter is None:
                row["prediction"] = UNPARSED
            out.append(row)
        return out

    rows = ctx.samples.collect([q.item_id for q in questions], score, chunk=ctx.batch_size)
    by_split = {name: [r for r in rows if r["split"] == name] for name in splits}
    accuracy = {name: float(sum(r["value"] for r in part) / len(part)) for name, part in by_split.items()}
    answered_gen = _answered(by_split.get("gen") or [])
    gen = rows_as_split(answered_gen, "gen") if answered_gen else None
    run = RunResult(
        "clip",
        0,
        0,
        accuracy,
        error_breakdown(gen[1], gen[0]) if gen else {},
        kind_breakdown(gen[1], gen[0]) if gen else {},
    )
    summary = ModelSummary.from_runs("clip", [run])
    setting = next(iter(splits.values())).setting
    report = BindingReport(ctx.dataset.repo, setting, answerer.model_id, answerer.revision, [summary])
    metrics = {
        **{f"{name}_accuracy": Metric(value, None, len(by_split[name])) for name, value in accuracy.items()},
        **unparsed_metric(rows),
    }
    if "unparsed_answers" in metrics and metrics["unparsed_answers"].value:
        logger.warning(
            "binding-clip: %d of %d answers named no caption (scored wrong)",
            int(metrics["unparsed_answers"].value),
            len(rows),
        )
    return TaskOutcome(
        rows,
        "gen_accuracy",
        protocol="binding/choose-by-answer",
        variant=f"captions lettered A-E, answered in words, letter parsed, {setting}",
        metrics=metrics,
        details={
            "setting": setting,
            "error_breakdown": summary.breakdown,
            "kinds": summary.kinds,
            "prompt": "by_answer.render_choice_prompt (lmms-eval / LLaVA layout)",
            "max_new_tokens": DEFAULT_MAX_NEW_TOKENS,
        },
        table=report.format(),
        dataset_config=config,
    )


def score_binding_clip(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> dict[str, Metric]:
    by_split: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        by_split[row["split"]].append(row["value"])
    return {
        **{f"{split}_accuracy": mean_metric(values) for split, values in by_split.items()},
        **low_allowed_mass_metric(rows, what="binding-clip"),
        **unparsed_metric(rows),
    }


def match_scores(matcher: Any, split: Any, *, template: str, batch_size: int):
    """[N, K] scores of each image with ``template`` filled with each of its candidates (stored
    order), from a ``match`` adapter (ITM head, VQAScore)."""
    import torch

    texts = [[template.format(label=c) for c in row] for row in split.candidates]
    return torch.tensor(matcher.match(split.images, texts, batch_size=batch_size), dtype=torch.float64)


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
            prepared["vocab"] = Vocabulary.from_splits(list(splits.values()))
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


# ----------------------------------------------------------------------------------- rescoring
def check_binding_rows(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> str | None:
    """Each row's ``label`` must be its candidate at ``label_index``, its ``value`` the tie-aware
    credit its ``scores`` give the true label and its ``prediction`` the top-scoring candidate: a
    row edited by hand (or written by other code) would otherwise be rescored as if the model had
    said so. binding-cdsm rows: every model and seed of the run's options scored the same items of
    each split (a dropped or added row in one seed would move that seed's accuracy only)."""
    import torch

    from conceptforge.loaders.binding.scoring import PROBABILITY, prediction_mass

    known = {"train", "val", "gen", "seen-val", "gen-calibrated"}
    by_answer = is_by_answer(rows)
    for row in rows:
        if by_answer:  # the parser again on the stored answer; then the credit and prediction rules below
            from conceptforge.loaders.harness.by_answer import check_choice_row

            problem = check_choice_row(row, list(row["candidates"]))
            if problem:
                return f"row {row['item_id']}: {problem}"
        if row["split"] not in known:
            return f"row {row['item_id']}: split {row['split']!r} is none of {', '.join(sorted(known))}"
        candidates, index = list(row["candidates"]), row["label_index"]
        if index is None or not 0 <= int(index) < len(candidates) or candidates[int(index)] != row["label"]:
            return f"row {row['item_id']}: label {row['label']!r} is not its candidate at label_index {index}"
        if len(list(row["scores"])) != len(candidates):
            return f"row {row['item_id']}: {len(list(row['scores']))} scores for {len(candidates)} candidates"
        if no_allowed_mass(row.get(ALLOWED_MASS_COLUMN)):  # unanswerable: 0, and no prediction
            if row["value"] != 0.0 or row["prediction"] != NO_ALLOWED_ANSWER:
                return (
                    f"row {row['item_id']}: allowed_mass 0 but value {row['value']} and prediction "
                    f"{row['prediction']!r}, not 0 and {NO_ALLOWED_ANSWER!r}"
                )
            continue
        scores = torch.tensor([list(row["scores"])], dtype=torch.float64)
        scale = _scale_of([row])
        credit = float(prediction_mass(scores, scale=scale)[0, int(row["label_index"])])
        if row["value"] is None or abs(credit - float(row["value"])) > 1e-9:
            if scale == PROBABILITY and row["value"] is not None:  # only files from before log space
                return (
                    f"row {row['item_id']}: value {row['value']} but its scores give the true label a credit of "
                    f"{credit:g}: the file was written by an older conceptforge that split near-equal "
                    "probabilities as ties; rerun conceptforge evaluate to rescore this model"
                )
            return (
                f"row {row['item_id']}: value {row['value']} but its scores give the true label a credit of {credit:g} "
                "(the per-sample file was edited or not written by conceptforge evaluate)"
            )
        top = list(row["candidates"])[int(torch.argmax(scores[0]))]
        if row["prediction"] != top and not (by_answer and not row.get("parsed")):
            return f"row {row['item_id']}: prediction {row['prediction']!r} but its scores rank {top!r} first"
    if rows and "binding_model" in rows[0]:
        return _check_cdsm_units(rows, options)
    return None


def _check_cdsm_units(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> str | None:
    """binding-cdsm: the rows of every (model, seed) of the options, each over the same items."""
    items: dict[tuple[str, int], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for row in rows:
        prefix = f"{row['binding_model']}/seed{row['seed']}/"
        if not str(row["item_id"]).startswith(prefix):
            return f"row {row['item_id']}: binding_model {row['binding_model']} seed {row['seed']} but id not {prefix}…"
        # calibration holds out a seed's own 10% of train as seen-val: train and seen-val compare as one
        split = "train" if row["split"] == "seen-val" else row["split"]
        items[(row["binding_model"], row["seed"])][split].add(str(row["item_id"])[len(prefix) :].split("/", 1)[-1])
    wanted = {(model, seed) for model in options["models"] for seed in options["seeds"]}
    if set(items) != wanted:
        odd = sorted(set(items) ^ wanted)[0]
        return (
            f"rows of model {odd[0]} seed {odd[1]}: the run's options (models {','.join(options['models'])}, seeds "
            f"{','.join(map(str, options['seeds']))}) {'have no such unit' if odd not in wanted else 'want them'}"
        )
    first, *others = sorted(items)
    for unit in others:
        if items[unit] != items[first]:
            split = next(s for s in set(items[unit]) | set(items[first]) if items[unit][s] != items[first][s])
            return (
                f"rows of model {unit[0]} seed {unit[1]}: split {split} holds other items than model {first[0]} "
                f"seed {first[1]}'s"
            )
    return None


def _breakdowns_of(rows: Sequence[dict[str, Any]], model: str, seeds: Sequence[int | None]) -> tuple[dict, dict]:
    """``ModelSummary``'s error and kind breakdowns (mean ± s.e. over seeds) from the gen rows."""
    from conceptforge.loaders.binding.evaluate import ModelSummary
    from conceptforge.loaders.binding.scoring import error_breakdown, kind_breakdown
    from conceptforge.loaders.binding.train import RunResult

    runs = []
    for seed in seeds:
        gen = _answered([r for r in rows if r["split"] == "gen" and (seed is None or r.get("seed") == seed)])
        split, scores = rows_as_split(gen, "gen") if gen else (None, None)
        runs.append(
            RunResult(
                model,
                seed or 0,
                0,
                {},
                error_breakdown(scores, split) if gen else {},
                kind_breakdown(scores, split) if gen else {},
            )
        )
    summary = ModelSummary.from_runs(model, runs)
    return summary.breakdown, summary.kinds


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
