"""The by-answer protocols' single source of truth: the multiple-choice item, its prompt, the parsers.

Why one module: the by-answer protocols (``choose-by-answer``, ``match-by-answer``), the served
endpoints and the harness exports (lmms-eval, VLMEvalKit, inspect-ai) must ask the *same bytes*
and read answers by the *same rules*, or their numbers cannot be compared. Everything that
decides what a model is asked and how its words are scored lives here, and nowhere else.

**The item.** :class:`ChoiceItem` is one multiple-choice question about one image: the question,
the option texts lettered A, B, … in a fixed order, the index of the right one and a category for
breakdowns. :func:`sub_choice_items` and :func:`binding_choice_items` build them from each task's
data, in a stable order (the order the task reads its items in).

**The prompt** (:func:`render_choice_prompt`) is the lmms-eval / LLaVA multiple-choice layout
(lmms-eval's MMBench, SEED-Bench and ScienceQA tasks; LLaVA-1.5's ``model_vqa_mmbench``)::

    <question>
    A. <option A>
    B. <option B>
    Answer with the option's letter from the given choices directly.

with the image before the text in the chat turn. :func:`render_yes_no_prompt` is the VQAScore
question the probability ``match`` protocol asks (``Does this figure show "<text>"? Please answer
yes or no.``), and :func:`render_yes_no_question` appends "Please answer yes or no." to a question
that already is a yes/no question (ConceptBed's composition questions).

**The parsers** are deterministic and documented rule by rule in :func:`parse_choice` and
:func:`parse_yes_no`; they follow the heuristic extraction of VLMEvalKit (``can_infer_option`` /
``can_infer_text``: a lone option letter, else the one option text the answer names) and
lmms-eval (MME's yes/no rule), made stricter where those guess: an answer naming two letters or
two options is refused. An answer no rule reads gives ``None``: the sample is kept with its raw
text, counted as unparsed and scored wrong (the convention of both toolkits, never a re-ask and
never a GPT judge).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conceptforge.errors import DataFormatError
from conceptforge.filters.vqa.questions import LETTERS as LETTERS  # the SUB filter letters options the same way
from conceptforge.loaders.harness.units import COUNT, MetricSpec

#: lmms-eval's / LLaVA's multiple-choice post-prompt (also the SUB filter's answer hint).
CHOICE_INSTRUCTION = "Answer with the option's letter from the given choices directly."
#: The VQAScore question (t2v_metrics' LLaVA-1.5 wording), as the probability ``match`` asks it.
YES_NO_TEMPLATE = 'Does this figure show "{text}"? Please answer yes or no.'
YES_NO_SUFFIX = " Please answer yes or no."
#: SUB's question stem (SUB paper §4.2); the options follow on their own lines, lettered. The
#: domain is the paper's "bird", or what a user's spec names (a SUB release made from a spec).
SUB_QUESTION = "What type of {group} does this {domain} have?"
SUB_DOMAIN = "bird"
SUB_OTHER = "Other"  # SUB's none-option, last, as the paper and the SUB filter write it
SUB_OTHER_KEY = "none"  # its key in the sample rows (sub-vlm's candidates)
BINDING_QUESTION = "Which caption describes the image?"
#: The generation length the by-answer protocols ask for: a letter, "Yes"/"No", or a short phrase.
DEFAULT_MAX_NEW_TOKENS = 16

#: Per-sample columns of a by-answer row: the model's raw words, what the parser read ("B",
#: "yes"/"no"; null when nothing) and whether it read anything.
ANSWER_COLUMN = "answer"
PARSED_ANSWER_COLUMN = "parsed_answer"
PARSED_COLUMN = "parsed"
UNPARSED_METRIC = "unparsed_answers"
#: its unit, for every by-answer task: a count of answers (of its n), never a share
UNPARSED_ANSWERS = MetricSpec(UNPARSED_METRIC, COUNT)
#: Their arrow types, for a task's ``columns`` (null in the rows of the probability protocols).
BY_ANSWER_COLUMNS = ((ANSWER_COLUMN, "string"), (PARSED_ANSWER_COLUMN, "string"), (PARSED_COLUMN, "bool"))
#: The by-answer columns of a row no answer was asked for (a probability or embedding protocol).
NO_ANSWER: dict[str, Any] = {ANSWER_COLUMN: None, PARSED_ANSWER_COLUMN: None, PARSED_COLUMN: None}


# ----------------------------------------------------------------------------------- the item
@dataclass(frozen=True)
class ChoiceItem:
    """One multiple-choice question about one image.

    ``options`` are the texts shown (lettered A, B, … in this order); ``option_keys`` the task's
    own names for them (SUB: ``has_crown_color::black`` and ``none``; binding: the caption
    itself), same order, defaulting to the texts. ``answer_index`` indexes both."""

    item_id: str
    image: Any = field(compare=False, repr=False)
    question: str
    options: tuple[str, ...]
    answer_index: int
    category: str
    option_keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 2 <= len(self.options) <= len(LETTERS):
            raise DataFormatError(f"item {self.item_id}: {len(self.options)} options, need 2 to {len(LETTERS)}")
        if not 0 <= self.answer_index < len(self.options):
            raise DataFormatError(f"item {self.item_id}: answer index {self.answer_index} outside its options")
        if not self.option_keys:
            object.__setattr__(self, "option_keys", tuple(self.options))
        elif len(self.option_keys) != len(self.options):
            raise DataFormatError(f"item {self.item_id}: {len(self.option_keys)} option keys for {len(self.options)}")

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple(LETTERS[: len(self.options)])

    @property
    def answer_letter(self) -> str:
        return LETTERS[self.answer_index]

    def index_of(self, letter: str | None) -> int | None:
        """The option index of a parsed letter (``None`` stays ``None``)."""
        return None if letter is None else self.letters.index(letter)


def sub_choice_items(
    items: Sequence[Any], groups: Mapping[str, Sequence[str]], *, domain: str | None = None
) -> Iterator[ChoiceItem]:
    """SUB's question per image, in the order of ``items`` (item ids ``"0"``, ``"1"``, … as the
    sub-vlm rows ``<index>/S+`` use): the options are every attribute of the substituted
    attribute's group in the vocabulary's order (``groups``: ``CubMetadata.groups`` or a spec
    release's ``SpecVocabulary.groups``, full names) plus "Other" — the SUB VLM protocol's
    options — and the answer is the substituted attribute (S+). ``domain`` is what the question
    says the image shows: the paper's bird unless a spec names its own (``None``: the paper's).
    S− ("that attribute" must not be chosen) is not a one-answer question; sub-vlm scores it from
    the same parsed answer."""
    from conceptforge.cub import attribute_value, group_words, value_words

    for index, item in enumerate(items):
        members = list(groups.get(item.group, ()))
        if item.attribute not in members:
            raise DataFormatError(f"SUB item {index}: {item.attribute} is not an attribute of group {item.group}")
        yield ChoiceItem(
            item_id=str(index),
            image=item.image,
            question=SUB_QUESTION.format(group=group_words(item.group), domain=domain or SUB_DOMAIN),
            options=(*(value_words(attribute_value(a)) for a in members), SUB_OTHER),
            answer_index=members.index(item.attribute),
            category=item.group,
            option_keys=(*members, SUB_OTHER_KEY),
        )


def binding_choice_items(splits: Mapping[str, Any]) -> Iterator[ChoiceItem]:
    """Binding's images against their stored candidate captions (stored order, lettered), split
    by split in ``splits``' order; item ids ``<split>/<item id>`` as binding-clip's rows; the
    category is the row's ``swap_kind`` (the kinds of its distractors, ``+``-joined)."""
    for name, split in splits.items():
        for i in range(len(split)):
            label_index = int(split.label_index[i])
            kinds = list(split.kinds[i])
            yield ChoiceItem(
                item_id=f"{name}/{split.item_ids[i] if split.item_ids else i}",
                image=split.images[i] if split.images else None,
                question=BINDING_QUESTION,
                options=tuple(split.candidates[i]),
                answer_index=label_index,
                category="+".join(sorted({k for j, k in enumerate(kinds) if j != label_index})),
            )


