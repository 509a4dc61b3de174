"""CUB_200_2011 on disk: file names, attribute and bird names, where the files are, and the
low-level readers of its text files (see :mod:`conceptforge.cub`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError

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
        raise InvalidArgumentError(
            f"attribute {name!r} is not in CUB's form has_<group>::<value> (e.g. has_crown_color::black)"
        )
    return group, value


def group_words(group: str) -> str:
    """``has_upper_tail_color`` -> ``upper tail color``: how prompts, questions, studies and tables
    write an attribute group (one spelling for every benchmark)."""
    return " ".join(group.removeprefix("has_").replace("_", " ").split())


def value_words(value: str) -> str:
    """``curved_(up_or_down)`` -> ``curved (up or down)``: how they write an attribute value."""
    return " ".join(value.replace("_", " ").split())


def readable_attribute(name: str) -> tuple[str, str]:
    """``has_bill_shape::curved_(up_or_down)`` -> (``bill shape``, ``curved (up or down)``): the
    words prompts and tables use."""
    group, value = split_attribute(name)
    return group_words(group), value_words(value)


def to_cub_attribute(name: str) -> str:
    """``has_crown_color--black`` (published SUB) or ``has_crown_color::black`` -> ``has_crown_color::black``."""
    name = str(name).strip()
    if SEP in name:
        return name
    if PUBLISHED_SEP in name:
        group, value = name.split(PUBLISHED_SEP, 1)
        return f"{group}{SEP}{value}"
    raise InvalidArgumentError(f"attribute {name!r} is not of the form has_<group>::<value> or has_<group>--<value>")


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
    """``Black_and_white_Warbler`` / ``017.Cardinal`` -> ``Black and white Warbler`` / ``Cardinal``
    (how the paper writes birds)."""
    return bird_name(bird).replace("_", " ")


# -- locating files ------------------------------------------------------------------------------
@dataclass(frozen=True)
class CubLayout:
    """Where a CUB directory's files are; ``find`` turns a missing file into one clear line."""

    root: Path

    @classmethod
    def resolve(cls, cub_dir: str | Path) -> CubLayout:
        """``cub_dir`` is the CUB_200_2011 folder or the folder holding it (as extracted)."""
        root = Path(cub_dir).expanduser()
        if not root.is_dir():
            raise DataNotFoundError(f"--cub-dir {root} is not a CUB_200_2011 directory: it does not exist")
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
        raise DataNotFoundError(
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
    raise DataNotFoundError(f"CUB class folder {folder!r} not found under {root}")


# -- low-level readers ---------------------------------------------------------------------------
def read_rows(path: Path) -> list[list[str]]:
    """Whitespace-split non-empty lines; an unreadable file is a one-line error naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise DataNotFoundError(f"cannot read CUB file {path}: {error.strerror or error}") from None
    return [line.split() for line in text.splitlines() if line.strip()]


def read_numbered(path: Path) -> list[str]:
    """Names of a ``<id> <name>`` file with ids 1, 2, 3, ... (list index i holds id i + 1)."""
    names = []
    for number, row in enumerate(read_rows(path), start=1):
        if len(row) != 2 or row[0] != str(number):
            raise DataFormatError(f"{path} line {number}: expected '{number} <name>', got {' '.join(row)!r}")
        names.append(row[1])
    return names


def read_int_pairs(path: Path) -> dict[int, int]:
    """``<image id> <int>`` files (image_class_labels.txt, train_test_split.txt) as a dict."""
    try:
        return {int(row[0]): int(row[1]) for row in read_rows(path)}
    except (ValueError, IndexError):
        raise DataFormatError(f"{path}: expected '<image id> <number>' on every line") from None


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
        raise DataFormatError(f"{path} is not a table of numbers: {error}") from None
    if percent.shape != (num_classes, num_attributes):
        raise DataFormatError(
            f"{path} has shape {percent.shape[0]}x{percent.shape[1]}, expected {num_classes} classes x {num_attributes} attributes"
        )
    return percent


def vote_class_labels(
    image_class_labels: Path, image_attribute_labels: Path, num_classes: int, num_attributes: int
) -> np.ndarray:
    """Class-level labels voted over per-image labels: present where at least half the class's
    images say so (ties count as present, as in the ConceptBottleneck preprocessing)."""
    image_class = {image: label - 1 for image, label in read_int_pairs(image_class_labels).items()}
    counts = np.zeros((num_classes, num_attributes, 2), dtype=np.int64)
    for image, column, present in iter_image_attribute_labels(image_attribute_labels):
        if image in image_class and 0 <= column < num_attributes:
            counts[image_class[image], column, 1 if present else 0] += 1
    return (counts[..., 1] >= counts[..., 0]) & (counts[..., 1] > 0)
