"""Composite prompts: caption loading, a rule-based categoriser and yes/no question generation.

The paper drew captions from Visual Genome in which the concept's parent word is the subject
("the dog has a black nose" for every dog breed), sorted them into action / attribute /
counting / relation with few-shot GPT-3 (Figure 7) and wrote existence questions whose answer is
always "yes" (Table 4). Neither the captions nor the question code were released, so:

* captions come from a user file (JSONL or one ``<concept>.txt`` per concept);
* the categoriser is a transparent rule set (word lists below), replaceable by any callable
  ``caption -> list[str]`` (``--categoriser module:function``), and categories given in the
  caption file win over both;
* questions are produced by chunking the caption at verbs and prepositions into noun phrases
  ("is there <np>?" / "are there <np>?") plus an action question when a verb has no noun-phrase
  object ("is the cat licking herself?"), which reproduces Table 4 exactly.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError

logger = logging.getLogger(__name__)

CATEGORIES: tuple[str, ...] = ("action", "attribute", "counting", "relation")
Categoriser = Callable[[str], list[str]]

NUMBER_WORDS = {
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "dozen",
    "several",
    "many",
    "multiple",
    "pair",
    "couple",
    "group",
    "few",
    "both",
    "numerous",
}
AUXILIARIES = {
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "am",
    "has",
    "have",
    "had",
    "does",
    "do",
    "did",
    "there",
}
POSSESSION = {"has", "have", "had", "with", "wearing", "wears"}
PREPOSITIONS = {
    "on",
    "in",
    "under",
    "around",
    "out",
    "of",
    "near",
    "behind",
    "beside",
    "besides",
    "next",
    "to",
    "at",
    "by",
    "over",
    "above",
    "below",
    "beneath",
    "underneath",
    "inside",
    "outside",
    "into",
    "onto",
    "from",
    "between",
    "along",
    "against",
    "across",
    "through",
    "toward",
    "towards",
    "atop",
    "within",
    "upon",
    "off",
    "up",
    "down",
    "front",
    "top",
    "side",
    "with",
    "for",
    "about",
    "past",
    "beyond",
}
# Spatial relation cues: the prepositions that place one thing relative to another ("of", "with",
# "for", "to", "from" ... alone are not relations).
RELATION_WORDS = PREPOSITIONS - {
    "about",
    "besides",
    "beyond",
    "down",
    "for",
    "from",
    "of",
    "off",
    "past",
    "side",
    "to",
    "up",
    "with",
    "within",
}
ACTION_VERBS = {
    "eat",
    "eats",
    "ate",
    "bite",
    "bites",
    "hold",
    "holds",
    "held",
    "drive",
    "drives",
    "ride",
    "rides",
    "carry",
    "carries",
    "lick",
    "licks",
    "chase",
    "chases",
    "play",
    "plays",
    "run",
    "runs",
    "jump",
    "jumps",
    "fly",
    "flies",
    "swim",
    "swims",
    "sit",
    "sits",
    "sat",
    "stand",
    "stands",
    "walk",
    "walks",
    "look",
    "looks",
    "pull",
    "pulls",
    "push",
    "pushes",
    "drink",
    "drinks",
    "sleep",
    "sleeps",
    "climb",
    "climbs",
    "perch",
    "perches",
    "perched",
    "tow",
    "tows",
    "towing",
    "grab",
    "grabs",
    "catch",
    "catches",
}
NOT_VERBS_ING = {
    "building",
    "ceiling",
    "clothing",
    "railing",
    "awning",
    "thing",
    "something",
    "nothing",
    "anything",
    "king",
    "wing",
    "ring",
    "string",
    "painting",
    "spring",
    "morning",
    "evening",
    "icing",
    "stuffing",
    "frosting",
    "bedding",
    "siding",
    "lettering",
    "wedding",
    "pudding",
    "topping",
    "dumpling",
    "sibling",
    "duckling",
    "earring",
    "sling",
    "swing",
    "sing",
    "ping",
    "ding",
    "bring",
    "sting",
    "lighting",
    "writing",
    "opening",
    "landing",
    "parking",
    "crossing",
    "drawing",
    "covering",
    "housing",
    "filling",
    "netting",
    "fencing",
    "tubing",
    "wiring",
    "flooring",
    "seating",
    "shelving",
    "decking",
    "molding",
}
ATTRIBUTE_WORDS = {
    # colours
    "black",
    "white",
    "red",
    "blue",
    "green",
    "yellow",
    "brown",
    "gray",
    "grey",
    "orange",
    "pink",
    "purple",
    "silver",
    "gold",
    "golden",
    "tan",
    "beige",
    "dark",
    "light",
    "colorful",
    "colourful",
    "striped",
    "spotted",
    # size / shape / material / state
    "large",
    "big",
    "small",
    "little",
    "tiny",
    "huge",
    "long",
    "short",
    "tall",
    "wide",
    "round",
    "square",
    "wooden",
    "metal",
    "metallic",
    "plastic",
    "glass",
    "furry",
    "fluffy",
    "shiny",
    "old",
    "new",
    "young",
    "wet",
    "dry",
    "open",
    "closed",
    "empty",
    "full",
    "clean",
    "dirty",
    "bright",
    "thick",
    "thin",
    "fat",
    "curly",
    "pointy",
    "pointed",
    "floppy",
    "fuzzy",
    "soft",
    "hairy",
    "bald",
    "rusty",
    "painted",
    "parked",
}
PRONOUNS = {
    "it",
    "itself",
    "him",
    "himself",
    "her",
    "herself",
    "them",
    "themselves",
    "its",
    "his",
    "their",
    "one",
    "another",
    "other",
    "each",
    "someone",
    "something",
    "away",
    "around",
    "together",
    "there",
}
DETERMINERS = {"a", "an", "the", "this", "that", "these", "those", "some", "his", "her", "its", "their"}


def _words(caption: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:['’][a-z]+)?|[a-z]+(?:-[a-z]+)+", caption.lower())


def _is_number(word: str) -> bool:
    return word.isdigit() or word in NUMBER_WORDS


def _is_verb(word: str) -> bool:
    return (word.endswith("ing") and len(word) > 4 and word not in NOT_VERBS_ING) or word in ACTION_VERBS


def rule_based_categories(caption: str) -> list[str]:
    """Categories of a caption by word lists (sorted in CATEGORIES order; at least one).

    Figure 7's examples: "wood is under bird" -> relation; "the dog has a black nose" ->
    attribute; "there are two mouse" -> counting; "the monkey is biting the banana" -> action;
    "The bird is eating food out of the person's hand" -> action, relation.
    """
    words = _words(caption)
    found: set[str] = set()
    if any(_is_number(w) for w in words):
        found.add("counting")
    if any(_is_verb(w) for w in words):
        found.add("action")
    if any(w in RELATION_WORDS for w in words):
        found.add("relation")
    if any(w in ATTRIBUTE_WORDS for w in words) or any(w in POSSESSION for w in words):
        found.add("attribute")
    if not found:
        found.add("attribute")  # "a furry <x>"-style captions with unknown adjectives
    return [c for c in CATEGORIES if c in found]


def load_categoriser(reference: str | None) -> Categoriser:
    """``None``/``rules`` -> the rule set; ``module:function`` -> that callable."""
    if reference in (None, "", "rules"):
        return rule_based_categories
    module_name, _, attribute = reference.partition(":")
    if not attribute:
        raise InvalidArgumentError(f"--categoriser must be 'rules' or 'module:function', got {reference!r}")
    try:
        function = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise InvalidArgumentError(f"cannot load categoriser {reference!r}: {error}") from None
    return function


def _chunks(words: Sequence[str]) -> list[tuple[str, list[str]]]:
    """Split words into ('np'|'verb'|'prep'|'aux', words) runs."""
    runs: list[tuple[str, list[str]]] = []
    for word in words:
        if word in AUXILIARIES:
            kind = "aux"
        elif _is_verb(word):
            kind = "verb"
        elif word in PREPOSITIONS - DETERMINERS:
            kind = "prep"
        else:
            kind = "np"
        if runs and runs[-1][0] == kind:
            runs[-1][1].append(word)
        else:
            runs.append((kind, [word]))
    return runs


def _is_plural(phrase: list[str]) -> bool:
    if any(_is_number(w) and w not in {"pair", "couple", "group", "dozen"} for w in phrase):
        return True
    head = phrase[-1]
    return head.endswith("s") and not head.endswith(("ss", "us", "is", "'s", "’s")) and len(head) > 2


def generate_questions(caption: str) -> list[str]:
    """Yes/no existence questions for a caption (Table 4); every answer is "yes"."""
    words = [w for w in _words(caption)]
    runs = _chunks(words)
    questions: list[str] = []
    for kind, run in runs:
        if kind != "np":
            continue
        phrase = [w for w in run if w not in PRONOUNS or w in DETERMINERS]
        if not phrase or all(w in DETERMINERS for w in phrase):
            continue
        verb = "are" if _is_plural(phrase) else "is"
        questions.append(f"{verb} there {' '.join(phrase)}?")
    # An action without a noun-phrase object ("cat is licking herself") gets its own question.
    for index, (kind, run) in enumerate(runs):
        if kind != "verb":
            continue
        rest = [w for k, r in runs[index + 1 :] for w in r]
        objectless = all(w in PRONOUNS for w in rest)
        subject = next((r for k, r in reversed(runs[:index]) if k == "np"), None)
        if objectless and subject:
            head = [w for w in subject if w not in DETERMINERS]
            plural = _is_plural(head)
            phrase = " ".join(["the", *head, *run, *rest])
            questions.append(f"{'are' if plural else 'is'} {phrase}?")
    seen: set[str] = set()
    return [q for q in questions if not (q in seen or seen.add(q))]


@dataclass(frozen=True)
class Caption:
    """One composite caption for a concept (ground-truth wording, as in Visual Genome)."""

    concept: str
    caption: str
    categories: tuple[str, ...] = ()
    subject: str | None = None
    image: Path | None = None  # optional real image the caption describes (VQA baseline)
    questions: tuple[str, ...] = field(default=())


def _parse_categories(value: object, where: str) -> tuple[str, ...]:
    if value in (None, "", []):
        return ()
    items = [value] if isinstance(value, str) else list(value)  # type: ignore[arg-type]
    parsed = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip().lower()
            if part and part not in CATEGORIES:
                raise DataFormatError(f"{where}: unknown category {part!r} (use {', '.join(CATEGORIES)})")
            if part:
                parsed.append(part)
    return tuple(c for c in CATEGORIES if c in parsed)


def _text(path: Path) -> str:
    """A captions file as text; a binary file given by mistake is one line, not a traceback."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataFormatError(f"{path} is not a UTF-8 text file of captions") from None


