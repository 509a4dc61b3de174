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

from generators.errors import ConceptforgeError

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


def _read_pairs(path: Path) -> list[tuple[int, str]]:
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            line = line.strip()
            if not line:
                continue
            head, _, rest = line.partition(" ")
            try:
                rows.append((int(head), rest.strip()))
            except ValueError:
                raise ConceptforgeError(f"{path}:{line_no}: expected '<id> <value>', got {line[:60]!r}") from None
    return rows


def _pretty(text: str) -> str:
    return text.replace("_", " ").strip()


def parse_attribute_name(name: str) -> CubAttribute:
    """``has_bill_shape::curved_(up_or_down)`` -> group ``bill shape``, value ``curved (up or down)``."""
    group, sep, value = name.partition("::")
    if not sep:
        raise ConceptforgeError(f"attribute {name!r} is not of the form has_<group>::<value>")
    group = group[4:] if group.startswith("has_") else group
    return CubAttribute(name=name, group=_pretty(group), value=_pretty(value))


def class_display_name(folder_name: str) -> str:
    """``001.Black_footed_Albatross`` -> ``Black footed Albatross``."""
    _, _, name = folder_name.partition(".")
    return _pretty(name or folder_name)


def _find(root: Path, *candidates: str) -> Path:
    for candidate in candidates:
        if (root / candidate).is_file():
            return root / candidate
    raise ConceptforgeError(f"CUB directory {root} lacks {candidates[0]} (looked for {', '.join(candidates)})")


def load_cub(root: str | Path, *, require_images: bool = True) -> CubData:
    """Read a ``CUB_200_2011`` directory in the layout the dataset ships in.

    ``attributes.txt`` is looked up in ``attributes/``, the root and the root's parent (the
    official tarball puts it next to ``CUB_200_2011/``).
    """
    root = Path(root)
    if not root.is_dir():
        raise ConceptforgeError(f"CUB directory {root} does not exist")
    images = _read_pairs(_find(root, "images.txt"))
    classes = _read_pairs(_find(root, "classes.txt"))
    labels_raw = dict(_read_pairs(_find(root, "image_class_labels.txt")))
    split_raw = dict(_read_pairs(_find(root, "train_test_split.txt")))
    attr_file = _find(root, "attributes/attributes.txt", "attributes.txt", "../attributes.txt")
    attributes = [parse_attribute_name(name) for _, name in _read_pairs(attr_file)]
    class_ids = {cid: i for i, (cid, _) in enumerate(classes)}
    image_ids = np.array([iid for iid, _ in images])
    paths = [root / "images" / rel for _, rel in images]
    if require_images:
        missing = [p for p in paths if not p.is_file()]
        if missing:
            raise ConceptforgeError(f"{len(missing)} CUB images are missing, e.g. {missing[0]}")
    try:
        labels = np.array([class_ids[int(labels_raw[iid])] for iid in image_ids])
        is_train = np.array([split_raw[iid].strip() == "1" for iid in image_ids])
    except KeyError as error:
        raise ConceptforgeError(f"CUB image {error.args[0]} has no class label or split entry") from None
    image_attributes = _read_image_attributes(_find(root, "attributes/image_attribute_labels.txt"), image_ids, len(attributes))
    logger.info("CUB: %d images, %d classes, %d attributes", len(image_ids), len(classes), len(attributes))
    return CubData(
        root=root,
        image_ids=image_ids,
        image_paths=paths,
        labels=labels,
        class_names=[class_display_name(name) for _, name in classes],
        is_train=is_train,
        attributes=attributes,
        image_attributes=image_attributes,
    )


def _read_image_attributes(path: Path, image_ids: np.ndarray, num_attributes: int) -> np.ndarray:
    """``<image_id> <attribute_id> <is_present> <certainty_id> <time>`` lines -> [N, A] 0/1.

    Only the first three fields are used: a few lines of the official file carry extra fields.
    """
    row_of = {int(iid): i for i, iid in enumerate(image_ids)}
    out = np.zeros((len(image_ids), num_attributes), dtype=np.float32)
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            parts = line.split()
            if not parts:
                continue
            try:
                iid, aid, present = int(parts[0]), int(parts[1]), int(parts[2])
            except (ValueError, IndexError):
                raise ConceptforgeError(f"{path}:{line_no}: malformed attribute line {line.strip()[:60]!r}") from None
            if iid in row_of and 1 <= aid <= num_attributes:
                out[row_of[iid], aid - 1] = float(present)
    return out
