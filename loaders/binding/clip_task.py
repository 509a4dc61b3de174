"""The ``binding-clip`` task: zero-shot choice among the stored candidate captions, by embedding
similarity, by a match head (ITM, VQAScore) or by a lettered answer in words.

Why apart from the task table (``tasks.py``): the three ways of asking a model are one task with one
report; the trained CDSMs (``binding-cdsm``) share only the rows (``task_rows.py``).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from conceptforge.errors import InvalidArgumentError
from conceptforge.loaders.binding.task_rows import _answered, _splits, rows_as_split, sample_rows
from conceptforge.loaders.harness.adapters.base import ANSWER_TEXT, EMBED, MATCH
from conceptforge.loaders.harness.allowed_tokens import low_allowed_mass_metric
from conceptforge.loaders.harness.by_answer import NO_ANSWER, unparsed_metric
from conceptforge.loaders.harness.task import Metric, TaskContext, TaskOutcome, mean_metric

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------- binding-clip
def run_binding_clip(ctx: TaskContext) -> TaskOutcome:
    from conceptforge.loaders.binding.evaluate import zero_shot_scores

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
    by_split, accuracy, summary, setting, report = _clip_report(ctx, splits, rows, scorer)
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
    from conceptforge.loaders.harness.by_answer import (
        DEFAULT_MAX_NEW_TOKENS,
        answer_scores,
        binding_choice_items,
        collect_choice_answers,
    )

    questions = list(binding_choice_items(splits))
    where = [(name, i) for name, split in splits.items() for i in range(len(split))]
    answerer = ctx.session.answerer()

    def record(position: int, question: Any, answer: Any) -> dict[str, Any]:
        name, i = where[position]
        scores = answer_scores(len(question.options), answer.index, label_index=question.answer_index)
        (row,) = sample_rows("binding-clip", ctx.dataset.repo, splits[name].subset([i]), [scores])
        answer.mark(row)
        return row

    rows = collect_choice_answers(ctx, answerer, questions, record)
    by_split, accuracy, summary, setting, report = _clip_report(ctx, splits, rows, answerer)
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


def _clip_report(ctx: TaskContext, splits: dict[str, Any], rows: list[dict[str, Any]], model: Any):
    """Each split's rows and accuracy, the gen split's error breakdowns, the setting and the table,
    from the sample rows: one summary whichever way the model was asked (scores or answers)."""
    from conceptforge.loaders.binding.evaluate import BindingReport, ModelSummary
    from conceptforge.loaders.binding.scoring import error_breakdown, kind_breakdown
    from conceptforge.loaders.binding.train import RunResult

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
    report = BindingReport(ctx.dataset.repo, setting, model.model_id, model.revision, [summary])
    return by_split, accuracy, summary, setting, report
