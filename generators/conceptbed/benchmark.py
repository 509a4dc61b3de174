"""The ConceptBed benchmark spec: any concepts, each with its class noun and its reference images.

A spec file (``conceptforge generate conceptbed --spec FILE``)::

    method: conceptbed
    spec_version: 1
    name: my-mugs
    concepts:
      - name: glazed_mug                # the concept (a row's `concept`, the oracle's label)
        class_noun: mug                 # its parent word: caption subject, Textual Inversion's init
        images: {folder: refs/glazed_mug}
      - name: watercolour
        kind: style                     # styles are sampled as 'a <subject> in the style of V*'
        class_noun: watercolour painting
        images: {dataset: {path: my_dataset}, label: watercolour}
    composition_templates: ["a {} on a wooden table", "two {}s next to a red car"]
    learner: {name: textual-inversion, steps: 3000}
    sampling: {num_images: 100}

Why a dataclass per part: pydantic validates the type hints, so a wrong field is one line naming
its path (``concepts[1].images.label``) before any model is read; :meth:`check` adds the rules
between fields. Where the reference images are is resolved later
(:mod:`conceptforge.generators.conceptbed.spec_resolution`), against the spec file's folder.
The paper's concepts (Table 9) are the preset ``conceptbed-paper``: their images live in PACS,
ImageNet and CUB folders named under ``roots``.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Field

from conceptforge.generators.conceptbed.concepts import PACS_ENTITIES
from conceptforge.specs import DatasetSource, check_exactly_one, spec_error

#: The paper's sampling (ConceptBed Sec. 3.2.2, Table 5).
PAPER_CONCEPT_PROMPT = "A photo of {}"
PAPER_STYLE_PROMPT = "A photo of {article} {subject} in the style of {}"
PAPER_NUM_IMAGES = 100
PAPER_INFERENCE_STEPS = 50
PAPER_GUIDANCE = 7.5
#: The paper's reference-image sources (their folders are named under ``roots``).
PAPER_SOURCE_KINDS = ("pacs", "imagenet", "cub")
IMAGE_SOURCE_KINDS = ("folder", "dataset", *PAPER_SOURCE_KINDS)


def _slots(template: str) -> list[str]:
    """The ``{...}`` fields of a format string (``"a {} on {x}"`` -> ``["", "x"]``)."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


@dataclass(frozen=True)
class ReferenceImages:
    """Where one concept's reference images are: exactly one of the kinds below."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    folder: Annotated[str | None, Field(description="a folder of this concept's images (an ImageFolder class)")] = None
    dataset: Annotated[DatasetSource | None, Field(description="a `datasets` dataset; `label` picks the rows")] = None
    label: Annotated[str | int | None, Field(description="the dataset's class_column value of this concept")] = None
    pacs: Annotated[str | None, Field(description="a PACS domain (style) under roots.pacs")] = None
    imagenet: Annotated[
        str | None, Field(description="an ImageNet class (folder or synset name) under roots.imagenet")
    ] = None
    cub: Annotated[str | None, Field(description="a CUB class folder (NNN.Name) under roots.cub")] = None

    @property
    def kind(self) -> str:
        return next(kind for kind in IMAGE_SOURCE_KINDS if getattr(self, kind) is not None)

    def check(self, *, source: str, location: str) -> None:
        given = [kind for kind in IMAGE_SOURCE_KINDS if getattr(self, kind) is not None]
        check_exactly_one(
            given, "folder, dataset (with label), pacs, imagenet or cub", location=location, source=source
        )
        if self.dataset is not None:
            self.dataset.check(source=source, location=f"{location}.dataset")
            if self.label is None:
                raise spec_error(
                    f"{location}.label",
                    f"a dataset source needs the {self.dataset.class_column!r} value of this concept's rows; "
                    "add e.g. 'label: glazed_mug'",
                    source=source,
                )
        elif self.label is not None:
            raise spec_error(f"{location}.label", "applies to a dataset source only; remove it", source=source)
        for kind in ("folder", *PAPER_SOURCE_KINDS):
            value = getattr(self, kind)
            if value is not None and not str(value).strip():
                raise spec_error(f"{location}.{kind}", "is empty; name the folder or class", source=source)


@dataclass(frozen=True)
class ConceptEntry:
    """One concept to learn."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1, description="the concept's name (rows, oracle labels)")]
    class_noun: Annotated[
        str,
        Field(
            min_length=1,
            description="its parent word (e.g. 'dog' for a beagle): the caption subject replaced by V*, "
            "Textual Inversion's initializer",
        ),
    ]
    images: ReferenceImages
    kind: Annotated[
        Literal["object", "style", "cub"],
        Field(description="style: sampled on the style subjects; cub: an object (the paper's birds)"),
    ] = "object"
    prompt_name: Annotated[
        str | None,
        Field(
            description="the words naming the concept in prompts (DreamBooth's 'sks <words>', class images); "
            "default: the name with '_' as spaces",
        ),
    ] = None


