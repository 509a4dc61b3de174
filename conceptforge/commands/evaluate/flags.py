"""The flags of ``conceptforge evaluate --model/--tasks`` and of its sweeps (``--models``) live on
the ``evaluate`` parser beside the per-benchmark sub-commands, so their ``dest`` names start with
``eval_`` (a sub-command's own ``--model`` never collides with them). One helper spells that rule,
and one function maps a flag back to its value, so the two modules that declare the flags and the
checks that refuse a flag in the wrong mode cannot drift apart."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

#: The flags whose dest is not their own name (``--dataset`` is repeatable: ``eval_datasets``).
IRREGULAR_DESTS = {
    "--dataset": "datasets",
    "--revision": "revisions",
    "--task-option": "options",
    "--push-results": "push",
}


def eval_dest(flag: str) -> str:
    """The ``args`` attribute of an ``evaluate`` flag: ``--cub-dir`` -> ``eval_cub_dir``."""
    return "eval_" + IRREGULAR_DESTS.get(flag, flag.removeprefix("--").replace("-", "_"))


def eval_flag_group(parser: argparse.ArgumentParser, title: str) -> tuple[Any, Callable[..., None]]:
    """A new argument group of ``parser`` and ``add(flag, **options)``, its ``add_argument`` with
    the flag's :func:`eval_dest`."""
    group = parser.add_argument_group(title)

    def add(flag: str, **options: Any) -> None:
        group.add_argument(flag, dest=eval_dest(flag), **options)

    return group, add


def first_given_flag(args: argparse.Namespace, flags: tuple[str, ...]) -> str | None:
    """The first of ``flags`` set on the command line (a value that is not empty, zero or off)."""
    return next((flag for flag in flags if getattr(args, eval_dest(flag), None)), None)
