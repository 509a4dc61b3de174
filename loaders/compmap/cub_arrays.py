"""CUB-200-2011 as CompMap's arrays, over the shared reader :class:`conceptforge.cub.CubDataset`.

Why class-level primitives: CUB's per-image attribute annotations are noisy, so CompMap follows
Koh et al. (2020) and denoises them by majority vote within each class — an attribute is present
for every image of a class when at least half of that class's images are annotated with it. The
ground-truth primitive vector of an image is then its class's vector.

The records (images, classes, attribute names) are the shared reader's; this module only lays
them out as the numpy arrays the protocols consume, and checks the files CompMap needs on top of
what the reader requires (the official train/test split and the per-image annotations).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from conceptforge.cub import (
    IMAGE_ATTRIBUTE_LABELS,
    IMAGES,
    TRAIN_TEST_SPLIT,
    CubDataset,
    CubLayout,
    display_name,
    readable_attribute,
)
from conceptforge.errors import DataFormatError, DataNotFoundError

logger = logging.getLogger(__name__)


@dataclass
class CubPrimitives:
    """A :class:`CubDataset` with its labels as arrays, in image-id order (0-based class labels)."""

    dataset: CubDataset
    labels: np.ndarray  # [N] 0-based class index
    is_train: np.ndarray  # [N] bool, the official split
    image_attributes: np.ndarray  # [N, A] 0/1 per-image annotations

    @property
    def image_paths(self) -> list[Path]:
        return [image.path for image in self.dataset.images]

    @property
    def class_names(self) -> list[str]:
        """Readable class names (``Black footed Albatross``) in class-id order."""
        return [display_name(self.dataset.classes[class_id]) for class_id in sorted(self.dataset.classes)]

    @property
    def attributes(self) -> list[str]:
        """CUB's attribute names (``has_bill_shape::dagger``) in column order."""
        return self.dataset.vocabulary.names

    @cached_property
    def groups(self) -> dict[str, np.ndarray]:
        """Readable attribute group -> attribute columns, in first-appearance order (28 groups in CUB)."""
        out: dict[str, list[int]] = {}
        for i, name in enumerate(self.attributes):
            out.setdefault(readable_attribute(name)[0], []).append(i)
        return {g: np.array(idx) for g, idx in out.items()}

    def class_attributes(self, *, threshold: float = 0.5) -> np.ndarray:
        """[num_classes, A] 0/1 majority vote: present when >= ``threshold`` of the class's images say so."""
        num_classes = len(self.dataset.classes)
        frac = np.zeros((num_classes, len(self.attributes)))
        for c in range(num_classes):
            rows = self.image_attributes[self.labels == c]
            if len(rows):
                frac[c] = rows.mean(0)
        return (frac >= threshold).astype(np.float32)

    def gt_primitives(self, *, threshold: float = 0.5) -> np.ndarray:
        """[N, A] class-level ground-truth primitive vector of every image."""
        return self.class_attributes(threshold=threshold)[self.labels]


def cub_primitives(root: str | Path, *, require_images: bool = True) -> CubPrimitives:
    """Read a ``CUB_200_2011`` directory (or the folder holding it) for CompMap.

    CompMap needs the official train/test split and the per-image annotations on top of what
    the shared reader requires, so both are checked here with one clear line each.
    """
    if not Path(root).expanduser().is_dir():
        raise DataNotFoundError(f"CUB directory {root} does not exist; pass the CUB_200_2011 folder as --data-dir")
    layout = CubLayout.resolve(root)
    for required in (IMAGES, TRAIN_TEST_SPLIT, IMAGE_ATTRIBUTE_LABELS):
        layout.find(required)
    dataset = CubDataset.load(layout.root)
    images = dataset.images
    if require_images:
        missing = [image.path for image in images if not image.path.is_file()]
        if missing:
            raise DataNotFoundError(f"{len(missing)} CUB images are missing, e.g. {missing[0]}")
    if any(image.is_train is None for image in images):
        raise DataFormatError(f"{layout.find(TRAIN_TEST_SPLIT)} has no entry for some images")
    class_index = {class_id: i for i, class_id in enumerate(sorted(dataset.classes))}
    logger.info(
        "CUB: %d images, %d classes, %d attributes", len(images), len(class_index), len(dataset.vocabulary.names)
    )
    return CubPrimitives(
        dataset=dataset,
        labels=np.array([class_index[image.class_id] for image in images]),
        is_train=np.array([bool(image.is_train) for image in images]),
        image_attributes=dataset.image_label_matrix(),
    )
