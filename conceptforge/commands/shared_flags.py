"""Flags that mean the same thing in every command that has them: ``--cub-dir``, a generator's
``--out``, an evaluation's ``--output`` and ``--dry-run``.

Why one helper each: the flag's type is its promise (an existing folder kept as the text given,
an output location refused before any work when it is someone else's, a results file that may
not replace a file we did not write). Defining the type once keeps the promise the same in every
command; each command still says in its own ``help`` what the flag is for there.

Each helper takes ``add``: a parser's or group's ``add_argument``, or the adder of
:func:`~conceptforge.commands.evaluate.flags.eval_flag_group` (which sets the flag's ``dest``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conceptforge import argtypes as at

Add = Callable[..., Any]


def add_cub_dir(add: Add, *, help: str, required: bool = False) -> None:
    """``--cub-dir``: an extracted CUB_200_2011 folder, checked to exist, passed on as text."""
    add("--cub-dir", required=required, type=at.existing_dir.as_text(), help=help)


def add_dataset_out(add: Add, *, help: str) -> None:
    """A generator's required ``--out``: a dataset folder or an fsspec URL (``s3://bucket/name``)."""
    add("--out", required=True, type=at.output_location, help=help)


def add_results_output(add: Add, *, help: str) -> None:
    """An evaluation's ``--output``: the results JSON file, passed on as text."""
    add("--output", type=at.output_file.as_text(), help=help)


def add_dry_run(add: Add, *, help: str) -> None:
    """``--dry-run``: say what would happen and exit; what it promises not to do goes in ``help``."""
    add("--dry-run", action="store_true", help=help)
