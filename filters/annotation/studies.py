"""The four human studies: what is asked, which columns they need, and how items are grouped.

A study is data, not code paths: the server, the browser page and the scoring all read the same
:class:`Study`, so adding a question means adding it here once. The wording follows the papers'
interfaces (SUB Appendix E Figs. 7–8, ConceptBed Appendix G Figs. 8–10).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from conceptforge import cub
from conceptforge.cub import display_name, group_words, value_words
from conceptforge.errors import DataFormatError, InvalidArgumentError

YES_SOMEWHAT_NO = ("yes", "somewhat", "no")
# SUB §5.2: "yes" = 1, "somewhat" = 0.5, "no" = 0.
ANSWER_SCORES = {"yes": 1.0, "somewhat": 0.5, "no": 0.0}
NONE_VALUE = "none"
OPTION_LETTERS = "abcdefghijklmopqrtuvwxyz"  # `n` is kept for "none"; `s` too, to avoid confusion
OPTION_LETTERS = "".join(letter for letter in OPTION_LETTERS if letter not in "ns")


@dataclass(frozen=True)
class AnswerOption:
    value: str | int
    label: str
    key: str  # the keyboard shortcut


@dataclass(frozen=True)
class Question:
    id: str
    text: str  # may contain {placeholders} filled from the item's display fields
    options: tuple[AnswerOption, ...] = ()  # empty: options come with each item (sub-attribute)


@dataclass(frozen=True)
class Study:
    name: str
    title: str
    instructions: str
    splits: tuple[str, ...]  # preferred splits, first present wins
    required_columns: tuple[str, ...]
    questions: tuple[Question, ...]
    default_per_group: int
    group_of: Callable[[Mapping[str, Any]], str]
    group_doc: str
    image_slots: Callable[[Mapping[str, Any]], list[str]] = field(default=lambda row: ["image"])
    #: The question compares each image with its concept's reference images: every row needs some.
    needs_references: bool = False

    def question(self, question_id: str) -> Question:
        for question in self.questions:
            if question.id == question_id:
                return question
        raise KeyError(question_id)


def split_attribute(attribute: str) -> tuple[str, str]:
    """``has_crown_color::black`` -> (``has_crown_color``, ``black``); ``("", "")`` if empty."""
    return cub.split_attribute(attribute) if attribute else ("", "")


def _rating_question(question_id: str, text: str, low: str, high: str) -> Question:
    labels = {1: f"1 – {low}", 2: "2", 3: "3", 4: "4", 5: f"5 – {high}"}
    return Question(question_id, text, tuple(AnswerOption(k, labels[k], str(k)) for k in range(1, 6)))


def _ysn(question_id: str, text: str) -> Question:
    return Question(question_id, text, tuple(AnswerOption(v, v, v[0]) for v in YES_SOMEWHAT_NO))


SUB_COLUMNS = ("image", "item_id", "bird", "attribute", "group", "value", "removed_attribute")

STUDIES: dict[str, Study] = {
    "sub-faithfulness": Study(
        name="sub-faithfulness",
        title="SUB: is the substitution faithful?",
        instructions=(
            "Look at the bird. First say whether the target attribute is clearly present, then "
            "whether the bird still looks like the named reference species apart from that change. "
            "Keys: y / s / n answer the highlighted question, Backspace goes back, Enter submits."
        ),
        splits=("test", "candidates"),
        required_columns=SUB_COLUMNS,
        questions=(
            _ysn("attribute", "Does this bird have {attribute_text}?"),
            _ysn("bird", "Does it still look like a {bird_text} (apart from that change)?"),
        ),
        default_per_group=40,  # SUB §4.3: 40 random images per attribute
        group_of=lambda row: str(row["attribute"]),
        group_doc="target attribute (S+)",
    ),
    "sub-attribute": Study(
        name="sub-attribute",
        title="SUB: which value is present?",
        instructions=(
            "Pick the value of the named body part that the bird shows, or none if no option fits. "
            "Keys: the letter beside each option, 0 for none; Enter submits."
        ),
        splits=("test", "candidates"),
        required_columns=SUB_COLUMNS,
        questions=(Question("value", "Which {group_text} does this bird have?"),),
        default_per_group=3,  # SUB §5.3: three images per bird–attribute pairing
        group_of=lambda row: f"{row['bird']}|{row['attribute']}",
        group_doc="bird–attribute pair",
    ),
    "conceptbed-alignment": Study(
        name="conceptbed-alignment",
        title="ConceptBed: same concept as the references?",
        instructions=(
            "Rate how likely the large image shows the same concept as the three reference images "
            "(1 = not at all, 5 = exactly the same concept). Keys: 1–5, Enter submits."
        ),
        splits=("concept",),
        required_columns=("image", "item_id", "concept", "learner", "reference_images"),
        questions=(
            _rating_question(
                "rating", "How likely is this image the same concept as the references?", "not at all", "exact match"
            ),
        ),
        default_per_group=10,
        group_of=lambda row: f"{row['learner']}|{row['concept']}",
        group_doc="learner–concept pair",
        image_slots=lambda row: ["image"] + [f"ref{k}" for k in range(len(row.get("reference_images") or []))],
        needs_references=True,
    ),
    "conceptbed-composition": Study(
        name="conceptbed-composition",
        title="ConceptBed: does the image match its caption?",
        instructions=(
            "Rate how well the image matches the caption (1 = not at all, 5 = exact match). Keys: 1–5, Enter submits."
        ),
        splits=("composition",),
        required_columns=("image", "item_id", "concept", "learner", "caption", "category"),
        questions=(
            _rating_question("rating", "How well does the image match the caption?", "not at all", "exact match"),
        ),
        default_per_group=25,
        group_of=lambda row: f"{row['learner']}|{row['category']}",
        group_doc="learner–composition category pair",
    ),
}


def check_references(study: Study, rows: Mapping[str, Mapping[str, Any]], root: Any) -> None:
    """Refuse to serve a study that shows references for a dataset that has none.

    Why: a ConceptBed dataset made without ``--embed-references`` (the default) names its
    references by id only, so the alignment study served "same concept as the references?" with
    no reference on the page, and the ratings meant nothing.
    """
    if not study.needs_references:
        return
    bare = sorted({str(row.get("concept")) for row in rows.values() if not row.get("reference_images")})
    if bare:
        shown = ", ".join(bare[:3]) + (", ..." if len(bare) > 3 else "")
        raise DataFormatError(
            f"{root} has no reference images for {len(bare)} concept(s) ({shown}): study {study.name} rates each image "
            "against its concept's references; generate the dataset with --embed-references"
        )


def get_study(name: str) -> Study:
    try:
        return STUDIES[name]
    except KeyError:
        raise InvalidArgumentError(f"unknown study {name!r}; choose one of: {', '.join(STUDIES)}") from None


def with_article(phrase: str) -> str:
    """``solid tail pattern`` -> ``a solid tail pattern``, ``orange breast color`` -> ``an orange …``."""
    if not phrase:
        return phrase
    return f"{'an' if phrase[0].lower() in 'aeiou' else 'a'} {phrase}"


def display_fields(study: Study, row: Mapping[str, Any]) -> dict[str, str]:
    """What the page shows beside the image (never the answer for sub-attribute)."""
    if study.name == "sub-faithfulness":
        group, value = split_attribute(str(row["attribute"]))
        return {
            "attribute_text": with_article(f"{value_words(value)} {group_words(group)}".strip()),
            "bird_text": display_name(str(row["bird"])),
        }
    if study.name == "sub-attribute":
        return {"group_text": group_words(str(row["group"]))}
    if study.name == "conceptbed-composition":
        return {"caption": str(row["caption"])}
    return {}


def item_options(
    study: Study, row: Mapping[str, Any], group_values: Mapping[str, list[str]]
) -> list[AnswerOption] | None:
    """Per-item options (sub-attribute: every value of the group, then none)."""
    if study.name != "sub-attribute":
        return None
    values = group_values.get(str(row["group"]), [])
    if len(values) > len(OPTION_LETTERS):
        raise DataFormatError(
            f"group {row['group']} has {len(values)} values; at most {len(OPTION_LETTERS)} fit the keyboard"
        )
    options = [AnswerOption(v, v.replace("_", " "), OPTION_LETTERS[i]) for i, v in enumerate(values)]
    return options + [AnswerOption(NONE_VALUE, "none of these", "0")]


def question_options(
    study: Study, question: Question, row: Mapping[str, Any], group_values: Mapping[str, list[str]]
) -> list[AnswerOption]:
    if question.options:
        return list(question.options)
    return item_options(study, row, group_values) or []


def validate_answers(
    study: Study, answers: Any, row: Mapping[str, Any], group_values: Mapping[str, list[str]]
) -> dict[str, Any]:
    """Return the answers normalised, or raise ValueError saying what is wrong."""
    if not isinstance(answers, dict):
        raise ValueError("answers must be an object")
    expected = {q.id for q in study.questions}
    if set(answers) != expected:
        raise ValueError(f"answers must have exactly the keys {sorted(expected)}")
    clean: dict[str, Any] = {}
    for question in study.questions:
        allowed = [o.value for o in question_options(study, question, row, group_values)]
        value = answers[question.id]
        if isinstance(value, bool) or value not in allowed or type(value) is not type(allowed[0]):
            raise ValueError(f"answer {value!r} to {question.id!r} is not one of {allowed}")
        clean[question.id] = value
    return clean
