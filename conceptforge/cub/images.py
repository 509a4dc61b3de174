"""CUB's per-image records: images, their classes and labels (what candidate selection needs;
see :mod:`conceptforge.cub`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import conceptforge.cub.files as files  # the CUB file names: files.CLASSES, …
from conceptforge.cub.files import (
    MAJORITY_PERCENT,
    CubLayout,
    bird_name,
    iter_image_attribute_labels,
    read_class_percent,
    read_int_pairs,
    read_numbered,
    read_rows,
)
from conceptforge.cub.metadata import CubAttributes, load_attributes


@dataclass(frozen=True)
class CubImage:
    image_id: int
    path: Path
    class_id: int
    class_name: str  # bird name, e.g. ``Cardinal``
    is_train: bool | None = None  # from train_test_split.txt when present


@dataclass
class CubDataset:
    """Images, classes and labels of a CUB_200_2011 directory: what candidate selection needs."""

    root: Path
    vocabulary: CubAttributes
    classes: dict[int, str]  # class id -> bird name
    images: list[CubImage]

    @classmethod
    def load(cls, cub_dir: str | Path) -> CubDataset:
        layout = CubLayout.resolve(cub_dir)
        root = layout.root
        for name in (files.CLASSES, files.IMAGES, files.IMAGE_CLASS_LABELS):
            layout.find(name)
        vocabulary = load_attributes(layout.find(files.ATTRIBUTES))
        classes = {i: bird_name(name) for i, name in enumerate(read_numbered(root / files.CLASSES), start=1)}
        labels = read_int_pairs(root / files.IMAGE_CLASS_LABELS)
        split_path = layout.find(files.TRAIN_TEST_SPLIT, required=False)
        split = read_int_pairs(split_path) if split_path else {}
        images = []
        for row in read_rows(root / files.IMAGES):
            image_id = int(row[0])
            class_id = labels[image_id]
            is_train = bool(split[image_id]) if image_id in split else None
            images.append(CubImage(image_id, root / "images" / row[1], class_id, classes[class_id], is_train))
        return cls(root, vocabulary, classes, images)

    def image_labels(self) -> dict[int, set[int]]:
        """Per image, the 0-based attribute columns its annotator marked present."""
        path = CubLayout(self.root).find(files.IMAGE_ATTRIBUTE_LABELS)
        present: dict[int, set[int]] = {image.image_id: set() for image in self.images}
        for image, column, is_present in iter_image_attribute_labels(path):
            if is_present:
                present.setdefault(image, set()).add(column)
        return present

    def image_label_matrix(self) -> np.ndarray:
        """[images, attributes] 0/1 float32 per-image labels, rows in ``images`` order."""
        matrix = np.zeros((len(self.images), len(self.vocabulary.names)), dtype=np.float32)
        labels = self.image_labels()
        for row, image in enumerate(self.images):
            columns = [c for c in labels.get(image.image_id, ()) if 0 <= c < matrix.shape[1]]
            matrix[row, columns] = 1.0
        return matrix

    def class_labels(self, *, min_percent: float = MAJORITY_PERCENT) -> dict[int, set[int]]:
        """Per class id, attribute columns present by majority vote (CBM-style class labels)."""
        path = CubLayout(self.root).find(files.CLASS_ATTRIBUTE_PERCENT)
        percent = read_class_percent(path, len(self.classes), len(self.vocabulary.names))
        return {
            class_id: set(np.flatnonzero(row >= min_percent).tolist())
            for class_id, row in zip(sorted(self.classes), percent)
        }
