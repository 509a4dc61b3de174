"""The ``--spec FILE | --preset NAME`` pair that every command running a benchmark spec offers.

Why one helper: generate sub/binding, filter sub and evaluate compmap each take a user's spec file
or a built-in preset, never both. Adding the pair in one place keeps the two flags exclusive the
same way everywhere; each command still says in its own words what its spec and presets are.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from conceptforge import argtypes as at

#: A spec file must exist; commands get its path as the text given.
SPEC_FILE = at.existing_file.as_text()


def add_spec_or_preset(
    container: argparse._ActionsContainer,
    *,
    spec_help: str,
    preset_help: str,
    spec_type: Callable[[str], Any] | None = SPEC_FILE,
    spec_metavar: str | None = "FILE",
    preset_metavar: str | None = "NAME",
    preset_choices: Sequence[str] | None = None,
    preset_first: bool = False,
) -> argparse._MutuallyExclusiveGroup:
    """Add ``--spec`` and ``--preset`` (dests ``spec`` and ``preset``, default ``None``) to
    ``container`` (a parser or an argument group) as one mutually exclusive pair.

    ``preset_first`` keeps the order a command's ``--help`` has always shown."""
    which = container.add_mutually_exclusive_group()
    flags = {
        "--spec": {"type": spec_type, "metavar": spec_metavar, "help": spec_help},
        "--preset": {"choices": preset_choices, "metavar": preset_metavar, "help": preset_help},
    }
    for flag in ("--preset", "--spec") if preset_first else ("--spec", "--preset"):
        which.add_argument(flag, default=None, **flags[flag])
    return which
