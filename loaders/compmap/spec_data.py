"""The data a CompMap spec names, laid out as the protocols read it.

CZSL reads a :class:`~.mit_states.MitStatesData` whatever the source: the MIT-States / UT-Zappos
folder layout through :func:`~.mit_states.load_mit_states`, or a ``datasets`` dataset with an
attribute, an object and a split column (or the spec's split rule). n-way k-shot reads a
:class:`ClassTableData`, the same arrays :class:`~.cub_arrays.CubPrimitives` gives for CUB: the
images' classes, a train/test split and a class × attribute table in softmax groups.

Why the split rule is what it is (no split column): CZSL needs unseen pairs in both validation
and test and seen pairs everywhere, as in the natural split of Purushwalkam et al. (2019). The
listed unseen pairs go alternately to test and val (sorted, the first to test); each seen pair's
images are shuffled with a seed of its own (so adding a pair moves no other pair's images) and
``test_share`` / ``val_share`` of them go to test / val (rounded, at least one each while one
stays in training).
"""

from __future__ import annotations

import csv
import hashlib
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from conceptforge.engine.workitems import derive_seed
from conceptforge.errors import DataFormatError, DataNotFoundError
from conceptforge.loaders.compmap.benchmark import CzslSpec, FewShotSpec, LoadedSpec
from conceptforge.loaders.compmap.mit_states import SPLITS, MitSample, MitStatesData, Pair, load_mit_states
from conceptforge.specs import SpecFieldError, open_source, spec_error

logger = logging.getLogger(__name__)
T = TypeVar("T")


def _source_name(loaded: LoadedSpec) -> str:
    return str(loaded.file.path) if loaded.file.preset is None else f"preset {loaded.file.preset}"


def _open(source: Any, loaded: LoadedSpec, *, at: str, class_column: str | None = None) -> Any:
    """The dataset of ``source`` (the spec's ``at.source``), its errors naming the full field path.
    CZSL has no class column: ``class_column`` (the image column) stands in for the check; the
    attribute and object columns are checked by :func:`_column_values`, naming their fields."""
    import dataclasses

    spec_source = _source_name(loaded)
    if class_column is not None:
        source = dataclasses.replace(source, class_column=class_column)
    try:
        return open_source(source, base_dir=loaded.file.base_dir, spec_source=spec_source)
    except SpecFieldError as error:
        message = str(error).removeprefix(f"{spec_source}: ").removeprefix(f"{error.field_path}: ")
        raise spec_error(f"{at}.{error.field_path}", message, source=spec_source) from None
    except (DataNotFoundError, DataFormatError) as error:
        text = str(error)
        if text.startswith("source"):
            raise type(error)(f"{spec_source}: {at}.{text}") from None
        raise


def _column_values(dataset: Any, column: str, *, at: str, spec_source: str) -> list[str]:
    """A column's values as text (a ClassLabel column by its names); a missing column is the spec's error."""
    if column not in dataset.column_names:
        raise spec_error(
            at, f"the dataset has no column {column!r} (columns: {', '.join(dataset.column_names)})", source=spec_source
        )
    feature = dataset.features[column]
    names = getattr(feature, "names", None)
    values = dataset[column]
    return [str(names[v]) if names is not None else str(v) for v in values]


def _images(dataset: Any, column: str) -> tuple[list[Any], list[str]]:
    """The images undecoded (``{"bytes", "path"}`` or a path) and a content key of each (for the
    activation cache: the same picture is the same key wherever it sits)."""
    import datasets

    if isinstance(dataset.features[column], datasets.Image):
        dataset = dataset.cast_column(column, datasets.Image(decode=False))
    images = list(dataset[column])
    keys = []
    for image in images:
        data = image.get("bytes") if isinstance(image, dict) else None
        if data:
            keys.append("sha256:" + hashlib.sha256(data).hexdigest())
        else:
            keys.append(str(image.get("path") if isinstance(image, dict) else image))
    return images, keys


