"""Numbers with a domain (``--epochs 0``, ``--validation-fraction 1.5``), lists of them, sizes and
resolutions: a value outside its domain used to be trained on or printed, and failed hours later.
"""

from __future__ import annotations

import argparse
import math
import re

from conceptforge.argtypes.base import ArgType, Examples
from conceptforge.argtypes.text import ListOf


def _parse_number(kind: type, text: str) -> int | float:
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(
            f"expected {'an integer' if kind is int else 'a number'}, got {text!r}"
        ) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


class IntRange(ArgType):
    """An integer in ``[minimum, maximum]`` (either end open when None)."""

    def __init__(
        self,
        minimum: int | None = None,
        maximum: int | None = None,
        *,
        name: str = "integer",
        multiple_of: int = 1,
        why: str = "",
        bound_why: str = "",
    ) -> None:
        self.minimum, self.maximum, self.__name__ = minimum, maximum, name
        self.multiple_of, self.why, self.bound_why = multiple_of, why, bound_why

    def __call__(self, text: str) -> int:
        value = _parse_number(int, str(text).strip())
        if self.minimum is not None and value < self.minimum:
            raise argparse.ArgumentTypeError(f"must be >= {self.minimum}, got {value}")
        if self.maximum is not None and value > self.maximum:
            why = f" ({self.bound_why})" if self.bound_why else ""
            raise argparse.ArgumentTypeError(f"must be <= {self.maximum}{why}, got {value}")
        if value % self.multiple_of:
            lower = value - value % self.multiple_of
            nearest = (
                f"{lower} or {lower + self.multiple_of}" if lower >= (self.minimum or 0) else lower + self.multiple_of
            )
            raise argparse.ArgumentTypeError(
                f"must be a multiple of {self.multiple_of}{f' ({self.why})' if self.why else ''}, got {value}; "
                f"use {nearest}"
            )
        return value

    def good_example(self, paths: Examples) -> str:
        value = (
            self.minimum
            if self.minimum is not None and self.minimum > 0
            else 1
            if self.maximum is None or self.maximum >= 1
            else self.maximum
        )
        return str(-(-value // self.multiple_of) * self.multiple_of)

    def bad_examples(self, paths: Examples) -> list[str]:
        bad = ["abc", "1.5", ""]
        if self.minimum is not None:
            bad.append(str(self.minimum - 1))
        if self.maximum is not None:
            bad.append(str(self.maximum + 1))
        if self.multiple_of > 1:
            bad.append(str(int(self.good_example(paths)) + 1))
        return bad


class FloatRange(ArgType):
    """A finite float within bounds; each bound is inclusive or exclusive."""

    def __init__(
        self,
        minimum: float | None = None,
        maximum: float | None = None,
        *,
        min_inclusive: bool = True,
        max_inclusive: bool = True,
        name: str = "number",
        bound_why: str = "",
    ) -> None:
        self.minimum, self.maximum, self.__name__ = minimum, maximum, name
        self.min_inclusive, self.max_inclusive, self.bound_why = min_inclusive, max_inclusive, bound_why

    def __call__(self, text: str) -> float:
        value = float(_parse_number(float, str(text).strip()))
        if self.minimum is not None and (value < self.minimum or (value == self.minimum and not self.min_inclusive)):
            raise argparse.ArgumentTypeError(
                f"must be {'>=' if self.min_inclusive else '>'} {self.minimum:g}, got {value:g}"
            )
        if self.maximum is not None and (value > self.maximum or (value == self.maximum and not self.max_inclusive)):
            why = f" ({self.bound_why})" if self.bound_why else ""
            raise argparse.ArgumentTypeError(
                f"must be {'<=' if self.max_inclusive else '<'} {self.maximum:g}{why}, got {value:g}"
            )
        return value

    def good_example(self, paths: Examples) -> str:
        low = self.minimum if self.minimum is not None else 0.0
        high = self.maximum if self.maximum is not None else low + 2.0
        return f"{(low + high) / 2:g}"

    def bad_examples(self, paths: Examples) -> list[str]:
        bad = ["abc", "nan", "inf", ""]
        if self.minimum is not None:
            bad.append(f"{self.minimum:g}" if not self.min_inclusive else f"{self.minimum - 0.5:g}")
        if self.maximum is not None:
            bad.append(f"{self.maximum:g}" if not self.max_inclusive else f"{self.maximum + 0.5:g}")
        return bad


positive_int = IntRange(1, name="positive_int")
non_negative_int = IntRange(0, name="non_negative_int")
port = IntRange(0, 65535, name="port")
seed = IntRange(0, 2**32 - 1, name="seed")  # numpy's seed range; torch takes the same
positive_float = FloatRange(0.0, min_inclusive=False, name="positive_float")
#: A measured time per image or step (the dry-run estimates): a day bounds any real measurement,
#: and a typo (``1e300``) used to print a 300-digit GPU-hours figure.
seconds_measured = FloatRange(
    0.0, 86400.0, min_inclusive=False, name="seconds", bound_why="one day; a measured time per image or step"
)
non_negative_float = FloatRange(0.0, name="non_negative_float")
finite_float = FloatRange(name="finite_float")
unit_interval = FloatRange(0.0, 1.0, name="fraction in [0, 1]")
open_unit_interval = FloatRange(0.0, 1.0, min_inclusive=False, max_inclusive=False, name="fraction in (0, 1)")
fraction_below_one = FloatRange(0.0, 1.0, max_inclusive=False, name="fraction in [0, 1)")
fraction_above_zero = FloatRange(0.0, 1.0, min_inclusive=False, name="fraction in (0, 1]")
rating = FloatRange(1.0, 5.0, name="rating in [1, 5]")


class ByteSize(ArgType):
    """A positive size such as ``500MB``, ``2GiB`` or ``1000000`` (the Hub's units); the value stays the text.

    Why: ``--max-shard-size`` is read when the dataset is assembled, hours after the start.
    """

    UNITS = {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "KB": 10**3, "MB": 10**6, "GB": 10**9, "B": 1}

    def __init__(self) -> None:
        self.__name__ = "size"

    def __call__(self, text: str) -> str:
        upper = str(text).strip().upper()
        factor = next((f for unit, f in self.UNITS.items() if upper.endswith(unit)), 1)
        number = next((upper[: -len(unit)] for unit in self.UNITS if upper.endswith(unit)), upper)
        try:
            size = float(number) * factor
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a size such as 500MB or 2GiB, got {text!r}") from None
        if not math.isfinite(size) or size < 1:
            raise argparse.ArgumentTypeError(f"must be a positive size, got {text!r}")
        return str(text).strip()

    def good_example(self, paths: Examples) -> str:
        return "500MB"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["abc", "0MB", "-5MB", "MB", "nanGB", ""]


class Resolution(ArgType):
    """``WIDTHxHEIGHT``, each at least ``minimum`` pixels; the value stays the text given."""

    def __init__(self, minimum: int = 16, maximum: int = 8192) -> None:
        self.minimum, self.maximum, self.__name__ = minimum, maximum, "resolution"

    def __call__(self, text: str) -> str:
        match = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", str(text))
        if not match:
            raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 320x240, got {text!r}")
        if min(int(match.group(1)), int(match.group(2))) < self.minimum:
            raise argparse.ArgumentTypeError(f"width and height must be >= {self.minimum}, got {text!r}")
        if max(int(match.group(1)), int(match.group(2))) > self.maximum:
            raise argparse.ArgumentTypeError(
                f"width and height must be <= {self.maximum} (CLEVR renders 320x240; {self.maximum} px a side is "
                f"already {self.maximum * self.maximum / 1e6:.0f} megapixels an image), got {text!r}"
            )
        return str(text).strip()

    def good_example(self, paths: Examples) -> str:
        return "320x240"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["abc", "320", "0x240", "-320x240", f"{self.minimum - 1}x240", f"320x{self.maximum + 1}", ""]


class IntList(ListOf):
    """Comma-separated integers within bounds, as a tuple (a task option's value: ``ways=5,10``).

    A flag built from such an option takes ``nargs="+"`` of it, so ``--ways 5 10`` and
    ``--ways 5,10`` both work. Its errors name the bound broken (``ways=5,0``: "must be >= 1
    (in '5,0')") rather than the part, since every part is a number."""

    def __init__(self, minimum: int | None = None, maximum: int | None = None, *, name: str = "integers") -> None:
        super().__init__(IntRange(minimum, maximum), name=name)
        self.minimum, self.maximum = minimum, maximum

    def __call__(self, text: str) -> tuple[int, ...]:
        parts = [part.strip() for part in str(text).split(",") if part.strip()]
        try:
            values = tuple(int(part) for part in parts)
        except ValueError:
            values = ()
        if not values:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
        for value in values:
            try:
                self.item(str(value))
            except argparse.ArgumentTypeError as error:
                raise argparse.ArgumentTypeError(f"{error} (in {text!r})") from None
        return values

    def bad_examples(self, paths: Examples) -> list[str]:
        good = self.item.good_example(paths)
        bad = ["abc", f"{good},abc", "1.5", "", ","]
        if self.minimum is not None:
            bad.append(f"{good},{self.minimum - 1}")
        if self.maximum is not None:
            bad.append(f"{good},{self.maximum + 1}")
        return bad
