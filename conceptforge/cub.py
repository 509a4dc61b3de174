"""The one reader of a local CUB_200_2011 directory (Wah et al., 2011).

Why one module: SUB generation, SUB filtering, candidate selection, evaluation and annotation all
need parts of CUB (attribute vocabulary, classes, class-level labels, per-image records). CUB's
license forbids redistribution, so nothing of it is bundled: users point ``--cub-dir`` at the copy
they have, and every tool must accept the same layouts and fail with the same one-line errors.

Files (relative to the CUB root ``CUB_200_2011/``; ``--cub-dir`` may also name the folder holding
it, and ``attributes.txt`` may sit beside the root as it does in the tarball)::

    attributes.txt or attributes/attributes.txt     "<id> has_<group>::<value>"   (312 lines, 28 groups)
    classes.txt                                      "<id> <nnn>.<Class_Name>"      (200 lines)
    images.txt                                       "<image id> <relative path under images/>"
    image_class_labels.txt                           "<image id> <class id>"
    train_test_split.txt                             "<image id> <1 = train, 0 = test>"
    attributes/image_attribute_labels.txt            "<image id> <attr id> <present> <certainty> <time>"
    attributes/class_attribute_labels_continuous.txt 200 rows x 312 percentages

Class-level labels follow the majority vote used by CBMs (Koh et al.): an attribute is present for
a class when at least half of its images show it. Two readers exist because CUB ships two sources:
the percentage table (what generation uses; it also ranks values for S-) and the per-image labels
(what evaluation votes over; it works on directories without the percentage table).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np

from conceptforge.errors import ConceptforgeError

ROOT_NAME = "CUB_200_2011"
ATTRIBUTES = "attributes.txt"
CLASSES = "classes.txt"
IMAGES = "images.txt"
IMAGE_CLASS_LABELS = "image_class_labels.txt"
TRAIN_TEST_SPLIT = "train_test_split.txt"
IMAGE_ATTRIBUTE_LABELS = "attributes/image_attribute_labels.txt"
CLASS_ATTRIBUTE_PERCENT = "attributes/class_attribute_labels_continuous.txt"

SEP = "::"  # CUB's own form: has_crown_color::black
PUBLISHED_SEP = "--"  # the published SUB dataset's form: has_crown_color--black
MAJORITY_PERCENT = 50.0
CBM_MIN_CLASS_COUNT = 10  # Koh et al.: keep attributes present in >= 10 classes -> 112 attributes


# -- names ---------------------------------------------------------------------------------------
def split_attribute(name: str) -> tuple[str, str]:
    """``has_crown_color::black`` -> (``has_crown_color``, ``black``); anything else is a user error."""
    group, sep, value = name.partition(SEP)
    if not sep or not group.startswith("has_") or not value:
        raise ConceptforgeError(f"attribute {name!r} is not in CUB's form has_<group>::<value> (e.g. has_crown_color::black)")
    return group, value


def readable_attribute(name: str) -> tuple[str, str]:
    """``has_bill_shape::curved_(up_or_down)`` -> (``bill shape``, ``curved (up or down)``): the
    words prompts and tables use."""
    group, value = split_attribute(name)
    return group[len("has_"):].replace("_", " ").strip(), value.replace("_", " ").strip()


def to_cub_attribute(name: str) -> str:
    """``has_crown_color--black`` (published SUB) or ``has_crown_color::black`` -> ``has_crown_color::black``."""
    name = str(name).strip()
    if SEP in name:
        return name
    if PUBLISHED_SEP in name:
        group, value = name.split(PUBLISHED_SEP, 1)
        return f"{group}{SEP}{value}"
    raise ConceptforgeError(f"attribute {name!r} is not of the form has_<group>::<value> or has_<group>--<value>")


def attribute_group(name: str) -> str:
    """The group of an attribute in either form (``has_crown_color--black`` -> ``has_crown_color``)."""
    return to_cub_attribute(name).split(SEP, 1)[0]


def attribute_value(name: str) -> str:
    """The value of an attribute in either form (``has_crown_color--black`` -> ``black``)."""
    return to_cub_attribute(name).split(SEP, 1)[1]


def bird_name(name: str) -> str:
    """``017.Cardinal`` / ``Black footed Albatross`` -> ``Cardinal`` / ``Black_footed_Albatross``.

    The class name without CUB's number, words joined by ``_``: the bird names every conceptforge
    schema uses.
    """
    name = re.sub(r"^\d+\.", "", str(name).strip())
    return re.sub(r"\s+", "_", name)


def bird_key(name: str) -> str:
    """A spelling-tolerant key: ``Black-footed Albatross``, ``Black_footed_Albatross`` and
    ``001.Black_footed_Albatross`` match (published datasets spell birds in all these ways)."""
    return re.sub(r"[^a-z0-9]", "", bird_name(name).lower())


def display_name(bird: str) -> str:
    """``Black_and_white_Warbler`` -> ``Black and white Warbler`` (how the paper writes birds)."""
    return bird.replace("_", " ")


# -- locating files ------------------------------------------------------------------------------
@dataclass(frozen=True)
class CubLayout:
    """Where a CUB directory's files are; ``find`` turns a missing file into one clear line."""

    root: Path

    @classmethod
    def resolve(cls, cub_dir: str | Path) -> "CubLayout":
        """``cub_dir`` is the CUB_200_2011 folder or the folder holding it (as extracted)."""
        root = Path(cub_dir).expanduser()
        if not root.is_dir():
            raise ConceptforgeError(f"--cub-dir {root} is not a CUB_200_2011 directory: it does not exist")
        if not (root / CLASSES).is_file() and (root / ROOT_NAME).is_dir():
            root = root / ROOT_NAME
        return cls(root)

    def candidates(self, relative: str) -> list[Path]:
        if relative == ATTRIBUTES:  # beside the root in the tarball, inside it in some copies
            return [self.root / ATTRIBUTES, self.root / "attributes" / ATTRIBUTES, self.root.parent / ATTRIBUTES]
        return [self.root / relative]

    def find(self, relative: str, *, required: bool = True) -> Path | None:
        """The file ``relative`` (one of this module's constants); ``None`` when optional and absent."""
        candidates = self.candidates(relative)
        for candidate in candidates:
            if candidate.is_file():
                return candidate
        if not required:
            return None
        tried = ", ".join(str(c) for c in candidates)
        raise ConceptforgeError(
            f"no {relative} under {self.root}: it is not a CUB_200_2011 directory, or is missing {relative} (looked for {tried})"
        )


