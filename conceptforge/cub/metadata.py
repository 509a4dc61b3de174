"""CUB's attribute vocabulary and class-level metadata (the labels SUB generation and evaluation
need; see :mod:`conceptforge.cub`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np

import conceptforge.cub.files as files  # the CUB file names: files.CLASSES, …
from conceptforge.cub.files import (
    CBM_MIN_CLASS_COUNT,
    MAJORITY_PERCENT,
    SEP,
    CubLayout,
    bird_key,
    bird_name,
    read_class_percent,
    read_numbered,
    split_attribute,
    vote_class_labels,
)
from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError


@dataclass
class CubAttributes:
    """CUB's attribute vocabulary: names in id order and each group's values in id order."""

    names: list[str]  # index i holds attribute id i + 1
    groups: dict[str, list[str]] = field(default_factory=dict)  # group -> values (``black``)

    @classmethod
    def from_names(cls, names: list[str]) -> CubAttributes:
        groups: dict[str, list[str]] = {}
        for name in names:
            group, value = split_attribute(name)
            groups.setdefault(group, []).append(value)
        return cls(list(names), groups)

    def values(self, group: str) -> list[str]:
        if group not in self.groups:
            known = ", ".join(sorted(self.groups)[:6])
            raise InvalidArgumentError(
                f"unknown attribute group {group!r}: CUB has {len(self.groups)} groups ({known}, ...)"
            )
        return list(self.groups[group])

    def group_attributes(self, group: str) -> list[str]:
        """The full names (``has_crown_color::black``) of a group, in id order ([] if unknown)."""
        return [f"{group}{SEP}{value}" for value in self.groups.get(group, [])]

    def index(self, name: str) -> int:
        """0-based column of attribute ``name``."""
        try:
            return self.columns[name]
        except KeyError:
            raise InvalidArgumentError(f"unknown CUB attribute {name!r}") from None

    @cached_property
    def columns(self) -> dict[str, int]:
        """Attribute name -> 0-based column (attribute id - 1)."""
        return {name: i for i, name in enumerate(self.names)}


def load_attributes(cub_dir: str | Path) -> CubAttributes:
    """The vocabulary of ``cub_dir`` (a CUB directory, or its attributes.txt itself)."""
    path = Path(cub_dir).expanduser()
    if not path.is_file():
        path = CubLayout.resolve(path).find(files.ATTRIBUTES)
    names = read_numbered(path)
    if not names:
        raise DataFormatError(f"{path} lists no attributes")
    return CubAttributes.from_names(names)


# -- class-level metadata ------------------------------------------------------------------------
@dataclass
class CubMetadata:
    """CUB's vocabulary, classes and class-level labels: what SUB generation and evaluation need.

    ``class_percent`` (from the percentage table) ranks a group's values, which S- needs;
    ``class_labels`` (voted over per-image labels) are the evaluation's class-level truth. Either is
    ``None`` when its files are absent, and the methods needing it say which files to add.
    """

    root: Path
    vocabulary: CubAttributes
    classes: list[str] = field(default_factory=list)  # bird names in class-id order
    class_percent: np.ndarray | None = None  # (classes, attributes), 0-100
    class_labels: np.ndarray | None = None  # (classes, attributes) bool, majority vote

    @property
    def attributes(self) -> list[str]:
        """``has_<group>::<value>`` names in attribute-id order."""
        return self.vocabulary.names

    @cached_property
    def groups(self) -> dict[str, list[str]]:
        """Group -> its full attribute names, in CUB order."""
        return {group: self.vocabulary.group_attributes(group) for group in self.vocabulary.groups}

    @property
    def index(self) -> dict[str, int]:
        """Attribute name -> 0-based column."""
        return self.vocabulary.columns

    @cached_property
    def _class_index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.classes)}

    @cached_property
    def _class_keys(self) -> dict[str, int]:
        return {bird_key(name): i for i, name in enumerate(self.classes)}

    # -- look-ups --------------------------------------------------------------------------------
    def check_bird(self, bird: str) -> int:
        """Row of ``bird`` spelled exactly as CUB does: names we write into datasets must be canonical."""
        if bird not in self._class_index:
            close = [c for c in self.classes if bird_key(c) == bird_key(bird)]
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise InvalidArgumentError(f"bird {bird!r} is not a CUB class in {self.root / files.CLASSES}{hint}")
        return self._class_index[bird]

    def find_bird(self, bird: str) -> int:
        """Row of ``bird`` in any spelling (``073.Blue_Jay``, ``Blue Jay``): for datasets we read."""
        row = self._class_keys.get(bird_key(bird))
        if row is None:
            raise InvalidArgumentError(f"bird {bird!r} is not a CUB class in {self.root / files.CLASSES}")
        return row

    def check_attribute(self, attribute: str) -> int:
        split_attribute(attribute)
        if attribute not in self.index:
            raise DataFormatError(
                f"attribute {attribute!r} is not in the CUB attribute vocabulary ({len(self.attributes)} attributes "
                f"in {self.root}): the dataset and the CUB metadata do not match"
            )
        return self.index[attribute]

    def group_attributes(self, group: str) -> list[str]:
        return self.vocabulary.group_attributes(group)

    # -- percentage table (generation) -----------------------------------------------------------
    def _percent(self) -> np.ndarray:
        if self.class_percent is None:
            raise DataNotFoundError(f"{self.root} lacks {files.CLASS_ATTRIBUTE_PERCENT} (class-level percentages)")
        return self.class_percent

    def percent(self, bird: str, attribute: str) -> float:
        return float(self._percent()[self.check_bird(bird), self.check_attribute(attribute)])

    def present_in_group(self, bird: str, group: str, threshold: float = MAJORITY_PERCENT) -> list[str]:
        """The group's attributes the bird's class-level (majority-vote) labels mark present."""
        row = self._percent()[self.check_bird(bird)]
        return [a for a in self.group_attributes(group) if row[self.index[a]] >= threshold]

    def removed_attribute(self, bird: str, group: str, threshold: float = MAJORITY_PERCENT) -> str:
        """S-: the most frequent present attribute of the group for the bird ('' if none is present).

        Several values of one group can pass the majority vote (a crown that is black and white);
        the most frequent one is S-, ties going to the lower attribute id.
        """
        present = self.present_in_group(bird, group, threshold)
        if not present:
            return ""
        row = self._percent()[self.check_bird(bird)]
        return max(present, key=lambda a: (row[self.index[a]], -self.index[a]))

    def most_typical_class(self, attribute: str) -> str:
        """The class whose images most often show ``attribute`` (ties: lower class id)."""
        column = self._percent()[:, self.check_attribute(attribute)]
        return self.classes[int(np.argmax(column))]

    # -- voted labels (evaluation) ---------------------------------------------------------------
    def _labels(self, why: str) -> np.ndarray:
        if self.class_labels is None:
            raise DataNotFoundError(
                f"{why} needs {files.CLASSES}, {files.IMAGE_CLASS_LABELS} and {files.IMAGE_ATTRIBUTE_LABELS}, which {self.root} lacks"
            )
        return self.class_labels

    def class_attributes(self, bird: str) -> set[str]:
        """The class-level (majority vote) present attributes of ``bird`` (any spelling)."""
        labels = self._labels("class-level labels")
        return {self.attributes[i] for i in np.flatnonzero(labels[self.find_bird(bird)])}

    def cbm_attributes(self, min_class_count: int = CBM_MIN_CLASS_COUNT) -> list[str]:
        """Koh et al.'s CBM subset: attributes present (class level) in >= ``min_class_count`` classes."""
        keep = self._labels("the 112-attribute CBM subset").sum(axis=0) >= min_class_count
        return [name for name, kept in zip(self.attributes, keep) if kept]


