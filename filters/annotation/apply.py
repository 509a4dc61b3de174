"""Apply a study's results to its dataset: a new dataset directory plus the statistics its card shows.

The studied split keeps the rows that pass the study's rule (:func:`results.row_decision`); the
other splits are copied unchanged. Every split gains the study's ``human_*`` columns (null where
nobody annotated the row), so several studies can be applied one after the other
(e.g. conceptbed-alignment on ``concept``, then conceptbed-composition on ``composition``).
Rows are streamed one row group at a time; the directory is written by
``cards.assemble_dataset_dir`` (staged, README last).
"""

from __future__ import annotations

import io
import logging
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from datasets import Features, Value
from huggingface_hub import DatasetCard
from PIL import Image

from conceptforge.cards import DatasetMetadata, assemble_dataset_dir, render_card
from conceptforge.cards.grid import grid_png
from conceptforge.cards.lineage import inherited_column_docs, read_upstream_metadata, upstream_provenance
from conceptforge.errors import DataFormatError, InvalidArgumentError
from conceptforge.filters.annotation.dataset import available_splits, split_files, split_tables
from conceptforge.filters.annotation.results import HUMAN_COLUMNS, row_decision, row_human_values, summary_for_card
from conceptforge.output import claim_folder, hold_output

logger = logging.getLogger(__name__)
GRID_SAMPLES = 8
#: The marker an --apply folder carries: a rerun replaces only a folder made by --apply.
APPLY_MADE_BY = "annotate --apply"

HUMAN_COLUMN_DOCS = {
    "human_faithfulness_attribute": "mean human score (yes 1 / somewhat 0.5 / no 0): is the target attribute applied",
    "human_faithfulness_bird": "mean human score: does the bird still look like the reference bird",
    "human_faithfulness_n": "number of human answers for this image (0: not in the validation sample)",
    "human_attribute_splus": "share of annotators who picked the substituted value S+",
    "human_attribute_n": "number of human answers for this image",
    "human_alignment": "mean human rating 1-5: same concept as the reference images",
    "human_alignment_n": "number of human ratings for this image",
    "human_composition": "mean human rating 1-5: image matches its caption",
    "human_composition_n": "number of human ratings for this image",
}


def _input_card(root: Path) -> tuple[str | None, str | None, list[str]]:
    path = root / "README.md"
    if not path.is_file():
        return None, None, []
    card = DatasetCard.load(path)
    return card.data.get("license"), card.data.get("pretty_name"), list(card.data.get("tags") or [])


def _features(root: Path, split: str, study: str) -> Features:
    schema = pq.ParquetFile(split_files(root, split)[0]).schema_arrow
    features = Features.from_arrow_schema(schema)
    for name, dtype in HUMAN_COLUMNS[study].items():
        features[name] = Value(dtype)
    return features


def apply_results(
    results: Mapping[str, Any],
    *,
    dataset_dir: str | Path,
    out_dir: str | Path,
    license: str | None = None,
) -> dict[str, Any]:
    """Write the filtered dataset to ``out_dir``; return the statistics written into its card."""
    root, out = Path(dataset_dir).resolve(), Path(out_dir).resolve()
    if out == root or root in out.parents:
        raise InvalidArgumentError(f"--apply output {out} must be outside the dataset directory {root}")
    claim_folder(out, made_by=APPLY_MADE_BY, flag="--apply")  # someone's folder: refused before any work
    hold_output(out, flag="--apply")  # two --apply runs into one folder: the second is refused
    study = results["study"]
    studied_split = results["config"]["split"]
    splits = available_splits(root)
    if studied_split not in splits:
        raise DataFormatError(f"{root} has no split {studied_split!r}: are these results from another dataset?")
    features = _features(root, studied_split, study)
    for split in splits:  # the card has one feature set: every split must agree with it
        other = Features.from_arrow_schema(pq.ParquetFile(split_files(root, split)[0]).schema_arrow)
        if any(name not in features for name in other):
            raise DataFormatError(f"split {split} of {root} has columns the studied split lacks")
    source_license, pretty_name, tags = _input_card(root)
    license = license or source_license
    if not license:
        raise InvalidArgumentError(f"{root}/README.md names no license; pass --license (e.g. cc-by-nc-4.0)")

    dropped_reasons: Counter = Counter()
    kept_counts: Counter = Counter()
    columns = list(features)
    # What the validity report needs, collected while the rows stream (cards.validity)
    kind = _validity_kind(features)
    compact: dict[str, list[dict[str, Any]]] = {split: [] for split in splits}
    annotated_ids = {str(a["item_id"]) for a in results.get("annotations") or []}
    annotated_rows: dict[str, dict[str, Any]] = {}

    def rows_of(split: str) -> Iterator[dict[str, Any]]:
        for table in split_tables(root, split):
            for row in table.to_pylist():
                if split == studied_split:
                    keep, reason = row_decision(results, row)
                    if not keep:
                        dropped_reasons[reason] += 1
                        continue
                    row.update(row_human_values(results, row))
                else:
                    row.update(
                        {name: (0 if name.endswith("_n") else None) for name in HUMAN_COLUMNS[study] if name not in row}
                    )
                kept_counts[split] += 1
                if kind is not None:
                    compact[split].append({key: row.get(key) for key in VALIDITY_COLUMNS[kind]})
                if split == studied_split and str(row.get("item_id")) in annotated_ids:
                    annotated_rows[str(row["item_id"])] = {k: row.get(k) for k in ("vqa_answer", "value")}
                yield {name: row.get(name) for name in columns}

    statistics: dict[str, Any] = {}
    upstream = read_upstream_metadata(root)

    def card(split_stats) -> str:
        summary = summary_for_card(results)
        summary["rows"] = {
            "kept": dict(kept_counts),
            "dropped": sum(dropped_reasons.values()),
            "dropped_by_reason": dict(sorted(dropped_reasons.items())),
        }
        statistics.update(summary)
        metadata = DatasetMetadata(
            pretty_name=f"{pretty_name or root.name} (human-validated: {study})",
            license=license,
            summary=(
                f"`{root.name}` after the `{study}` human study of conceptforge's annotation app: "
                f"{summary['progress']['answers']} answers from {len(summary['progress']['annotators'])} "
                f"annotator(s) on {summary['progress']['annotated_items']} sampled items; split "
                f"`{studied_split}` keeps {kept_counts[studied_split]} rows and drops "
                f"{sum(dropped_reasons.values())}."
            ),
            tags=sorted(set(tags) | {"conceptforge", "human-validation"}),
            # Columns, paper and provenance of the input pass through (cards.lineage says why).
            column_docs=inherited_column_docs(upstream, HUMAN_COLUMN_DOCS, features),
            provenance={
                "source_dataset": root.name,
                "study": study,
                "sample": results["config"],
                "upstream": upstream_provenance(upstream, root),
            },
            filter_stats=summary,
            task_categories=list(upstream.task_categories) if upstream else [],
            citation=upstream.citation if upstream else "",
            paper_title=upstream.paper_title if upstream else "",
            paper_url=upstream.paper_url if upstream else "",
            # the input card's own sections pass through (they were dropped before)
            uses=upstream.uses if upstream else "",
            out_of_scope_use=upstream.out_of_scope_use if upstream else "",
            bias_risks_limitations=upstream.bias_risks_limitations if upstream else "",
            annotations=_annotations(upstream.annotations if upstream else "", study, summary),
            validity=_validity(kind, compact, results, annotated_rows),
            personal_data=upstream.personal_data if upstream else "",
        )
        return render_card(metadata, features, split_stats, has_grid=grid_bytes is not None)

    grid_bytes = _grid_png(results, root, studied_split)
    assemble_dataset_dir(
        out,
        splits={s: (lambda s=s: rows_of(s)) for s in splits},
        features=features,
        render_card=card,
        grid_png=grid_bytes,
        made_by=APPLY_MADE_BY,
        flag="--apply",
    )
    logger.info("wrote %s: kept %s, dropped %d", out, dict(kept_counts), sum(dropped_reasons.values()))
    return statistics


