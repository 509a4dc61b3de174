"""The SUB method's benchmark spec: SUB on any attribute dataset, the paper as one preset.

A SUB benchmark needs the classes to substitute into (reference classes R), the attributes in
mutually exclusive groups (each a colour, shape or pattern group), when a class "has" an
attribute (class-level presence from labels: the paper's majority vote), the substitutions S+,
the guidance class G of each, the prompt templates of c_R / c_G (and the plain prompt of
reference-class selection), the VQA question of the filter, and the TDG schedule of each
category. The SUB paper's choices for CUB are ``conceptforge/specs/presets/sub-cub-paper.yaml``;
module code holds no paper constant.

Prompt templates use ``{class}`` (the reference class, words spaced), ``{guide}`` (the guidance
class) and ``{phrase}`` (the group's phrase with ``{value}`` filled in); the VQA question uses
``{group}``, ``{domain}`` and ``{choices}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Field

from conceptforge.cub.files import SEP
from conceptforge.specs import DatasetSource, spec_error

SUBSTITUTION_CATEGORIES = ("colour", "shape", "pattern")
Category = Literal["colour", "shape", "pattern"]
NonEmpty = Annotated[str, Field(min_length=1)]


@dataclass(frozen=True)
class TDGSchedule:
    """Tied Diffusion Guidance's schedule of one category (SUB paper, Sec. 5)."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    k: Annotated[float, Field(gt=0, description="sharpness of the tying schedule")]
    tmin: Annotated[float, Field(ge=0, le=1, description="no tying below this diffusion time")]
    tmax: Annotated[float, Field(ge=0, le=1, description="full tying above this diffusion time")]


@dataclass(frozen=True)
class PromptTemplates:
    """c_R and c_G of one category."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    reference: NonEmpty
    guidance: NonEmpty


@dataclass(frozen=True)
class AttributeGroup:
    """One group of mutually exclusive values (a class-level label picks at most one as S-)."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    category: Category
    phrase: Annotated[str, Field(min_length=1, description="the words for S+ in prompts; {value} is the value")]
    values: Annotated[tuple[NonEmpty, ...], Field(description="the values; empty (CUB): all the source's")] = ()
    reference: Annotated[str | None, Field(description="this group's own c_R template (else the category's)")] = None
    question: Annotated[str | None, Field(description="this group's own VQA question (else vqa_question)")] = None
    from_paper: bool = False


@dataclass(frozen=True)
class Guidance:
    """The guidance class G of each substitution."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    generic: Annotated[str, Field(min_length=1, description="G of colour substitutions: a generic word ('bird')")]
    named: Annotated[dict[str, NonEmpty], Field(description="group::value -> the class named as G")] = field(
        default_factory=dict
    )
    #: G of a shape/pattern substitution not named: the class whose images most often show it.
    rule: Literal["most-typical-class"] = "most-typical-class"


@dataclass(frozen=True)
class Presence:
    """When a class has an attribute (class level): S- and the pairs dropped because S+ = S-."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    class_percent: Annotated[float, Field(gt=0, le=100)] = 50.0
    drop_present: Annotated[bool, Field(description="leave out pairs whose class already has S+")] = True


@dataclass(frozen=True)
class SubSource:
    """Where classes, attributes and class-level labels come from.

    ``kind: cub`` reads CUB_200_2011 (``--cub-dir``). ``kind: dataset`` reads ``dataset`` (a
    ``datasets`` dataset or ImageFolder) whose rows carry the attributes: ``layout: value-columns``
    has one 0/1 column per ``group::value``; ``layout: group-columns`` has one column per group
    holding the value (``group_columns`` maps group -> column; default: the group's name).
    """

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    kind: Literal["cub", "dataset"]
    dataset: DatasetSource | None = None
    layout: Literal["value-columns", "group-columns"] = "value-columns"
    group_columns: dict[str, NonEmpty] = field(default_factory=dict)

    def check(self, *, source: str = "") -> None:
        if self.kind == "cub":
            if self.dataset is not None:
                raise spec_error("source.dataset", "a cub source reads --cub-dir; remove dataset", source=source)
            return
        if self.dataset is None:
            raise spec_error(
                "source.dataset", "a dataset source needs dataset: {path: ... | hub: ..., revision: ...}", source=source
            )
        self.dataset.check(source=source, location="source.dataset")
        if self.group_columns and self.layout != "group-columns":
            raise spec_error("source.group_columns", "applies to layout: group-columns only; remove it", source=source)


