"""Binding's sample rows: written from a split's scores, read back as a split, and checked when a
results file is rescored.

Why apart from the task table (``tasks.py``): both binding tasks (zero-shot CLIP and the trained
CDSMs) write and check the same rows; the runners and the row format change for different reasons.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError
from conceptforge.loaders.harness.allowed_tokens import NO_ALLOWED_ANSWER, no_allowed_mass
from conceptforge.loaders.harness.by_answer import is_by_answer
from conceptforge.loaders.harness.sample_columns import ALLOWED_MASS_COLUMN
from conceptforge.loaders.harness.task import TaskContext


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
