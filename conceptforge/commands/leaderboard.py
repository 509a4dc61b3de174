"""``conceptforge leaderboard results/*.json``: compare models across their evaluate results files."""

from __future__ import annotations

import argparse

from conceptforge import argtypes as at

HELP = "compare models: one markdown table from several `conceptforge evaluate` results files"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", type=at.existing_file.as_text(), help="results JSON files written by `conceptforge evaluate --output`")
    parser.add_argument("--metrics", choices=("main", "all"), default="main",
                        help="each task's headline metric (main) or every metric (all)")
    parser.add_argument("--output", type=at.output_file.as_text(), default=None, help="also write the table to this markdown file")


def run(args: argparse.Namespace) -> int:
    from conceptforge.loaders.leaderboard import leaderboard, load_results
    from conceptforge.store import atomic_write_bytes

    table = leaderboard(load_results(args.results), metrics=args.metrics)
    if args.output:
        atomic_write_bytes(args.output, table.encode("utf-8"))
    print(table, end="")
    return 0
