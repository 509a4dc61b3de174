"""ConceptBed oracles: concept classifiers (Table 6) and the ViLT VQA composition oracle.

* Concept oracles are any ``AutoModelForImageClassification`` checkpoint, through the shared
  :class:`filters.classifier_oracle.ClassifierOracle` (label names are matched to ConceptBed
  concept names after normalisation, ``001.Black_footed_Albatross`` = ``Black-footed Albatross``).
  The paper's: ResNet-18 over the 4 PACS styles, ConvNeXt-base over the 80 ImageNet concepts
  (with outlier exposure), a CUB classifier for the 200 birds; fine-tune your own with
  ``scripts/train_oracle.py``.
* The composition oracle asks ViLT (``dandelin/vilt-b32-finetuned-vqa``) each generated yes/no
  question; its confidence in "yes" is f(y_c | x) in the CCD (paper Section 3.2.2).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from PIL import Image

from conceptforge.argtypes import check_device
from conceptforge.errors import InvalidArgumentError, WeightsUnavailableError
from conceptforge.external_errors import weights_error
from conceptforge.filters.classifier_oracle import ClassifierOracle, OracleError

logger = logging.getLogger(__name__)

DEFAULT_STYLE_ORACLE = "microsoft/resnet-18"  # fine-tune on PACS first (scripts/train_oracle.py)
DEFAULT_OBJECT_ORACLE = "facebook/convnext-base-224"  # fine-tune on the 80 ImageNet concepts
DEFAULT_CUB_ORACLE = "Emiel/cub-200-bird-classifier-swin"
DEFAULT_VQA_ORACLE = "dandelin/vilt-b32-finetuned-vqa"


@dataclass
class ConceptScores:
    """Per image: the oracle's probability of the true concept, its max probability, correctness."""

    target_prob: np.ndarray
    max_prob: np.ndarray
    correct: np.ndarray


def load_concept_oracle(
    model_id: str, concepts: Sequence[str], *, device: str | None = None, revision: str | None = None
) -> ClassifierOracle:
    """A classifier oracle whose classes are ``concepts`` (each must match one model label)."""
    try:
        return ClassifierOracle.from_pretrained(
            model_id, target_classes=list(concepts), device=device, revision=revision
        )
    except (OracleError, WeightsUnavailableError) as error:
        raise type(error)(f"oracle {model_id}: {error}") from None  # same kind, says which oracle


def score_concepts(
    oracle: ClassifierOracle, images: Sequence[Image.Image], concepts: Sequence[str], *, batch_size: int = 32
) -> ConceptScores:
    """f(y_c | x) for each image and its own concept ``c``."""
    if len(images) != len(concepts):
        raise ValueError("one concept per image")
    if not images:
        empty = np.zeros(0)
        return ConceptScores(empty, empty, empty.astype(bool))
    probs = oracle.score(list(images), batch_size=batch_size).probs
    index = {name: i for i, name in enumerate(oracle.classes)}
    targets = np.array([index[c] for c in concepts])
    rows = np.arange(len(images))
    return ConceptScores(
        target_prob=probs[rows, targets],
        max_prob=probs.max(axis=1),
        correct=probs.argmax(axis=1) == targets,
    )


class VQAOracle:
    """ViLT VQA: probability of the answer "yes" for (image, question) pairs.

    ``probability="softmax"`` (default) normalises over the answer vocabulary, so MSP and ECE see
    a distribution like the classifier oracles'; ``"sigmoid"`` gives ViLT's per-answer score
    (it was trained with binary cross-entropy over answers).
    """

    def __init__(
        self, model: Any, processor: Any, *, probability: str = "softmax", device: torch.device | None = None
    ) -> None:
        if probability not in ("softmax", "sigmoid"):
            raise InvalidArgumentError(f"VQA probability must be softmax or sigmoid, got {probability!r}")
        self.model = model.eval()
        self.processor = processor
        self.probability = probability
        self.device = device or next(model.parameters()).device
        label2id = {str(k).lower(): int(v) for k, v in model.config.label2id.items()}
        if "yes" not in label2id:
            raise WeightsUnavailableError("the VQA model has no 'yes' answer in its label set")
        self.yes_index = label2id["yes"]
        self.max_text = int(getattr(model.config, "max_position_embeddings", 40))

    @classmethod
    def from_pretrained(
        cls,
        model_id: str = DEFAULT_VQA_ORACLE,
        *,
        device: str | None = None,
        probability: str = "softmax",
        revision: str | None = None,
    ) -> VQAOracle:
        from transformers import AutoProcessor, ViltForQuestionAnswering

        target = (
            torch.device(check_device(str(device)))
            if device
            else torch.device("cuda" if torch.cuda.is_available() else "cpu")
        )
        try:
            try:
                processor = AutoProcessor.from_pretrained(model_id, revision=revision, backend="pil")
            except TypeError:
                processor = AutoProcessor.from_pretrained(model_id, revision=revision)
            model = ViltForQuestionAnswering.from_pretrained(model_id, revision=revision).to(target)
        except OSError as error:
            raise weights_error("VQA model", model_id, error) from None
        return cls(model, processor, probability=probability, device=target)

    @torch.inference_mode()
    def score(self, images: Sequence[Image.Image], questions: Sequence[str], *, batch_size: int = 32) -> ConceptScores:
        """For each pair: P(yes), the max answer probability, and whether "yes" is the argmax."""
        if len(images) != len(questions):
            raise ValueError("one question per image")
        yes, top, correct = [], [], []
        for start in range(0, len(images), batch_size):
            chunk_images = [im.convert("RGB") for im in images[start : start + batch_size]]
            chunk_questions = list(questions[start : start + batch_size])
            inputs = self.processor(
                images=chunk_images,
                text=chunk_questions,
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=self.max_text,
            )
            inputs = {k: v.to(self.device) for k, v in inputs.items()}
            logits = self.model(**inputs).logits.float()
            probs = torch.softmax(logits, dim=-1) if self.probability == "softmax" else torch.sigmoid(logits)
            yes.append(probs[:, self.yes_index].cpu().numpy())
            top.append(probs.max(dim=-1).values.cpu().numpy())
            correct.append((logits.argmax(dim=-1) == self.yes_index).cpu().numpy())
        if not yes:
            empty = np.zeros(0)
            return ConceptScores(empty, empty, empty.astype(bool))
        return ConceptScores(
            np.concatenate(yes).astype(np.float64), np.concatenate(top).astype(np.float64), np.concatenate(correct)
        )