# ----------------------------------------------------------------------------------- CZSL
def czsl_data(loaded: LoadedSpec, *, folder: str | None = None) -> MitStatesData:
    """The CZSL data of a spec: its MIT-States-layout folder (or ``folder`` from the command line
    when the spec leaves it out), or its dataset source split by column or rule."""
    czsl = loaded.spec.czsl
    assert czsl is not None
    if czsl.mit_states is not None:
        root = loaded.resolve(czsl.mit_states.folder) if czsl.mit_states.folder else folder
        if root is None:
            raise DataNotFoundError(
                "czsl.mit_states.folder: the spec names no folder; add 'folder: PATH' or pass --data-dir"
            )
        return load_mit_states(root, split_dir=czsl.mit_states.split_dir, metadata=czsl.mit_states.metadata)
    return _czsl_from_source(loaded, czsl)


def _czsl_from_source(loaded: LoadedSpec, czsl: CzslSpec) -> MitStatesData:
    spec_source = _source_name(loaded)
    assert czsl.source is not None
    dataset = _open(czsl.source, loaded, at="czsl", class_column=czsl.source.image_column)
    attrs = _column_values(dataset, czsl.attribute_column, at="czsl.attribute_column", spec_source=spec_source)
    objs = _column_values(dataset, czsl.object_column, at="czsl.object_column", spec_source=spec_source)
    images, keys = _images(dataset, czsl.source.image_column)
    if czsl.split_column is not None:
        splits = _column_values(dataset, czsl.split_column, at="czsl.split_column", spec_source=spec_source)
        wrong = next((value for value in splits if value not in SPLITS), None)
        if wrong is not None:
            raise DataFormatError(
                f"{czsl.source.description}: column {czsl.split_column!r} holds {wrong!r}; "
                "each row's split must be train, val or test"
            )
    else:
        splits = _rule_splits(list(zip(attrs, objs)), czsl, spec_source=spec_source)
    samples: dict[str, list[MitSample]] = {split: [] for split in SPLITS}
    for index, (attr, obj, split) in enumerate(zip(attrs, objs, splits)):
        samples[split].append(MitSample(Path(keys[index]), attr, obj, image=images[index]))
    for split in SPLITS:
        if not samples[split]:
            raise DataFormatError(f"{czsl.source.description}: the {split} split has no images; CZSL needs all three")
    pairs = {split: sorted({(s.attr, s.obj) for s in samples[split]}) for split in SPLITS}
    logger.info(
        "%s: %d attributes, %d objects; pairs train/val/test %d/%d/%d",
        czsl.source.description,
        len(set(attrs)),
        len(set(objs)),
        *(len(pairs[s]) for s in SPLITS),
    )
    return MitStatesData(
        root=Path(czsl.source.description),
        attrs=sorted(set(attrs)),
        objs=sorted(set(objs)),
        pairs=pairs,
        samples=samples,
    )


def _check_known(
    listed: Sequence[T], known: Collection[T], location: str, unknown: Callable[[T], str], *, spec_source: str
) -> None:
    """Refuse the first entry of a spec's list (at ``location``) that the data does not have, with the
    line ``unknown`` writes for it: the spec names only what the data holds."""
    for index, item in enumerate(listed):
        if item not in known:
            raise spec_error(f"{location}[{index}]", unknown(item), source=spec_source)


def _rule_splits(rows: list[Pair], czsl: CzslSpec, *, spec_source: str) -> list[str]:
    """Each row's split by the spec's rule (module docstring): unseen pairs alternately to test
    and val, seen pairs' images shared out by ``test_share`` and ``val_share``."""
    present = set(rows)
    unseen = [tuple(text.split()) for text in czsl.unseen_pairs]
    _check_known(
        unseen,
        present,
        "czsl.unseen_pairs",
        lambda pair: f"no image is labelled {' '.join(pair)!r}; name a pair of the dataset",
        spec_source=spec_source,
    )
    unseen_split = {pair: ("test", "val")[position % 2] for position, pair in enumerate(sorted(unseen))}
    out = [""] * len(rows)
    by_pair: dict[Pair, list[int]] = {}
    for index, pair in enumerate(rows):
        if pair in unseen_split:
            out[index] = unseen_split[pair]
        else:
            by_pair.setdefault(pair, []).append(index)
    if not by_pair:
        raise spec_error("czsl.unseen_pairs", "lists every pair; leave some seen pairs to train on", source=spec_source)
    for pair, indices in sorted(by_pair.items()):
        rng = np.random.default_rng(derive_seed(czsl.split_seed, "czsl-split", *pair))
        order = [indices[i] for i in rng.permutation(len(indices))]
        n_test, n_val = _seen_counts(len(order), czsl.test_share, czsl.val_share)
        for rank, index in enumerate(order):
            out[index] = "test" if rank < n_test else "val" if rank < n_test + n_val else "train"
    return out