def class_image_dir(root: str | Path, folder: str) -> Path:
    """The image folder of class ``folder`` (``017.Cardinal``) under ``root``.

    ``root`` may be CUB's ``images/`` folder itself (what ConceptBed specs name ``cub_root``), the
    CUB_200_2011 folder or the folder holding it: users point at whichever they have.
    """
    root = Path(root).expanduser()
    for candidate in (root / folder, root / "images" / folder, root / ROOT_NAME / "images" / folder):
        if candidate.is_dir():
            return candidate
    raise ConceptforgeError(f"CUB class folder {folder!r} not found under {root}")


# -- low-level readers ---------------------------------------------------------------------------
def read_rows(path: Path) -> list[list[str]]:
    """Whitespace-split non-empty lines; an unreadable file is a one-line error naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConceptforgeError(f"cannot read CUB file {path}: {error.strerror or error}") from None
    return [line.split() for line in text.splitlines() if line.strip()]


def read_numbered(path: Path) -> list[str]:
    """Names of a ``<id> <name>`` file with ids 1, 2, 3, ... (list index i holds id i + 1)."""
    names = []
    for number, row in enumerate(read_rows(path), start=1):
        if len(row) != 2 or row[0] != str(number):
            raise ConceptforgeError(f"{path} line {number}: expected '{number} <name>', got {' '.join(row)!r}")
        names.append(row[1])
    return names


def read_int_pairs(path: Path) -> dict[int, int]:
    """``<image id> <int>`` files (image_class_labels.txt, train_test_split.txt) as a dict."""
    try:
        return {int(row[0]): int(row[1]) for row in read_rows(path)}
    except (ValueError, IndexError):
        raise ConceptforgeError(f"{path}: expected '<image id> <number>' on every line") from None


def iter_image_attribute_labels(path: Path) -> Iterator[tuple[int, int, bool]]:
    """(image id, 0-based attribute column, present) per line of image_attribute_labels.txt.

    Some lines of CUB's file carry extra fields (a known quirk); only the first three count.
    Streams, because the real file has 3.7 million lines.
    """
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) >= 3:
                yield int(parts[0]), int(parts[1]) - 1, parts[2] == "1"


def read_class_percent(path: Path, num_classes: int, num_attributes: int) -> np.ndarray:
    """class_attribute_labels_continuous.txt as a (classes, attributes) array of percentages."""
    try:
        percent = np.loadtxt(path, dtype=np.float64, ndmin=2)
    except ValueError as error:
        raise ConceptforgeError(f"{path} is not a table of numbers: {error}") from None
    if percent.shape != (num_classes, num_attributes):
        raise ConceptforgeError(
            f"{path} has shape {percent.shape[0]}x{percent.shape[1]}, expected {num_classes} classes x {num_attributes} attributes"
        )
    return percent


def vote_class_labels(image_class_labels: Path, image_attribute_labels: Path, num_classes: int, num_attributes: int) -> np.ndarray:
    """Class-level labels voted over per-image labels: present where at least half the class's
    images say so (ties count as present, as in the ConceptBottleneck preprocessing)."""
    image_class = {image: label - 1 for image, label in read_int_pairs(image_class_labels).items()}
    counts = np.zeros((num_classes, num_attributes, 2), dtype=np.int64)
    for image, column, present in iter_image_attribute_labels(image_attribute_labels):
        if image in image_class and 0 <= column < num_attributes:
            counts[image_class[image], column, 1 if present else 0] += 1
    return (counts[..., 1] >= counts[..., 0]) & (counts[..., 1] > 0)


# -- attribute vocabulary ------------------------------------------------------------------------
@dataclass
class CubAttributes:
    """CUB's attribute vocabulary: names in id order and each group's values in id order."""

    names: list[str]  # index i holds attribute id i + 1
    groups: dict[str, list[str]] = field(default_factory=dict)  # group -> values (``black``)

    @classmethod
    def from_names(cls, names: list[str]) -> "CubAttributes":
        groups: dict[str, list[str]] = {}
        for name in names:
            group, value = split_attribute(name)
            groups.setdefault(group, []).append(value)
        return cls(list(names), groups)

    def values(self, group: str) -> list[str]:
        if group not in self.groups:
            known = ", ".join(sorted(self.groups)[:6])
            raise ConceptforgeError(f"unknown attribute group {group!r}: CUB has {len(self.groups)} groups ({known}, ...)")
        return list(self.groups[group])

    def group_attributes(self, group: str) -> list[str]:
        """The full names (``has_crown_color::black``) of a group, in id order ([] if unknown)."""
        return [f"{group}{SEP}{value}" for value in self.groups.get(group, [])]

    def index(self, name: str) -> int:
        """0-based column of attribute ``name``."""
        try:
            return self.columns[name]
        except KeyError:
            raise ConceptforgeError(f"unknown CUB attribute {name!r}") from None

    @cached_property
    def columns(self) -> dict[str, int]:
        """Attribute name -> 0-based column (attribute id - 1)."""
        return {name: i for i, name in enumerate(self.names)}


def load_attributes(cub_dir: str | Path) -> CubAttributes:
    """The vocabulary of ``cub_dir`` (a CUB directory, or its attributes.txt itself)."""
    path = Path(cub_dir).expanduser()
    if not path.is_file():
        path = CubLayout.resolve(path).find(ATTRIBUTES)
    names = read_numbered(path)
    if not names:
        raise ConceptforgeError(f"{path} lists no attributes")
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
            raise ConceptforgeError(f"bird {bird!r} is not a CUB class in {self.root / CLASSES}{hint}")
        return self._class_index[bird]

    def find_bird(self, bird: str) -> int:
        """Row of ``bird`` in any spelling (``073.Blue_Jay``, ``Blue Jay``): for datasets we read."""
        row = self._class_keys.get(bird_key(bird))
        if row is None:
            raise ConceptforgeError(f"bird {bird!r} is not a CUB class in {self.root / CLASSES}")
        return row

    def check_attribute(self, attribute: str) -> int:
        split_attribute(attribute)
        if attribute not in self.index:
            raise ConceptforgeError(
                f"attribute {attribute!r} is not in the CUB attribute vocabulary ({len(self.attributes)} attributes "
                f"in {self.root}): the dataset and the CUB metadata do not match"
            )
        return self.index[attribute]

    def group_attributes(self, group: str) -> list[str]:
        return self.vocabulary.group_attributes(group)

    # -- percentage table (generation) -----------------------------------------------------------
    def _percent(self) -> np.ndarray:
        if self.class_percent is None:
            raise ConceptforgeError(f"{self.root} lacks {CLASS_ATTRIBUTE_PERCENT} (class-level percentages)")
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
            raise ConceptforgeError(
                f"{why} needs {CLASSES}, {IMAGE_CLASS_LABELS} and {IMAGE_ATTRIBUTE_LABELS}, which {self.root} lacks"
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
    classes_path = layout.find(CLASSES, required=strict)
    vocabulary = load_attributes(layout.find(ATTRIBUTES))
    classes = [bird_name(name) for name in read_numbered(classes_path)] if classes_path else []
    percent = labels = None
    percent_path = layout.find(CLASS_ATTRIBUTE_PERCENT, required=strict)
    if percent_path is not None and classes:
        percent = read_class_percent(percent_path, len(classes), len(vocabulary.names))
    if need == "votes" and classes:
        image_classes = layout.find(IMAGE_CLASS_LABELS, required=False)
        image_labels = layout.find(IMAGE_ATTRIBUTE_LABELS, required=False)
        if image_classes is not None and image_labels is not None:
            labels = vote_class_labels(image_classes, image_labels, len(classes), len(vocabulary.names))
    return CubMetadata(root=layout.root, vocabulary=vocabulary, classes=classes, class_percent=percent, class_labels=labels)


# -- per-image records ---------------------------------------------------------------------------
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
    def load(cls, cub_dir: str | Path) -> "CubDataset":
        layout = CubLayout.resolve(cub_dir)
        root = layout.root
        for name in (CLASSES, IMAGES, IMAGE_CLASS_LABELS):
            layout.find(name)
        vocabulary = load_attributes(layout.find(ATTRIBUTES))
        classes = {i: bird_name(name) for i, name in enumerate(read_numbered(root / CLASSES), start=1)}
        labels = read_int_pairs(root / IMAGE_CLASS_LABELS)
        split_path = layout.find(TRAIN_TEST_SPLIT, required=False)
        split = read_int_pairs(split_path) if split_path else {}
        images = []
        for row in read_rows(root / IMAGES):
            image_id = int(row[0])
            class_id = labels[image_id]
            is_train = bool(split[image_id]) if image_id in split else None
            images.append(CubImage(image_id, root / "images" / row[1], class_id, classes[class_id], is_train))
        return cls(root, vocabulary, classes, images)

    def image_labels(self) -> dict[int, set[int]]:
        """Per image, the 0-based attribute columns its annotator marked present."""
        path = CubLayout(self.root).find(IMAGE_ATTRIBUTE_LABELS)
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
        path = CubLayout(self.root).find(CLASS_ATTRIBUTE_PERCENT)
        percent = read_class_percent(path, len(self.classes), len(self.vocabulary.names))
        return {class_id: set(np.flatnonzero(row >= min_percent).tolist()) for class_id, row in zip(sorted(self.classes), percent)}