# ----------------------------------------------------------------------------------- prompts
def render_choice_prompt(item: ChoiceItem) -> str:
    """The exact text asked for ``item`` (the lmms-eval / LLaVA layout; module docstring)."""
    lines = [item.question, *(f"{letter}. {option}" for letter, option in zip(item.letters, item.options))]
    return "\n".join([*lines, CHOICE_INSTRUCTION])


def render_yes_no_prompt(text: str) -> str:
    """The yes/no question asked to match an image with ``text`` (a caption, a prompt)."""
    return YES_NO_TEMPLATE.format(text=text)


def render_yes_no_question(question: str) -> str:
    """A question that is already yes/no ("is there a dog?"), capitalised, asked for yes or no."""
    return question[:1].upper() + question[1:] + YES_NO_SUFFIX


# ----------------------------------------------------------------------------------- parsers
_MARKDOWN = re.compile(r"\*\*|__|`")
_EDGE = " \t\r\n\"'*_.,:;!?()[]{}<>"
#: Rule 2: a leading letter in a marker: "(B)", "[B]", "B.", "B)", "B:" then a space or the end.
_LEADING = re.compile(r"^(?:\(([A-Za-z])\)|\[([A-Za-z])\]|([A-Za-z])[.):\]])(?=\s|$)")
#: Rule 3: a phrase naming the letter: "answer is B", "Answer: (C)", "option D", "choice is B"; a
#: lowercase letter only where the sentence ends or punctuation follows ("answer is b.", not "is a bird").
_PHRASE = re.compile(
    r"(?i:\b(?:answer|option|choice)\b(?:\s+(?:is|would\s+be|will\s+be))?\s*[:=-]?\s*(?:(?i:option|choice)\s+)?)"
    r"[(\[]?([A-Z]|[a-z](?=$|[.,;:!?)\]]))(?![A-Za-z0-9])"
)
#: Rule 4's tokenisation (VLMEvalKit's ``can_infer_option``): these characters become spaces.
_TOKEN_BREAKS = str.maketrans({c: " " for c in ".()[],:;!?*#{}\"'"})
_ARTICLE_LETTERS = ("A", "I")
_CONJUNCTIONS = ("and", "or", "nor")
_WORDS = re.compile(r"[a-z0-9]+")


