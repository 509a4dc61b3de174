"""Prompt templates for concept prompting (Section 4.2 and Table A3 of CompMap paper).

A concept is embedded from one prompt per template; with several templates the normalised text
embeddings are averaged and renormalised ("embedding ensembling", as CLIP does for ImageNet).

Template choices (``parse_templates``):

- ``paper``: the main-paper prompts — CUB attributes "a photo of bird whose {group} is {value}",
  CUB classes "the bird is {class}", MIT-States "this is {attr}", "this is {obj}",
  "this is {attr} {obj}";
- ``a3``: all seven templates of Table A3, ensembled;
- ``a3:1,4,7``: the listed Table A3 templates (1-based ids), ensembled; ``a3:2`` is one template.

With Table A3 templates the CUB concept phrase keeps the bird context, e.g. "itap of a bird
whose bill shape is needle" — the paper introduced that prior because part attributes
("size", "shape") are ambiguous without it.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from conceptforge.argtypes import ArgType, Examples
from conceptforge.errors import InvalidArgumentError

TABLE_A3_TEMPLATES: tuple[str, ...] = (
    "itap of a {}",
    "a bad photo of the {}",
    "a origami {}",
    "a photo of the large {}",
    "a {} in a video game",
    "art of the {}",
    "a photo of the small {}",
)

CUB_ATTRIBUTE_TEMPLATE = "a photo of bird whose {group} is {value}"
CUB_CLASS_TEMPLATE = "the bird is {name}"
SPEC_ATTRIBUTE_TEMPLATE = "a photo of {}"  # the paper's CUB template around a spec's attribute phrase
MIT_TEMPLATE = "this is {}"


@dataclass(frozen=True)
class TemplateChoice:
    """``paper`` (the main-paper prompts) or a tuple of Table A3 templates to ensemble."""

    name: str
    a3_templates: tuple[str, ...] = ()
    own_template: str = ""  # a spec's own prompt with one {} in place of the paper's (with ``paper``)

    @property
    def is_paper(self) -> bool:
        return not self.a3_templates

    def fill(self, phrase: str, *, paper_template: str) -> list[str]:
        """Prompts for one concept: the paper's own template or every chosen Table A3 one."""
        if self.is_paper:
            return [(self.own_template or paper_template).format(phrase)]
        return [t.format(phrase) for t in self.a3_templates]


def parse_templates(text: str) -> TemplateChoice:
    text = text.strip().lower()
    if text == "paper":
        return TemplateChoice("paper")
    if text == "a3":
        return TemplateChoice("a3", TABLE_A3_TEMPLATES)
    if text.startswith("a3:"):
        try:
            ids = [int(x) for x in text[3:].split(",") if x.strip()]
        except ValueError:
            ids = []
        if not ids or any(not 1 <= i <= len(TABLE_A3_TEMPLATES) for i in ids):
            raise InvalidArgumentError(
                f"--templates {text!r}: list Table A3 ids 1..{len(TABLE_A3_TEMPLATES)}, e.g. a3:1,4,7"
            )
        return TemplateChoice(text, tuple(TABLE_A3_TEMPLATES[i - 1] for i in ids))
    raise InvalidArgumentError(f"--templates must be 'paper', 'a3' or 'a3:<ids>', got {text!r}")


def with_own_template(choice: TemplateChoice, template: str | None) -> TemplateChoice:
    """``choice`` with a spec's own template in place of the paper's (None: unchanged)."""
    if not template:
        return choice
    return TemplateChoice(f"own {template!r}", choice.a3_templates, template)


def attribute_prompts(group: str, value: str, choice: TemplateChoice, *, phrase: str, template: str) -> list[str]:
    """A spec's attribute prompts: its ``phrase`` ("car whose {group} is {value}") in its template
    (paper: ``template``, "a photo of {}" by default) or in each chosen Table A3 template."""
    text = phrase.format(group=group, value=value)
    if choice.is_paper:
        return [(choice.own_template or template).format(text)]
    return choice.fill(text, paper_template="{}")


def cub_attribute_prompts(group: str, value: str, choice: TemplateChoice) -> list[str]:
    if choice.is_paper:
        return [CUB_ATTRIBUTE_TEMPLATE.format(group=group, value=value)]
    return choice.fill(f"bird whose {group} is {value}", paper_template="{}")


def cub_class_prompts(name: str, choice: TemplateChoice) -> list[str]:
    if choice.is_paper:
        return [CUB_CLASS_TEMPLATE.format(name=name)]
    return choice.fill(f"{name}, a type of bird", paper_template="{}")


def mit_prompts(phrase: str, choice: TemplateChoice) -> list[str]:
    """``phrase`` is an attribute, an object or "attr obj"."""
    return choice.fill(phrase, paper_template=MIT_TEMPLATE)


class TemplatesOption(ArgType):
    """The ``templates`` task option (``paper``, ``a3`` or ``a3:<ids>``), checked when the option
    is given, so a bad id list is refused before any model loads; the value stays the text."""

    def __init__(self) -> None:
        self.__name__ = "templates"

    def __call__(self, text: str) -> str:
        try:
            parse_templates(str(text))
        except InvalidArgumentError as error:
            raise argparse.ArgumentTypeError(str(error).removeprefix("--templates ")) from None
        return str(text).strip().lower()

    def good_example(self, paths: Examples) -> str:
        return "a3:1,4"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["a3:0", f"a3:{len(TABLE_A3_TEMPLATES) + 1}", "a3:", "papers", ""]

    def __repr__(self) -> str:
        return self.__name__
