"""A CompMap benchmark spec: either protocol of the CompMap paper on a researcher's own data.

CompMap asks whether a vision-language model's concept activations are *useful* (a probe on them
classifies) and *interpretable* (the probe still works when they are replaced by the ground-truth
concepts). The paper ran it on two datasets; the protocols themselves only need

* ``czsl`` (generalized compositional zero-shot learning, Tables 1/3/4): images labelled with an
  (attribute, object) pair, and a split of the pairs into seen (training) and unseen ones. Data:
  the MIT-States / UT-Zappos folder layout (``mit_states``), or any ``datasets`` dataset with an
  image, an attribute, an object and a split column (``source``), or a split rule instead of
  the split column (``unseen_pairs``);
* ``few_shot`` (n-way k-shot usefulness, Tables 2/3/4): images labelled with a class, and a
  class × attribute table whose attributes fall into mutually exclusive groups (the softmax
  groups). Data: the CUB_200_2011 folder (``cub``), or any ``datasets`` dataset (``source``) plus
  a CSV table (``attribute_table``).

A spec holds exactly one of the two. The paper's setups are the presets
``compmap-cub-paper`` and ``compmap-mit-states-paper``: their data folder is the one given on
the command line (``folder`` left out), so they reproduce the paper's runs byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from conceptforge.specs import DatasetSource, check_exactly_one, load_benchmark_spec, spec_error
from conceptforge.specs.loading import BenchmarkSpecFile

METHOD = "compmap"
CZSL_TASK = "compmap-mit-states"
FEW_SHOT_TASK = "compmap-cub"
_A3 = re.compile(r"^a3(:\s*\d+(\s*,\s*\d+)*)?$")
_FORBID = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class PairFolder:
    """The MIT-States / UT-Zappos layout: ``images/<attr obj>/…``, ``<split_dir>/{train,val,test}_pairs.txt``
    and a metadata file of ``{image, attr, obj, set}`` records (.t7, .pt, .json or .jsonl)."""

    __pydantic_config__: ClassVar = _FORBID

    folder: str | None = Field(None, description="the dataset root; left out: the folder given on the command line")
    split_dir: str = "compositional-split-natural"
    metadata: str | None = Field(None, description="metadata file in the root (default metadata_<split_dir>.t7)")


@dataclass(frozen=True)
class CubFolder:
    """CUB_200_2011 read by the shared reader (class-level majority vote of the per-image attributes)."""

    __pydantic_config__: ClassVar = _FORBID

    folder: str | None = Field(None, description="the CUB_200_2011 folder; left out: the one given on the command line")


@dataclass(frozen=True)
class CzslSpec:
    """Generalized CZSL on (attribute, object) pairs: the data, the seen/unseen split, the prompts
    and the composition model."""

    __pydantic_config__: ClassVar = _FORBID

    mit_states: PairFolder | None = None
    source: DatasetSource | None = None
    attribute_column: str = "attribute"
    object_column: str = "object"
    split_column: str | None = Field("split", description="rows labelled train/val/test; null: split by unseen_pairs")
    unseen_pairs: tuple[str, ...] = Field(
        (), description="'attr obj' pairs never seen in training (with split_column: null)"
    )
    test_share: Annotated[float, Field(gt=0, lt=1)] = 0.2
    val_share: Annotated[float, Field(ge=0, lt=1)] = 0.1
    split_seed: Annotated[int, Field(ge=0)] = 0
    templates: str = Field("paper", description="paper | a3 | a3:<ids> (Table A3 templates, ensembled)")
    template: str | None = Field(None, description="your own prompt with one {} (with templates: paper)")
    world: Literal["closed", "open", "both"] = "closed"
    czsl_curve: Literal["paper", "authors"] = "paper"
    epochs: Annotated[int, Field(ge=1)] = 20
    dim: Annotated[int, Field(ge=1)] = 256
    lr: Annotated[float, Field(gt=0)] = 1e-3
    seed: Annotated[int, Field(ge=0)] = 0

    def check(self, *, source: str = "", at: str = "czsl") -> None:
        _one_source(self.mit_states, self.source, "mit_states", source=source, at=at)
        _check_templates(self.templates, self.template, source=source, at=at)
        if self.source is not None:
            self.source.check(source=source, location=f"{at}.source")
            columns = {"attribute_column": self.attribute_column, "object_column": self.object_column}
            if self.split_column is not None:
                columns["split_column"] = self.split_column
            for name, column in columns.items():
                if not column.strip():
                    raise spec_error(f"{at}.{name}", "is empty; name a column of the dataset", source=source)
                if column == self.source.image_column:
                    raise spec_error(f"{at}.{name}", f"is the image column {column!r}; name another", source=source)
            if len(set(columns.values())) < len(columns):
                raise spec_error(
                    f"{at}.object_column", "two of the columns are the same; name distinct columns", source=source
                )
        if self.mit_states is not None and (self.unseen_pairs or self.split_column != "split"):
            field_name = "unseen_pairs" if self.unseen_pairs else "split_column"
            raise spec_error(
                f"{at}.{field_name}",
                "the MIT-States layout has its own split files; remove it (or set mit_states.split_dir)",
                source=source,
            )
        if self.split_column is not None and self.unseen_pairs:
            raise spec_error(
                f"{at}.unseen_pairs",
                "give either split_column or unseen_pairs (with split_column: null), not both",
                source=source,
            )
        if self.source is not None and self.split_column is None:
            if len(self.unseen_pairs) < 2:
                raise spec_error(
                    f"{at}.unseen_pairs",
                    "without a split column, list >= 2 unseen 'attr obj' pairs (alternately test and val)",
                    source=source,
                )
            for index, pair in enumerate(self.unseen_pairs):
                if len(pair.split()) != 2:
                    raise spec_error(
                        f"{at}.unseen_pairs[{index}]", f"{pair!r} is not 'attribute object' (two words)", source=source
                    )
            if len(set(self.unseen_pairs)) < len(self.unseen_pairs):
                raise spec_error(f"{at}.unseen_pairs", "lists a pair twice; list each once", source=source)
            if self.test_share + self.val_share >= 1:
                raise spec_error(
                    f"{at}.val_share",
                    f"test_share + val_share = {self.test_share + self.val_share:g} leaves no training images; "
                    "keep their sum below 1",
                    source=source,
                )


@dataclass(frozen=True)
class FewShotSpec:
    """n-way k-shot on classes with a class × attribute table: the data, the episodes, the prompts."""

    __pydantic_config__: ClassVar = _FORBID

    cub: CubFolder | None = None
    source: DatasetSource | None = None
    attribute_table: str | None = Field(
        None, description="CSV: a 'class' column, then one column per attribute (0/1 or a share of images)"
    )
    attribute_groups: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description="group -> its attributes (mutually exclusive: one softmax each); "
        "left out: attributes named 'group::value'",
    )
    threshold: Annotated[float, Field(gt=0, le=1)] = 0.5
    split_column: str | None = Field(None, description="rows labelled train/test; null: split by test_share")
    test_share: Annotated[float, Field(gt=0, lt=1)] = 0.5
    split_seed: Annotated[int, Field(ge=0)] = 0
    ways: Annotated[tuple[Annotated[int, Field(ge=2, le=200)], ...], Field(min_length=1)] = (5, 10, 100, 200)
    shots: Annotated[tuple[Annotated[int, Field(ge=1)], ...], Field(min_length=1)] = (1, 5)
    episodes: Annotated[int, Field(ge=1)] = 600
    queries: Annotated[int, Field(ge=1)] = 15
    seed: Annotated[int, Field(ge=0)] = 0
    protocol: Literal["authors", "episodic"] = "authors"
    full_shot: bool = True
    C: Annotated[float, Field(gt=0)] = 1.0
    templates: str = Field("paper", description="paper | a3 | a3:<ids> (Table A3 templates, ensembled)")
    template: str | None = Field(None, description="your own prompt with one {} (with templates: paper)")
    attribute_phrase: str = Field(
        "object whose {group} is {value}", description="the concept phrase of an attribute: {group} and {value}"
    )

    def check(self, *, source: str = "", at: str = "few_shot") -> None:
        _one_source(self.cub, self.source, "cub", source=source, at=at)
        _check_templates(self.templates, self.template, source=source, at=at)
        for key in ("{group}", "{value}"):
            if key not in self.attribute_phrase:
                raise spec_error(
                    f"{at}.attribute_phrase", f"has no {key}; e.g. 'car whose {{group}} is {{value}}'", source=source
                )
        if self.source is not None:
            self.source.check(source=source, location=f"{at}.source")
            if not self.attribute_table:
                raise spec_error(
                    f"{at}.attribute_table",
                    "a dataset source needs its class x attribute table: add 'attribute_table: classes.csv'",
                    source=source,
                )
        elif self.attribute_table or self.attribute_groups or self.split_column:
            extra = (
                "attribute_table"
                if self.attribute_table
                else "attribute_groups"
                if self.attribute_groups
                else "split_column"
            )
            raise spec_error(f"{at}.{extra}", "CUB brings its own attributes and split; remove it", source=source)
        seen: dict[str, str] = {}
        for group, attributes in self.attribute_groups.items():
            if not attributes:
                raise spec_error(
                    f"{at}.attribute_groups.{group}", "is empty; list its attributes or remove it", source=source
                )
            for index, name in enumerate(attributes):
                if name in seen:
                    raise spec_error(
                        f"{at}.attribute_groups.{group}[{index}]",
                        f"attribute {name!r} is already in group {seen[name]!r}; groups are mutually exclusive",
                        source=source,
                    )
                seen[name] = group


def _one_source(paper: Any, dataset: Any, paper_name: str, *, source: str, at: str) -> None:
    given = [name for name, value in ((paper_name, paper), ("source", dataset)) if value is not None]
    check_exactly_one(
        given,
        f"{paper_name} (the paper's folder layout) or source (a datasets dataset)",
        location=at,
        source=source,
        joiner=" and ",
    )


def _check_templates(templates: str, template: str | None, *, source: str, at: str) -> None:
    from conceptforge.errors import InvalidArgumentError
    from conceptforge.loaders.compmap.prompts import parse_templates

    if templates.strip().lower() != "paper" and not _A3.match(templates.strip().lower()):
        raise spec_error(f"{at}.templates", f"{templates!r}: use paper, a3 or a3:<ids> (e.g. a3:1,4,7)", source=source)
    try:
        parse_templates(templates)
    except InvalidArgumentError as error:
        raise spec_error(f"{at}.templates", str(error).removeprefix("--templates "), source=source) from None
    if template is not None:
        if templates.strip().lower() != "paper":
            raise spec_error(
                f"{at}.template", "your own template replaces the paper's; it goes with templates: paper", source=source
            )
        if template.count("{}") != 1 or re.search(r"\{[^}]", template):
            raise spec_error(
                f"{at}.template",
                f"{template!r} must hold exactly one {{}} for the concept, e.g. 'a photo of {{}}'",
                source=source,
            )


@dataclass(frozen=True)
class CompMapBenchmarkSpec:
    """A CompMap benchmark: one of the two protocols (``czsl`` or ``few_shot``) on its data."""

    __pydantic_config__: ClassVar = _FORBID

    czsl: CzslSpec | None = None
    few_shot: FewShotSpec | None = None

    def check(self, *, source: str = "") -> None:
        given = [name for name in ("czsl", "few_shot") if getattr(self, name) is not None]
        if len(given) != 1:
            raise spec_error(
                "(top level)" if not given else "few_shot",
                "give exactly one protocol: czsl (attribute-object pairs) or few_shot (classes with attributes)"
                + (" (got both)" if given else ""),
                source=source,
            )
        (self.czsl or self.few_shot).check(source=source)  # type: ignore[union-attr]

    @property
    def task(self) -> str:
        """The ``conceptforge evaluate`` task that runs this protocol."""
        return CZSL_TASK if self.czsl is not None else FEW_SHOT_TASK

    @property
    def names_its_data(self) -> bool:
        """Whether the spec says where its data is (else: the folder given on the command line)."""
        if self.czsl is not None:
            return self.czsl.source is not None or bool(self.czsl.mit_states and self.czsl.mit_states.folder)
        assert self.few_shot is not None
        return self.few_shot.source is not None or bool(self.few_shot.cub and self.few_shot.cub.folder)

    def task_options(self) -> dict[str, Any]:
        """The task options this spec sets (each the same value a flag or ``--task-option`` gives)."""
        if self.czsl is not None:
            czsl = self.czsl
            options = {name: getattr(czsl, name) for name in ("world", "czsl_curve", "epochs", "dim", "lr", "seed")}
            options["templates"] = czsl.templates.strip().lower()
            if czsl.mit_states is not None:
                options["split_dir"] = czsl.mit_states.split_dir
                options["metadata"] = czsl.mit_states.metadata or ""
            return options
        few = self.few_shot
        assert few is not None
        options = {name: getattr(few, name) for name in ("ways", "shots", "episodes", "queries", "seed", "protocol")}
        options.update(full_shot=few.full_shot, C=few.C, templates=few.templates.strip().lower())
        return options


@dataclass(frozen=True)
class LoadedSpec:
    """A validated CompMap spec file and what a run takes from it."""

    file: BenchmarkSpecFile
    spec: CompMapBenchmarkSpec = field(repr=False)

    def resolve(self, path: str) -> Path:
        from conceptforge.specs.sources import resolve_path

        return resolve_path(path, self.file.base_dir)


def load_compmap_spec(spec_file: str | Path | None = None, *, preset: str | None = None) -> LoadedSpec:
    """Read and validate a CompMap spec file or preset (one line naming the field on error)."""
    loaded = load_benchmark_spec(spec_file, preset=preset, method=METHOD, spec_cls=CompMapBenchmarkSpec)
    return LoadedSpec(loaded, loaded.spec)