def _normalise(answer: str) -> str:
    """Markdown emphasis dropped, runs of spaces and tabs made one space, line breaks kept."""
    return re.sub(r"[ \t]+", " ", _MARKDOWN.sub("", str(answer))).strip()


def _lone_letter(text: str, letters: Sequence[str]) -> str | None:
    core = text.strip(_EDGE)
    return core.upper() if len(core) == 1 and core.upper() in letters else None


def _letter_tokens(text: str, letters: Sequence[str]) -> set[str]:
    """The option letters standing as words (uppercase), less an article/pronoun "A"/"I"."""
    found = set()
    sentences = re.split(r"(?<=[.!?])\s+|\n+", text)
    for sentence in sentences:
        tokens = sentence.translate(_TOKEN_BREAKS).split()
        for position, token in enumerate(tokens):
            if token not in letters:
                continue
            following = tokens[position + 1] if position + 1 < len(tokens) else ""
            if (
                position == 0
                and token in _ARTICLE_LETTERS
                and following[:1].islower()
                and following not in _CONJUNCTIONS
            ):
                continue  # "A black crown.", "I think so": the English word, not the letter
            found.add(token)
    return found


def _option_text(text: str, letters: Sequence[str], options: Sequence[str]) -> str | None:
    words = " ".join(_WORDS.findall(text.lower()))
    normalised = [" ".join(_WORDS.findall(str(o).lower())) for o in options]
    exact = [letter for letter, option in zip(letters, normalised) if option and option == words]
    if len(exact) == 1:
        return exact[0]
    named = [(letter, o) for letter, o in zip(letters, normalised) if o and f" {o} " in f" {words} "]
    # an option named only as part of a longer named option ("red" inside "dark red") does not count
    kept = [letter for letter, o in named if not any(o != other and f" {o} " in f" {other} " for _, other in named)]
    return kept[0] if len(kept) == 1 else None


