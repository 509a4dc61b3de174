"""Filter a SUB candidates dataset into the published SUB layout (SUB paper §4.2).

Two stages, both resumable:

1. **Score**: every candidate image is asked the multiple-choice question of its S+ group; the
   option distribution is written per image id to an item store (``OUT/.work/``). A rerun
   skips scored ids; shards (``--num-shards/--shard-index``, accelerate ranks) split the ids.
   An unreadable image is recorded as such (counted, never retried, never fatal).
2. **Decide and assemble** (once every id is scored): :func:`filters.sub_filter.decide` on the
   stored scores, then the kept rows stream from the candidates into ``OUT/data/test-*.parquet``
   with the VQA columns, the card (with filter statistics) and a sample grid. Deciding is cheap,
   so another ``--keep-fraction`` reuses the stored scores.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from datasets import Features, Value

from conceptforge import ItemResult, ItemStore, ShardSpec, WorkItem
from conceptforge.cards import DatasetMetadata, assemble_dataset_dir, collect_provenance, render_card
from conceptforge.cards.grid import grid_png
from conceptforge.cards.lineage import inherited_column_docs, read_upstream_metadata, upstream_provenance
from conceptforge.engine.assembly import register_assembler
from conceptforge.engine.runner import ASSEMBLY_ARGS, Stage, out_of_store, run_stage
from conceptforge.engine.workitems import check_unique_ids
from conceptforge.errors import DataFormatError, StoreError
from conceptforge.filters.dataset_io import LocalSplit, decode_image, open_split
from conceptforge.filters.sub.decision import COUNT_KEYS, FilterParams, ScoredCandidate, decide, filter_statistics
from conceptforge.filters.vqa.questions import QuestionBuilder
from conceptforge.filters.vqa.scorer import VQAScorer
from conceptforge.generators.sub.card import CITATION as SUB_CITATION
from conceptforge.generators.sub.card import card_sections
from conceptforge.generators.sub.validity import sub_validity
from conceptforge.progress import tqdm
from conceptforge.specs.release import write_release_spec

logger = logging.getLogger(__name__)

CANDIDATE_SPLIT = "candidates"
OUTPUT_SPLIT = "test"
SCORE_SPLIT = "scores"
DEFAULT_CHUNK_ROWS = 100  # = the row group size of a SUB candidates dataset
CANDIDATE_COLUMNS = ("image", "item_id", "bird", "attribute", "group", "value")

try:  # datasets >= 4 names variable-length lists List; older versions Sequence
    from datasets import List as _ListFeature
except ImportError:  # pragma: no cover
    from datasets import Sequence as _ListFeature

VQA_FEATURES = {
    "vqa_options": _ListFeature(Value("string")),
    "vqa_probs": _ListFeature(Value("float32")),
    "vqa_answer": Value("string"),
    "vqa_splus_prob": Value("float32"),
    "vqa_raw_mass": Value("float32"),
    "rank": Value("int32"),
}

COLUMN_DOCS = {
    "image": "the reference-bird image R with the substituted attribute",
    "item_id": "stable candidate id `<bird>__<attribute-slug>__<index>`",
    "bird": "reference bird (CUB class name without number)",
    "attribute": "S+: the substituted attribute, `has_<group>::<value>`",
    "group": "attribute group",
    "value": "S+ value",
    "category": "colour, shape or pattern",
    "removed_attribute": "S-: the bird's class-level attribute of that group",
    "prompt_reference": "prompt c_R of the reference image",
    "prompt_guidance": "prompt c_G of the (discarded) guidance image",
    "image_index": "index of the candidate within its pair",
    "seed": "work-item seed of the candidate",
    "vqa_options": "VQA options in letter order (A, B, ...; last `Other`)",
    "vqa_probs": "VQA option probabilities (normalised over the option letters)",
    "vqa_answer": "the VQA model's answer (argmax option)",
    "vqa_splus_prob": "VQA probability of S+",
    "vqa_raw_mass": "next-token probability mass on the option letters before normalising",
    "rank": "rank of the image within its pair by S+ probability (0 = best)",
}

# The filtered dataset cites the same paper as the candidates it came from.
CITATION = SUB_CITATION


@dataclass(frozen=True)
class FilterRunConfig:
    """Settings that decide the stored scores (a resume with other ones is refused)."""

    vqa_model: str
    vqa_revision: str | None
    answer_hint: str
    candidates: str

    def as_store_config(self) -> dict[str, Any]:
        return {"stage": "sub-vqa-scores", **asdict(self)}


def open_candidates(path: str | Path) -> LocalSplit:
    return open_split(path, CANDIDATE_SPLIT, required=CANDIDATE_COLUMNS, kind="SUB candidates dataset")


def check_candidate_groups(candidates: LocalSplit, questions: QuestionBuilder) -> None:
    """Every S+ must be an option of a known group: fail before any model time is spent."""
    pairs = {
        (row["group"], row["value"], row["attribute"])
        for row in candidates.iter_rows(["group", "value", "attribute"], batch_size=4096)
    }
    for group, value, attribute in sorted(pairs):
        question = questions(group)
        question.option_index(value)
        if attribute != f"{group}::{value}":
            raise DataFormatError(f"candidate attribute {attribute!r} disagrees with group {group!r} / value {value!r}")


def _score_result(row: dict[str, Any], scores: Any = None, error: str | None = None) -> ItemResult:
    if error is not None:
        return ItemResult(
            metadata={
                "status": "unreadable",
                "error": error,
                "bird": row["bird"],
                "attribute": row["attribute"],
                "splus": row["value"],
            }
        )
    return ItemResult(
        metadata={
            "status": "ok",
            "bird": row["bird"],
            "attribute": row["attribute"],
            "splus": row["value"],
            "options": list(scores.options),
            "probs": list(scores.probs),
            "raw_mass": scores.raw_mass,
            "answer": scores.answer,
            "splus_prob": scores.prob(row["value"]),
        }
    )


def scoring_stage(
    candidates: LocalSplit,
    scorer: VQAScorer | Callable[[], VQAScorer],
    questions: QuestionBuilder,
    *,
    settings: dict[str, Any],
    batch_size: int = 8,
    chunk_size: int = DEFAULT_CHUNK_ROWS,
    assembly_args: dict[str, Any] | None = None,
) -> Stage:
    """VQA scoring as an engine stage: one item per candidate, chunks inside parquet row groups.

    A chunk never spans a row group of the candidates, and a batch reads only its own row group:
    a shard reads about ``1/num_shards`` of the candidate images, not all of them.
    """
    groups = candidates.row_groups()
    ids = candidates.column("item_id")
    items: list[WorkItem] = []
    position = 0
    for number, (_file, _rg, rows) in enumerate(groups):
        for offset in range(rows):
            items.append(WorkItem(ids[position], 0, SCORE_SPLIT, {"row_group": number, "row": offset}))
            position += 1
    check_unique_ids(items)
    state: dict[str, Any] = {}

    def prepare() -> None:
        if "scorer" not in state:
            model = scorer if isinstance(scorer, VQAScorer) else scorer()
            widest = max(len(questions(group).options) for group in set(candidates.column("group")))
            model.letter_token_ids(widest)  # refuse multi-token letters before any image is scored
            state["scorer"] = model

    def process_batch(batch: list[WorkItem]) -> list[ItemResult]:
        prepare()
        file_index, rg, _rows = groups[batch[0].payload["row_group"]]
        rows = candidates.read_row_group(file_index, rg, ["item_id", "image", "group", "value", "attribute", "bird"])
        results: dict[str, ItemResult] = {}
        readable = []
        for item in batch:
            row = rows[item.payload["row"]]
            try:
                readable.append((item, row, decode_image(row["image"]), questions(row["group"])))
            except ValueError as error:
                logger.warning("candidate %s: %s (skipped)", row["item_id"], error)
                results[item.item_id] = _score_result(row, error=str(error))
        for start in range(0, len(readable), batch_size):
            part = readable[start : start + batch_size]
            scored = state["scorer"].score([p[2] for p in part], [p[3] for p in part], batch_size=batch_size)
            for (item, row, _image, _question), scores in zip(part, scored):
                results[item.item_id] = _score_result(row, scores)
        return [results[item.item_id] for item in batch]

    return Stage(
        name="sub/vqa-filter",
        items=items,
        settings=settings,
        process_batch=process_batch,
        prepare=prepare,
        assembler=ASSEMBLER if assembly_args is not None else None,
        assembly_args=assembly_args or {},
        chunk_size=chunk_size,
        group=lambda item: item.payload["row_group"],
        description="VQA scoring",
        unit="img",
    )


def score_candidates(
    candidates: LocalSplit,
    store: ItemStore,
    scorer: VQAScorer | Callable[[], VQAScorer],
    questions: QuestionBuilder,
    *,
    shard: ShardSpec = ShardSpec(),
    batch_size: int = 8,
    max_images: int | None = None,
    progress: bool = True,
    chunk_size: int = DEFAULT_CHUNK_ROWS,
    settings: dict[str, Any] | None = None,
) -> dict[str, int]:
    """Score this shard's unscored candidates into ``store`` (no assembly).

    Returns counts: total (this shard), skipped (already scored), scored, unreadable.
    ``scorer`` may be a factory: the model is then loaded only when something is left to score.
    """
    stage = scoring_stage(
        candidates, scorer, questions, settings=settings or {}, batch_size=batch_size, chunk_size=chunk_size
    )
    before = {record.item_id for record in store.records(SCORE_SPLIT)} if store.chunk_states() else set()
    report = run_stage(stage, out_of_store(store), shard=shard, max_items=max_images, assemble=False, store=store)
    unreadable = (
        sum(
            1
            for record in store.records(SCORE_SPLIT)
            if record.item_id not in before and record.metadata.get("status") == "unreadable"
        )
        if report.made
        else 0
    )
    if unreadable:
        logger.warning("%d unreadable candidate image(s) skipped", unreadable)
    return {
        "total": report.shard_items,
        "skipped": report.skipped,
        "scored": report.made - unreadable,
        "unreadable": unreadable,
    }


def stored_scores(store: ItemStore) -> dict[str, dict[str, Any]]:
    return {record.item_id: record.metadata for record in store.records(SCORE_SPLIT)}


def scored_candidates(scores: dict[str, dict[str, Any]]) -> list[ScoredCandidate]:
    out = []
    for item_id, meta in scores.items():
        ok = meta.get("status") == "ok"
        out.append(
            ScoredCandidate(
                item_id,
                meta["bird"],
                meta["attribute"],
                meta["splus"],
                meta["answer"] if ok else None,
                float(meta.get("splus_prob", 0.0)) if ok else 0.0,
            )
        )
    return out


def candidates_license(path: Path) -> str | None:
    """The license in the candidates card, if it has one (the filtered set inherits it)."""
    card = path / "README.md"
    if not card.is_file():
        return None
    try:
        from huggingface_hub import DatasetCard

        return DatasetCard.load(card).data.license
    except Exception:  # a card we cannot parse just means no inherited license
        return None


def assemble_filtered(
    candidates: LocalSplit,
    store: ItemStore,
    out_dir: str | Path,
    *,
    params: FilterParams,
    license: str,
    provenance: dict[str, Any],
    grid_size: int = 8,
    benchmark: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Decide on the stored scores and write the filtered dataset; returns the statistics.

    ``benchmark`` (a user spec's run, ``own_benchmark.carried``): the card names its domain and
    carries its section, and the dataset its ``benchmark_spec.yaml``."""
    scores = stored_scores(store)
    ids = candidates.column("item_id")
    missing = [item_id for item_id in ids if item_id not in scores]
    if missing:
        raise StoreError(
            f"{len(missing)} of {len(ids)} candidates are not scored yet (e.g. {missing[0]}); "
            "finish all shards, then rerun without --num-shards to assemble"
        )
    decision = decide(scored_candidates({i: scores[i] for i in ids}), params)
    stats = filter_statistics(decision, params)
    totals = stats["totals"]
    if not totals.get("kept"):  # an empty test split: load_dataset refuses it, so say why nothing is left
        reasons = ", ".join(f"{key.replace('_', ' ')} {totals[key]}" for key in COUNT_KEYS[1:-1] if totals.get(key))
        raise DataFormatError(
            f"no candidate passed the filter ({totals.get('candidates', 0)} candidates: {reasons or 'none kept'}); "
            "check the VQA model and --cub-dir, or relax --keep-fraction / --min-survivor-fraction / --min-splus-prob"
        )
    features = Features({**candidates.features, **VQA_FEATURES})
    grid_png = _grid_png(candidates, decision.ranks, scores, grid_size)

    def rows() -> Iterator[dict[str, Any]]:
        for row in tqdm(candidates.iter_rows(), total=len(ids), desc="assembling", unit="img"):
            rank = decision.ranks.get(row["item_id"])
            if rank is None:
                continue
            meta = scores[row["item_id"]]
            row.update(
                vqa_options=meta["options"],
                vqa_probs=meta["probs"],
                vqa_answer=meta["answer"],
                vqa_splus_prob=meta["splus_prob"],
                vqa_raw_mass=meta["raw_mass"],
                rank=rank,
            )
            yield row

    # The candidates card documents the generator's columns and how the images were made; carry
    # both over (cards.lineage says why), this stage's own meanings and settings taking precedence.
    upstream = read_upstream_metadata(candidates.root)
    provenance = {**provenance, "upstream": upstream_provenance(upstream, candidates.root)}
    wanted = [
        c for c in ("item_id", "bird", "attribute", "group", "value", "removed_attribute") if c in candidates.features
    ]
    kept_rows = (row for row in candidates.iter_rows(wanted, batch_size=4096) if row["item_id"] in decision.ranks)
    validity = sub_validity({OUTPUT_SPLIT: kept_rows})
    subject = "CUB birds" if benchmark is None else f"{benchmark['domain'].capitalize()} classes of the spec below"
    metadata = DatasetMetadata(
        pretty_name="SUB: synthetic attribute substitutions (VQA-filtered)",
        license=license,
        summary=(
            f"{subject} with one attribute substituted by Tied Diffusion Guidance, filtered as in SUB "
            "(the SUB paper, Sec. 4.2): images whose VQA answer is not the target attribute S+ are discarded, "
            f"the rest of each bird-attribute pair is ranked by the S+ probability, the top "
            f"{params.keep_fraction:.0%} of the pair's candidates are kept, and pairs with fewer survivors "
            "are dropped. The VQA option probabilities are kept as columns.\n\n"
            + stats_table(stats)
            + (f"\n\n{benchmark['card_section']}" if benchmark is not None else "")
        ),
        task_categories=["image-classification"],
        tags=["sub", "cub", "concept-bottleneck", "synthetic", "conceptforge"]
        if benchmark is None
        else ["sub", "concept-bottleneck", "synthetic", "conceptforge"],
        citation=CITATION,
        column_docs=inherited_column_docs(upstream, COLUMN_DOCS, features),
        provenance=provenance,
        filter_stats=stats,
        validity=validity,
        **card_sections(benchmark),
    )
    assemble_dataset_dir(
        out_dir,
        splits={OUTPUT_SPLIT: rows},
        features=features,
        render_card=lambda split_stats: render_card(metadata, features, split_stats, has_grid=grid_png is not None),
        grid_png=grid_png,
    )
    if benchmark is not None:
        write_release_spec(out_dir, benchmark["spec_yaml"])
    return stats