@dataclass(frozen=True)
class PaperRoots:
    """The folders of the paper's datasets, for concepts whose images are ``pacs``/``imagenet``/``cub``."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    pacs: Annotated[str | None, Field(description="PACS: <root>/<domain>/<entity>/*.jpg")] = None
    imagenet: Annotated[str | None, Field(description="ImageNet train: <wnid>/*.JPEG (+ LOC_synset_mapping.txt)")] = (
        None
    )
    cub: Annotated[str | None, Field(description="CUB-200-2011 images: NNN.Class_Name/*.jpg")] = None


@dataclass(frozen=True)
class Prompts:
    """The concept split's prompts; ``{}`` is V* (the learned phrase)."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    concept: Annotated[str, Field(description="objects: one '{}' for V*")] = PAPER_CONCEPT_PROMPT
    style: Annotated[
        str,
        Field(
            description="styles: '{}' for V*, '{subject}' for a style subject, '{article}' for its a/an",
        ),
    ] = PAPER_STYLE_PROMPT
    style_subjects: Annotated[
        tuple[str, ...], Field(description="what a style is shown on, in turn (the paper: PACS's 7 entities)")
    ] = PACS_ENTITIES


@dataclass(frozen=True)
class LearnerSettings:
    """The concept learner (unset fields: Table 5's values for the learner)."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    # learners.LEARNERS, spelled out for the JSON Schema (a test keeps the two equal)
    name: Literal["textual-inversion", "dreambooth", "custom-diffusion", "none"] | None = None
    preset: Literal["paper", "lora"] | None = None
    steps: Annotated[int, Field(ge=1)] | None = None
    learning_rate: Annotated[float, Field(gt=0)] | None = None
    placeholder_token: str | None = None
    initializer_token: str | None = None
    dreambooth_mode: Literal["lora", "full"] | None = None
    num_class_images: Annotated[int, Field(ge=0)] | None = None


@dataclass(frozen=True)
class SamplingSettings:
    """How many images and how they are sampled (the paper: 100 per concept, 50 steps, guidance 7.5)."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    num_images: Annotated[int, Field(ge=1)] = PAPER_NUM_IMAGES
    num_inference_steps: Annotated[int, Field(ge=1)] = PAPER_INFERENCE_STEPS
    guidance_scale: Annotated[float, Field(ge=0)] = PAPER_GUIDANCE
    resolution: Annotated[int, Field(ge=8, le=2048, multiple_of=8)] | None = None
    seed: Annotated[int, Field(ge=0)] = 0


@dataclass(frozen=True)
class ConceptBedBenchmarkSpec:
    """A ConceptBed benchmark: the concepts, their prompts and captions, the learner and sampling."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    concepts: Annotated[tuple[ConceptEntry, ...], Field(min_length=1)]
    roots: PaperRoots = field(default_factory=PaperRoots)
    max_reference_images: Annotated[int, Field(ge=1)] = 100
    prompts: Prompts = field(default_factory=Prompts)
    captions: Annotated[
        str | None, Field(description="composite captions: JSONL of {concept, caption} or a folder of <concept>.txt")
    ] = None
    composition_templates: Annotated[
        tuple[str, ...],
        Field(description="composite captions for every concept; '{}' is the class noun, replaced by V*"),
    ] = ()
    max_captions: Annotated[int, Field(ge=1)] | None = None
    learner: LearnerSettings = field(default_factory=LearnerSettings)
    sampling: SamplingSettings = field(default_factory=SamplingSettings)

    def check(self, *, source: str = "") -> None:
        """Rules between fields: unique names, one image source each, templates with their slot."""
        seen: dict[str, int] = {}
        for index, concept in enumerate(self.concepts):
            where = f"concepts[{index}]"
            if concept.name in seen:
                raise spec_error(
                    f"{where}.name",
                    f"{concept.name!r} is already concepts[{seen[concept.name]}]; give each concept its own name",
                    source=source,
                )
            if "/" in concept.name or concept.name.strip() != concept.name or concept.name in (".", ".."):
                raise spec_error(
                    f"{where}.name",
                    f"{concept.name!r} names a folder of the run: no '/', no surrounding spaces",
                    source=source,
                )
            seen[concept.name] = index
            concept.images.check(source=source, location=f"{where}.images")
        self._check_prompts(source)
        for index, template in enumerate(self.composition_templates):
            if _slots(template) != [""]:
                raise spec_error(
                    f"composition_templates[{index}]",
                    f"{template!r} needs exactly one '{{}}' where the concept goes, e.g. 'a {{}} on a beach'",
                    source=source,
                )
        if self.learner.dreambooth_mode and self.learner.name not in (None, "dreambooth"):
            raise spec_error(
                "learner.dreambooth_mode", f"applies to dreambooth, not {self.learner.name}; remove it", source=source
            )

    def _check_prompts(self, source: str) -> None:
        if _slots(self.prompts.concept) != [""]:
            raise spec_error(
                "prompts.concept",
                f"{self.prompts.concept!r} needs exactly one '{{}}' for V*, e.g. 'A photo of {{}}'",
                source=source,
            )
        style = _slots(self.prompts.style)
        if style.count("") != 1 or any(slot not in ("", "subject", "article") for slot in style):
            raise spec_error(
                "prompts.style",
                f"{self.prompts.style!r} needs one '{{}}' for V* and may use only {{subject}} and {{article}}",
                source=source,
            )
        if any(c.kind == "style" for c in self.concepts):
            if "subject" not in style:
                raise spec_error("prompts.style", "needs '{subject}': what each style image shows", source=source)
            if not self.prompts.style_subjects:
                raise spec_error(
                    "prompts.style_subjects",
                    "is empty; name what a style is shown on, e.g. [dog, house]",
                    source=source,
                )
