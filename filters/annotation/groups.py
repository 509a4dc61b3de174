"""The values offered for each attribute group in the sub-attribute study.

SUB Fig. 8 offers every value of the group (plus none). The complete lists live in CUB's
``attributes.txt`` (``<id> has_<group>::<value>`` per line), so with ``--cub-dir`` we use them in
CUB's order. Without CUB at hand we fall back to the values the dataset itself contains (its S+
values and the removed S− values of that group), sorted: a narrower choice, which the results
record (``group_values_source``) so a reader knows which one was used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from filters.annotation.studies import split_attribute
from generators.errors import ConceptforgeError


def cub_attributes_file(cub_dir: str | Path) -> Path:
    cub_dir = Path(cub_dir)
    for candidate in (cub_dir / "attributes.txt", cub_dir / "attributes" / "attributes.txt",
                      cub_dir.parent / "attributes.txt"):
        if candidate.is_file():
            return candidate
    raise ConceptforgeError(f"no attributes.txt in {cub_dir} (expected CUB's '<id> has_<group>::<value>' list)")


def group_values_from_cub(cub_dir: str | Path) -> dict[str, list[str]]:
    path = cub_attributes_file(cub_dir)
    groups: dict[str, list[str]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or "::" not in parts[1]:
            raise ConceptforgeError(f"{path}:{number}: expected '<id> has_<group>::<value>', got {line!r}")
        group, value = split_attribute(parts[1].strip())
        groups.setdefault(group, [])
        if value not in groups[group]:
            groups[group].append(value)
    return groups


def group_values_from_rows(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    groups: dict[str, set[str]] = {}
    for row in rows:
        group = str(row["group"])
        groups.setdefault(group, set()).add(str(row["value"]))
        removed_group, removed_value = split_attribute(str(row.get("removed_attribute") or ""))
        if removed_value and removed_group == group:
            groups[group].add(removed_value)
    return {group: sorted(values) for group, values in groups.items()}


def resolve_group_values(rows: Mapping[str, Mapping[str, Any]], cub_dir: str | Path | None) -> tuple[dict[str, list[str]], str]:
    """Return (values per group, source) where source is ``cub`` or ``dataset``."""
    if cub_dir is None:
        return group_values_from_rows(rows.values()), "dataset"
    groups = group_values_from_cub(cub_dir)
    for row in rows.values():
        group, value = str(row["group"]), str(row["value"])
        if value not in groups.get(group, []):
            raise ConceptforgeError(f"{group}::{value} (item {row['item_id']}) is not in CUB's attributes.txt")
    return groups, "cub"
