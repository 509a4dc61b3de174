"""Choices, lists, free text, templates and the optional/flag wrappers around another type: a
typo in a choice or a template with an unknown field is refused before anything runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from conceptforge.argtypes.base import ArgType, Examples


class ListOf(ArgType):
    """Comma-separated values of one :class:`ArgType` (at least one): ``--seeds 0,1,2``."""

    def __init__(self, item: ArgType, *, name: str = "list") -> None:
        self.item, self.__name__ = item, name

    def __call__(self, text: str) -> list:
        parts = [part.strip() for part in str(text).split(",") if part.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"expected comma-separated values, got {text!r}")
        values = []
        for part in parts:
            try:
                values.append(self.item(part))
            except argparse.ArgumentTypeError as error:
                raise argparse.ArgumentTypeError(f"{part!r} in {text!r}: {error}") from None
        return values

    def good_example(self, paths: Examples) -> str:
        return self.item.good_example(paths)

    def bad_examples(self, paths: Examples) -> list[str]:
        good = self.item.good_example(paths)
        return [f"{good},{bad}" for bad in self.item.bad_examples(paths) if bad and "," not in bad] + ["", ","]


class Template(ArgType):
    """A ``str.format`` prompt template: only the ``allowed`` fields, each ``required`` one present.

    Why: an unknown field (``{colour}`` for ``{value}``) used to end in a KeyError traceback once
    the model was loaded; a missing one silently gave every option the same prompt.
    """

    def __init__(self, *, allowed: set[str], required: set[str]) -> None:
        self.allowed, self.required, self.__name__ = set(allowed), set(required), "template"

    def __call__(self, text: str) -> str:
        import string

        try:
            fields = {name for _, name, _, _ in string.Formatter().parse(str(text)) if name is not None}
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"not a valid template ({error}): {text!r}") from None
        unknown = sorted(fields - self.allowed)
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown field(s) {', '.join('{' + f + '}' for f in unknown)} in {text!r}; the fields are "
                f"{', '.join('{' + f + '}' for f in sorted(self.allowed))}"
            )
        missing = sorted(self.required - fields)
        if missing:
            raise argparse.ArgumentTypeError(f"{text!r} lacks {', '.join('{' + f + '}' for f in missing)}")
        return str(text)

    def good_example(self, paths: Examples) -> str:
        return " ".join("{" + f + "}" for f in sorted(self.allowed))

    def bad_examples(self, paths: Examples) -> list[str]:
        bad = ["{no_such_field} " + self.good_example(paths), "{unclosed"]
        if self.required:
            bad.append("no fields at all")
        return bad


class Choice(ArgType):
    """One of a fixed set of names. Why a type (not just ``choices=``): the same check serves a
    task option given as ``--task-option TASK.NAME=VALUE``, where argparse's ``choices`` is not in
    the loop; a flag built from the option passes ``choices=`` too, for its usage line."""

    def __init__(self, choices: tuple[str, ...] | list[str], *, name: str = "choice") -> None:
        self.choices, self.__name__ = tuple(choices), name

    def __call__(self, text: str) -> str:
        if text not in self.choices:
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(self.choices)}, got {text!r}")
        return str(text)

    def good_example(self, paths: Examples) -> str:
        return self.choices[0]

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["not-a-choice", ""]


class StrList(ArgType):
    """Comma-separated names (at least one), as a tuple: ``models=csp,add``."""

    def __init__(self, *, name: str = "names") -> None:
        self.__name__ = name

    def __call__(self, text: str) -> tuple[str, ...]:
        values = tuple(part.strip() for part in str(text).split(",") if part.strip())
        if not values:
            raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
        return values

    def good_example(self, paths: Examples) -> str:
        return "a,b"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["", ","]


class Optional(ArgType):
    """``inner``'s value, or ``empty`` for one of ``words`` (compared lower-case): an option whose
    default means "not set" (``lr``: Appendix A's rate; ``concept_names``: the CBM's own order)."""

    def __init__(self, inner: ArgType, *, words: tuple[str, ...] = ("", "none"), empty: Any = None) -> None:
        self.inner, self.words, self.empty = inner, tuple(words), empty
        self.__name__ = f"optional {getattr(inner, '__name__', 'value')}"

    def __call__(self, text: str) -> Any:
        if str(text).strip().lower() in self.words:
            return self.empty
        return self.inner(text)

    def good_example(self, paths: Examples) -> str:
        return self.inner.good_example(paths)

    def bad_examples(self, paths: Examples) -> list[str]:
        return [bad for bad in self.inner.bad_examples(paths) if bad.strip().lower() not in self.words]


class Flag(ArgType):
    """An on/off value as text (``true``/``false``, ``yes``/``no``, ``on``/``off``, ``1``/``0``):
    a task option such as ``binding-cdsm.calibrate`` given as ``--task-option`` text (its alias
    flag is ``--calibrate/--no-calibrate``)."""

    TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")

    def __init__(self) -> None:
        self.__name__ = "flag"

    def __call__(self, text: str) -> bool:
        word = str(text).strip().lower()
        if word in self.TRUE:
            return True
        if word in self.FALSE:
            return False
        raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")

    def good_example(self, paths: Examples) -> str:
        return "true"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["maybe", "2", ""]


class Text(ArgType):
    """Free text (a prompt, a display name). Why checked at all: a control character (a NUL, an
    escape) is never meant, and a line break in a one-line name breaks the tables it is printed
    in; ``multiline`` allows line breaks (a prompt's extra line), ``required`` refuses ''."""

    def __init__(self, *, multiline: bool = False, required: bool = False, name: str = "text") -> None:
        self.multiline, self.required, self.__name__ = multiline, required, name

    def __call__(self, text: str) -> str:
        text = str(text)
        allowed = "\n\t" if self.multiline else ""
        bad = sorted({c for c in text if (ord(c) < 32 or ord(c) == 127) and c not in allowed})
        if bad:
            raise argparse.ArgumentTypeError(
                f"{text!r} holds control character(s) {', '.join(repr(c) for c in bad)}"
                + ("" if self.multiline else " (one line, no line breaks)")
            )
        if self.required and not text.strip():
            raise argparse.ArgumentTypeError("expected some text, got an empty string")
        return text

    def good_example(self, paths: Examples) -> str:
        return "a photo"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["a\x00b"] + ([] if self.multiline else ["two\nlines"]) + (["", "  "] if self.required else [])


class ChoiceList(ArgType):
    """Comma-separated names, each from a fixed set (at least one, no repeats), as a tuple:
    ``models=csp,add``. ``refused``: names with their own one-line reason (``clip`` is another task)."""

    def __init__(self, choices: tuple[str, ...], *, refused: dict[str, str] | None = None, name: str = "names") -> None:
        self.choices, self.refused, self.__name__ = tuple(choices), dict(refused or {}), name

    def __call__(self, text: str) -> tuple[str, ...]:
        values = tuple(part.strip() for part in str(text).split(",") if part.strip())
        if not values:
            raise argparse.ArgumentTypeError(f"expected comma-separated names from {', '.join(self.choices)}")
        for value in values:
            if value in self.refused:
                raise argparse.ArgumentTypeError(f"{value}: {self.refused[value]}")
            if value not in self.choices:
                raise argparse.ArgumentTypeError(
                    f"unknown name {value!r} in {text!r}; choose from {', '.join(self.choices)}"
                )
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise argparse.ArgumentTypeError(f"{', '.join(repeated)} listed twice in {text!r}")
        return values

    def good_example(self, paths: Examples) -> str:
        return self.choices[0]

    def bad_examples(self, paths: Examples) -> list[str]:
        good = self.choices[0]
        return [f"{good},not-a-choice", f"{good},{good}", "", ","] + [f"{good},{name}" for name in self.refused]


flag = Flag()
