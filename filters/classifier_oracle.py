"""A classifier oracle: class probabilities of any transformers image classifier, on *your* classes.

Why a label mapping: an oracle checkpoint names its classes its own way (``001.Black_footed_Albatross``,
``Black-footed Albatross``, ``black_footed_albatross``), while a benchmark has its own list of class
names. :func:`map_labels` matches them after normalisation (case, separators, a leading class
number), optional explicit overrides win, and the probabilities of the model's labels are summed
onto the target classes. The mass that falls on model labels outside the targets is reported
(``mapped_mass``) and, by default, renormalised away.

Standalone on purpose (only torch, numpy, PIL and transformers): other benchmarks (ConceptBed's
oracles) reuse this file as is. Typical use::

    oracle = ClassifierOracle.from_pretrained("Emiel/cub-200-bird-classifier-swin",
                                              target_classes=["Blue_Jay", "Cardinal", ...])
    out = oracle.score(images)          # out.probs: [n_images, n_classes], rows sum to 1
    out.predicted()                     # class name per image
"""

from __future__ import annotations

import importlib.util
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from PIL import Image

from conceptforge.argtypes import check_device
from conceptforge.errors import InvalidArgumentError
from conceptforge.external_errors import weights_error

logger = logging.getLogger(__name__)

#: The paper's CUB oracle (SUB, SUB paper §4.2: 88% CUB test accuracy).
DEFAULT_CUB_CLASSIFIER = "Emiel/cub-200-bird-classifier-swin"


class OracleError(InvalidArgumentError):
    """Bad oracle input (unknown classes, unmappable labels); one line, says what to fix.

    A ``ValueError`` like every :class:`~conceptforge.errors.InvalidArgumentError`.
    """


def normalize_label(name: str) -> str:
    """Canonical key of a class name: drop a leading ``NNN.``/``NNN_`` number, case, separators.

    ``001.Black_footed_Albatross``, ``Black-footed Albatross`` and ``black footed albatross``
    all become ``blackfootedalbatross``.
    """
    text = re.sub(r"^\s*\d+\s*[._\-: ]\s*", "", str(name))
    return re.sub(r"[^0-9a-z]+", "", text.lower())


@dataclass(frozen=True)
class LabelMapping:
    """Which model label indices feed which target class."""

    target_classes: tuple[str, ...]
    sources: tuple[tuple[int, ...], ...]  # per target class: model label indices summed into it
    unmapped_targets: tuple[str, ...] = ()
    unmapped_labels: tuple[str, ...] = ()


def map_labels(
    id2label: Mapping[int, str],
    target_classes: Sequence[str],
    *,
    overrides: Mapping[str, str] | None = None,
    require_all: bool = True,
) -> LabelMapping:
    """Map a model's ``id2label`` onto ``target_classes``.

    ``overrides`` maps a model label to a target class explicitly (for names normalisation
    cannot match). With ``require_all`` every target class must receive at least one label.
    """
    targets = list(target_classes)
    if len(set(targets)) != len(targets):
        raise OracleError("target classes contain duplicates")
    by_key: dict[str, int] = {}
    for index, name in enumerate(targets):
        key = normalize_label(name)
        if key in by_key:
            raise OracleError(f"target classes {targets[by_key[key]]!r} and {name!r} normalise to the same name")
        by_key[key] = index
    overrides = dict(overrides or {})
    for label, target in overrides.items():
        if target not in targets:
            raise OracleError(f"label override {label!r} -> {target!r}: {target!r} is not a target class")
    sources: list[list[int]] = [[] for _ in targets]
    unmapped_labels = []
    for model_index, label in sorted((int(k), v) for k, v in id2label.items()):
        if label in overrides:
            sources[targets.index(overrides[label])].append(model_index)
        elif normalize_label(label) in by_key:
            sources[by_key[normalize_label(label)]].append(model_index)
        else:
            unmapped_labels.append(label)
    unmapped_targets = [name for name, src in zip(targets, sources) if not src]
    if unmapped_targets and require_all:
        shown = ", ".join(unmapped_targets[:5])
        raise OracleError(
            f"{len(unmapped_targets)} target class(es) match no label of the classifier ({shown}"
            f"{', ...' if len(unmapped_targets) > 5 else ''}); pass label overrides or check the class names"
        )
    return LabelMapping(
        tuple(targets), tuple(tuple(s) for s in sources), tuple(unmapped_targets), tuple(unmapped_labels)
    )


@dataclass
class OracleOutput:
    classes: tuple[str, ...]
    probs: np.ndarray  # [n_images, n_classes] float64
    mapped_mass: np.ndarray  # [n_images]: model probability on labels that map to a target class
    model_top_label: list[str] = field(default_factory=list)  # the model's own argmax label

    def predicted(self) -> list[str]:
        return [self.classes[i] for i in self.probs.argmax(axis=1)]