def _seen_counts(n: int, test_share: float, val_share: float) -> tuple[int, int]:
    """(test, val) images of a seen pair with ``n`` images: the shares, rounded, but at least one
    each while one stays in training (val only when ``val_share`` > 0), so val and test both hold
    seen pairs even when pairs have few images (generalized CZSL compares seen and unseen)."""
    n_test = min(max(int(round(test_share * n)), 1), n - 1)
    n_val = min(max(int(round(val_share * n)), 1 if val_share > 0 else 0), n - 1 - n_test)
    return n_test, max(n_val, 0)


# ----------------------------------------------------------------------------------- n-way k-shot
@dataclass
class ClassTableData:
    """Classes with a class × attribute table, as the n-way k-shot protocol reads them (the
    interface of :class:`~.cub_arrays.CubPrimitives`)."""

    images: list[Any]  # what the model reads: a path or a datasets {"bytes", "path"} record
    image_keys: list[str]  # the activation cache's name of each image
    labels: np.ndarray  # [N] class index
    is_train: np.ndarray  # [N] bool
    class_names: list[str]
    attributes: list[str]  # table columns, in order
    attribute_group: list[str]  # each column's group
    table: np.ndarray  # [C, A] 0/1

    @cached_property
    def groups(self) -> dict[str, np.ndarray]:
        """Group -> attribute columns, in first-appearance order."""
        out: dict[str, list[int]] = {}
        for index, group in enumerate(self.attribute_group):
            out.setdefault(group, []).append(index)
        return {group: np.array(columns) for group, columns in out.items()}

    def class_attributes(self) -> np.ndarray:
        return self.table

    def gt_primitives(self) -> np.ndarray:
        """[N, A] each image's class vector (class-level ground truth, as CompMap uses on CUB)."""
        return self.table[self.labels]

    def readable(self, index: int) -> tuple[str, str]:
        """(group, value) of an attribute in words, for its prompt."""
        name, group = self.attributes[index], self.attribute_group[index]
        value = name.split("::", 1)[1] if "::" in name else name
        return group.replace("_", " "), value.replace("_", " ")


def read_attribute_table(path: Path, *, threshold: float) -> tuple[list[str], list[str], np.ndarray]:
    """(classes, attributes, [C, A] 0/1) of a CSV: a ``class`` column, then one column per attribute
    holding 0/1 or the share of the class's images that show it (present when >= ``threshold``)."""
    if not path.is_file():
        raise DataNotFoundError(f"few_shot.attribute_table: no such file {str(path)!r}; give the CSV of classes")
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    if not rows or len(rows[0]) < 2 or rows[0][0].strip() != "class":
        raise DataFormatError(f"{path}: the first row must be 'class,<attribute>,<attribute>,...'")
    attributes = [name.strip() for name in rows[0][1:]]
    if len(set(attributes)) < len(attributes):
        raise DataFormatError(f"{path}: an attribute column appears twice")
    classes, values = [], []
    for line, row in enumerate(rows[1:], 2):
        if not row or not any(cell.strip() for cell in row):
            continue
        if len(row) != len(attributes) + 1:
            raise DataFormatError(f"{path}:{line}: {len(row)} cells; the header has {len(attributes) + 1}")
        try:
            numbers = [float(cell) for cell in row[1:]]
        except ValueError:
            raise DataFormatError(f"{path}:{line}: attribute values must be numbers (0/1 or a share)") from None
        if any(not 0.0 <= x <= 1.0 for x in numbers):
            raise DataFormatError(f"{path}:{line}: attribute values must lie in [0, 1]")
        classes.append(row[0].strip())
        values.append(numbers)
    if not classes:
        raise DataFormatError(f"{path}: no class rows")
    if len(set(classes)) < len(classes):
        raise DataFormatError(f"{path}: a class appears twice")
    return classes, attributes, (np.array(values) >= threshold).astype(np.float32)