def assemble_from_store(store: ItemStore, out_dir: Path, args: dict[str, Any]) -> None:
    """The engine's assembler: decide on the stored scores and write the filtered dataset."""
    assemble_filtered(
        open_candidates(Path(args["candidates"])),
        store,
        out_dir,
        params=FilterParams(**args["params"]),
        license=args["license"],
        provenance=args["provenance"],
        benchmark=args.get("benchmark"),
    )


#: Stored in every SUB filter run (the name is the one first stored: old runs stay valid).
ASSEMBLER = register_assembler("conceptforge.filters.sub_pipeline:assemble_from_store", assemble_from_store)


def assemble_stats(store: ItemStore) -> dict[str, Any]:
    """The filter statistics of the assembled run (recomputed from the stored scores)."""
    import json

    args = json.loads(store.location.read(ASSEMBLY_ARGS))["args"]
    candidates = open_candidates(Path(args["candidates"]))
    params = FilterParams(**args["params"])
    scores = stored_scores(store)
    decision = decide(scored_candidates({i: scores[i] for i in candidates.column("item_id")}), params)
    return filter_statistics(decision, params)


def stats_table(stats: dict[str, Any]) -> str:
    """Per-attribute filter counts as a markdown table (the full JSON follows in the card)."""
    head = [
        "attribute",
        "pairs kept",
        "pairs dropped",
        "candidates",
        "wrong answer",
        "below rank",
        "in dropped pair",
        "unreadable",
        "kept",
    ]
    keys = [
        "pairs_kept",
        "pairs_dropped",
        "candidates",
        "wrong_answer",
        "below_rank",
        "in_dropped_pair",
        "unreadable",
        "kept",
    ]
    lines = ["### Filter summary", "", "| " + " | ".join(head) + " |", "| --- |" + " ---: |" * len(keys)]
    rows = list(stats["per_attribute"].items()) + [("**all**", stats["totals"])]
    for name, counts in rows:
        lines.append(
            f"| {name if name.startswith('**') else '`' + name + '`'} | "
            + " | ".join(str(counts.get(k, 0)) for k in keys)
            + " |"
        )
    return "\n".join(lines)


