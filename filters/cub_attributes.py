"""Read what the filters need from a local CUB_200_2011 directory.

Why a reader here: the VQA question lists *every* manifestation of an attribute group (CUB's
312 attributes in 28 groups), attribute-candidate selection needs CUB's per-image labels, and
the filters must not depend on the SUB generator's modules. CUB's license forbids
redistribution, so nothing of it is bundled: the user points at the directory they have.

Files read (all relative to the CUB root, ``CUB_200_2011/``)::

    attributes.txt or attributes/attributes.txt   "<id> has_<group>::<value>"  (312 lines)
    classes.txt                                    "<id> <nnn>.<Class_Name>"
    images.txt                                     "<image id> <relative path>"
    image_class_labels.txt                         "<image id> <class id>"
    attributes/image_attribute_labels.txt          "<image id> <attr id> <present> <certainty> <time>"
    attributes/class_attribute_labels_continuous.txt   200 rows x 312 percentages
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from generators.errors import ConceptforgeError

logger = logging.getLogger(__name__)

ATTRIBUTE_FILES = ("attributes.txt", "attributes/attributes.txt")


def split_attribute(name: str) -> tuple[str, str]:
    """``has_crown_color::black`` -> (``has_crown_color``, ``black``)."""
    group, sep, value = name.partition("::")
    if not sep or not group or not value:
        raise ConceptforgeError(f"attribute {name!r} is not in CUB's form has_<group>::<value>")
    return group, value


def class_short_name(name: str) -> str:
    """``017.Cardinal`` -> ``Cardinal`` (the form the SUB schemas use for birds)."""
    head, dot, tail = name.partition(".")
    return tail if dot and head.isdigit() else name


@dataclass
class CubAttributes:
    """CUB's attribute vocabulary: ids in file order and values per group in file order."""

    names: list[str]  # index i holds attribute id i + 1
    groups: dict[str, list[str]] = field(default_factory=dict)

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
            raise ConceptforgeError(
                f"unknown attribute group {group!r}: CUB has {len(self.groups)} groups ({known}, ...)"
            )
        return list(self.groups[group])

    def index(self, name: str) -> int:
        """0-based column of attribute ``name``."""
        try:
            return self._index[name]
        except KeyError:
            raise ConceptforgeError(f"unknown CUB attribute {name!r}") from None

    @cached_property
    def _index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.names)}


def _read_lines(path: Path) -> list[list[str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConceptforgeError(f"cannot read CUB file {path}: {error.strerror or error}") from None
    return [line.split() for line in text.splitlines() if line.strip()]


def find_attributes_file(cub_dir: str | Path) -> Path:
    """The attribute list inside ``cub_dir`` (or ``cub_dir`` itself when it is that file)."""
    cub_dir = Path(cub_dir)
    if cub_dir.is_file():
        return cub_dir
    for relative in ATTRIBUTE_FILES:
        if (cub_dir / relative).is_file():
            return cub_dir / relative
    raise ConceptforgeError(
        f"{cub_dir} is not a CUB_200_2011 directory: no attributes.txt or attributes/attributes.txt "
        "(pass the folder that holds images.txt and attributes/)"
    )


def load_attributes(cub_dir: str | Path) -> CubAttributes:
    path = find_attributes_file(cub_dir)
    rows = _read_lines(path)
    names = []
    for number, row in enumerate(rows, start=1):
        if len(row) != 2 or row[0] != str(number):
            raise ConceptforgeError(f"{path} line {number}: expected '<id> has_<group>::<value>'")
        split_attribute(row[1])
        names.append(row[1])
    if not names:
        raise ConceptforgeError(f"{path} lists no attributes")
    return CubAttributes.from_names(names)


@dataclass(frozen=True)
class CubImage:
    image_id: int
    path: Path
    class_id: int
    class_name: str  # short form, e.g. ``Cardinal``


@dataclass
class CubDataset:
    """Images, classes and labels of a CUB_200_2011 directory (loaded on demand)."""

    root: Path
    attributes: CubAttributes
    classes: dict[int, str]
    images: list[CubImage]

    @classmethod
    def load(cls, cub_dir: str | Path) -> "CubDataset":
        root = Path(cub_dir)
        attributes = load_attributes(root)
        required = ["classes.txt", "images.txt", "image_class_labels.txt"]
        missing = [name for name in required if not (root / name).is_file()]
        if missing:
            raise ConceptforgeError(f"{root} is not a CUB_200_2011 directory: missing {', '.join(missing)}")
        classes = {int(row[0]): class_short_name(row[1]) for row in _read_lines(root / "classes.txt")}
        labels = {int(row[0]): int(row[1]) for row in _read_lines(root / "image_class_labels.txt")}
        images = []
        for row in _read_lines(root / "images.txt"):
            image_id = int(row[0])
            class_id = labels[image_id]
            images.append(CubImage(image_id, root / "images" / row[1], class_id, classes[class_id]))
        return cls(root, attributes, classes, images)

    def image_labels(self) -> dict[int, set[int]]:
        """Per image, the 0-based attribute columns its annotator marked present.

        Some lines of CUB's file carry extra fields (a known quirk); only the first three count.
        """
        path = self.root / "attributes" / "image_attribute_labels.txt"
        if not path.is_file():
            raise ConceptforgeError(f"{self.root} lacks attributes/image_attribute_labels.txt (per-image labels)")
        present: dict[int, set[int]] = {image.image_id: set() for image in self.images}
        for row in _read_lines(path):
            if len(row) >= 3 and row[2] == "1":
                present.setdefault(int(row[0]), set()).add(int(row[1]) - 1)
        return present

    def class_labels(self, *, min_percent: float = 50.0) -> dict[int, set[int]]:
        """Per class id, attribute columns present by majority vote (CBM-style class labels)."""
        path = self.root / "attributes" / "class_attribute_labels_continuous.txt"
        if not path.is_file():
            raise ConceptforgeError(
                f"{self.root} lacks attributes/class_attribute_labels_continuous.txt (class-level labels)"
            )
        rows = _read_lines(path)
        return {
            class_id: {j for j, value in enumerate(row) if float(value) >= min_percent}
            for class_id, row in zip(sorted(self.classes), rows)
        }
