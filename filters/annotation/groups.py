"""The values offered for each attribute group in the sub-attribute study.

SUB Fig. 8 offers every value of the group (plus none). The complete lists live in CUB's
``attributes.txt`` (``<id> has_<group>::<value>`` per line), so with ``--cub-dir`` we use them in
CUB's order. Without CUB at hand we fall back to the values the dataset itself contains (its S+
values and the removed S− values of that group), sorted: a narrower choice, which the results
record (``group_values_source``) so a reader knows which one was used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from conceptforge.cub import load_attributes
from conceptforge.errors import DataFormatError
from conceptforge.filters.annotation.studies import split_attribute


def group_values_from_rows(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    groups: dict[str, set[str]] = {}
    for row in rows:
        group = str(row["group"])
        groups.setdefault(group, set()).add(str(row["value"]))
        removed_group, removed_value = split_attribute(str(row.get("removed_attribute") or ""))
        if removed_value and removed_group == group:
            groups[group].add(removed_value)
    return {group: sorted(values) for group, values in groups.items()}


def resolve_group_values(
    rows: Mapping[str, Mapping[str, Any]], cub_dir: str | Path | None
) -> tuple[dict[str, list[str]], str]:
    """Return (values per group, source) where source is ``cub`` or ``dataset``."""
    if cub_dir is None:
        return group_values_from_rows(rows.values()), "dataset"
    groups = load_attributes(cub_dir).groups
    for row in rows.values():
        group, value = str(row["group"]), str(row["value"])
        if value not in groups.get(group, []):
            raise DataFormatError(f"{group}::{value} (item {row['item_id']}) is not in CUB's attributes.txt")
    return groups, "cub"
