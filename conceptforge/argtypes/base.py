"""The protocol every argument type follows: convert the text, or name values inside and outside
its domain, so the flag walker (tests/core/test_flag_walk.py) tries every flag without a list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Examples:
    """Paths the flag walker offers the path types: a missing path, a file, a folder, …"""

    missing: str
    file: str
    folder: str
    under_file: str  # a path whose parent is a file: never creatable


class ArgType:
    """An ``add_argument(type=...)`` callable that can name values inside and outside its domain."""

    __name__ = "value"  # argparse names the type in some messages

    def __call__(self, text: str) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def good_example(self, paths: Examples) -> str:
        raise NotImplementedError

    def bad_examples(self, paths: Examples) -> list[str]:
        raise NotImplementedError

    def __repr__(self) -> str:
        # the type's name, as in argparse's messages (a ``Namespace`` or ``--help`` shows it so)
        return self.__name__
