"""Class-level attribute labels of any attribute dataset: what CUB's percentage table is to the paper.

SUB needs, per reference class and attribute group, which values the class "has" (S-, and the
pairs to leave out because S+ is already there) and, for a shape or pattern substitution without
a named guidance class, the class that most often shows it. CUB ships these as a percentage
table; a researcher's dataset has per-image labels, from which the same table is the share of a
class's images that show each value. :class:`ClassAttributeTable` offers the look-ups of
:class:`conceptforge.cub.CubMetadata` that the plan uses, so the plan is the same for both.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from conceptforge.errors import InvalidArgumentError
from conceptforge.generators.sub.benchmark import SEP, SubBenchmarkSpec
from conceptforge.specs import open_source, spec_error

logger = logging.getLogger(__name__)


@dataclass
class ClassAttributeTable:
    """Per class, the percentage of its images showing each ``group::value`` attribute."""

    description: str  # where the labels came from (the card says it)
    classes: list[str]
    groups: dict[str, list[str]]  # group -> its attributes (group::value), in the spec's order
    class_percent: np.ndarray  # (classes, attributes), 0-100
    image_counts: list[int] = field(default_factory=list)
    threshold: float = 50.0

    @property
    def attributes(self) -> list[str]:
        return [attribute for names in self.groups.values() for attribute in names]

    @property
    def index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.attributes)}

    def check_bird(self, name: str) -> int:
        if name not in self.classes:
            raise InvalidArgumentError(
                f"class {name!r} is not a class of {self.description} ({', '.join(self.classes[:8])}"
                f"{', ...' if len(self.classes) > 8 else ''})"
            )
        return self.classes.index(name)

    def check_attribute(self, attribute: str) -> int:
        if attribute not in self.index:
            raise InvalidArgumentError(f"attribute {attribute!r} is not an attribute of the spec's groups")
        return self.index[attribute]

    def group_attributes(self, group: str) -> list[str]:
        return list(self.groups[group])

    def percent(self, name: str, attribute: str) -> float:
        return float(self.class_percent[self.check_bird(name), self.check_attribute(attribute)])

    def present_in_group(self, name: str, group: str, threshold: float | None = None) -> list[str]:
        """The group's attributes shown by at least ``threshold`` % of the class's images."""
        row = self.class_percent[self.check_bird(name)]
        limit = self.threshold if threshold is None else threshold
        return [a for a in self.groups[group] if row[self.index[a]] >= limit]

    def removed_attribute(self, name: str, group: str, threshold: float | None = None) -> str:
        """S-: the group's most frequent present attribute ('' if none); ties go to the earlier value."""
        present = self.present_in_group(name, group, threshold)
        if not present:
            return ""
        row = self.class_percent[self.check_bird(name)]
        return max(present, key=lambda a: (row[self.index[a]], -self.index[a]))

    def most_typical_class(self, attribute: str) -> str:
        """The class whose images most often show ``attribute`` (ties: the earlier class)."""
        column = self.class_percent[:, self.check_attribute(attribute)]
        return self.classes[int(np.argmax(column))]

    def class_attributes(self, name: str) -> set[str]:
        """The attributes the class has at the presence threshold (evaluation's class-level truth)."""
        row = self.class_percent[self.check_bird(name)]
        return {a for a, i in self.index.items() if row[i] >= self.threshold}


def class_names(dataset: Any, column: str) -> list[str]:
    """The class of every row as text (a ClassLabel column's names, else the values themselves)."""
    feature = dataset.features[column]
    values = dataset[column]
    names = getattr(feature, "names", None)
    return [names[v] for v in values] if names else [str(v) for v in values]


def attribute_matrix(dataset: Any, spec: SubBenchmarkSpec, *, spec_source: str = "") -> dict[str, np.ndarray]:
    """``group::value`` -> 0/1 per row, read in the source's layout; a missing column is a spec error."""
    columns = dataset.column_names
    result: dict[str, np.ndarray] = {}
    for group, definition in spec.groups.items():
        if spec.source.layout == "value-columns":
            for value in definition.values:
                name = f"{group}{SEP}{value}"
                if name not in columns:
                    raise spec_error(
                        f"groups.{group}.values",
                        f"the source has no column {name!r} for value {value!r} (layout value-columns: one 0/1 "
                        f"column per group::value; columns: {', '.join(columns[:12])})",
                        source=spec_source,
                    )
                result[name] = np.asarray(dataset[name], dtype=float) > 0.5
        else:
            column = spec.source.group_columns.get(group, group)
            if column not in columns:
                raise spec_error(
                    f"source.group_columns.{group}",
                    f"the source has no column {column!r} for group {group!r} (columns: {', '.join(columns[:12])})",
                    source=spec_source,
                )
            labels = class_names(dataset, column)
            unknown = sorted(set(labels) - set(definition.values) - {"", "None"})
            if unknown:
                raise spec_error(
                    f"groups.{group}.values",
                    f"column {column!r} holds {unknown[0]!r}, not a listed value; add it to the group's values",
                    source=spec_source,
                )
            for value in definition.values:
                result[f"{group}{SEP}{value}"] = np.asarray([label == value for label in labels])
    return result


def table_from_dataset(
    spec: SubBenchmarkSpec, *, base_dir: Path, spec_source: str = "", dataset: Any = None
) -> ClassAttributeTable:
    """The class-level table of a ``kind: dataset`` source; the spec's classes must all be there."""
    if dataset is None:
        dataset = open_source(spec.source.dataset, base_dir=base_dir, spec_source=spec_source)
    labels = class_names(dataset, spec.source.dataset.class_column)
    matrix = attribute_matrix(dataset, spec, spec_source=spec_source)
    classes = list(dict.fromkeys(labels))
    for index, name in enumerate(spec.classes):
        if name not in classes:
            raise spec_error(
                f"classes[{index}]",
                f"class {name!r} has no images in {spec.source.dataset.description} (its classes: "
                f"{', '.join(classes[:10])}{', ...' if len(classes) > 10 else ''})",
                source=spec_source,
            )
    groups = {group: [f"{group}{SEP}{v}" for v in definition.values] for group, definition in spec.groups.items()}
    attributes = [a for names in groups.values() for a in names]
    rows = np.asarray(labels)
    percent = np.zeros((len(classes), len(attributes)))
    counts = []
    for i, name in enumerate(classes):
        mask = rows == name
        counts.append(int(mask.sum()))
        for j, attribute in enumerate(attributes):
            percent[i, j] = 100.0 * float(matrix[attribute][mask].mean())
    logger.info(
        "class-level labels of %d classes x %d attributes from %d rows", len(classes), len(attributes), len(rows)
    )
    return ClassAttributeTable(
        description=spec.source.dataset.description,
        classes=classes,
        groups=groups,
        class_percent=percent,
        image_counts=counts,
        threshold=spec.presence.class_percent,
    )
