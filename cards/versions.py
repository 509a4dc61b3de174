"""Semantic-version tags for dataset releases (``vMAJOR.MINOR.PATCH``).

Tags are what papers cite (``load_dataset(repo, revision="v1.0.0")``), so a version, once
published, names one set of files forever, and versions only go up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from conceptforge.errors import InvalidArgumentError

_VERSION_RE = re.compile(r"v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)")


@dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"v{self.major}.{self.minor}.{self.patch}"

    def bump_patch(self) -> Version:
        return Version(self.major, self.minor, self.patch + 1)


def parse_version(text: str) -> Version:
    """``"v1.2.3"`` -> Version(1, 2, 3); anything else is a one-line user error."""
    match = _VERSION_RE.fullmatch(text.strip())
    if not match:
        raise InvalidArgumentError(f"version {text!r} is not of the form vMAJOR.MINOR.PATCH (e.g. v1.0.0)")
    return Version(*(int(part) for part in match.groups()))


def is_version(text: str) -> bool:
    return _VERSION_RE.fullmatch(text) is not None


def published_versions(tag_names: Iterable[str]) -> list[Version]:
    """The semantic-version tags among ``tag_names``, ascending (other tags are ignored)."""
    return sorted(parse_version(name) for name in tag_names if is_version(name))


def previous_version(version: Version, existing: Iterable[Version]) -> Version | None:
    """The highest existing version below ``version``."""
    lower = [v for v in existing if v < version]
    return max(lower) if lower else None