def _grid_png(
    candidates: LocalSplit, ranks: dict[str, int], scores: dict[str, dict[str, Any]], size: int
) -> bytes | None:
    """The best image (rank 0) of the first ``size`` kept pairs, captioned with bird, S+ and p."""
    wanted = sorted(item_id for item_id, rank in ranks.items() if rank == 0)[:size]
    if not wanted:
        return None
    found: dict[str, Any] = {}
    for row in candidates.iter_rows(["item_id", "image"], batch_size=16):
        if row["item_id"] in wanted:
            found[row["item_id"]] = decode_image(row["image"])
            if len(found) == len(wanted):
                break
    samples = []
    for item_id in wanted:
        meta = scores[item_id]
        caption = f"{meta['bird']} | {meta['attribute'].removeprefix('has_')} p={meta['splus_prob']:.2f}"
        samples.append((found[item_id], caption))
    return grid_png(samples)


def provenance_for(
    config: FilterRunConfig, params: FilterParams, *, batch_size: int, argv: list[str] | None = None
) -> dict[str, Any]:
    """The filtered card's provenance, through the cards' collector (pinned VQA model, package
    versions, and the command line with tokens and secrets redacted)."""
    return collect_provenance(
        generator="conceptforge filter sub (conceptforge.filters.sub.pipeline, SUB VQA filter)",
        models={"vqa": (config.vqa_model, config.vqa_revision)},
        parameters={"vqa": asdict(config), "batch_size": batch_size},
        filters=asdict(params),
        argv=argv,
        packages=("conceptforge", "torch", "transformers", "datasets", "huggingface_hub", "pillow"),
        extra={
            "paper": "SUB: Benchmarking CBM Generalization via Synthetic Attribute Substitutions, Sec. 4.2 VQA filtering"
        },
    )