def parse_choice(answer: str | None, letters: Sequence[str], options: Sequence[str] = ()) -> str | None:
    """The option letter an answer names, or ``None`` (unparsed: kept, counted, scored wrong).

    ``letters`` are the item's letters (``ChoiceItem.letters``), ``options`` its option texts in
    the same order (may be empty: then rule 5 is skipped). Markdown emphasis (``**``, ``__``,
    backticks) is dropped first. The first rule that reads the answer decides:

    1. **Lone letter**: the whole answer, or its first line, is one of the letters once the
       surrounding spaces and punctuation are stripped: ``B``, ``b``, ``(B)``, ``B.``, ``"C"``,
       ``**D**``, ``B\\nBecause …``. Either case (a lone letter is nothing else).
    2. **Leading marker**: the answer begins with a letter in a marker — ``(B)``, ``[B]``,
       ``B.``, ``B)``, ``B:`` — then a space: ``B. black``, ``(C) white crown``. Either case
       (the marker says it is a letter). A marked letter that is not an option falls through.
    3. **Answer phrase**: "answer", "option" or "choice" (any case), optionally "is" / "would
       be" and ``:``, then an *uppercase* letter not followed by a letter or digit — or a
       lowercase one followed by the end or punctuation: ``The answer is B``, ``Answer: (C)``,
       ``I choose option D``, ``the answer is b.`` (not ``the answer is a bird``). Every such
       phrase must name the same letter; two different letters: ``None`` (ambiguous).
    4. **Letter tokens** (VLMEvalKit's ``can_infer_option``): punctuation ``.()[],:;!?*#{}"'``
       becomes spaces and the *uppercase* option letters standing as words are counted — one
       distinct letter: it; two or more: ``None`` (ambiguous, no rule 5). An "A" or "I" that
       opens a sentence and is followed by a lowercase word other than and/or/nor is the
       English article or pronoun ("A black crown", "I think …"), not a letter. Lowercase
       letters never count here ("a", "i" are words).
    5. **Option text** (VLMEvalKit's ``can_infer_text``, on whole words): compared lowercased,
       on alphanumeric words only — the answer equal to exactly one option's text: it; else the
       options whose text appears in the answer as whole words, less those appearing only inside
       another named option's text ("red" inside "dark red"): exactly one: it, else ``None``.

    Anything else — empty, a refusal, a letter that is not an option, two options — is ``None``.
    """
    if answer is None:
        return None
    letters = tuple(str(letter).upper() for letter in letters)
    text = _normalise(answer)
    if not text:
        return None
    first_line = text.split("\n", 1)[0]
    letter = _lone_letter(text, letters) or _lone_letter(first_line, letters)
    if letter:
        return letter
    leading = _LEADING.match(text)
    if leading:
        marked = next(g for g in leading.groups() if g).upper()
        if marked in letters:
            return marked
    phrased = {m.group(1).upper() for m in _PHRASE.finditer(text) if m.group(1).upper() in letters}
    if phrased:
        return phrased.pop() if len(phrased) == 1 else None
    tokens = _letter_tokens(text, letters)
    if tokens:
        return tokens.pop() if len(tokens) == 1 else None
    return _option_text(text, letters, options) if options else None


def parse_yes_no(answer: str | None) -> bool | None:
    """``True`` (yes), ``False`` (no) or ``None`` (unparsed: kept, counted, scored wrong).

    Case-insensitive, on the answer's alphabetic words (punctuation and markdown ignored):

    1. **First word**: "yes" or "no" opens the answer: ``Yes.``, ``no``, ``No, there is no dog``,
       ``**Yes**, it does`` (lmms-eval's MME rule reads the answer's start the same way).
    2. **Only one of them**: the answer contains the word "yes" and not "no", or "no" and not
       "yes": ``There is no dog in the image`` → no, ``I would say yes`` → yes.
    3. Otherwise — both, neither ("The figure shows a dog", "not sure"), empty — ``None``. "not"
       alone is not read as no: "not only a dog but …" says nothing of the kind.
    """
    if answer is None:
        return None
    words = re.findall(r"[a-z]+", str(answer).lower())
    if not words:
        return None
    if words[0] in ("yes", "no"):
        return words[0] == "yes"
    has_yes, has_no = "yes" in words, "no" in words
    return has_yes if has_yes != has_no else None


def yes_no_label(value: bool | None) -> str | None:
    """How a parsed yes/no is written in the rows' ``parsed_answer`` column."""
    return None if value is None else ("yes" if value else "no")


# ----------------------------------------------------------------------------------- sample rows
#: The ``prediction`` of a row whose answer no rule read.
UNPARSED = "(unparsed)"


def answer_scores(count: int, chosen: int | None, *, label_index: int | None = None) -> list[float]:
    """The ``scores`` a by-answer row stores over its ``count`` candidates: 1 at the chosen
    option, 0 elsewhere. Unparsed (``chosen`` None): 0 on the label and 1 on every other
    candidate when ``label_index`` is given — wrong, its error spread evenly over the
    distractors, so tie-aware credits and error breakdowns read it as the protocol scores it
    (binding) — else all 0 (SUB, whose rows carry the verdict rule themselves)."""
    if chosen is not None:
        return [1.0 if i == chosen else 0.0 for i in range(count)]
    if label_index is None:
        return [0.0] * count
    return [0.0 if i == label_index else 1.0 for i in range(count)]


def answer_columns(answer: str, letter: str | None) -> dict[str, Any]:
    """The three by-answer columns of a row: the raw answer, the parsed letter/yes-no, the flag."""
    return {ANSWER_COLUMN: answer, PARSED_ANSWER_COLUMN: letter, PARSED_COLUMN: letter is not None}


