"""The attribute vocabulary of a SUB release made from a user's spec, in the place of CUB's.

A release made with ``generate sub --spec`` carries ``benchmark_spec.yaml``: its groups and
values are the vocabulary the SUB tasks choose within (and the question they ask, and the domain
their prompts name), so ``evaluate --tasks sub-vlm:ORG/NAME@REV`` needs no ``--cub-dir``. S- of
each image is the release's own ``removed_attribute`` (the class's value of the group by the
spec's presence rule): there is no CUB class-level table to take the paper's CBM-subset rule from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conceptforge.cub.files import SEP
from conceptforge.errors import DataFormatError


@dataclass(frozen=True)
class SpecVocabulary:
    """What the SUB scoring reads of ``CubMetadata``, from a release's spec."""

    name: str
    domain: str
    groups: dict[str, list[str]]  # group -> its attributes (group::value), in the spec's order
    question: str
    class_labels: None = None  # no class-level table: S- is the release's removed_attribute
    s_minus_from_release: bool = True

    @property
    def attributes(self) -> list[str]:
        return [a for names in self.groups.values() for a in names]

    def group_attributes(self, group: str) -> list[str]:
        return list(self.groups[group])

    def check_attribute(self, attribute: str) -> int:
        names = self.attributes
        if attribute not in names:
            raise DataFormatError(
                f"attribute {attribute!r} is not in the release's spec {self.name!r} ({len(names)} attributes): "
                "the rows and benchmark_spec.yaml do not match"
            )
        return names.index(attribute)


def vocabulary_from_spec(spec: dict[str, Any]) -> SpecVocabulary:
    """The vocabulary of a ``benchmark_spec.yaml`` mapping (a damaged one: one line)."""
    try:
        groups = {
            group: [f"{group}{SEP}{value}" for value in definition["values"]]
            for group, definition in spec["groups"].items()
        }
        return SpecVocabulary(str(spec["name"]), str(spec["domain"]), groups, str(spec["vqa_question"]))
    except (KeyError, TypeError, AttributeError) as error:
        raise DataFormatError(f"the release's benchmark_spec.yaml lacks {error} (not a SUB spec?)") from None


def reads_own_vocabulary(spec: dict[str, Any] | None) -> bool:
    """Whether a release's spec (``None``: it carries none) brings its own vocabulary: a spec whose
    source is CUB (the paper readers' kind) keeps CUB's attribute list and class-level labels,
    which only ``--cub-dir`` holds."""
    return spec is not None and (spec.get("source") or {}).get("kind") != "cub"


def release_vocabulary(spec: dict[str, Any] | None) -> SpecVocabulary | None:
    """The vocabulary a SUB release brings itself (from its ``benchmark_spec.yaml`` mapping), or
    ``None`` where CUB's is needed (no spec, or a spec over CUB)."""
    return vocabulary_from_spec(spec) if reads_own_vocabulary(spec) else None