VALIDITY_COLUMNS = {
    "sub": ("bird", "attribute", "group", "value", "removed_attribute"),
    "conceptbed": ("concept", "questions"),
}


def _validity_kind(features: Features) -> str | None:
    """Which benchmark's validity report the rows support (None: neither SUB nor ConceptBed)."""
    if all(name in features for name in ("attribute", "group", "value")):
        return "sub"
    if "concept" in features:
        return "conceptbed"
    return None


def _validity(
    kind: str | None,
    rows: Mapping[str, list[dict[str, Any]]],
    results: Mapping[str, Any],
    annotated: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """The validity report of the human-validated dataset: the benchmark's blind baselines on the
    kept rows, and the agreement of this study (filters.annotation.agreement)."""
    from conceptforge.cards.validity import not_applicable, validity_report
    from conceptforge.filters.annotation.agreement import agreement_part

    agreement = agreement_part(results, annotated)
    if kind == "sub":
        from conceptforge.generators.sub.validity import sub_validity

        return sub_validity(rows, agreement=agreement)
    if kind == "conceptbed":
        from conceptforge.generators.conceptbed.validity import conceptbed_validity

        return conceptbed_validity(rows, agreement=agreement)
    reason = "the dataset's columns are neither SUB's nor ConceptBed's: no blind baseline is defined for them"
    return validity_report(blind_baselines=not_applicable(reason), held_out=not_applicable(reason), agreement=agreement)


def _annotations(upstream: str, study: str, summary: Mapping[str, Any]) -> str:
    """The input card's Annotations section plus one paragraph on this human study."""
    progress = summary.get("progress", {})
    own = (
        f"Human validation (`{study}` study, conceptforge's annotation app): {progress.get('answers', 0)} answers "
        f"from {len(progress.get('annotators', []))} annotator(s); the `human_*` columns hold the results."
    )
    return f"{upstream.strip()}\n\n{own}" if upstream.strip() else own


def _caption(row: Mapping[str, Any]) -> str:
    if "bird" in row and "attribute" in row:
        return f"{str(row['bird']).replace('_', ' ')} · {row['attribute']}"
    if row.get("caption"):
        return str(row["caption"])
    return f"{row.get('learner', '')} {row.get('concept', '')}".strip()


def _grid_png(results: Mapping[str, Any], root: Path, split: str) -> bytes | None:
    """A sample grid of the first kept rows (read before assembly: the card names the grid)."""

    def kept() -> Iterator[tuple[Image.Image, str]]:
        for table in split_tables(root, split):
            for row in table.to_pylist():
                if row_decision(results, row)[0] and (row.get("image") or {}).get("bytes"):
                    yield Image.open(io.BytesIO(row["image"]["bytes"])).convert("RGB"), _caption(row)

    return grid_png(kept(), limit=GRID_SAMPLES)
