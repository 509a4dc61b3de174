"""Run the ConceptBed oracles over generated datasets and real images -> score records.

Concept oracles are chosen per concept kind (style / object / cub); each oracle's classes are
the ConceptBed concepts of that kind that its labels name, so an oracle fine-tuned on a subset
works, and a generated concept the oracle cannot name is a clear error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from conceptforge.errors import (
    DataNotFoundError,
    InvalidArgumentError,
    WeightsUnavailableError,
)
from conceptforge.external_errors import weights_error
from conceptforge.filters.classifier_oracle import ClassifierOracle, normalize_label
from conceptforge.filters.conceptbed.oracles import VQAOracle, load_concept_oracle, score_concepts
from conceptforge.filters.conceptbed.records import ORIGINAL, ScoreRecord
from conceptforge.generators.conceptbed.composition import Caption
from conceptforge.generators.conceptbed.concepts import library
from conceptforge.generators.conceptbed.spec import ConceptSpec
from conceptforge.progress import tqdm

logger = logging.getLogger(__name__)


def oracle_concepts(
    model_id: str, kind: str, *, revision: str | None = None, candidates: Sequence[str] | None = None
) -> list[str]:
    """The ConceptBed concepts of ``kind`` that the classifier ``model_id`` has a label for:
    Table 9's, or ``candidates`` (the concepts of a user's benchmark spec)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model_id, revision=revision)
    except OSError as error:
        raise weights_error("classifier", model_id, error) from None
    labels = {normalize_label(v) for v in config.id2label.values()}
    if candidates is None:
        candidates = [name for name, (k, _) in library().items() if k == kind]
    names = [name for name in candidates if normalize_label(name) in labels]
    if len(names) < 2:
        raise WeightsUnavailableError(
            f"oracle {model_id} names {len(names)} ConceptBed {kind} concept(s); fine-tune it on the concepts "
            "first (scripts/train_oracle.py)"
        )
    return names


