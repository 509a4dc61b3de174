"""Candidate selection for SUB (SUB paper §4.2): which reference birds and attributes to use.

* **Reference birds**: images generated per CUB class from the class name alone are classified
  by a CUB classifier; classes recognised at >= ``min_accuracy`` (paper: 100% of 20) are kept.
* **Attribute candidates**: the VQA question of every attribute group is asked on real CUB
  images; for each attribute we search the answer-probability threshold in [0.60, 0.95] that
  maximises its accuracy and keep attributes reaching >= 90%.

"Accuracy of an attribute at threshold t" is not defined further in the paper. The filter uses
the VQA model to *confirm* S+, so the default metric is the precision of that confirmation:
among images the model answers ``a`` with probability >= t, the share whose CUB label has
``a``. A minimum support (images answered ``a`` above t) keeps a handful of lucky images from
reaching 100%. ``metric="accuracy"`` gives the binary accuracy over all images instead
(prediction "a present" = answer a with p >= t); it rewards rare attributes by their negatives,
which is why it is not the default.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conceptforge import ItemResult, ItemStore, ShardSpec, WorkItem
from conceptforge.cub import CubDataset
from conceptforge.engine.runner import RunDir, Stage, out_of_store, run_stage
from conceptforge.errors import InvalidArgumentError
from conceptforge.filters.classifier_oracle import ClassifierOracle, normalize_label
from conceptforge.filters.dataset_io import LocalSplit, decode_image
from conceptforge.filters.vqa.questions import QuestionBuilder
from conceptforge.filters.vqa.scorer import VQAScorer
from conceptforge.progress import tqdm

logger = logging.getLogger(__name__)

SELECTION_METRICS = ("precision", "accuracy")


def threshold_grid(low: float = 0.60, high: float = 0.95, step: float = 0.01) -> tuple[float, ...]:
    if not 0.0 <= low <= high <= 1.0 or step <= 0:
        raise InvalidArgumentError(f"bad threshold range [{low}, {high}] step {step}")
    count = int(round((high - low) / step))
    return tuple(round(low + i * step, 6) for i in range(count + 1))


# -- reference birds -------------------------------------------------------------------------
@dataclass(frozen=True)
class BirdAccuracy:
    bird: str
    images: int
    correct: int
    unreadable: int = 0

    @property
    def accuracy(self) -> float:
        return self.correct / self.images if self.images else 0.0


def reference_bird_accuracy(
    references: LocalSplit,
    oracle: ClassifierOracle,
    *,
    batch_size: int = 32,
    progress: bool = True,
) -> list[BirdAccuracy]:
    """Per-class accuracy of ``oracle`` on a dataset with columns ``image`` and ``bird``.

    A prediction is correct when the oracle's class and the row's bird name agree after
    :func:`~filters.classifier_oracle.normalize_label` (``017.Cardinal`` == ``Cardinal``).
    Unreadable images are counted per bird and scored as wrong (a class must be *reliably* drawn).
    """
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    images, birds = [], []

    def flush() -> None:
        if not images:
            return
        for bird, predicted in zip(birds, oracle.predict(images, batch_size=batch_size)):
            totals[bird][1] += int(normalize_label(predicted) == normalize_label(bird))
        images.clear()
        birds.clear()

    for row in tqdm(
        references.iter_rows(["image", "bird"]),
        total=references.num_rows(),
        desc="classifying",
        unit="img",
        disable=not progress,
    ):
        totals[row["bird"]][0] += 1
        try:
            images.append(decode_image(row["image"]))
        except ValueError as error:
            logger.warning("reference image of %s: %s (counted wrong)", row["bird"], error)
            totals[row["bird"]][2] += 1
            continue
        birds.append(row["bird"])
        if len(images) >= batch_size:
            flush()
    flush()
    return [BirdAccuracy(bird, n, correct, bad) for bird, (n, correct, bad) in sorted(totals.items())]


def select_birds(accuracies: Sequence[BirdAccuracy], *, min_accuracy: float = 1.0) -> list[str]:
    return [a.bird for a in accuracies if a.images and a.accuracy >= min_accuracy - 1e-12]


# -- attribute candidates --------------------------------------------------------------------
@dataclass(frozen=True)
class GroupAnswer:
    """One image's VQA answer to one group question, with the image's true values of the group."""

    group: str
    answer: str
    answer_prob: float
    present: frozenset[str]


@dataclass(frozen=True)
class AttributeSelection:
    attribute: str
    threshold: float | None  # None: no threshold reached the minimum support
    accuracy: float
    support: int  # images the metric counted at that threshold
    answered: int  # images answered with this attribute (any probability)
    selected: bool


def _metric_at(answers: Sequence[GroupAnswer], value: str, threshold: float, metric: str) -> tuple[float, int]:
    if metric == "precision":
        accepted = [a for a in answers if a.answer == value and a.answer_prob >= threshold]
        if not accepted:
            return 0.0, 0
        return sum(value in a.present for a in accepted) / len(accepted), len(accepted)
    correct = sum((a.answer == value and a.answer_prob >= threshold) == (value in a.present) for a in answers)
    return (correct / len(answers) if answers else 0.0), len(answers)


def search_thresholds(
    answers: Iterable[GroupAnswer],
    groups: Mapping[str, Sequence[str]],
    *,
    thresholds: Sequence[float] = threshold_grid(),
    metric: str = "precision",
    min_support: int = 10,
    min_accuracy: float = 0.9,
) -> list[AttributeSelection]:
    """Per attribute of the answered groups: the threshold with the best metric, and whether it passes.

    Ties go to the lowest threshold (it keeps the most images). Thresholds whose support is
    below ``min_support`` are not eligible.
    """
    if metric not in SELECTION_METRICS:
        raise InvalidArgumentError(f"unknown metric {metric!r}; choose one of {', '.join(SELECTION_METRICS)}")
    by_group: dict[str, list[GroupAnswer]] = defaultdict(list)
    for answer in answers:
        by_group[answer.group].append(answer)
    table = []
    for group in sorted(by_group):
        group_answers = by_group[group]
        for value in groups[group]:
            best: tuple[float, float, int] | None = None  # (accuracy, threshold, support)
            for threshold in sorted(thresholds):
                accuracy, support = _metric_at(group_answers, value, threshold, metric)
                if support < max(1, min_support):
                    continue
                if best is None or accuracy > best[0] + 1e-12:
                    best = (accuracy, threshold, support)
            answered = sum(a.answer == value for a in group_answers)
            name = f"{group}::{value}"
            if best is None:
                table.append(AttributeSelection(name, None, 0.0, 0, answered, False))
            else:
                table.append(
                    AttributeSelection(name, best[1], best[0], best[2], answered, best[0] >= min_accuracy - 1e-12)
                )
    return table


def score_cub_groups(
    cub: CubDataset,
    scorer: VQAScorer | Callable[[], VQAScorer],
    questions: QuestionBuilder,
    store: ItemStore | RunDir,
    *,
    groups: Sequence[str],
    images_per_class: int | None = None,
    shard: ShardSpec = ShardSpec(),
    batch_size: int = 8,
    progress: bool = True,
    settings: dict[str, Any] | None = None,
    chunk_size: int = 64,
) -> dict[str, int]:
    """Ask every group question on CUB images, caching the option probabilities per (image, group).

    Runs on the run engine: chunks of (image, group) questions, sharded by any launcher, resumed.
    Returns counts: total (all questions), todo (this shard's, before the run), unreadable.
    """
    images = _subsample(cub, images_per_class)
    items = [WorkItem(f"{image.image_id:06d}__{group}", 0, "cub") for image in images for group in groups]
    by_id = {image.image_id: image for image in images}
    state: dict[str, Any] = {"unreadable": 0}

    def prepare() -> None:
        if "scorer" not in state:
            model = scorer if isinstance(scorer, VQAScorer) else scorer()
            for group in groups:
                model.letter_token_ids(len(questions(group).options))
            state["scorer"] = model

    def process_batch(batch: Sequence[WorkItem]) -> list[ItemResult]:
        prepare()
        results: dict[str, ItemResult] = {}
        loaded: dict[int, Any] = {}
        ready = []
        for item in batch:
            image_id = int(item.item_id.split("__")[0])
            group = item.item_id.split("__", 1)[1]
            if image_id not in loaded:
                try:
                    loaded[image_id] = decode_image({"bytes": by_id[image_id].path.read_bytes()})
                except (OSError, ValueError) as error:
                    loaded[image_id] = None
                    logger.warning("CUB image %s: %s (skipped)", by_id[image_id].path, error)
            if loaded[image_id] is None:
                results[item.item_id] = ItemResult(
                    metadata={"status": "unreadable", "group": group, "image_id": image_id}
                )
                state["unreadable"] += 1
                continue
            ready.append((item, image_id, group, loaded[image_id], questions(group)))
        for start in range(0, len(ready), batch_size):
            part = ready[start : start + batch_size]
            for (item, image_id, group, _pic, _q), scores in zip(
                part, state["scorer"].score([p[3] for p in part], [p[4] for p in part], batch_size=batch_size)
            ):
                results[item.item_id] = ItemResult(
                    metadata={
                        "status": "ok",
                        "group": group,
                        "image_id": image_id,
                        "options": list(scores.options),
                        "probs": list(scores.probs),
                        "raw_mass": scores.raw_mass,
                    }
                )
        return [results[item.item_id] for item in batch]

    stage = Stage(
        name="sub/cub-vqa",
        items=items,
        settings=settings or {},
        process_batch=process_batch,
        prepare=prepare,
        chunk_size=chunk_size,
        description="CUB VQA",
        unit="q",
    )
    run = store if isinstance(store, RunDir) else out_of_store(store)
    report = run_stage(stage, run, shard=shard, assemble=False)
    return {
        "total": len(items),
        "todo": report.shard_items - report.skipped,
        "unreadable": state["unreadable"],
        "missing": report.missing_items,
    }


def _subsample(cub: CubDataset, images_per_class: int | None) -> list:
    if images_per_class is None:
        return list(cub.images)
    taken: dict[int, int] = defaultdict(int)
    out = []
    for image in cub.images:
        if taken[image.class_id] < images_per_class:
            taken[image.class_id] += 1
            out.append(image)
    return out


def group_answers(cub: CubDataset, store: ItemStore, *, ground_truth: str = "image") -> list[GroupAnswer]:
    """Stored answers joined with CUB labels (per-image annotations or class-level majority)."""
    if ground_truth == "image":
        labels = cub.image_labels()
        present_of = lambda image: labels.get(image.image_id, set())  # noqa: E731
    elif ground_truth == "class":
        labels = cub.class_labels()
        present_of = lambda image: labels.get(image.class_id, set())  # noqa: E731
    else:
        raise InvalidArgumentError(f"--ground-truth must be image or class, got {ground_truth!r}")
    images = {image.image_id: image for image in cub.images}
    names = cub.vocabulary.names
    out = []
    for record in store.records("cub"):
        meta = record.metadata
        if meta.get("status") != "ok":
            continue
        group = meta["group"]
        present = frozenset(
            names[j].partition("::")[2]
            for j in present_of(images[meta["image_id"]])
            if names[j].startswith(group + "::")
        )
        probs = meta["probs"]
        best = max(range(len(probs)), key=lambda i: (probs[i], -i))
        out.append(GroupAnswer(group, meta["options"][best], float(probs[best]), present))
    return out
