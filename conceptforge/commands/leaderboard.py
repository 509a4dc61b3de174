"""``conceptforge leaderboard results/*.json``: compare models across their evaluate results files."""

from __future__ import annotations

import argparse

from conceptforge import argtypes as at

HELP = "compare models: one markdown table from several `conceptforge evaluate` results files (and an HTML page)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results",
        nargs="+",
        type=at.existing_file.as_text(),
        help="results JSON files written by `conceptforge evaluate --output`",
    )
    parser.add_argument(
        "--metrics",
        choices=("main", "all"),
        default="main",
        help="each task's headline metric (main) or every metric (all)",
    )
    parser.add_argument(
        "--output", type=at.output_file.as_text(), default=None, help="also write the table to this markdown file"
    )
    parser.add_argument(
        "--html",
        type=at.output_file.as_text(),
        default=None,
        metavar="PATH",
        help="also write a static HTML page: the table, each task's breakdowns with bootstrap intervals "
        "(charts embedded) and paired differences between models that share items; reads the "
        "per-sample files <stem>.samples/ beside each results file",
    )
    parser.add_argument(
        "--json",
        type=at.output_file.as_text(),
        default=None,
        metavar="PATH",
        help="also write the numbers unrounded as JSON: the table, and per task and dataset each model's "
        "breakdowns and every pair's paired differences (interval, exact McNemar/sign test); reads the "
        "per-sample files like --html",
    )
    parser.add_argument(
        "--bootstrap-resamples",
        type=at.positive_int,
        default=1000,
        metavar="N",
        help="bootstrap resamples per interval (--html, --json)",
    )
    parser.add_argument(
        "--bootstrap-seed",
        type=at.seed,
        default=0,
        metavar="SEED",
        help="seed of the bootstrap's PCG64 generator (--html, --json)",
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from conceptforge.errors import InvalidArgumentError
    from conceptforge.loaders.analysis.leaderboard import leaderboard, load_results
    from conceptforge.serialization import atomic_write_bytes

    if args.output:  # a user's file of that name is never replaced: only a table we wrote
        from conceptforge.output import claim_files

        claim_files(
            [args.output],
            ours=lambda _path, head: (
                [cell.strip() for cell in head.split(b"\n", 1)[0].split(b"|")[1:4]] == [b"model", b"kind", b"revision"]
            ),
        )
    payloads = load_results(args.results)
    table = leaderboard(payloads, metrics=args.metrics)
    page = numbers = None
    if args.html or args.json:
        from conceptforge.loaders.analysis.bootstrap import BootstrapConfig
        from conceptforge.loaders.analysis.leaderboard_html import (
            LEADERBOARD_FORMAT,
            analyse,
            leaderboard_html,
            leaderboard_json,
        )
        from conceptforge.output import claim_files

        if args.html and Path(args.html).is_dir():
            raise InvalidArgumentError(f"--html {args.html} is a folder: name the page to write, e.g. leaderboard.html")
        if args.html:
            claim_files(
                [args.html],
                flag="--html",  # a user's page of that name is never replaced
                ours=lambda _path, head: b"<title>conceptforge leaderboard</title>" in head,
            )
        if args.json:
            claim_files(
                [args.json],
                flag="--json",
                ours=lambda _path, head: f'"format": "{LEADERBOARD_FORMAT}"'.encode() in head,
            )
        config = BootstrapConfig(resamples=args.bootstrap_resamples, seed=args.bootstrap_seed)
        # everything computed before any write
        analysed = analyse(payloads, config=config)
        page = leaderboard_html(payloads, metrics=args.metrics, config=config, analysed=analysed) if args.html else None
        numbers = (
            leaderboard_json(payloads, metrics=args.metrics, config=config, analysed=analysed) if args.json else None
        )
    if args.output:
        atomic_write_bytes(args.output, table.encode("utf-8"))
    if page is not None:
        atomic_write_bytes(args.html, page.encode("utf-8"))
    if numbers is not None:
        from conceptforge.files import write_json

        write_json(args.json, numbers)
    print(table, end="")
    return 0
