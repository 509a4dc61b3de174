"""The by-answer parsers and prompt, on answers of the kind chat VLMs give, each expectation worked
out by hand from the rules in ``by_answer.parse_choice`` / ``parse_yes_no`` (not by running them)."""

from __future__ import annotations

import pytest

from conceptforge.errors import DataFormatError
from conceptforge.loaders.harness.by_answer import (
    ChoiceItem,
    binding_choice_items,
    parse_choice,
    parse_yes_no,
    render_choice_prompt,
    render_yes_no_prompt,
    render_yes_no_question,
    sub_choice_items,
)

# A SUB crown-colour question: A blue, B brown, C black, D white, E Other.
OPTIONS = ("blue", "brown", "black", "white", "Other")
LETTERS = ("A", "B", "C", "D", "E")

CHOICE_TABLE = [
    # rule 1: lone letter (whole answer or first line), either case
    ("C", "C"),
    ("c", "C"),
    (" (C) ", "C"),
    ("C.", "C"),
    ('"D"', "D"),
    ("**B**", "B"),
    ("B\nThe crown of this bird is brown.", "B"),
    ("[E]", "E"),
    # rule 2: leading marker
    ("C. black", "C"),
    ("(D) white", "D"),
    ("b) brown", "B"),
    ("A: blue", "A"),
    # rule 3: a phrase names the letter
    ("The answer is C.", "C"),
    ("Answer: (B)", "B"),
    ("The correct answer is D) white", "D"),
    ("I would pick option E, since none fits.", "E"),
    ("My choice is A", "A"),
    ("Option A is wrong; the answer is B.", None),  # two letters named by phrases
    ("the answer is b.", "B"),  # lowercase, then punctuation
    ("The answer is a bird with a white crown.", "D"),  # "a bird": the article; rule 5 reads "white"
    # rule 4: letter tokens
    ("I think it is C", "C"),  # sentence-opening "I" + lowercase word: the pronoun
    ("It looks like B to me.", "B"),
    ("A and C both fit", None),  # "A" followed by "and" is a letter: two letters
    ("B or C", None),
    ("Between B and D, D.", None),  # two distinct letters, however often
    ("C, definitely C", "C"),  # one distinct letter twice
    # rule 5: option text
    ("black", "C"),
    ("Black.", "C"),
    ("A black crown.", "C"),  # "A" is the article; the text names black only
    ("The crown is white.", "D"),
    ("other", "E"),
    ("The crown is black and white.", None),  # two options named
    ("blue-black", None),  # "blue" and "black" both whole words
    # unparseable
    ("", None),
    ("   ", None),
    ("I cannot tell from this image.", None),
    ("F", None),  # not an option letter
    ("The crown is grey.", None),
]


@pytest.mark.parametrize(("answer", "expected"), CHOICE_TABLE)
def test_parse_choice_table(answer, expected):
    assert parse_choice(answer, LETTERS, OPTIONS) == expected


def test_parse_choice_without_options_skips_the_text_rule():
    assert parse_choice("black", LETTERS) is None
    assert parse_choice("C", LETTERS) == "C"
    assert parse_choice(None, LETTERS, OPTIONS) is None


def test_option_text_inside_a_longer_option_does_not_count():
    options = ("red", "dark red", "green")
    assert parse_choice("It is dark red.", ("A", "B", "C"), options) == "B"  # "red" only inside "dark red"
    assert parse_choice("red", ("A", "B", "C"), options) == "A"  # the exact text


def test_binding_captions_parse_by_text():
    options = ("cube left sphere", "sphere left cube", "cube right sphere")
    letters = ("A", "B", "C")
    assert parse_choice("sphere left cube", letters, options) == "B"
    assert parse_choice("The image shows a cube left sphere", letters, options) == "A"


YES_NO_TABLE = [
    ("Yes", True),
    ("yes.", True),
    ("No", False),
    ("NO.", False),
    ("**Yes**, it does.", True),
    ("No, there is no dog in the image.", False),
    ("There is no dog in the image.", False),  # rule 2: "no" only
    ("I would say yes.", True),
    ("Yes and no.", True),  # rule 1: the first word decides
    ("Well, yes and no.", None),  # both, not first
    ("The figure shows a cat.", None),
    ("not sure", None),
    ("", None),
    ("Nope", None),  # a word that is not "no"
]


@pytest.mark.parametrize(("answer", "expected"), YES_NO_TABLE)
def test_parse_yes_no_table(answer, expected):
    assert parse_yes_no(answer) is expected


def test_choice_prompt_is_the_lmms_eval_layout():
    item = ChoiceItem("0", None, "What type of crown color does this bird have?", OPTIONS, 2, "has_crown_color")
    assert render_choice_prompt(item) == (
        "What type of crown color does this bird have?\n"
        "A. blue\nB. brown\nC. black\nD. white\nE. Other\n"
        "Answer with the option's letter from the given choices directly."
    )
    assert item.letters == LETTERS and item.answer_letter == "C" and item.option_keys == OPTIONS
    assert item.index_of("D") == 3 and item.index_of(None) is None


def test_yes_no_prompts():
    assert render_yes_no_prompt("a red cube") == 'Does this figure show "a red cube"? Please answer yes or no.'
    assert render_yes_no_question("is there a dog?") == "Is there a dog? Please answer yes or no."


def test_choice_item_checks_its_shape():
    with pytest.raises(DataFormatError):
        ChoiceItem("x", None, "q", ("only",), 0, "c")
    with pytest.raises(DataFormatError):
        ChoiceItem("x", None, "q", ("a", "b"), 2, "c")
    with pytest.raises(DataFormatError):
        ChoiceItem("x", None, "q", ("a", "b"), 0, "c", option_keys=("k",))


def test_sub_items_follow_the_vlm_protocols_options():
    from conceptforge.loaders.sub.scoring import SubItem

    groups = {
        "has_bill_shape": ["has_bill_shape::curved_(up_or_down)", "has_bill_shape::dagger"],
        "has_crown_color": ["has_crown_color::blue", "has_crown_color::black"],
    }
    items = [
        SubItem("img0", "Cardinal", "has_crown_color::black", ("has_crown_color::blue",)),
        SubItem("img1", "Cardinal", "has_bill_shape::dagger"),
    ]
    first, second = sub_choice_items(items, groups)
    assert first.item_id == "0" and second.item_id == "1"
    assert first.question == "What type of crown color does this bird have?"
    assert first.options == ("blue", "black", "Other") and first.answer_index == 1
    assert first.option_keys == ("has_crown_color::blue", "has_crown_color::black", "none")
    assert second.options == ("curved (up or down)", "dagger", "Other") and second.answer_letter == "B"
    assert second.category == "has_bill_shape"
    with pytest.raises(DataFormatError):
        list(sub_choice_items([SubItem("i", "b", "has_crown_color::red")], groups))


def test_binding_items_letter_the_stored_candidates():
    from conceptforge.loaders.binding.data import BindingSplit

    split = BindingSplit(
        "gen",
        ["i0", "i1"],
        ["red cube", "blue sphere"],
        [["blue cube", "red cube", "red sphere"], ["blue sphere", "red sphere", "blue cube"]],
        [1, 0],
        [["attribute", "true", "object"], ["true", "attribute", "object"]],
        item_ids=["a", "b"],
    )
    first, second = binding_choice_items({"gen": split})
    assert first.item_id == "gen/a" and first.options == ("blue cube", "red cube", "red sphere")
    assert first.answer_letter == "B" and first.category == "attribute+object" and first.image == "i0"
    assert second.answer_letter == "A" and second.question == "Which caption describes the image?"
