"""``conceptforge assemble OUT``: write the dataset of a finished run, exactly once.

Idempotent: a run already assembled with the same settings is reported, not redone (``--force``
redoes it). Safe to start from several processes at once: one assembles, the others wait for it
and report that the dataset was assembled. Works for local folders and fsspec URLs.
"""

from __future__ import annotations

import argparse

from conceptforge import argtypes as at


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "out", type=at.existing_location, help="the run's --out folder or URL (s3://..., gs://..., hf://...)"
    )
    parser.add_argument("--force", action="store_true", help="assemble again even if it was already assembled")
    parser.add_argument(
        "--allow-failed",
        action="store_true",
        help="assemble without the items that failed every attempt (the card lists them)",
    )
    parser.add_argument(
        "--wait",
        type=at.non_negative_float,
        default=600.0,
        help="seconds to wait for another process that is assembling (default 600)",
    )


def run(args: argparse.Namespace) -> int:
    from conceptforge.engine.runner import assemble_run

    outcome = assemble_run(args.out, force=args.force, wait=args.wait, allow_failed=args.allow_failed)
    print(outcome.message)
    return 0 if outcome.status in {"assembled", "already"} else 1
