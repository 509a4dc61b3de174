"""Read the metadata of a local CUB_200_2011 directory: classes, attributes, class-level labels.

Why local: CUB is distributed by Caltech under research terms and is not on the Hub in its
original layout; users already have it. Only three text files are needed::

    CUB_200_2011/classes.txt                                         "17 017.Cardinal"
    attributes.txt  (beside CUB_200_2011/, as in the tarball;         "1 has_bill_shape::dagger"
                     CUB_200_2011/attributes.txt or
                     CUB_200_2011/attributes/attributes.txt also work)
    CUB_200_2011/attributes/class_attribute_labels_continuous.txt    200 rows x 312 percentages

Class-level labels follow the majority vote used by CBMs (Koh et al.): an attribute is present
for a class when at least 50% of its images show it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from generators.errors import ConceptforgeError

CLASSES = "classes.txt"
ATTRIBUTES = "attributes.txt"
CLASS_LABELS = Path("attributes") / "class_attribute_labels_continuous.txt"
MAJORITY_PERCENT = 50.0


def class_name(folder_name: str) -> str:
    """``017.Cardinal`` -> ``Cardinal`` (the bird names used everywhere in conceptforge)."""
    return folder_name.split(".", 1)[1] if "." in folder_name and folder_name.split(".", 1)[0].isdigit() else folder_name


def display_name(bird: str) -> str:
    """``Black_and_white_Warbler`` -> ``Black and white Warbler`` (how the paper writes birds)."""
    return bird.replace("_", " ")


def parse_attribute(attribute: str) -> tuple[str, str]:
    """``has_crown_color::black`` -> (``has_crown_color``, ``black``)."""
    group, sep, value = attribute.partition("::")
    if not sep or not group.startswith("has_") or not value:
        raise ConceptforgeError(f"attribute {attribute!r} is not in CUB's form has_<group>::<value> (e.g. has_crown_color::black)")
    return group, value


@dataclass
class CUBMetadata:
    """CUB's class names, attribute names and class-level attribute percentages."""

    root: Path
    classes: list[str]  # bird names without number, in class-id order
    attributes: list[str]  # has_<group>::<value>, in attribute-id order
    class_percent: np.ndarray  # (num_classes, num_attributes), 0-100
    _class_index: dict[str, int] = field(default_factory=dict, repr=False)
    _attribute_index: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._class_index = {name: i for i, name in enumerate(self.classes)}
        self._attribute_index = {name: i for i, name in enumerate(self.attributes)}

    # -- look-ups --------------------------------------------------------------------------------
    def check_bird(self, bird: str) -> int:
        if bird not in self._class_index:
            close = [c for c in self.classes if c.lower() == bird.lower().replace(" ", "_")]
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConceptforgeError(f"bird {bird!r} is not a CUB class in {self.root / CLASSES}{hint}")
        return self._class_index[bird]

    def check_attribute(self, attribute: str) -> int:
        parse_attribute(attribute)
        if attribute not in self._attribute_index:
            raise ConceptforgeError(f"attribute {attribute!r} is not among the {len(self.attributes)} CUB attributes in {self.root}")
        return self._attribute_index[attribute]

    def group_attributes(self, group: str) -> list[str]:
        return [a for a in self.attributes if a.startswith(group + "::")]

    def percent(self, bird: str, attribute: str) -> float:
        return float(self.class_percent[self.check_bird(bird), self.check_attribute(attribute)])

    def present_in_group(self, bird: str, group: str, threshold: float = MAJORITY_PERCENT) -> list[str]:
        """The group's attributes the bird's class-level (majority-vote) labels mark present."""
        row = self.class_percent[self.check_bird(bird)]
        return [a for a in self.group_attributes(group) if row[self._attribute_index[a]] >= threshold]

    def removed_attribute(self, bird: str, group: str, threshold: float = MAJORITY_PERCENT) -> str:
        """S-: the most frequent present attribute of the group for the bird ('' if none is present).

        Several values of one group can pass the majority vote (a crown that is black and white);
        the most frequent one is S-, ties going to the lower attribute id.
        """
        present = self.present_in_group(bird, group, threshold)
        if not present:
            return ""
        row = self.class_percent[self.check_bird(bird)]
        return max(present, key=lambda a: (row[self._attribute_index[a]], -self._attribute_index[a]))

    def most_typical_class(self, attribute: str) -> str:
        """The class whose images most often show ``attribute`` (ties: lower class id)."""
        column = self.class_percent[:, self.check_attribute(attribute)]
        return self.classes[int(np.argmax(column))]


def _find(root: Path, candidates: list[Path], what: str) -> Path:
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise ConceptforgeError(f"--cub-dir {root} is not a CUB_200_2011 directory: missing {what} (looked for {tried})")


def load_cub(cub_dir: str | Path) -> CUBMetadata:
    """Read CUB's metadata from ``cub_dir`` (the CUB_200_2011 folder or the folder holding it)."""
    root = Path(cub_dir).expanduser()
    if not root.is_dir():
        raise ConceptforgeError(f"--cub-dir {root} does not exist; point it at your CUB_200_2011 directory")
    if not (root / CLASSES).is_file() and (root / "CUB_200_2011" / CLASSES).is_file():
        root = root / "CUB_200_2011"
    classes_path = _find(root, [root / CLASSES], "classes.txt")
    attributes_path = _find(
        root,
        [root.parent / ATTRIBUTES, root / ATTRIBUTES, root / "attributes" / ATTRIBUTES],
        "attributes.txt (it ships beside CUB_200_2011/ in the tarball)",
    )
    labels_path = _find(root, [root / CLASS_LABELS], str(CLASS_LABELS))

    def numbered(path: Path) -> list[str]:
        rows = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            parts = line.split(maxsplit=1)
            if len(parts) != 2 or not parts[0].isdigit():
                raise ConceptforgeError(f"{path}:{number}: expected '<id> <name>', got {line.strip()!r}")
            rows.append(parts[1].strip())
        return rows

    classes = [class_name(name) for name in numbered(classes_path)]
    attributes = numbered(attributes_path)
    for attribute in attributes:
        parse_attribute(attribute)
    try:
        percent = np.loadtxt(labels_path, dtype=np.float64, ndmin=2)
    except ValueError as error:
        raise ConceptforgeError(f"{labels_path} is not a table of numbers: {error}") from None
    if percent.shape != (len(classes), len(attributes)):
        raise ConceptforgeError(
            f"{labels_path} has shape {percent.shape[0]}x{percent.shape[1]}, expected "
            f"{len(classes)} classes x {len(attributes)} attributes"
        )
    return CUBMetadata(root=root, classes=classes, attributes=attributes, class_percent=percent)