def _load_image_processor(model_id: str, **kwargs: Any) -> Any:
    """``AutoImageProcessor``, on its PIL backend when torchvision is absent (transformers 5)."""
    from transformers import AutoImageProcessor

    if importlib.util.find_spec("torchvision") is None:
        try:
            return AutoImageProcessor.from_pretrained(model_id, backend="pil", **kwargs)
        except TypeError:  # older transformers: no backend argument
            pass
    return AutoImageProcessor.from_pretrained(model_id, **kwargs)


class ClassifierOracle:
    """Class probabilities of an ``AutoModelForImageClassification`` over target class names."""

    def __init__(
        self,
        model: Any,
        image_processor: Any,
        *,
        target_classes: Sequence[str] | None = None,
        label_overrides: Mapping[str, str] | None = None,
        require_all: bool = True,
        renormalize: bool = True,
        model_id: str = "",
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        self.model = model.eval()
        self.image_processor = image_processor
        self.model_id = model_id
        self.device = device or next(model.parameters()).device
        self.dtype = dtype or next(model.parameters()).dtype
        self.renormalize = renormalize
        id2label = {int(k): v for k, v in model.config.id2label.items()}
        if target_classes is None:
            target_classes = [id2label[i] for i in sorted(id2label)]
        self.mapping = map_labels(id2label, target_classes, overrides=label_overrides, require_all=require_all)
        self.id2label = id2label
        if self.mapping.unmapped_labels:
            logger.info(
                "%d classifier labels map to no target class (their mass is %s)",
                len(self.mapping.unmapped_labels),
                "renormalised away" if renormalize else "kept out",
            )
        num_labels = len(id2label)
        matrix = torch.zeros(num_labels, len(self.mapping.target_classes), dtype=torch.float64)
        for target, src in enumerate(self.mapping.sources):
            for model_index in src:
                matrix[model_index, target] = 1.0
        self._matrix = matrix

    @property
    def classes(self) -> tuple[str, ...]:
        return self.mapping.target_classes

    @classmethod
    def from_pretrained(
        cls,
        model_id: str,
        *,
        target_classes: Sequence[str] | None = None,
        label_overrides: Mapping[str, str] | None = None,
        require_all: bool = True,
        renormalize: bool = True,
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        revision: str | None = None,
        trust_remote_code: bool = False,
    ) -> ClassifierOracle:
        from transformers import AutoModelForImageClassification

        device = (
            torch.device(check_device(str(device)))
            if device is not None
            else (torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu"))
        )
        dtype = dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)
        kwargs = {"revision": revision, "trust_remote_code": trust_remote_code}
        try:
            processor = _load_image_processor(model_id, **kwargs)
            model = AutoModelForImageClassification.from_pretrained(model_id, dtype=dtype, **kwargs)
        except OSError as error:
            raise weights_error("classifier", model_id, error) from None
        model.to(device)
        return cls(
            model,
            processor,
            target_classes=target_classes,
            label_overrides=label_overrides,
            require_all=require_all,
            renormalize=renormalize,
            model_id=model_id,
            device=device,
            dtype=dtype,
        )

    @torch.inference_mode()
    def score(self, images: Sequence[Image.Image], *, batch_size: int = 32) -> OracleOutput:
        """Probabilities over :attr:`classes` for every image, ``batch_size`` images per forward."""
        probs, masses, tops = [], [], []
        for start in range(0, len(images), batch_size):
            chunk = [image.convert("RGB") for image in images[start : start + batch_size]]
            inputs = self.image_processor(images=chunk, return_tensors="pt")
            pixel_values = inputs["pixel_values"].to(self.device, self.dtype)
            logits = self.model(pixel_values=pixel_values).logits.float()
            full = torch.softmax(logits.double(), dim=-1).cpu()
            mapped = full @ self._matrix
            mass = mapped.sum(dim=1)
            if self.renormalize:
                mapped = mapped / mass.clamp_min(1e-300).unsqueeze(1)
            probs.append(mapped.numpy())
            masses.append(mass.numpy())
            tops += [self.id2label[int(i)] for i in full.argmax(dim=1)]
        width = len(self.classes)
        return OracleOutput(
            self.classes,
            np.concatenate(probs) if probs else np.zeros((0, width)),
            np.concatenate(masses) if masses else np.zeros(0),
            tops,
        )

    def predict_proba(self, images: Sequence[Image.Image], *, batch_size: int = 32) -> np.ndarray:
        return self.score(images, batch_size=batch_size).probs

    def predict(self, images: Sequence[Image.Image], *, batch_size: int = 32) -> list[str]:
        return self.score(images, batch_size=batch_size).predicted()
