"""Filter statistics: candidates, kept, and dropped per reason, overall and per group.

A filter counts every candidate it sees with :meth:`FilterStats.add`; the card renders the totals
and a per-group table (e.g. per bird–attribute pair for SUB), so a reader can see where the data
was thinned out and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from conceptforge.errors import DataFormatError


@dataclass
class FilterStats:
    """Counts of one filter run. Invariant: ``candidates == kept + sum(dropped.values())``."""

    candidates: int = 0
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    groups: dict[str, FilterStats] = field(default_factory=dict)
    group_label: str = "group"

    def add(self, *, kept: bool, reason: str | None = None, group: str | None = None, count: int = 1) -> None:
        """Count ``count`` candidates as kept, or dropped for ``reason`` (in ``group`` too)."""
        if not kept and not reason:
            raise ValueError("a dropped candidate needs a reason")
        self.candidates += count
        if kept:
            self.kept += count
        else:
            self.dropped[reason] = self.dropped.get(reason, 0) + count
        if group is not None:
            self.groups.setdefault(group, FilterStats()).add(kept=kept, reason=reason, count=count)

    @property
    def reasons(self) -> list[str]:
        """Every drop reason seen, in first-seen order of totals then groups."""
        names = list(self.dropped)
        for stats in self.groups.values():
            names += [reason for reason in stats.dropped if reason not in names]
        return names

    def check(self) -> None:
        """Raise if the counts do not add up (a filter bug that a card must not publish)."""
        for name, stats in [("total", self), *self.groups.items()]:
            if stats.candidates != stats.kept + sum(stats.dropped.values()):
                raise DataFormatError(
                    f"filter statistics for {name} do not add up: {stats.candidates} candidates != "
                    f"{stats.kept} kept + {sum(stats.dropped.values())} dropped"
                )
        if self.groups:
            if sum(s.candidates for s in self.groups.values()) != self.candidates:
                raise DataFormatError("filter statistics: per-group candidates do not sum to the total")
            if sum(s.kept for s in self.groups.values()) != self.kept:
                raise DataFormatError("filter statistics: per-group kept counts do not sum to the total")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"candidates": self.candidates, "kept": self.kept, "dropped": dict(self.dropped)}
        if self.groups:
            out["group_label"] = self.group_label
            out["groups"] = {name: stats.to_dict() for name, stats in self.groups.items()}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FilterStats:
        return cls(
            candidates=int(data.get("candidates", 0)),
            kept=int(data.get("kept", 0)),
            dropped={str(k): int(v) for k, v in dict(data.get("dropped", {})).items()},
            groups={str(k): cls.from_dict(v) for k, v in dict(data.get("groups", {})).items()},
            group_label=str(data.get("group_label", "group")),
        )

    @staticmethod
    def looks_like(data: Any) -> bool:
        """Whether a plain dict has this shape (older callers pass dicts)."""
        return (
            isinstance(data, Mapping)
            and {"candidates", "kept"} <= set(data)
            and set(data) <= {"candidates", "kept", "dropped", "groups", "group_label"}
        )