def load_cub(cub_dir: str | Path, *, need: Literal["percent", "votes"] = "percent") -> CubMetadata:
    """Read CUB's class-level metadata from ``cub_dir`` (the CUB_200_2011 folder or the folder holding it).

    ``need="percent"`` (generation): classes.txt and the percentage table must exist; the per-image
    labels are not voted over (3.7 million lines that generation never uses). ``need="votes"``
    (evaluation): only attributes.txt must exist; classes, the percentage table and labels voted over
    the per-image files are read when present, so a vocabulary-only directory still scores the
    parts that need no class labels.
    """
    if need not in ("percent", "votes"):
        raise ValueError(f"need must be 'percent' or 'votes', not {need!r}")
    strict = need == "percent"
    layout = CubLayout.resolve(cub_dir)
    classes_path = layout.find(files.CLASSES, required=strict)
    vocabulary = load_attributes(layout.find(files.ATTRIBUTES))
    classes = [bird_name(name) for name in read_numbered(classes_path)] if classes_path else []
    percent = labels = None
    percent_path = layout.find(files.CLASS_ATTRIBUTE_PERCENT, required=strict)
    if percent_path is not None and classes:
        percent = read_class_percent(percent_path, len(classes), len(vocabulary.names))
    if need == "votes" and classes:
        image_classes = layout.find(files.IMAGE_CLASS_LABELS, required=False)
        image_labels = layout.find(files.IMAGE_ATTRIBUTE_LABELS, required=False)
        if image_classes is not None and image_labels is not None:
            labels = vote_class_labels(image_classes, image_labels, len(classes), len(vocabulary.names))
    return CubMetadata(
        root=layout.root, vocabulary=vocabulary, classes=classes, class_percent=percent, class_labels=labels
    )
