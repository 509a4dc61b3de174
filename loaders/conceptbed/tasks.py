"""The ConceptBed task of ``conceptforge evaluate`` (the task table), next to its metrics (``conceptbed.py``).

One sample row per oracle judgement (a generated or real image; for VQA one question about it):
``candidates``/``scores`` are the concept and f(y_c|x), ``correct`` is null (CCD is not a
correctness; the oracle's own argmax verdict is ``oracle_correct``) and ``value`` the image's
CCD term, mean f over the concept's real images minus this image's f — its per-concept mean is
the concept's CCD (0 for the real images themselves). Grouping: ``concept``, ``concept_category``
(the composition category, or the oracle task for single concepts). The rows hold every field
of the oracle records, so CCD, its authors' aggregations, accuracy, MSP and ECE are recomputed
from them by the same ``loaders.conceptbed.evaluate``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from conceptforge import argtypes
from conceptforge.errors import DataFormatError, DataNotFoundError, one_line
from conceptforge.loaders.conceptbed import breakdowns
from conceptforge.loaders.harness.adapters.base import ENDPOINT, IMAGES_TO_JUDGE, MATCH
from conceptforge.loaders.harness.model_ref import GENERATED, VLM
from conceptforge.loaders.harness.task import (
    Metric,
    Option,
    Task,
    TaskContext,
    TaskOutcome,
    choice,
    flag,
    model_source,
)
from conceptforge.loaders.harness.units import PERCENT, SCORE, MetricSpec

COLUMNS = (
    ("concept", "string"),
    ("concept_category", "string"),
    ("source", "string"),
    ("oracle_task", "string"),
    ("categories", "list<string>"),
    ("question", "string"),
    ("record_id", "string"),
    ("max_prob", "float64"),
    ("oracle_correct", "bool"),
)


def record_rows(records: Sequence[Any]) -> list[dict[str, Any]]:
    from conceptforge.loaders.conceptbed.metrics import ORIGINAL, real_tasks

    real: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        if r.source == ORIGINAL:
            real[(r.task, r.concept)].append(r.target_prob)

    def real_mean(task: str, concept: str) -> float | None:
        values = [p for t in real_tasks(task) for p in real.get((t, concept), [])]
        return sum(values) / len(values) if values else None

    rows, seen = [], defaultdict(int)
    for r in records:
        base = f"{r.source}/{r.task}/{r.item_id}" + (f"/{r.question}" if r.question else "")
        seen[base] += 1
        reference = real_mean(r.task, r.concept)
        rows.append(
            {
                "task": "conceptbed-ccd",
                "item_id": base if seen[base] == 1 else f"{base}#{seen[base]}",
                "candidates": [r.concept],
                "scores": [r.target_prob],
                "prediction": r.concept if r.correct else "",
                "label": r.concept,
                "correct": None,
                "value": reference - r.target_prob if reference is not None else None,
                "concept": r.concept,
                "concept_category": ";".join(r.categories) or r.task,
                "source": r.source,
                "oracle_task": r.task,
                "categories": list(r.categories),
                "question": r.question,
                "record_id": r.item_id,
                "max_prob": r.max_prob,
                "oracle_correct": bool(r.correct),
            }
        )
    return rows


def rows_to_records(rows: Sequence[dict[str, Any]]) -> list[Any]:
    from conceptforge.loaders.conceptbed.metrics import ScoreRecord

    return [
        ScoreRecord(
            r["source"],
            r["oracle_task"],
            r["concept"],
            r["scores"][0],
            r["max_prob"],
            bool(r["oracle_correct"]),
            tuple(r["categories"] or ()),
            r["record_id"],
            r["question"] or "",
        )
        for r in rows
    ]


def metrics_of(results: dict) -> dict[str, Metric]:
    from conceptforge.loaders.conceptbed.metrics import ORIGINAL

    metrics: dict[str, Metric] = {}
    sources = sorted({key[0] for key in results if key[0] != ORIGINAL})
    for (source, task, category), values in sorted(results.items()):
        if source == ORIGINAL or category:
            continue
        prefix = f"{source}." if len(sources) > 1 else ""
        metrics[f"{prefix}{task}.ccd"] = Metric(values.ccd, None, values.n)
        for name in ("ccd_pooled", "ccd_category_mean"):  # the authors' aggregations, by name
            value = getattr(values, name, float("nan"))
            if value == value:
                metrics[f"{prefix}{task}.{name}"] = Metric(value, None, values.n)
        metrics[f"{prefix}{task}.accuracy"] = Metric(values.accuracy, None, values.n)
    return metrics


def score_conceptbed(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> dict[str, Metric]:
    """CCD and the oracles' accuracies from the oracle rows; CLIPScore and DINO similarity (when the
    run computed them) from theirs."""
    from conceptforge.loaders.conceptbed.metrics import evaluate
    from conceptforge.loaders.conceptbed.similarity import SIMILARITY_TASKS, similarity_metrics

    oracle = [r for r in rows if r["oracle_task"] not in SIMILARITY_TASKS]
    metrics = metrics_of(evaluate(rows_to_records(oracle), n_bins=options["ece_bins"]))
    similar = [r for r in rows if r["oracle_task"] in SIMILARITY_TASKS]
    metrics.update({name: Metric(value, None, n) for name, (value, n) in similarity_metrics(similar).items()})
    return metrics


def check_conceptbed_rows(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> str | None:
    """An oracle row's candidate and label are its concept, its prediction the concept when the
    oracle's argmax was right, and its value the concept's mean score over the real images (the
    ``original`` rows of the same oracle task) minus its own score — recomputed here, since CCD
    is the mean of these values."""
    from conceptforge.loaders.conceptbed.metrics import ORIGINAL, real_tasks
    from conceptforge.loaders.conceptbed.similarity import SIMILARITY_TASKS

    oracle = [r for r in rows if r["oracle_task"] not in SIMILARITY_TASKS]
    real: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in oracle:
        if row["source"] == ORIGINAL and row["scores"]:
            real[(row["oracle_task"], row["concept"])].append(float(row["scores"][0]))
    for row in oracle:
        item, concept = row["item_id"], row["concept"]
        if list(row["candidates"]) != [concept] or row["label"] != concept or len(list(row["scores"])) != 1:
            return f"row {item}: candidates, label and one score must be its concept {concept!r}'s"
        if row["prediction"] != (concept if row["oracle_correct"] else ""):
            return f"row {item}: prediction {row['prediction']!r} but oracle_correct is {row['oracle_correct']}"
        values = [p for t in real_tasks(row["oracle_task"]) for p in real.get((t, concept), [])]
        expected = sum(values) / len(values) - float(row["scores"][0]) if values else None
        if (expected is None) != (row["value"] is None) or (
            expected is not None and abs(float(row["value"]) - expected) > 1e-9
        ):
            return (
                f"row {item}: value {row['value']} but the real images' mean score minus its own score gives "
                f"{expected if expected is None else f'{expected:g}'}"
            )
    return None


def run_conceptbed_ccd(ctx: TaskContext) -> TaskOutcome:
    from datasets import load_dataset

    from conceptforge.filters.conceptbed.scoring import OracleSet, score_generated, score_real
    from conceptforge.generators.conceptbed.spec_resolution import load_concepts_file
    from conceptforge.generators.conceptbed.stage import prepare_captions
    from conceptforge.loaders.conceptbed.metrics import evaluate, report
    from conceptforge.loaders.conceptbed.similarity import similarity_metrics

    options = ctx.options
    by_match = ctx.capability == MATCH  # the model is the composition oracle (VQAScore), the images are --dataset
    vqa = options["vqa_model"] if options["vqa_model"] not in ("", "none") else None
    vlm_oracle = None
    if by_match:
        from conceptforge.loaders.harness.adapters.generative_vlm import VQAOracleView

        vqa, vlm_oracle = ctx.model.id, VQAOracleView(ctx.session.matcher())
    spec = load_concepts_file(ctx.concepts)  # a spec's problems are told before any oracle loads
    own = None  # a user's benchmark spec: the oracles' classes are its concepts
    if spec.label_names is not None:
        own = {kind: [c.name for c in spec.concepts if c.kind == kind] for kind in ("style", "object", "cub")}
    oracles = OracleSet(
        {"style": options["style_oracle"], "object": options["object_oracle"], "cub": options["cub_oracle"]},
        vqa_model=vqa,
        vqa_probability=options["vqa_probability"],
        device=ctx.device,
        vqa_oracle=vlm_oracle,
        concepts=own,
    )
    use_vqa = vqa is not None
    if by_match:
        images_id, revision = ctx.dataset.repo, ctx.dataset.load_revision
    else:
        images_id, revision = ctx.model.id, (ctx.model.sha if ctx.model.source == "hub" else None)
    try:
        generated = load_dataset(images_id, revision=revision)
    except (FileNotFoundError, ValueError, ConnectionError) as error:  # ConnectionError: no such folder, Hub offline
        raise DataNotFoundError(f"cannot load generated dataset {images_id}: {one_line(error)}") from None
    missing = {"concept_kind", "concept", "learner", "image"} - set(next(iter(generated.values())).column_names)
    if missing:
        raise DataFormatError(
            f"{images_id} is not a ConceptBed generated dataset (missing {', '.join(sorted(missing))})"
        )
    kinds = {k for split in generated.values() for k in split.unique("concept_kind")}
    ctx.samples.extend_key(  # (a VLM oracle's weights are in the key already: it is the model)
        _oracles_key(
            [options["style_oracle"], options["object_oracle"], options["cub_oracle"], "" if by_match else vqa or ""]
        )
    )
    records = _score_generated_resumably(
        ctx, generated, lambda subset: score_generated(subset, oracles, batch_size=ctx.batch_size, use_vqa=use_vqa)
    )
    records += score_real(
        spec,
        prepare_captions(spec, options["categoriser"], None),
        oracles,
        batch_size=ctx.batch_size,
        kinds=kinds,
        max_images=options["max_real_images"] or None,
        use_vqa=use_vqa,
    )
    metrics = metrics_of(evaluate(records, n_bins=options["ece_bins"]))
    if not metrics:
        raise DataFormatError(f"{ctx.model.id} holds no generated images the oracles could score")
    similar = _similarity_rows(ctx, generated, spec)
    metrics.update({name: Metric(value, None, n) for name, (value, n) in similarity_metrics(similar).items()})
    main = next(name for name in metrics if name.endswith(".ccd"))
    return TaskOutcome(
        record_rows(records) + similar,
        main,
        metrics=metrics,
        protocol="conceptbed/ccd-vqascore" if by_match else "conceptbed/ccd",
        variant=f"oracles={options['style_oracle']},{options['object_oracle']},{options['cub_oracle']}"
        + (f"; composition oracle {ctx.model.id} by VQAScore (P('Yes') to each question)" if by_match else ""),
        table=report(records, per_concept=options["per_concept"], n_bins=options["ece_bins"]),
    )


def _similarity_rows(ctx: TaskContext, generated: Any, spec: Any) -> list[dict[str, Any]]:
    """CLIPScore (``clip_model``) and DINO similarity (``dino_model``) rows; none when both are ''."""
    from conceptforge.loaders.conceptbed.similarity import DinoEmbedder, score_similarities

    options = ctx.options
    if not options["clip_model"] and not options["dino_model"]:
        return []
    clip = None
    if options["clip_model"]:
        from conceptforge.loaders.harness.embeddings import EmbeddingModel

        clip = EmbeddingModel.from_pretrained(options["clip_model"], cache_dir=ctx.session.cache_dir, device=ctx.device)
    dino = DinoEmbedder.from_pretrained(options["dino_model"], device=ctx.device) if options["dino_model"] else None
    try:
        return score_similarities(
            generated,
            spec,
            clip=clip,
            dino=dino,
            batch_size=ctx.batch_size,
            clipscore_prefix=options["clipscore_prefix"],
        )
    finally:
        if clip is not None:
            clip.close()


def _oracles_key(oracles: list[str]) -> str | None:
    """The oracles' content fingerprints (they are part of the metric): local folders only, since
    a Hub id names no fixed weights here; None (no caching) when one is not a local folder."""
    import os

    from conceptforge.cards.provenance import local_fingerprint

    if not all(not name or os.path.isdir(name) for name in oracles):
        return None
    return ",".join(local_fingerprint(name) if name else "" for name in oracles)


def _score_generated_resumably(ctx: TaskContext, generated: Any, score: Any) -> list[Any]:
    """The generated images' oracle records, one cached unit per dataset row (its image's records,
    several for VQA questions), so a rerun after a crash scores only the rows the cache lacks.
    The real images (the reference set) are scored again on every run."""
    from dataclasses import asdict

    from conceptforge.loaders.conceptbed.metrics import ScoreRecord

    records: list[Any] = []
    for split in ("concept", "composition"):
        if split not in generated:
            continue
        data = generated[split]
        keys = [(str(learner), str(item)) for learner, item in zip(data["learner"], data["item_id"])]

        def unit(positions: list[int], data=data, keys=keys, split=split) -> list[dict[str, Any]]:
            found: dict[tuple[str, str], list[dict[str, Any]]] = {keys[p]: [] for p in positions}
            for record in score({split: data.select(positions)}):
                found[(record.source, str(record.item_id))].append(
                    {**asdict(record), "categories": list(record.categories)}
                )
            return [{"records": found[keys[p]]} for p in positions]

        for done in ctx.samples.collect([f"{split}/{i}" for i in range(len(keys))], unit, chunk=ctx.batch_size):
            records += [ScoreRecord(**{**r, "categories": tuple(r["categories"])}) for r in done["records"]]
    return records


def tasks() -> list[Task]:
    """The ConceptBed row of the task table."""
    from conceptforge.loaders.conceptbed.similarity import CLIPSCORE_PREFIX

    try:
        from conceptforge.filters.conceptbed import oracles
    except ImportError:  # the filters stage is optional for evaluation
        oracles = None

    def default(name: str) -> str:
        return getattr(oracles, name, "") if oracles else ""

    return [
        Task(
            "conceptbed-ccd",
            "conceptbed",
            "ConceptBed: concept confidence deviation, accuracy of a concept learner's "
            "generated images by oracles (ConceptBed paper Tables 1, 7); with a generative VLM as --model, "
            "the VLM answers the composition questions (VQAScore) on the images given by --dataset",
            (IMAGES_TO_JUDGE, MATCH),
            "conceptbed/ccd",
            run_conceptbed_ccd,
            score_conceptbed,
            columns=COLUMNS,
            check_rows=check_conceptbed_rows,
            needs=("concepts",),
            families=(GENERATED, VLM, ENDPOINT),
            protocols=(
                (
                    IMAGES_TO_JUDGE,
                    "conceptbed/ccd: --model is the generated images; ViLT VQA answers compositions (paper)",
                ),
                (MATCH, "conceptbed/ccd-vqascore: --model (a generative VLM) answers them by P('Yes') (ours)"),
            ),
            options=(
                Option("style_oracle", default("DEFAULT_STYLE_ORACLE"), model_source, "PACS style classifier"),
                Option("object_oracle", default("DEFAULT_OBJECT_ORACLE"), model_source, "ImageNet concept classifier"),
                Option("cub_oracle", default("DEFAULT_CUB_ORACLE"), model_source, "CUB 200-class classifier"),
                Option(
                    "vqa_model",
                    default("DEFAULT_VQA_ORACLE"),
                    argtypes.Optional(model_source, words=("", "none"), empty="none"),
                    "ViLT VQA model for compositions ('' or none: no VQA)",
                ),
                Option(
                    "vqa_probability",
                    "softmax",
                    choice(("softmax", "sigmoid")),
                    "the VQA model's probability of 'yes': softmax | sigmoid",
                ),
                Option(
                    "categoriser",
                    "rules",
                    argtypes.FunctionRef(words=("rules",)),
                    "'rules' or module:function, for the real captions",
                ),
                Option("max_real_images", 0, argtypes.non_negative_int, "real images per concept (0: all in the spec)"),
                Option("ece_bins", 15, argtypes.positive_int, "bins of the expected calibration error"),
                Option("per_concept", False, flag, "also tabulate CCD per concept"),
                Option(
                    "clip_model",
                    "",
                    argtypes.Optional(model_source, words=("",), empty=""),
                    "dual encoder for CLIPScore of the compositions (paper Table 2: CLIP ViT-B/32); '' = off",
                ),
                Option(
                    "clipscore_prefix",
                    CLIPSCORE_PREFIX,
                    argtypes.Text(name="prefix"),
                    "text put before each caption for CLIPScore (Hessel et al.'s clipscore.py: "
                    "'A photo depicts '); '' = the caption alone (a named variant, docs/metrics.md)",
                ),
                Option(
                    "dino_model",
                    "",
                    argtypes.Optional(model_source, words=("",), empty=""),
                    "DINO ViT for pairwise similarity to the real images (paper Table 3: facebook/dino-vits16); '' = off",
                ),
            ),
            breakdowns=breakdowns.CONCEPTBED,
            # per [learner.]oracle task: CCD (a difference of oracle probabilities, on their scale) in
            # the paper's and the authors' aggregations, the oracle's accuracy; CLIPScore and DINO cosine
            metrics=(
                MetricSpec("*.ccd", SCORE, "style.ccd"),
                MetricSpec("*.ccd_*", SCORE, "style.ccd_pooled"),
                MetricSpec("*.accuracy", PERCENT, "style.accuracy"),
                MetricSpec("*.clipscore", SCORE, "composition.clipscore"),
                MetricSpec("*.dino", SCORE, "style.dino"),
            ),
        ),
    ]
