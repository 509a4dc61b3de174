"""CUB-200-2011 attribute metadata read from a local CUB directory.

What SUB evaluation needs from CUB: the 312 attribute names and their 28 groups (the label set
offered to VLMs, paper 001 Appendix F), the class-level labels obtained by majority vote over a
class's images (the "cleaner CBM class-aggregated labels" that define S−), and the 112-attribute
CBM subset of Koh et al. (attributes present, after the vote, in at least 10 classes).

Files read (the layout of ``CUB_200_2011.tgz``; ``attributes.txt`` may sit beside or inside the
``CUB_200_2011`` folder): ``attributes.txt`` (``1 has_bill_shape::curved_(up_or_down)``),
``classes.txt`` (``1 001.Black_footed_Albatross``), ``image_class_labels.txt`` and
``attributes/image_attribute_labels.txt`` (``image attribute is_present certainty time``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from generators.errors import ConceptforgeError

SEP = "::"
PUBLISHED_SEP = "--"
CBM_MIN_CLASS_COUNT = 10


def to_cub_attribute(name: str) -> str:
    """``has_crown_color--black`` (published SUB) or ``has_crown_color::black`` -> ``has_crown_color::black``."""
    name = name.strip()
    if SEP in name:
        return name
    if PUBLISHED_SEP in name:
        group, value = name.split(PUBLISHED_SEP, 1)
        return f"{group}{SEP}{value}"
    raise ConceptforgeError(f"attribute {name!r} is not of the form has_<group>::<value> or has_<group>--<value>")


def attribute_group(name: str) -> str:
    return to_cub_attribute(name).split(SEP, 1)[0]


def attribute_value(name: str) -> str:
    return to_cub_attribute(name).split(SEP, 1)[1]


def normalize_bird(name: str) -> str:
    """``001.Black_footed_Albatross`` / ``Black footed Albatross`` -> ``Black_footed_Albatross``."""
    name = re.sub(r"^\d+\.", "", str(name).strip())
    return re.sub(r"\s+", "_", name)


def _bird_key(name: str) -> str:
    """Match ``Black-footed Albatross``, ``Black_footed_Albatross`` and ``001.Black_footed_Albatross``."""
    return re.sub(r"[^a-z0-9]", "", normalize_bird(name).lower())


def _find(root: Path, relative: str) -> Path | None:
    for base in (root, root / "CUB_200_2011", root.parent):
        if (base / relative).is_file():
            return base / relative
    return None


@dataclass
class CubMetadata:
    """Attribute vocabulary and (optionally) class-level labels of CUB."""

    attributes: list[str]
    classes: list[str] = field(default_factory=list)  # normalised names, CUB order
    class_labels: np.ndarray | None = None  # [num_classes, num_attributes] bool, majority vote

    @classmethod
    def from_dir(cls, cub_dir: str | Path) -> "CubMetadata":
        root = Path(cub_dir)
        if not root.is_dir():
            raise ConceptforgeError(f"CUB directory {root} does not exist")
        attributes_file = _find(root, "attributes.txt") or _find(root, "attributes/attributes.txt")
        if attributes_file is None:
            raise ConceptforgeError(f"no attributes.txt under {root}: pass the extracted CUB_200_2011 directory")
        attributes = [line.split(maxsplit=1)[1].strip() for line in attributes_file.read_text().splitlines() if line.strip()]
        classes: list[str] = []
        class_labels = None
        classes_file = _find(root, "classes.txt")
        if classes_file is not None:
            classes = [normalize_bird(line.split(maxsplit=1)[1]) for line in classes_file.read_text().splitlines() if line.strip()]
        image_classes_file = _find(root, "image_class_labels.txt")
        labels_file = _find(root, "attributes/image_attribute_labels.txt")
        if classes and image_classes_file is not None and labels_file is not None:
            class_labels = _majority_vote(image_classes_file, labels_file, len(classes), len(attributes))
        return cls(attributes=attributes, classes=classes, class_labels=class_labels)

    @cached_property
    def groups(self) -> dict[str, list[str]]:
        """Group -> its attributes, in CUB order."""
        groups: dict[str, list[str]] = defaultdict(list)
        for name in self.attributes:
            groups[attribute_group(name)].append(name)
        return dict(groups)

    @cached_property
    def _class_rows(self) -> dict[str, int]:
        return {_bird_key(name): row for row, name in enumerate(self.classes)}

    @cached_property
    def index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.attributes)}

    def check_attribute(self, name: str) -> None:
        if name not in self.index:
            raise ConceptforgeError(
                f"attribute {name!r} is not in the CUB attribute vocabulary ({len(self.attributes)} attributes): "
                "the dataset and the CUB metadata do not match"
            )

    def class_attributes(self, bird: str) -> set[str]:
        """The class-level (majority vote) present attributes of ``bird``."""
        if self.class_labels is None:
            raise ConceptforgeError(
                "the CUB directory lacks classes.txt / image_class_labels.txt / attributes/image_attribute_labels.txt, "
                "needed for class-level labels"
            )
        row = self._class_rows.get(_bird_key(bird))
        if row is None:
            raise ConceptforgeError(f"bird {bird!r} is not a CUB class")
        return {self.attributes[i] for i in np.flatnonzero(self.class_labels[row])}

    def cbm_attributes(self, min_class_count: int = CBM_MIN_CLASS_COUNT) -> list[str]:
        """Koh et al.'s CBM subset: attributes present (class level) in >= ``min_class_count`` classes."""
        if self.class_labels is None:
            raise ConceptforgeError("the 112-attribute CBM subset needs CUB's image_attribute_labels.txt")
        keep = self.class_labels.sum(axis=0) >= min_class_count
        return [name for name, kept in zip(self.attributes, keep) if kept]


def _majority_vote(image_classes_file: Path, labels_file: Path, num_classes: int, num_attributes: int) -> np.ndarray:
    """Class-level labels: present where at least half the class's images say so (ties count as
    present, as in the ConceptBottleneck preprocessing)."""
    image_class: dict[int, int] = {}
    for line in image_classes_file.read_text().splitlines():
        if line.strip():
            image, label = line.split()[:2]
            image_class[int(image)] = int(label) - 1
    counts = np.zeros((num_classes, num_attributes, 2), dtype=np.int64)
    with open(labels_file) as handle:
        for line in handle:
            parts = line.split()
            if len(parts) < 3:
                continue
            image, attribute, present = int(parts[0]), int(parts[1]) - 1, int(parts[2])
            if image in image_class and 0 <= attribute < num_attributes:
                counts[image_class[image], attribute, 1 if present else 0] += 1
    return (counts[..., 1] >= counts[..., 0]) & (counts[..., 1] > 0)
