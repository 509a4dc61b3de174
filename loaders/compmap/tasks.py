"""The CompMap tasks of ``conceptforge evaluate`` (the task table), next to the CompMap protocols.

Sample rows are the units each metric averages:

* ``compmap-cub``: one row per (setting, row, episode) with the episode's accuracy as ``value``
  (the n-way k-shot number is the mean over episodes; the query-level logits of 600 episodes of
  a 200-way problem are not kept), and one row per test image and row for the 200-way
  full-shot setting (``episode`` 0, ``k_shot`` null), right or wrong. Grouping: ``n_way``,
  ``k_shot``, ``episode``; ``setting`` and ``row`` (oracle, prim, interv_full, interv_partial).
* ``compmap-mit-states``: one row per test image, world and row, holding what the CZSL bias
  sweep needs (the best seen/unseen pair scores and the true pair's score), so AUC, best
  seen/unseen/HM/GM — under either ``czsl_curve`` — are recomputed from the rows. ``value`` is
  top-1 correctness at bias 0. Grouping: ``pair``, ``attr``, ``obj``, ``seen``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from conceptforge import argtypes
from conceptforge.errors import InvalidArgumentError, WeightsUnavailableError
from conceptforge.loaders.compmap import breakdowns
from conceptforge.loaders.compmap.prompts import TemplatesOption
from conceptforge.loaders.harness.model_ref import DEFAULT_CLIP
from conceptforge.loaders.harness.task import (
    EMBED,
    MATCH,
    Metric,
    Option,
    Task,
    TaskContext,
    TaskOutcome,
    choice,
    flag,
    model_source,
    option_spelling,
    text,
)
from conceptforge.loaders.harness.units import PERCENT, POINTS, MetricSpec

CUB_COLUMNS = (
    ("n_way", "int64"),
    ("k_shot", "int64"),
    ("episode", "int64"),
    ("setting", "string"),
    ("row", "string"),
    ("classes", "list<string>"),
)
MIT_COLUMNS = (
    ("pair", "string"),
    ("attr", "string"),
    ("obj", "string"),
    ("seen", "bool"),
    ("world", "string"),
    ("row", "string"),
    ("seen_top", "list<float64>"),
    ("unseen_top", "list<float64>"),
    ("gt_score", "float64"),
)
CUB_MAX_WAYS = 200  # the most ways an episode of CUB can have
CZSL_KEYS = ("auc", "best_seen", "best_unseen", "best_hm", "best_gm")
METRIC_ROWS = ("prim", "oracle", "interv_full")


def _named(model: Any, name: str) -> Any:
    """The model under the display name its tables should use (``name`` option; "" keeps it)."""
    import dataclasses

    return dataclasses.replace(model, name=name) if name else model


# ----------------------------------------------------------------------------------- compmap-cub
def cub_rows(keep: dict, results: dict, class_names: list[str], labels: Any) -> list[dict[str, Any]]:
    rows = []
    for name, kept in keep.items():
        setting = results["settings"][name]
        if name == "full-shot":
            for row, predicted in kept["predicted"].items():
                for image, guess in zip(kept["test"].tolist(), predicted.tolist()):
                    truth = int(labels[image])
                    rows.append(
                        {
                            "task": "compmap-cub",
                            "item_id": f"{name}/{row}/{image}",
                            "candidates": [],
                            "scores": [],
                            "prediction": class_names[guess],
                            "label": class_names[truth],
                            "correct": guess == truth,
                            "value": float(guess == truth),
                            "n_way": setting["n_way"],
                            "k_shot": None,
                            "episode": 0,
                            "setting": name,
                            "row": row,
                            "classes": [],
                        }
                    )
            continue
        for row, shares in kept["shares"].items():
            for episode, share in enumerate(shares.tolist()):
                rows.append(
                    {
                        "task": "compmap-cub",
                        "item_id": f"{name}/{row}/{episode}",
                        "candidates": [],
                        "scores": [],
                        "prediction": "",
                        "label": "",
                        "correct": None,
                        "value": float(share),
                        "n_way": setting["n_way"],
                        "k_shot": setting["k_shot"],
                        "episode": episode,
                        "setting": name,
                        "row": row,
                        "classes": [class_names[c] for c in kept["classes"][episode]],
                    }
                )
    return rows


def score_compmap_cub(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> dict[str, Metric]:
    """Per setting and row: the mean of the rows' values (± s.e. over episodes), and Δ."""
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        values[row["setting"]][row["row"]].append(row["value"])
    metrics: dict[str, Metric] = {}
    for setting, by_row in values.items():
        for row in METRIC_ROWS:
            v = by_row[row]
            mean = sum(v) / len(v)
            if setting == "full-shot":
                metrics[f"{setting}.{row}"] = Metric(mean, None, len(v))
            else:
                std = math.sqrt(sum((x - mean) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
                metrics[f"{setting}.{row}"] = Metric(mean, std / len(v) ** 0.5 if len(v) > 1 else None, len(v))
        metrics[f"{setting}.delta"] = Metric(
            metrics[f"{setting}.interv_full"].value - metrics[f"{setting}.oracle"].value,
            None,
            metrics[f"{setting}.oracle"].n,
        )
    return metrics


def run_compmap_cub(ctx: TaskContext) -> TaskOutcome:
    import torch

    from conceptforge.loaders.compmap.logreg import LogRegConfig
    from conceptforge.loaders.compmap.pipeline import activation_key, cached_tensor, session_vl_model
    from conceptforge.loaders.compmap.protocols import CubProtocol, evaluate_cub
    from conceptforge.loaders.compmap.report import cub_tables
    from conceptforge.loaders.compmap.spec_run import few_shot_inputs, spec_details, spec_of, spec_variant

    options = ctx.options
    spec = spec_of(ctx)
    data, vocab, images, keys, templates = few_shot_inputs(ctx, spec)
    model = _named(session_vl_model(ctx.session), options["name"])
    group_softmax = bool(options["group_softmax"])
    pred = cached_tensor(
        ctx.session.activation_cache_dir(),
        activation_key(model, vocab, keys, apply_group_softmax=group_softmax),
        lambda: model.activations(images, vocab, apply_group_softmax=group_softmax, batch_size=ctx.batch_size),
    )
    protocol = CubProtocol(
        ways=tuple(options["ways"]),
        shots=tuple(options["shots"]),
        n_query=options["queries"],
        n_episodes=options["episodes"],
        seed=options["seed"],
        full_shot=bool(options["full_shot"]),
        logreg=LogRegConfig(C=options["C"]),
        protocol=options["protocol"],
    )
    keep: dict = {}
    results = evaluate_cub(
        pred,
        torch.as_tensor(data.gt_primitives()),
        data.labels,
        data.is_train,
        data.class_attributes(),
        protocol,
        groups=data.groups,
        keep=keep,
    )
    metrics: dict[str, Metric] = {}
    for name, setting in results["settings"].items():
        for row in METRIC_ROWS:
            cell = setting[row]
            episodes = cell.get("episodes")
            stderr = cell["std"] / episodes**0.5 / 100 if episodes and episodes > 1 else None
            metrics[f"{name}.{row}"] = Metric(cell["accuracy"] / 100, stderr, episodes)
        metrics[f"{name}.delta"] = Metric(results["interpretability"][name]["delta"] / 100)
    first = next(iter(results["settings"]))
    return TaskOutcome(
        cub_rows(keep, results, data.class_names, data.labels),
        f"{first}.prim",
        metrics=metrics,
        seeds=[options["seed"]],
        variant=f"activations by {ctx.capability or EMBED}, {options['protocol']} protocol, templates={templates.name}, "
        f"group softmax={'on' if group_softmax else 'off'}" + spec_variant(spec),
        details={"results": results, **spec_details(spec)},
        table=cub_tables(results, model.name),
    )


# ----------------------------------------------------------------------------------- compmap-mit-states
def mit_rows(keep: dict, samples: list[Any]) -> list[dict[str, Any]]:
    rows = []
    for (world, row), kept in keep.items():
        stats, pairs, labels = kept["stats"], kept["candidates"], kept["labels"].tolist()
        names = [f"{a} {o}" for a, o in pairs]
        for i, sample in enumerate(samples):
            seen_top, unseen_top = stats.seen_top[i].tolist(), stats.unseen_top[i].tolist()
            kept_at = [
                (names[j], s)
                for j, s in zip(stats.seen_index[i].tolist() + stats.unseen_index[i].tolist(), seen_top + unseen_top)
                if j >= 0
            ]
            best = max(kept_at, key=lambda pair: pair[1])[0] if kept_at else ""
            label = names[labels[i]]
            rows.append(
                {
                    "task": "compmap-mit-states",
                    "item_id": f"{world}/{row}/{i}",
                    "candidates": [n for n, _ in kept_at],
                    "scores": [s for _, s in kept_at],
                    "prediction": best,
                    "label": label,
                    "correct": best == label,
                    "value": float(best == label),
                    "pair": label,
                    "attr": sample.attr,
                    "obj": sample.obj,
                    "seen": bool(stats.gt_seen[i]),
                    "world": world,
                    "row": row,
                    "seen_top": seen_top,
                    "unseen_top": unseen_top,
                    "gt_score": float(stats.gt[i]),
                }
            )
    return rows


def score_compmap_mit_states(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> dict[str, Metric]:
    """The generalized CZSL sweep (``options["czsl_curve"]``) over each (world, row)'s rows."""
    import torch

    from conceptforge.loaders.compmap.metrics import CzslRowStats, generalized_czsl_from_stats

    grouped: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[(row["world"], row["row"])].append(row)
    metrics: dict[str, Metric] = {}
    for world in dict.fromkeys(world for world, _ in grouped):
        top1 = {}
        for (w, name), part in grouped.items():
            if w != world:
                continue
            stats = CzslRowStats(
                torch.tensor([r["seen_top"] for r in part], dtype=torch.float64),
                torch.tensor([r["unseen_top"] for r in part], dtype=torch.float64),
                torch.tensor([r["gt_score"] for r in part], dtype=torch.float64),
                torch.tensor([bool(r["seen"]) for r in part]),
            )
            top1[name] = generalized_czsl_from_stats(stats, topk=1, curve=options["czsl_curve"]).to_dict()
            for key in CZSL_KEYS:
                metrics[f"{world}.{name}.{key}"] = Metric(top1[name][key] / 100, None, len(part))
        for key in CZSL_KEYS:
            metrics[f"{world}.delta.{key}"] = Metric(
                (float(top1["interv_full"][key]) - float(top1["oracle"][key])) / 100,
                None,
                len(grouped[(world, "oracle")]),
            )
    return metrics


def mit_ablation_inputs(ctx: TaskContext, model: Any, data: Any, templates: Any) -> dict[str, Any]:
    """The image embeddings of every split and the pairs' prompt embeddings that Table 5's
    zero-shot row and Table 6's image-embedding rows need: a dual encoder's (``embed``) only."""
    from conceptforge.loaders.compmap.mit_states import SPLITS
    from conceptforge.loaders.compmap.pipeline import text_targets

    if model.embedder is None:
        raise InvalidArgumentError(
            f"{option_spelling('compmap-mit-states', 'ablations', True)} needs a dual encoder's image embeddings "
            f"(embed); {model.model_id} only scores (image, text) pairs: drop it"
        )
    embeddings = {
        split: model.embedder.embed_images([s.model_input for s in data.samples[split]], batch_size=ctx.batch_size)
        for split in SPLITS
    }
    return {"image_embeddings": embeddings, "pair_texts": text_targets(model.embedder, templates)}


def run_compmap_mit_states(ctx: TaskContext) -> TaskOutcome:
    import torch

    from conceptforge.loaders.compmap.contrastive import ContrastiveConfig
    from conceptforge.loaders.compmap.mit_states import SPLITS
    from conceptforge.loaders.compmap.pipeline import (
        activation_key,
        cached_tensor,
        mit_vocabulary,
        session_vl_model,
        text_targets,
    )
    from conceptforge.loaders.compmap.protocols import MitProtocol, evaluate_mit_states
    from conceptforge.loaders.compmap.report import mit_tables
    from conceptforge.loaders.compmap.spec_run import czsl_inputs, spec_details, spec_of, spec_variant

    options = ctx.options
    spec = spec_of(ctx)
    data, templates = czsl_inputs(ctx, spec)
    vocab = mit_vocabulary(data, templates)
    model = _named(session_vl_model(ctx.session), options["name"])
    group_softmax = bool(options["group_softmax"])
    ablation_inputs = mit_ablation_inputs(ctx, model, data, templates) if options["ablations"] else {}
    pred = {}
    for split in SPLITS:
        images = [sample.model_input for sample in data.samples[split]]
        keys = [str(sample.path) for sample in data.samples[split]]
        pred[split] = cached_tensor(
            ctx.session.activation_cache_dir(),
            activation_key(model, vocab, keys, apply_group_softmax=group_softmax),
            lambda images=images: model.activations(
                images, vocab, apply_group_softmax=group_softmax, batch_size=ctx.batch_size
            ),
        )
    if options["targets"] == "primitives":

        def pair_targets(pairs):
            return torch.as_tensor(data.pair_primitives(list(pairs)))
    else:
        embedder = model.embedder
        if embedder is None:  # an ITM model: pair texts are embedded by a dual encoder
            from conceptforge.loaders.harness.embeddings import EmbeddingModel

            embedder = EmbeddingModel.from_pretrained(
                options["target_model"], cache_dir=ctx.session.cache_dir, device=ctx.device
            )
        pair_targets = text_targets(embedder, templates)
    worlds = ("closed", "open") if options["world"] == "both" else (options["world"],)
    topk = tuple(sorted({1, *options["topk"]}))
    protocol = MitProtocol(
        worlds,
        topk,
        ContrastiveConfig(dim=options["dim"], epochs=options["epochs"], lr=options["lr"], seed=options["seed"]),
        czsl_curve=options["czsl_curve"],
    )
    keep: dict = {}
    results = evaluate_mit_states(data, pred, pair_targets, protocol, keep=keep, **ablation_inputs)
    metrics: dict[str, Metric] = {}
    n_test = len(data.samples["test"])
    for world in worlds:
        for row, cell in results["worlds"][world]["test"].items():
            for key in CZSL_KEYS:
                metrics[f"{world}.{row}.{key}"] = Metric(cell["top1"][key] / 100, None, n_test)
        for key, delta in results["interpretability"][world].items():
            metrics[f"{world}.delta.{key}"] = Metric(delta / 100)
    return TaskOutcome(
        mit_rows(keep, data.samples["test"]),
        f"{worlds[0]}.prim.auc",
        metrics=metrics,
        seeds=[options["seed"]],
        variant=f"activations by {ctx.capability or EMBED}, test split, top-1, {options['czsl_curve']} CZSL curve, "
        f"targets={options['targets']}, "
        f"templates={templates.name}, group softmax={'on' if group_softmax else 'off'}"
        + (", with Table 5/6 ablation rows" if options["ablations"] else "")
        + spec_variant(spec),
        details={"results": results, **spec_details(spec)},
        table=mit_tables(results, model.name),
    )


def check_cub_rows(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> str | None:
    """compmap-cub: a full-shot row is right when its prediction is its label; an episode row's
    value is the episode's accuracy, in [0, 1]; every setting has rows of every row the metrics
    and Δ need (oracle, prim, interv_full)."""
    rows_of: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        item = row["item_id"]
        if row["row"] not in (*METRIC_ROWS, "interv_partial"):
            return f"row {item}: row {row['row']!r} is none of {', '.join((*METRIC_ROWS, 'interv_partial'))}"
        rows_of[row["setting"]].add(row["row"])
        if row["k_shot"] is None:  # the 200-way full-shot setting: one row per test image
            if row["correct"] is None or bool(row["correct"]) != (row["prediction"] == row["label"]):
                return (
                    f"row {item}: correct is {row['correct']} but prediction {row['prediction']!r} and label "
                    f"{row['label']!r} {'agree' if row['prediction'] == row['label'] else 'differ'}"
                )
        elif row["value"] is None or not 0.0 <= float(row["value"]) <= 1.0:
            return f"row {item}: an episode's accuracy {row['value']} outside [0, 1]"
    for setting, present in rows_of.items():
        missing = [name for name in METRIC_ROWS if name not in present]
        if missing:
            return f"rows of setting {setting}: none of row {missing[0]} (its metrics and delta need {', '.join(METRIC_ROWS)})"
    return None


def check_mit_rows(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> str | None:
    """compmap-mit-states: the prediction is the top-scoring kept pair (first of tied maxima),
    right when it is the label, the label is the row's ``pair``; every world has the oracle and
    interv_full rows Δ needs."""
    rows_of: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        item, scores, candidates = row["item_id"], list(row["scores"]), list(row["candidates"])
        rows_of[row["world"]].add(row["row"])
        if len(scores) != len(candidates):
            return f"row {item}: {len(scores)} scores for {len(candidates)} candidates"
        top = candidates[max(range(len(scores)), key=lambda i: (scores[i], -i))] if scores else ""
        if row["prediction"] != top:
            return f"row {item}: prediction {row['prediction']!r} but its scores rank {top!r} first"
        if row["label"] != row["pair"]:
            return f"row {item}: label {row['label']!r} is not its pair {row['pair']!r}"
        if row["correct"] is None or bool(row["correct"]) != (row["prediction"] == row["label"]):
            return (
                f"row {item}: correct is {row['correct']} but prediction {row['prediction']!r}, label {row['label']!r}"
            )
    for world, present in rows_of.items():
        missing = [name for name in ("oracle", "interv_full") if name not in present]
        if missing:
            return f"rows of world {world}: none of row {missing[0]} (delta needs oracle and interv_full)"
    return None


def check_cub_options(options: dict[str, Any], *, model: Any, inputs: dict[str, Any]) -> None:
    """Before any model loads: the run's spec (if any) is an n-way k-shot spec with its data."""
    from conceptforge.loaders.compmap.spec_run import check_spec_input

    check_spec_input("compmap-cub", inputs)


def check_mit_options(options: dict[str, Any], *, model: Any, inputs: dict[str, Any]) -> None:
    """Before any model loads: the run's spec (if any) is a CZSL spec with its data, the split
    folder and metadata file are in the MIT-States folder, and the ablation rows (image
    embeddings) have a dual encoder to come from."""
    from pathlib import Path

    from conceptforge.loaders.compmap.spec_run import check_spec_input
    from conceptforge.loaders.harness.task import provides

    check_spec_input("compmap-mit-states", inputs)
    root = inputs.get("mit_states_dir")
    if root and Path(root).is_dir() and not inputs.get("compmap_spec"):
        if not (Path(root) / options["split_dir"]).is_dir():
            raise InvalidArgumentError(
                f"compmap-mit-states.split_dir: no folder {options['split_dir']} in {root} "
                "(compositional-split-natural holds the paper's split)"
            )
        metadata = options["metadata"] or f"metadata_{options['split_dir']}.t7"
        if not (Path(root) / metadata).is_file():
            raise InvalidArgumentError(f"compmap-mit-states.metadata: no file {metadata} in {root}")
    if options["ablations"] and not provides(model.kind, EMBED):
        raise InvalidArgumentError(
            f"{option_spelling('compmap-mit-states', 'ablations', True)} needs a dual encoder's image embeddings "
            f"(embed); {model.id} is a {model.kind} model: drop it"
        )
    if options["targets"] == "text" and not provides(model.kind, EMBED):
        # an ITM model (ViLT, BLIP): pair texts are embedded by target_model, which loads after the
        # activations; a mistyped or uncached one must fail here, before the first task
        from conceptforge.external_errors import model_unavailable

        problem = model_unavailable(options["target_model"])
        if problem is not None:
            spelled = option_spelling("compmap-mit-states", "target_model", options["target_model"])
            raise WeightsUnavailableError(f"{spelled} (the dual encoder for pair texts of an ITM model): {problem}")


# ----------------------------------------------------------------------------------- table
_PROTOCOLS = (
    (EMBED, "activations logit_scale·cos(image, concept prompts) (paper, CLIP)"),
    (MATCH, "activations = pair scores: ITM log-odds (paper's ITM models), VQAScore log-odds (ours)"),
)


def tasks() -> list[Task]:
    """The CompMap rows of the task table."""
    from conceptforge.loaders.compmap.protocols import CUB_PROTOCOLS

    return [
        Task(
            "compmap-cub",
            "compmap",
            "CompMap on CUB: n-way k-shot usefulness of concept activations and the "
            "interpretability gap (CompMap paper Tables 2-4)",
            (EMBED, MATCH),
            "compmap/cub-episodes",
            run_compmap_cub,
            score_compmap_cub,
            check_rows=check_cub_rows,
            columns=CUB_COLUMNS,
            needs=("cub_dir",),
            needs_met_by="compmap_spec",
            check_options=check_cub_options,
            seeded=True,
            protocols=_PROTOCOLS,
            options=(
                Option(
                    "ways", (5, 10, 100, 200), argtypes.IntList(2, CUB_MAX_WAYS, name="ways"), "n of n-way (2 to 200)"
                ),
                Option("shots", (1, 5), argtypes.IntList(1, name="shots"), "k of k-shot"),
                Option("episodes", 600, argtypes.positive_int, "episodes per setting"),
                Option("queries", 15, argtypes.positive_int, "query images per class and episode (protocol episodic)"),
                Option("seed", 0, argtypes.seed, "episode sampling seed"),
                Option("full_shot", True, flag, "also the 200-way full-shot setting"),
                Option(
                    "C",
                    1.0,
                    argtypes.positive_float,
                    "inverse L2 strength of the logistic regression (scikit-learn's C)",
                ),
                Option("templates", "paper", TemplatesOption(), "paper | a3 | a3:<ids>"),
                Option("group_softmax", True, flag, "softmax over each attribute group"),
                Option(
                    "protocol",
                    CUB_PROTOCOLS[0],
                    choice(CUB_PROTOCOLS),
                    "authors: k support images from the train split, every test image of the n classes a query "
                    "(the CompMap authors' code); episodic: k support + queries per class drawn from all of CUB",
                ),
                Option("name", "", text(name="name"), "model name in the tables (default: derived from the model id)"),
            ),
            breakdowns=breakdowns.COMPMAP_CUB,
            # per setting: each row's accuracy, and Δ = interv_full − oracle (a difference of accuracies)
            metrics=(
                MetricSpec("*.delta", POINTS, "5-way-1-shot.delta"),
                *(MetricSpec(f"*.{row}", PERCENT, f"5-way-1-shot.{row}") for row in METRIC_ROWS),
            ),
        ),
        Task(
            "compmap-mit-states",
            "compmap",
            "CompMap on MIT-States: generalized CZSL (AUC, best seen/unseen/HM) of "
            "composition models over concept activations (CompMap paper Tables 1, 3, 4)",
            (EMBED, MATCH),
            "compmap/mit-states-czsl",
            run_compmap_mit_states,
            score_compmap_mit_states,
            columns=MIT_COLUMNS,
            needs=("mit_states_dir",),
            needs_met_by="compmap_spec",
            seeded=True,
            protocols=_PROTOCOLS,
            rescore_options=("czsl_curve",),
            check_rows=check_mit_rows,
            check_options=check_mit_options,
            options=(
                Option("world", "closed", choice(("closed", "open", "both")), "closed world, open world, or both"),
                Option(
                    "czsl_curve",
                    "paper",
                    choice(("paper", "authors")),
                    "paper: 20 biases from unseen gaps (A.6.2) | authors: their released curve, closed at bias 1e3",
                ),
                Option(
                    "targets",
                    "text",
                    choice(("text", "primitives")),
                    "composite-concept features of the contrastive model",
                ),
                Option("target_model", DEFAULT_CLIP, model_source, "dual encoder for pair texts when the model is ITM"),
                Option(
                    "split_dir",
                    "compositional-split-natural",
                    argtypes.RelativeName(name="folder"),
                    "split folder under the MIT-States folder",
                ),
                Option(
                    "metadata",
                    "",
                    argtypes.Optional(argtypes.RelativeName(name="file"), words=("",), empty=""),
                    "metadata file in the MIT-States folder (default metadata_<split_dir>.t7)",
                ),
                Option("epochs", 20, argtypes.positive_int, "contrastive model epochs"),
                Option("dim", 256, argtypes.positive_int, "contrastive model width"),
                Option("lr", 1e-3, argtypes.positive_float, "contrastive model learning rate"),
                Option("seed", 0, argtypes.seed, "contrastive model training seed"),
                Option("templates", "paper", TemplatesOption(), "paper | a3 | a3:<ids>"),
                Option("group_softmax", True, flag, "softmax over each attribute group"),
                Option(
                    "topk",
                    (1, 2, 3),
                    argtypes.IntList(1, name="topk"),
                    "top-k CZSL in the tables and details (metrics are top-1)",
                ),
                Option(
                    "ablations",
                    False,
                    flag,
                    "also Table 5's zero-shot row and Table 6's image-embedding rows (dual encoders)",
                ),
                Option("name", "", text(name="name"), "model name in the tables (default: derived from the model id)"),
            ),
            breakdowns=breakdowns.COMPMAP_MIT,
            # per world: Δ = interv_full − oracle of each CZSL number; per world and row (the
            # ablation rows too) the CZSL numbers: AUC in % of the unit square, best accuracies and
            # their means
            metrics=(
                MetricSpec("*.delta.*", POINTS, "closed.delta.auc"),
                MetricSpec("*.*.*", PERCENT, "closed.prim.auc"),
            ),
        ),
    ]