def _attribute_groups(few: FewShotSpec, attributes: list[str], *, spec_source: str) -> list[str]:
    if few.attribute_groups:
        group_of = {name: group for group, names in few.attribute_groups.items() for name in names}
        for group, names in few.attribute_groups.items():
            _check_known(
                names,
                attributes,
                f"few_shot.attribute_groups.{group}",
                lambda name: f"the table has no attribute {name!r}; table attributes: {', '.join(attributes[:8])}",
                spec_source=spec_source,
            )
        missing = [name for name in attributes if name not in group_of]
        if missing:
            raise spec_error(
                "few_shot.attribute_groups",
                f"attribute {missing[0]!r} of the table is in no group; add it to one",
                source=spec_source,
            )
        return [group_of[name] for name in attributes]
    ungrouped = next((name for name in attributes if "::" not in name), None)
    if ungrouped is not None:
        raise spec_error(
            "few_shot.attribute_groups",
            f"table attribute {ungrouped!r} has no group: name the columns 'group::value' or list attribute_groups",
            source=spec_source,
        )
    return [name.split("::", 1)[0] for name in attributes]


def few_shot_table_data(loaded: LoadedSpec) -> ClassTableData:
    """The images, classes, split and class × attribute table of a ``few_shot`` spec with a dataset source."""
    few = loaded.spec.few_shot
    assert few is not None and few.source is not None and few.attribute_table is not None
    spec_source = _source_name(loaded)
    dataset = _open(few.source, loaded, at="few_shot")
    classes = _column_values(
        dataset, few.source.class_column, at="few_shot.source.class_column", spec_source=spec_source
    )
    table_classes, attributes, table = read_attribute_table(
        loaded.resolve(few.attribute_table), threshold=few.threshold
    )
    groups = _attribute_groups(few, attributes, spec_source=spec_source)
    index = {name: i for i, name in enumerate(table_classes)}
    unknown = next((name for name in classes if name not in index), None)
    if unknown is not None:
        raise DataFormatError(f"{few.attribute_table}: no row for class {unknown!r} of {few.source.description}")
    labels = np.array([index[name] for name in classes], dtype=np.int64)
    imageless = [name for i, name in enumerate(table_classes) if not (labels == i).any()]
    if imageless:
        raise DataFormatError(
            f"{few.attribute_table}: class {imageless[0]!r} has no image in {few.source.description}; remove its row"
        )
    if few.split_column is not None:
        splits = _column_values(dataset, few.split_column, at="few_shot.split_column", spec_source=spec_source)
        wrong = next((value for value in splits if value not in ("train", "test")), None)
        if wrong is not None:
            raise DataFormatError(
                f"{few.source.description}: column {few.split_column!r} holds {wrong!r}; each row is train or test"
            )
        is_train = np.array([value == "train" for value in splits])
    else:
        is_train = _share_split(labels, few.test_share, few.split_seed)
    images, keys = _images(dataset, few.source.image_column)
    logger.info(
        "%s: %d images, %d classes, %d attributes in %d groups",
        few.source.description,
        len(images),
        len(table_classes),
        len(attributes),
        len(set(groups)),
    )
    return ClassTableData(images, keys, labels, is_train, table_classes, attributes, groups, table)


def _share_split(labels: np.ndarray, test_share: float, seed: int) -> np.ndarray:
    """Per class, a seeded shuffle: ``test_share`` of its images to test, at least one each side
    when the class has two or more."""
    is_train = np.ones(len(labels), dtype=bool)
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        order = members[np.random.default_rng(derive_seed(seed, "few-shot-split", int(c))).permutation(len(members))]
        n_test = min(max(int(round(test_share * len(order))), 1 if len(order) > 1 else 0), len(order) - 1)
        is_train[order[:n_test]] = False
    return is_train