def load_captions(path: str | Path, concepts: Iterable[str]) -> dict[str, list[Caption]]:
    """Read captions for ``concepts`` from a JSONL file or a folder of ``<concept>.txt`` files.

    JSONL lines: ``{"concept": "beagle", "caption": "the dog has a black nose"}`` with optional
    ``categories`` (list or comma string), ``subject`` (word to replace by V*) and ``image``
    (path, relative to the file, of the real image the caption describes).
    """
    path = Path(path)
    wanted = list(concepts)
    result: dict[str, list[Caption]] = {name: [] for name in wanted}
    if path.is_dir():
        for name in wanted:
            file = path / f"{name}.txt"
            if not file.exists():
                continue
            for line in _text(file).splitlines():
                if line.strip():
                    result[name].append(Caption(concept=name, caption=" ".join(line.split())))
    elif path.is_file():
        for number, line in enumerate(_text(path).splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataFormatError(f"{where}: not valid JSON ({error.msg})") from None
            if not isinstance(record, dict) or not record.get("concept") or not record.get("caption"):
                raise DataFormatError(f"{where}: each line needs 'concept' and 'caption'")
            if record["concept"] not in result:
                continue
            image = record.get("image")
            image_path = None
            if image:
                image_path = Path(image) if Path(image).is_absolute() else path.parent / image
            result[record["concept"]].append(
                Caption(
                    concept=record["concept"],
                    caption=" ".join(str(record["caption"]).split()),
                    categories=_parse_categories(record.get("categories"), where),
                    subject=record.get("subject"),
                    image=image_path,
                )
            )
    else:
        raise DataNotFoundError(f"captions {path} do not exist")
    return result


def with_questions_and_categories(captions: Iterable[Caption], categoriser: Categoriser) -> list[Caption]:
    out = []
    for caption in captions:
        categories = caption.categories or tuple(c for c in CATEGORIES if c in categoriser(caption.caption))
        out.append(
            Caption(
                concept=caption.concept,
                caption=caption.caption,
                categories=categories,
                subject=caption.subject,
                image=caption.image,
                questions=tuple(generate_questions(caption.caption)),
            )
        )
    return out


def substitute_subject(caption: str, subjects: Sequence[str], phrase: str) -> str | None:
    """Replace the first mention of a subject word (singular or plural) by the concept phrase.

    R(a, b) -> R(V*, b): "the dog has a black nose" -> "the <object> has a black nose". Returns
    None when no subject word occurs (the caption is then not about the concept).
    """
    for subject in subjects:
        if not subject:
            continue
        pattern = re.compile(rf"\b({re.escape(subject)})(es|s)?\b", re.IGNORECASE)
        match = pattern.search(caption)
        if match:
            replacement = phrase + ("s" if match.group(2) else "")
            return caption[: match.start()] + replacement + caption[match.end() :]
    return None
