"""Validating a spec's fields against its method's dataclass, with errors that name the field path.

pydantic validates stdlib dataclasses (``TypeAdapter``) and reports each error's location as a
tuple; we turn the first one into ``attributes[3].group: …``, which is what a user needs to find
the line. Cross-field rules (an attribute in two groups, a pair naming an unknown class) are
checked by the method after parsing and raised with :func:`spec_error`, in the same format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cache
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from conceptforge.errors import SpecError

T = TypeVar("T")


class SpecFieldError(SpecError):
    """A field of a spec file has a wrong value; ``field_path`` is where (``attributes[3].group``)."""

    def __init__(self, message: str, *, field_path: str = "", source: str = "") -> None:
        self.field_path = field_path
        self.source = source
        prefix = ": ".join(part for part in (source, field_path) if part)
        super().__init__(f"{prefix}: {message}" if prefix else message)


_NAME = re.compile(r"[A-Za-z_][\w-]*")


def format_path(location: Sequence[str | int]) -> str:
    """``("attributes", 3, "group")`` -> ``attributes[3].group``; a key that is not a plain name
    is quoted (``classes["Blue Jay"].colour``), so the path says exactly which key."""
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        elif not _NAME.fullmatch(str(part)):
            text += f"[{json.dumps(str(part), ensure_ascii=False)}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def input_path(data: Any, location: Sequence[str | int | Any], *, missing: bool) -> list[str | int]:
    """The part of pydantic's error location that is in the user's file.

    pydantic puts the member it tried into the location of a union's error (``size.float``,
    ``source.DatasetSource.hub``); those are not in the file and would send the user looking for a
    field that does not exist. Walking the data keeps the keys and indexes that are there, and the
    last part of a ``missing`` error (the name of the field to add).
    """
    kept: list[str | int] = []
    current = data
    for position, part in enumerate(location):
        if isinstance(current, dict) and part in current:
            kept.append(part)
            current = current[part]
        elif isinstance(current, (list, tuple)) and isinstance(part, int) and 0 <= part < len(current):
            kept.append(part)
            current = current[part]
        elif missing and position == len(location) - 1:
            kept.append(part)
    return kept


def spec_error(field_path: str | Sequence[str | int], message: str, *, source: str = "") -> SpecFieldError:
    """The error for a cross-field rule, in the same ``path: message`` shape as a type error."""
    path = field_path if isinstance(field_path, str) else format_path(field_path)
    return SpecFieldError(message, field_path=path, source=source)


def check_exactly_one(
    given: Sequence[str], choices: str, *, location: str, source: str = "", joiner: str = ", "
) -> None:
    """Refuse a part that fills none or several of its alternative fields (a source is a Hub
    dataset *or* a folder): one line naming the ``choices`` and, when any, the fields ``given``."""
    if len(given) != 1:
        raise spec_error(
            location,
            f"give exactly one of {choices}" + (f" (got {joiner.join(given)})" if given else ""),
            source=source,
        )


@cache
def _adapter(cls: type) -> TypeAdapter:
    return TypeAdapter(cls)


def _message(error: dict[str, Any]) -> str:
    kind = error.get("type", "")
    if kind in ("extra_forbidden", "unexpected_keyword_argument"):
        return "unknown field; remove it or check its spelling (conceptforge spec schema METHOD lists the fields)"
    if kind == "missing":
        return "is required; add it"
    text = str(error.get("msg", "invalid value"))
    text = text.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    given = error.get("input")
    if (
        kind not in ("model_type", "dataclass_type")
        and isinstance(given, (str, int, float, bool))
        and len(repr(given)) < 60
    ):
        text = f"{text} (got {given!r})"
    return text


def parse_fields(cls: type[T], data: Any, *, source: str = "", location: Sequence[str | int] = ()) -> T:
    """Validate ``data`` as ``cls`` (a dataclass whose config forbids extra fields); one line on error.

    ``location`` prefixes the error's path when ``data`` is a part of a larger spec.
    """
    try:
        return _adapter(cls).validate_python(data)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        path = format_path([*location, *input_path(data, first["loc"], missing=first.get("type") == "missing")])
        raise SpecFieldError(_message(first), field_path=path or "(top level)", source=source) from None


def json_schema_of(cls: type) -> dict[str, Any]:
    """The JSON Schema pydantic derives from the dataclass (field docs become descriptions)."""
    return _adapter(cls).json_schema()
