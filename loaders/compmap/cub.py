"""CUB-200-2011 from a local ``CUB_200_2011`` directory: images, classes, attributes, split.

Why class-level primitives: CUB's per-image attribute annotations are noisy, so paper 002 follows
Koh et al. (2020) and denoises them by majority vote within each class — an attribute is present
for every image of a class when at least half of that class's images are annotated with it. The
ground-truth primitive vector of an image is then its class's vector.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from conceptforge.cub import (
    IMAGE_ATTRIBUTE_LABELS,
    IMAGES,
    TRAIN_TEST_SPLIT,
    CubDataset,
    CubLayout,
    display_name,
    iter_image_attribute_labels,
    split_attribute,
)
from conceptforge.errors import DataFormatError, DataNotFoundError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CubAttribute:
    """One of the 312 binary attributes, e.g. group ``bill shape``, value ``curved (up or down)``."""

    name: str  # as CUB writes it: has_bill_shape::curved_(up_or_down)
    group: str
    value: str


@dataclass
class CubData:
    """Everything CompMap needs from CUB, in image-id order (0-based labels)."""

    root: Path
    image_ids: np.ndarray
    image_paths: list[Path]
    labels: np.ndarray
    class_names: list[str]
    is_train: np.ndarray
    attributes: list[CubAttribute]
    image_attributes: np.ndarray  # [N, A] 0/1 per-image annotations

    @property
    def groups(self) -> dict[str, np.ndarray]:
        """Attribute group -> attribute indices, in first-appearance order (28 groups in CUB)."""
        out: dict[str, list[int]] = {}
        for i, attr in enumerate(self.attributes):
            out.setdefault(attr.group, []).append(i)
        return {g: np.array(idx) for g, idx in out.items()}

    def class_attributes(self, *, threshold: float = 0.5) -> np.ndarray:
        """[num_classes, A] 0/1 majority vote: present when >= ``threshold`` of the class's images say so."""
        num_classes = len(self.class_names)
        frac = np.zeros((num_classes, len(self.attributes)))
        for c in range(num_classes):
            rows = self.image_attributes[self.labels == c]
            if len(rows):
                frac[c] = rows.mean(0)
        return (frac >= threshold).astype(np.float32)

    def gt_primitives(self, *, threshold: float = 0.5) -> np.ndarray:
        """[N, A] class-level ground-truth primitive vector of every image."""
        return self.class_attributes(threshold=threshold)[self.labels]


def _pretty(text: str) -> str:
    return text.replace("_", " ").strip()


def parse_attribute_name(name: str) -> CubAttribute:
    """``has_bill_shape::curved_(up_or_down)`` -> group ``bill shape``, value ``curved (up or down)``."""
    group, value = split_attribute(name)
    return CubAttribute(name=name, group=_pretty(group[len("has_"):]), value=_pretty(value))


def load_cub(root: str | Path, *, require_images: bool = True) -> CubData:
    """Read a ``CUB_200_2011`` directory (or the folder holding it) through :mod:`generators.cub`.

    CompMap needs the official train/test split and the per-image annotations on top of what
    the shared reader gives, so both are required here.
    """
    if not Path(root).expanduser().is_dir():
        raise DataNotFoundError(f"CUB directory {root} does not exist; pass the CUB_200_2011 folder as --data-dir")
    layout = CubLayout.resolve(root)
    for required in (IMAGES, TRAIN_TEST_SPLIT, IMAGE_ATTRIBUTE_LABELS):
        layout.find(required)
    dataset = CubDataset.load(layout.root)
    attributes = [parse_attribute_name(name) for name in dataset.vocabulary.names]
    class_ids = sorted(dataset.classes)
    class_index = {class_id: i for i, class_id in enumerate(class_ids)}
    images = dataset.images
    if require_images:
        missing = [image.path for image in images if not image.path.is_file()]
        if missing:
            raise DataNotFoundError(f"{len(missing)} CUB images are missing, e.g. {missing[0]}")
    if any(image.is_train is None for image in images):
        raise DataFormatError(f"{layout.find(TRAIN_TEST_SPLIT)} has no entry for some images")
    image_ids = np.array([image.image_id for image in images])
    row_of = {int(iid): i for i, iid in enumerate(image_ids)}
    image_attributes = np.zeros((len(images), len(attributes)), dtype=np.float32)
    for image_id, column, present in iter_image_attribute_labels(layout.find(IMAGE_ATTRIBUTE_LABELS)):
        if image_id in row_of and 0 <= column < len(attributes):
            image_attributes[row_of[image_id], column] = float(present)
    logger.info("CUB: %d images, %d classes, %d attributes", len(images), len(class_ids), len(attributes))
    return CubData(
        root=layout.root,
        image_ids=image_ids,
        image_paths=[image.path for image in images],
        labels=np.array([class_index[image.class_id] for image in images]),
        class_names=[display_name(dataset.classes[class_id]) for class_id in class_ids],
        is_train=np.array([bool(image.is_train) for image in images]),
        attributes=attributes,
        image_attributes=image_attributes,
    )
