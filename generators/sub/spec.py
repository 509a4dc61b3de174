"""A SUB benchmark's specification as the generator uses it, and the class x substitution plan.

The specification comes from a spec file (:mod:`conceptforge.generators.sub.benchmark`); the
paper's — the 33 reference birds (App. A), the guidance birds (App. B, Table 3), the 32
substitutions (App. C), the per-category prompt templates (Sec. 4.1, App. D) and the TDG
schedules (Sec. 5) — is the preset ``sub-cub-paper`` (:func:`load_spec`). "Bird" in the names
below is the reference class of any domain: the paper's domain gave the code its words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from conceptforge.cub import CubMetadata, bird_name, display_name, split_attribute, value_words
from conceptforge.errors import DataNotFoundError, InvalidArgumentError, SpecError
from conceptforge.generators.sub.benchmark import SubBenchmarkSpec
from conceptforge.generators.sub.schedule import TDGParams

SUB_PAPER_PRESET = "sub-cub-paper"
NEEDS_CUB = "(needs --cub-dir)"  # a guidance bird only CUB can choose, shown by dry runs without it


@dataclass(frozen=True)
class GroupSpec:
    category: str
    phrase: str
    reference_template: str | None = None
    from_paper: bool = False
    values: tuple[str, ...] = ()  # empty: the source's (CUB's) values of the group
    question: str | None = None  # this group's own VQA question template


@dataclass(frozen=True)
class SubSpec:
    """A benchmark's specification (the paper's: :func:`load_spec`)."""

    reference_birds: tuple[str, ...]
    substitutions: tuple[str, ...]
    guidance_birds: Mapping[str, str]
    colour_guidance_bird: str
    tdg_params: Mapping[str, TDGParams]
    templates: Mapping[str, Mapping[str, str]]
    plain_template: str
    groups: Mapping[str, GroupSpec]
    domain: str = "bird"
    vqa_question: str = "What type of {group} does this {domain} have? Please pick between {choices}"
    class_percent: float = 50.0
    drop_present: bool = True
    cub: bool = True  # the source is CUB (attribute names has_<group>::<value>, --cub-dir)

    def group(self, group: str) -> GroupSpec:
        if group not in self.groups:
            raise InvalidArgumentError(
                f"no prompt template for CUB attribute group {group!r}; known groups: {', '.join(sorted(self.groups))}"
            )
        return self.groups[group]

    def split(self, attribute: str) -> tuple[str, str]:
        """(group, value) of ``group::value`` (CUB's ``has_<group>::<value>`` for a CUB source)."""
        if self.cub:
            return split_attribute(attribute)
        group, sep, value = attribute.partition("::")
        if not sep or group not in self.groups or not value:
            raise InvalidArgumentError(
                f"attribute {attribute!r} is not group::value with a group of the spec ({', '.join(self.groups)})"
            )
        return group, value


def sub_spec_from(benchmark: SubBenchmarkSpec) -> SubSpec:
    """The generator's view of a validated spec file."""
    groups = {
        name: GroupSpec(g.category, g.phrase, g.reference, g.from_paper, tuple(g.values), g.question)
        for name, g in benchmark.groups.items()
    }
    return SubSpec(
        reference_birds=tuple(benchmark.classes),
        substitutions=tuple(benchmark.substitutions),
        guidance_birds=dict(benchmark.guidance.named),
        colour_guidance_bird=benchmark.guidance.generic,
        tdg_params={name: TDGParams(k=t.k, tmin=t.tmin, tmax=t.tmax) for name, t in benchmark.tdg.items()},
        templates={name: {"reference": t.reference, "guidance": t.guidance} for name, t in benchmark.templates.items()},
        plain_template=benchmark.plain_template,
        groups=groups,
        domain=benchmark.domain,
        vqa_question=benchmark.vqa_question,
        class_percent=benchmark.presence.class_percent,
        drop_present=benchmark.presence.drop_present,
        cub=benchmark.source.kind == "cub",
    )


@lru_cache(maxsize=1)
def load_spec() -> SubSpec:
    """The SUB paper's specification: the preset ``sub-cub-paper``."""
    from conceptforge.specs import load_benchmark_spec

    return sub_spec_from(load_benchmark_spec(preset=SUB_PAPER_PRESET, method="sub", spec_cls=SubBenchmarkSpec).spec)


def _fix_article(phrase: str) -> str:
    """``a orange colored breast`` -> ``an orange colored breast`` (phrases only, never birds:
    the paper writes "a European Goldfinch")."""
    return re.sub(r"^a (?=[aeiouAEIOU])", "an ", phrase)


@dataclass(frozen=True)
class Substitution:
    """S+: one target attribute with its category, guidance bird and TDG schedule."""

    attribute: str
    group: str
    value: str
    category: str
    guidance_bird: str  # CUB-style name (``Brown_Thrasher``) or a generic word (``bird``)
    tdg: TDGParams


@dataclass(frozen=True)
class Pair:
    """One reference bird R with one substitution S (or, for reference selection, none)."""

    bird: str
    attribute: str
    group: str
    value: str
    category: str
    removed_attribute: str
    guidance_bird: str
    prompt_reference: str
    prompt_guidance: str
    tdg: TDGParams | None

    @property
    def slug(self) -> str:
        return attribute_slug(self.attribute) if self.attribute else "plain"


def published_attribute(attribute: str) -> str:
    """The published SUB's name of an attribute (its ``attr_label`` names):
    ``has_bill_shape::needle`` -> ``has_bill_shape--needle`` (CUB writes ``::``)."""
    return attribute.replace("::", "--")


def attribute_slug(attribute: str) -> str:
    """A file-name-safe form: ``has_bill_shape::curved_(up_or_down)`` -> ``has_bill_shape--curved__up_or_down_``."""
    return re.sub(r"[^A-Za-z0-9._+-]", "_", attribute.replace("::", "--"))


def make_substitution(
    attribute: str,
    *,
    spec: SubSpec | None = None,
    cub: CubMetadata | None = None,
    guidance_bird: str | None = None,
) -> Substitution:
    """Build S+ for any CUB attribute.

    Guidance bird: colour -> the generic "bird" (paper); shape/pattern -> ``guidance_bird`` if
    given, else the paper's Table 3, else (attributes outside the paper) the CUB class whose
    images most often show the attribute.
    """
    spec = spec or load_spec()
    group, value = spec.split(attribute)
    group_spec = spec.group(group)
    category = group_spec.category
    if category == "colour":
        guide = guidance_bird or spec.colour_guidance_bird
    elif guidance_bird:
        guide = guidance_bird
    elif attribute in spec.guidance_birds:
        guide = spec.guidance_birds[attribute]
    elif cub is not None:
        guide = cub.most_typical_class(attribute)
    else:
        raise InvalidArgumentError(
            f"no guidance bird for {attribute}: pass one in the candidate spec or give --cub-dir"
        )
    return Substitution(attribute, group, value, category, guide, spec.tdg_params[category])


def make_prompts(bird: str, substitution: Substitution, *, spec: SubSpec | None = None) -> tuple[str, str]:
    """(c_R, c_G) for bird R and substitution S, as in Section 4.1 / Appendix D."""
    spec = spec or load_spec()
    group_spec = spec.group(substitution.group)
    templates = spec.templates[substitution.category]
    phrase = _fix_article(group_spec.phrase.format(value=value_words(substitution.value)))
    fields = {"class": display_name(bird), "guide": display_name(substitution.guidance_bird), "phrase": phrase}
    reference = (group_spec.reference_template or templates["reference"]).format(**fields)
    guidance = templates["guidance"].format(**fields)
    return reference, guidance


def plain_prompt(bird: str, *, spec: SubSpec | None = None) -> str:
    """The plain bird prompt used for reference-bird selection: ``A photo of a Blue Jay``."""
    return (spec or load_spec()).plain_template.format(**{"class": display_name(bird)})


@dataclass
class PairPlan:
    """The pairs to generate and the pairs left out because the bird already has S+."""

    pairs: list[Pair] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (bird, attribute)


def plan_pairs(
    birds: Sequence[str],
    attributes: Sequence[str],
    *,
    cub: CubMetadata | None,
    drop_present: bool = True,
    guidance_birds: Mapping[str, str] | None = None,
    tdg_overrides: Mapping[str, TDGParams] | None = None,
    spec: SubSpec | None = None,
) -> PairPlan:
    """All birds x attributes, in that order; S- from CUB's class-level labels.

    ``drop_present`` leaves out pairs whose bird's class-level labels already mark S+ present
    (S+ = S-, paper Sec. 4.2/4.3). ``tdg_overrides`` replaces a category's schedule.

    ``cub=None`` gives the plan a dry run can show without CUB: nothing is checked or dropped, S-
    is empty, and a guidance bird only CUB can choose is written ``(needs --cub-dir)``.
    """
    spec = spec or load_spec()
    if cub is not None:
        for bird in birds:
            cub.check_bird(bird)
        for attribute in attributes:
            cub.check_attribute(attribute)
    substitutions = []
    for attribute in attributes:
        guidance_bird = (guidance_birds or {}).get(attribute)
        if cub is None and guidance_bird is None and attribute not in spec.guidance_birds:
            if spec.group(spec.split(attribute)[0]).category != "colour":  # colour: the generic "bird"
                guidance_bird = NEEDS_CUB
        sub = make_substitution(attribute, spec=spec, cub=cub, guidance_bird=guidance_bird)
        if tdg_overrides and sub.category in tdg_overrides:
            sub = Substitution(
                sub.attribute, sub.group, sub.value, sub.category, sub.guidance_bird, tdg_overrides[sub.category]
            )
        substitutions.append(sub)
    plan = PairPlan()
    for bird in birds:
        for sub in substitutions:
            if (
                cub is not None
                and drop_present
                and sub.attribute in cub.present_in_group(bird, sub.group, spec.class_percent)
            ):
                plan.dropped.append((bird, sub.attribute))
                continue
            reference, guidance = make_prompts(bird, sub, spec=spec)
            plan.pairs.append(
                Pair(
                    bird=bird,
                    attribute=sub.attribute,
                    group=sub.group,
                    value=sub.value,
                    category=sub.category,
                    removed_attribute=cub.removed_attribute(bird, sub.group, spec.class_percent)
                    if cub is not None
                    else "",
                    guidance_bird=sub.guidance_bird,
                    prompt_reference=reference,
                    prompt_guidance=guidance,
                    tdg=sub.tdg,
                )
            )
    return plan


def plan_reference_selection(
    cub: CubMetadata | None, classes: Iterable[str] | None = None, *, spec: SubSpec | None = None
) -> PairPlan:
    """One plain-prompt "pair" per CUB class (all 200, or ``classes``) for reference-bird selection."""
    spec = spec or load_spec()
    if cub is None and not classes:
        raise InvalidArgumentError("reference selection over all CUB classes needs --cub-dir (or name --classes)")
    names = [bird_name(c) for c in classes] if classes else list(cub.classes)  # "017.Cardinal" works too
    plan = PairPlan()
    for bird in names:
        if cub is not None:
            cub.check_bird(bird)
        plan.pairs.append(Pair(bird, "", "", "", "", "", "", plain_prompt(bird, spec=spec), "", None))
    return plan


@dataclass(frozen=True)
class CandidateSpec:
    """The filters' candidate selection output: ``{"birds": [...], "attributes": [...]}``.

    An optional ``"guidance_birds": {attribute: bird}`` sets guidance birds for shape and pattern
    attributes outside the paper's Table 3.
    """

    birds: tuple[str, ...]
    attributes: tuple[str, ...]
    guidance_birds: Mapping[str, str] = field(default_factory=dict)


def read_candidate_spec(path: str | Path) -> CandidateSpec:
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise DataNotFoundError(f"cannot read --candidate-spec {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise SpecError(f"--candidate-spec {path} is not valid JSON: {error}") from None
    if not isinstance(raw, dict):
        raise SpecError(f"--candidate-spec {path} must hold a JSON object with 'birds' and 'attributes'")
    birds, attributes = raw.get("birds"), raw.get("attributes")
    for key, value in (("birds", birds), ("attributes", attributes)):
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            raise SpecError(f"--candidate-spec {path}: '{key}' must be a non-empty list of strings")
    guidance = raw.get("guidance_birds") or {}
    if not isinstance(guidance, dict):
        raise SpecError(f"--candidate-spec {path}: 'guidance_birds' must map attributes to bird names")
    return CandidateSpec(tuple(dict.fromkeys(birds)), tuple(dict.fromkeys(attributes)), dict(guidance))