@dataclass(frozen=True)
class ChoiceAnswer:
    """A model's answer in words to one :class:`ChoiceItem`, its parsed letter and that letter's
    option index (``None`` both when no letter could be read)."""

    answer: str
    letter: str | None
    index: int | None

    def mark(self, row: dict[str, Any]) -> None:
        """Add the by-answer columns to a sample row; an unparsed answer predicts :data:`UNPARSED`."""
        row.update(answer_columns(self.answer, self.letter))
        if self.letter is None:
            row["prediction"] = UNPARSED


def ask_choices(answerer: Any, questions: Sequence[ChoiceItem], *, batch_size: int) -> list[ChoiceAnswer]:
    """Each question asked in words (:func:`render_choice_prompt`, :data:`DEFAULT_MAX_NEW_TOKENS`)
    and its letter parsed. Why one helper: every choose-by-answer task (SUB, binding) must ask and
    parse the same way, or their unparsed counts would not compare."""
    answers = answerer.answer_text(
        [q.image for q in questions],
        [render_choice_prompt(q) for q in questions],
        max_new_tokens=DEFAULT_MAX_NEW_TOKENS,
        batch_size=batch_size,
    )
    out = []
    for question, answer in zip(questions, answers):
        letter = parse_choice(answer, question.letters, question.options)
        out.append(ChoiceAnswer(answer, letter, question.index_of(letter)))
    return out


def collect_choice_answers(
    ctx: Any,
    answerer: Any,
    questions: Sequence[ChoiceItem],
    record: Callable[[int, ChoiceItem, ChoiceAnswer], dict[str, Any]],
    *,
    item_ids: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Every question of a choose-by-answer task asked (:func:`ask_choices`) through the run's
    per-sample cache (``ctx.samples``, ``ctx.batch_size`` at a time): ``record(position, question,
    answer)`` turns one answer into what the cache keeps for that item (the task's rows, marked with
    the answer). ``item_ids`` name the items in the cache (default: each question's ``item_id``).
    Why one helper: SUB and binding must batch, cache and resume their by-answer runs alike."""

    def score(positions: list[int]) -> list[dict[str, Any]]:
        asked = [questions[p] for p in positions]
        replies = ask_choices(answerer, asked, batch_size=ctx.batch_size)
        return [record(position, question, answer) for position, question, answer in zip(positions, asked, replies)]

    ids = [q.item_id for q in questions] if item_ids is None else list(item_ids)
    return ctx.samples.collect(ids, score, chunk=ctx.batch_size)


def is_by_answer(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the rows were written by a by-answer protocol (their ``parsed`` flag is set)."""
    return any(row.get(PARSED_COLUMN) is not None for row in rows)


def check_choice_row(row: Mapping[str, Any], options: Sequence[str]) -> str | None:
    """A by-answer row against itself (``--from-predictions``): the parser, run again on the raw
    answer with the row's option texts ``options``, must give the stored letter and flag, and the
    ``prediction`` must be the candidate of that letter (:data:`UNPARSED` when none)."""
    candidates = list(row["candidates"])
    letters = LETTERS[: len(candidates)]
    expected = parse_choice(row.get(ANSWER_COLUMN), letters, options)
    if row.get(PARSED_ANSWER_COLUMN) != expected:
        return (
            f"parsed answer {row.get(PARSED_ANSWER_COLUMN)!r} but the parser reads {expected!r} "
            f"from the answer {row.get(ANSWER_COLUMN)!r}"
        )
    if bool(row.get(PARSED_COLUMN)) != (expected is not None):
        return f"parsed is {row.get(PARSED_COLUMN)} but the answer {'parses' if expected else 'does not parse'}"
    want = UNPARSED if expected is None else candidates[letters.index(expected)]
    if row.get("prediction") != want:
        return f"prediction {row.get('prediction')!r} but the parsed answer names {want!r}"
    return None


def unparsed_metric(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"unparsed_answers": Metric(count, None, answers)}`` over rows that carry the ``parsed``
    flag (none: ``{}``, a probability protocol). Computed from the rows: a rescored file reports
    the same; a run warns when any answer was unparsed."""
    from conceptforge.loaders.harness.task import Metric

    flags = [row[PARSED_COLUMN] for row in rows if row.get(PARSED_COLUMN) is not None]
    if not flags:
        return {}
    missed = sum(1 for flag in flags if not flag)
    return {UNPARSED_METRIC: Metric(float(missed), None, len(flags))}