class OracleSet:
    """Loads each concept oracle (and the VQA oracle) once, on first use."""

    def __init__(
        self,
        models: Mapping[str, str | None],
        *,
        vqa_model: str | None,
        vqa_probability: str = "softmax",
        device: str | None = None,
        revision: str | None = None,
        vqa_oracle: Any = None,
        concepts: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """``vqa_oracle``: an already loaded composition oracle (anything with ``VQAOracle.score``),
        used instead of loading ``vqa_model``. ``concepts``: kind -> a user's concepts of that kind
        (the oracle's classes are chosen among them; default: Table 9's)."""
        self.concepts = dict(concepts) if concepts is not None else None
        self.models = dict(models)
        self.vqa_model = vqa_model
        self.vqa_probability = vqa_probability
        self.device = device
        self.revision = revision
        self._oracles: dict[str, ClassifierOracle] = {}
        self._vqa: VQAOracle | None = vqa_oracle

    def concept_oracle(self, kind: str) -> ClassifierOracle:
        if kind not in self._oracles:
            model_id = self.models.get(kind)
            if not model_id:
                raise InvalidArgumentError(f"no oracle given for {kind} concepts (--{kind}-oracle)")
            candidates = None if self.concepts is None else list(self.concepts.get(kind, []))
            names = oracle_concepts(model_id, kind, candidates=candidates)
            self._oracles[kind] = load_concept_oracle(model_id, names, device=self.device)
            logger.info("%s oracle %s over %d concepts", kind, model_id, len(names))
        return self._oracles[kind]

    @property
    def vqa(self) -> VQAOracle | None:
        if self._vqa is None and self.vqa_model:
            self._vqa = VQAOracle.from_pretrained(self.vqa_model, device=self.device, probability=self.vqa_probability)
        return self._vqa


def _check_concepts(oracle: ClassifierOracle, concepts: Iterable[str], kind: str) -> None:
    missing = sorted(set(concepts) - set(oracle.classes))
    if missing:
        raise WeightsUnavailableError(f"the {kind} oracle has no class for concept(s) {', '.join(missing[:5])}")


def _batches(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def score_generated(
    dataset: Mapping[str, Any], oracles: OracleSet, *, batch_size: int = 32, use_vqa: bool = True
) -> list[ScoreRecord]:
    """Score every row of a generated dataset (``DatasetDict`` with ``concept``/``composition``)."""
    records: list[ScoreRecord] = []
    for split in ("concept", "composition"):
        if split not in dataset:
            continue
        data = dataset[split].remove_columns([c for c in ("reference_images",) if c in dataset[split].column_names])
        task_of = (lambda kind: kind) if split == "concept" else (lambda kind: "composition")
        for batch in tqdm(
            _batches(iter(data), batch_size),
            total=(len(data) + batch_size - 1) // batch_size,
            desc=f"scoring {split}",
            unit="batch",
        ):
            for kind in sorted({row["concept_kind"] for row in batch}):
                rows = [row for row in batch if row["concept_kind"] == kind]
                oracle = oracles.concept_oracle(kind)
                _check_concepts(oracle, (r["concept"] for r in rows), kind)
                scores = score_concepts(
                    oracle, [r["image"] for r in rows], [r["concept"] for r in rows], batch_size=batch_size
                )
                for row, p, m, ok in zip(rows, scores.target_prob, scores.max_prob, scores.correct):
                    records.append(_record(row, task_of(kind), p, m, ok))
            if split == "composition" and use_vqa and oracles.vqa is not None:
                pairs = [(row, q) for row in batch for q in row["questions"]]
                if pairs:
                    scores = oracles.vqa.score(
                        [r["image"] for r, _ in pairs], [q for _, q in pairs], batch_size=batch_size
                    )
                    for (row, question), p, m, ok in zip(pairs, scores.target_prob, scores.max_prob, scores.correct):
                        records.append(_record(row, "vqa", p, m, ok, question))
    return records


def _record(row: dict[str, Any], task: str, p: Any, m: Any, ok: Any, question: str = "") -> ScoreRecord:
    """One judgement of a generated image's dataset row (numpy scalars made plain Python values)."""
    return ScoreRecord(
        row["learner"],
        task,
        row["concept"],
        float(p),
        float(m),
        bool(ok),
        tuple(row.get("categories") or ()),
        row["item_id"],
        question,
    )


def _open(path: Path) -> Image.Image:
    with Image.open(path) as image:
        return image.convert("RGB")


def score_real(
    spec: ConceptSpec,
    captions: Mapping[str, Sequence[Caption]],
    oracles: OracleSet,
    *,
    batch_size: int = 32,
    max_images: int | None = None,
    kinds: Iterable[str] | None = None,
    use_vqa: bool = True,
) -> list[ScoreRecord]:
    """The "Original" rows: oracles on the concepts' real images and the captions' real images."""
    wanted = set(kinds) if kinds is not None else None
    records: list[ScoreRecord] = []
    for concept in tqdm(spec.concepts, desc="scoring real images", unit="concept"):
        if wanted is not None and concept.kind not in wanted:
            continue
        oracle = oracles.concept_oracle(concept.kind)
        _check_concepts(oracle, [concept.name], concept.kind)
        paths = list(concept.reference_images[:max_images] if max_images else concept.reference_images)
        for start in range(0, len(paths), batch_size):
            chunk = paths[start : start + batch_size]
            scores = score_concepts(
                oracle, [_open(p) for p in chunk], [concept.name] * len(chunk), batch_size=batch_size
            )
            for path, p, m, ok in zip(chunk, scores.target_prob, scores.max_prob, scores.correct):
                records.append(
                    ScoreRecord(ORIGINAL, concept.kind, concept.name, float(p), float(m), bool(ok), (), path.name)
                )
    if use_vqa and oracles.vqa is not None:
        pairs = [(c, q) for items in captions.values() for c in items if c.image is not None for q in c.questions]
        for start in range(0, len(pairs), batch_size):
            chunk = pairs[start : start + batch_size]
            missing = [str(c.image) for c, _ in chunk if not c.image.is_file()]
            if missing:
                raise DataNotFoundError(f"caption image {missing[0]} does not exist")
            scores = oracles.vqa.score([_open(c.image) for c, _ in chunk], [q for _, q in chunk], batch_size=batch_size)
            for (caption, question), p, m, ok in zip(chunk, scores.target_prob, scores.max_prob, scores.correct):
                records.append(
                    ScoreRecord(
                        ORIGINAL,
                        "vqa",
                        caption.concept,
                        float(p),
                        float(m),
                        bool(ok),
                        caption.categories,
                        caption.image.name,
                        question,
                    )
                )
    return records
