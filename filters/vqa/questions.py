"""The paper's multiple-choice question about one CUB attribute group (SUB paper, §4.2).

"What type of {group} does this bird have? Please pick between A) {a1} B) {a2} … X) Other",
listing every manifestation of the group in CUB's order plus "Other". The option *values* stay
in CUB's spelling (``curved_(up_or_down)``); only the question text is humanised.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from conceptforge.cub import group_words, value_words
from conceptforge.errors import DataFormatError, InvalidArgumentError

OTHER = "Other"
LETTERS = string.ascii_uppercase
#: Appended to the paper's question so that chat models answer with the letter first (the same
#: instruction InternVL's own multiple-choice evaluation uses). Set ``answer_hint=""`` for the
#: paper's text verbatim.
DEFAULT_ANSWER_HINT = "Answer with the option's letter from the given choices directly."
#: The paper's question (§4.2), which the evaluation tasks ask too; a SUB spec's ``vqa_question``
#: (the preset ``sub-cub-paper`` writes this one) replaces it for the filter of that benchmark.
PAPER_QUESTION = "What type of {group} does this {domain} have? Please pick between {choices}"


@dataclass(frozen=True)
class MultipleChoiceQuestion:
    group: str
    options: tuple[str, ...]  # CUB values in letter order, last one ``Other``
    text: str

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple(LETTERS[: len(self.options)])

    def option_index(self, value: str) -> int:
        try:
            return self.options.index(value)
        except ValueError:
            raise InvalidArgumentError(
                f"{value!r} is not an option of {self.group} ({', '.join(self.options)})"
            ) from None


def build_question(
    group: str,
    values: Sequence[str],
    *,
    answer_hint: str = DEFAULT_ANSWER_HINT,
    template: str = PAPER_QUESTION,
    domain: str = "bird",
) -> MultipleChoiceQuestion:
    """The question for ``group`` with options ``values`` + ``Other`` lettered A, B, …

    ``template`` names ``{group}`` (its words), ``{domain}`` (what the images show) and ``{choices}``."""
    options = tuple(values) + (OTHER,)
    if len(values) == 0:
        raise DataFormatError(f"attribute group {group!r} has no values to ask about")
    if len(set(options)) != len(options):
        raise DataFormatError(f"attribute group {group!r} lists an option twice")
    if len(options) > len(LETTERS):
        raise DataFormatError(f"attribute group {group!r} has {len(values)} values: more options than letters A-Z")
    choices = " ".join(f"{LETTERS[i]}) {value_words(option)}" for i, option in enumerate(options))
    text = template.format(group=group_words(group), domain=domain, choices=choices)
    if answer_hint:
        text = f"{text}\n{answer_hint}"
    return MultipleChoiceQuestion(group, options, text)


class QuestionBuilder:
    """Questions for every group of a vocabulary (``group -> values``), built once each."""

    def __init__(
        self,
        groups: Mapping[str, Sequence[str]],
        *,
        answer_hint: str = DEFAULT_ANSWER_HINT,
        template: str = PAPER_QUESTION,
        domain: str = "bird",
        group_templates: Mapping[str, str] | None = None,
    ) -> None:
        self.groups = {group: list(values) for group, values in groups.items()}
        self.answer_hint = answer_hint
        self.template, self.domain = template, domain
        self.group_templates = dict(group_templates or {})  # a group's own question (a SUB spec's)
        self._cache: dict[str, MultipleChoiceQuestion] = {}

    def __call__(self, group: str) -> MultipleChoiceQuestion:
        if group not in self._cache:
            if group not in self.groups:
                known = ", ".join(sorted(self.groups)[:5])
                raise InvalidArgumentError(
                    f"unknown attribute group {group!r}: the question builder knows "
                    f"{len(self.groups)} groups ({known}{', ...' if len(self.groups) > 5 else ''})"
                )
            self._cache[group] = build_question(
                group,
                self.groups[group],
                answer_hint=self.answer_hint,
                template=self.group_templates.get(group, self.template),
                domain=self.domain,
            )
        return self._cache[group]
