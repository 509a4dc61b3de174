"""SUB's candidate spec (``{"birds": [...], "attributes": [...], ...report}``), filled by the two
selections of SUB §4.2: reference birds (a CUB classifier on generated images) and attribute
candidates (the VQA question on real CUB images, threshold searched).

Why a library module: ``conceptforge select-candidates`` only parses flags and prints the tables;
the selection, its store and the spec update are the same whoever runs them. Each selection
updates its own keys of the spec and keeps the others.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conceptforge.engine.workitems import ShardSpec
from conceptforge.errors import InvalidArgumentError, SpecError

logger = logging.getLogger(__name__)


#: Keys only select-candidates writes: a spec holding one of them is ours to update.
SELECTION_KEYS = ("reference_selection", "attribute_selection")


def claim_spec(path: str | Path) -> Path:
    """Refuse (before any model work) a ``--spec`` that exists and was not written by select-candidates.

    A hand-written candidate spec or any other JSON file of the user's is never rewritten: the
    selection goes to a new file, which ``generate sub --candidate-spec`` reads the same way.
    """
    from conceptforge.output import claim_files, json_with_keys

    path = Path(path)
    ours = [json_with_keys(key) for key in SELECTION_KEYS]
    claim_files([path], flag="--spec", ours=lambda file, head: any(test(file, head) for test in ours))
    return path


def update_spec(path: Path, updates: dict[str, Any]) -> None:
    from conceptforge.serialization import atomic_write_bytes

    claim_spec(path)
    spec: dict[str, Any] = {}
    if path.exists():
        try:
            spec = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:  # not JSON, or not text at all
            raise SpecError(f"{path} is not a JSON candidate spec: {error}") from None
        if not isinstance(spec, dict):
            raise SpecError(f"{path} is not a JSON object")
    spec.update(updates)
    atomic_write_bytes(path, (json.dumps(spec, indent=1, sort_keys=True) + "\n").encode("utf-8"))


# -- reference birds ------------------------------------------------------------------------------
@dataclass
class BirdSelectionConfig:
    references: Path
    classifier: str
    split: str | None = None
    min_accuracy: float = 1.0
    batch_size: int = 32
    device: str | None = None
    trust_remote_code: bool = False


@dataclass
class BirdSelection:
    table: list[Any]  # BirdAccuracy rows
    birds: list[str]
    spec_updates: dict[str, Any]


def select_reference_birds(config: BirdSelectionConfig) -> BirdSelection:
    """Per-class accuracy of the classifier on the generated references; the classes kept."""
    from conceptforge.filters.classifier_oracle import ClassifierOracle
    from conceptforge.filters.dataset_io import open_split
    from conceptforge.filters.sub.candidate_selection import reference_bird_accuracy, select_birds

    split = config.split
    if split is None:
        data = config.references / "data"
        names = sorted({p.name.split("-")[0] for p in data.glob("*.parquet")}) if data.is_dir() else []
        if len(names) > 1:
            raise InvalidArgumentError(f"{config.references} has splits {', '.join(names)}; pick one with --split")
        split = names[0] if names else "train"
    references = open_split(config.references, split, required=("image", "bird"), kind="reference-selection dataset")
    oracle = ClassifierOracle.from_pretrained(
        config.classifier, device=config.device, trust_remote_code=config.trust_remote_code
    )
    table = reference_bird_accuracy(references, oracle, batch_size=config.batch_size)
    birds = select_birds(table, min_accuracy=config.min_accuracy)
    updates = {
        "birds": birds,
        "reference_selection": {
            "classifier": config.classifier,
            "classifier_revision": getattr(oracle.model.config, "_commit_hash", None),
            "references": str(config.references),
            "min_accuracy": config.min_accuracy,
            "per_class": [
                {
                    "bird": r.bird,
                    "images": r.images,
                    "correct": r.correct,
                    "accuracy": r.accuracy,
                    "unreadable": r.unreadable,
                }
                for r in table
            ],
        },
    }
    return BirdSelection(table, birds, updates)


# -- attribute candidates -------------------------------------------------------------------------
@dataclass
class AttributeSelectionConfig:
    cub_dir: Path | None
    spec: Path
    vqa_model: str
    vqa_revision: str | None = None
    trust_remote_code: bool = False
    groups: Sequence[str] | None = None
    images_per_class: int | None = None
    ground_truth: str = "image"
    metric: str = "precision"
    threshold_min: float = 0.60
    threshold_max: float = 0.95
    threshold_step: float = 0.01
    min_support: int = 10
    min_accuracy: float = 0.9
    work: Path | None = None
    batch_size: int = 8
    device: str | None = None
    answer_hint: str | None = None  # None: the default hint


@dataclass
class AttributeSelection:
    counts: dict[str, int]
    table: list[Any] | None = None  # AttributeSelection rows of candidate_selection; None while shards are missing
    chosen: list[str] | None = None
    spec_updates: dict[str, Any] | None = None


def select_attributes(
    config: AttributeSelectionConfig,
    *,
    shard: ShardSpec | Callable[[], ShardSpec] = ShardSpec(),
) -> AttributeSelection:
    """Score this shard's CUB questions into the cache; once all are scored, search thresholds.

    ``shard`` may be a zero-argument callable, resolved after the inputs are checked.
    """
    from conceptforge.cub import CubDataset
    from conceptforge.filters.sub.candidate_selection import (
        group_answers,
        score_cub_groups,
        search_thresholds,
        threshold_grid,
    )
    from conceptforge.filters.vqa.questions import DEFAULT_ANSWER_HINT, QuestionBuilder
    from conceptforge.filters.vqa.scorer import VQAScorer
    from conceptforge.output import RunDir

    if config.cub_dir is None:
        raise InvalidArgumentError("--cub-dir is required (the CUB_200_2011 directory)")
    cub = CubDataset.load(config.cub_dir)
    answer_hint = DEFAULT_ANSWER_HINT if config.answer_hint is None else config.answer_hint
    questions = QuestionBuilder(cub.vocabulary.groups, answer_hint=answer_hint)
    groups = config.groups or sorted(cub.vocabulary.groups)
    for group in groups:
        questions(group)  # unknown group -> clear error before any model time
    thresholds = threshold_grid(config.threshold_min, config.threshold_max, config.threshold_step)
    work = str(config.work or config.spec.with_name(config.spec.name + ".work"))
    store = RunDir.open(work, flag="--work", work=work, stage="sub/cub-vqa")  # the store lives in --work itself
    settings = {
        "stage": "cub-vqa",
        "vqa_model": config.vqa_model,
        "vqa_revision": config.vqa_revision,
        "answer_hint": answer_hint,
        "cub_dir": str(Path(config.cub_dir).resolve()),
    }
    shard = shard() if callable(shard) else shard
    counts = score_cub_groups(
        cub,
        lambda: VQAScorer.from_pretrained(
            config.vqa_model,
            trust_remote_code=config.trust_remote_code,
            revision=config.vqa_revision,
            device=config.device,
        ),
        questions,
        store,
        groups=groups,
        images_per_class=config.images_per_class,
        shard=shard,
        batch_size=config.batch_size,
        settings=settings,
    )
    if counts["missing"]:
        return AttributeSelection(counts)
    answers = [a for a in group_answers(cub, store.store(), ground_truth=config.ground_truth) if a.group in set(groups)]
    table = search_thresholds(
        answers,
        cub.vocabulary.groups,
        thresholds=thresholds,
        metric=config.metric,
        min_support=config.min_support,
        min_accuracy=config.min_accuracy,
    )
    chosen = [row.attribute for row in table if row.selected]
    updates = {
        "attributes": chosen,
        "attribute_selection": {
            "vqa_model": config.vqa_model,
            "ground_truth": config.ground_truth,
            "metric": config.metric,
            "thresholds": [thresholds[0], thresholds[-1], config.threshold_step],
            "min_support": config.min_support,
            "min_accuracy": config.min_accuracy,
            "images_per_class": config.images_per_class,
            "table": [
                {
                    "attribute": r.attribute,
                    "threshold": r.threshold,
                    "accuracy": r.accuracy,
                    "support": r.support,
                    "answered": r.answered,
                    "selected": r.selected,
                }
                for r in table
            ],
        },
    }
    return AttributeSelection(counts, table, chosen, updates)