@dataclass(frozen=True)
class SubBenchmarkSpec:
    """A SUB benchmark: what is substituted into which classes, how prompted, filtered and guided."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    source: SubSource
    domain: Annotated[str, Field(min_length=1, description="the noun for a class's kind ('bird', 'car')")]
    classes: Annotated[tuple[NonEmpty, ...], Field(min_length=1, description="the reference classes R")]
    groups: Annotated[dict[str, AttributeGroup], Field(min_length=1, description="attribute groups by name")]
    substitutions: Annotated[tuple[NonEmpty, ...], Field(min_length=1, description="S+ as group::value")]
    guidance: Guidance
    templates: dict[Category, PromptTemplates]
    tdg: dict[Category, TDGSchedule]
    plain_template: Annotated[str, Field(min_length=1, description="the plain prompt of reference-class selection")]
    vqa_question: Annotated[str, Field(min_length=1, description="the filter's question; {group} {domain} {choices}")]
    presence: Presence = field(default_factory=Presence)

    def check(self, *, source: str = "") -> None:
        """Cross-field rules: every name used is declared, in one place, with what it needs."""
        self.source.check(source=source)
        _unique(self.classes, "classes", source)
        _unique(self.substitutions, "substitutions", source)
        for name, group in self.groups.items():
            if SEP in name:
                raise spec_error(f"groups.{name}", f"a group name cannot contain '{SEP}'", source=source)
            _unique(group.values, f"groups.{name}.values", source)
            if self.source.kind == "dataset" and not group.values:
                raise spec_error(
                    f"groups.{name}.values",
                    "list the group's values (at least two: a group of one value substitutes nothing)",
                    source=source,
                )
            if group.values and len(group.values) < 2:
                raise spec_error(
                    f"groups.{name}.values", "a group needs at least two mutually exclusive values", source=source
                )
            if group.reference is not None:
                _check_fields(group.reference, f"groups.{name}.reference", source)
            if group.question is not None:
                _check_fields(group.question, f"groups.{name}.question", source, allowed=QUESTION_FIELDS)
            _check_fields(group.phrase, f"groups.{name}.phrase", source, allowed={"value"})
        for category in SUBSTITUTION_CATEGORIES:
            used = any(g.category == category for g in self.groups.values())
            for table, label in ((self.templates, "templates"), (self.tdg, "tdg")):
                if used and category not in table:
                    raise spec_error(
                        f"{label}.{category}", f"is required: a group of category {category} exists", source=source
                    )
        for category, templates in self.templates.items():
            _check_fields(templates.reference, f"templates.{category}.reference", source)
            _check_fields(templates.guidance, f"templates.{category}.guidance", source)
        for category, schedule in self.tdg.items():
            if schedule.tmin > schedule.tmax:
                raise spec_error(
                    f"tdg.{category}", f"tmin {schedule.tmin} is above tmax {schedule.tmax}; swap them", source=source
                )
        _check_fields(self.plain_template, "plain_template", source)
        _check_fields(self.vqa_question, "vqa_question", source, allowed=QUESTION_FIELDS)
        for index, attribute in enumerate(self.substitutions):
            self._check_attribute(attribute, f"substitutions[{index}]", source)
        for attribute in self.guidance.named:
            self._check_attribute(attribute, f"guidance.named.{attribute}", source)
        column_owner: dict[str, str] = {}
        for group, column in self.source.group_columns.items():
            if group not in self.groups:
                raise spec_error(f"source.group_columns.{group}", self._unknown_group(group), source=source)
            if column in column_owner:  # one column cannot hold two groups' values
                raise spec_error(
                    f"source.group_columns.{group}",
                    f"column {column!r} is already group {column_owner[column]!r}'s; give each group its own column",
                    source=source,
                )
            column_owner[column] = group

    def _unknown_group(self, group: str) -> str:
        return f"unknown group {group!r}; known groups: {', '.join(sorted(self.groups))}"

    def _check_attribute(self, attribute: str, location: str, source: str) -> None:
        group, sep, value = attribute.partition(SEP)
        if not sep or not group or not value:
            raise spec_error(location, f"{attribute!r} is not group::value (e.g. colour::red)", source=source)
        if group not in self.groups:
            raise spec_error(location, self._unknown_group(group), source=source)
        values = self.groups[group].values
        if values and value not in values:
            raise spec_error(
                location, f"{value!r} is not a value of group {group!r} ({', '.join(values)})", source=source
            )

    def values(self, group: str) -> tuple[str, ...]:
        return self.groups[group].values


#: The fields each prompt template may use, and those of a VQA question.
TEMPLATE_FIELDS = {"class", "guide", "phrase"}
QUESTION_FIELDS = {"group", "domain", "choices"}


def _unique(items: tuple[str, ...], location: str, source: str) -> None:
    seen = set()
    for index, item in enumerate(items):
        if item in seen:
            raise spec_error(f"{location}[{index}]", f"{item!r} is listed twice; remove one", source=source)
        seen.add(item)


def _check_fields(template: str, location: str, source: str, allowed: set[str] = TEMPLATE_FIELDS) -> None:
    """A template names only fields it will be given (``{clas}`` would fail hours into a run)."""
    import string

    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as error:
        raise spec_error(location, f"is not a valid template: {error}", source=source) from None
    unknown = sorted(name for name in names if name not in allowed)
    if unknown:
        raise spec_error(
            location,
            f"unknown field {{{unknown[0]}}}; a template may use {', '.join('{' + a + '}' for a in sorted(allowed))}",
            source=source,
        )
