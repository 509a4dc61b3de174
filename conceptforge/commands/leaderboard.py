"""``conceptforge leaderboard results/*.json``: compare models across their evaluate results files."""

from __future__ import annotations

import argparse

HELP = "compare models: one markdown table from several `conceptforge evaluate` results files"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", help="results JSON files written by `conceptforge evaluate --output`")
    parser.add_argument("--metrics", choices=("main", "all"), default="main",
                        help="each task's headline metric (main) or every metric (all)")
    parser.add_argument("--output", default=None, help="also write the table to this markdown file")


def run(args: argparse.Namespace) -> int:
    from conceptforge.loaders.leaderboard import leaderboard, load_results
    from conceptforge.serialization import atomic_write_bytes

    table = leaderboard(load_results(args.results), metrics=args.metrics)
    if args.output:
        atomic_write_bytes(args.output, table.encode("utf-8"))
    print(table, end="")
    return 0
