"""``conceptforge leaderboard results/*.json``: compare models across their evaluate results files;
``--hub ORG/NAME``: the benchmark's leaderboard on the Hub beside them (loaders/analysis/hub_leaderboard.py)."""

from __future__ import annotations

import argparse

from conceptforge import argtypes as at
from conceptforge.commands.base import OneLineArgumentParser, add_bootstrap_flags

HELP = (
    "compare models: one markdown table from several `conceptforge evaluate` results files (and an HTML page); "
    "--hub ORG/NAME: the benchmark's Hub leaderboard beside them"
)


def add_arguments(parser: OneLineArgumentParser) -> None:
    parser.add_argument(
        "results",
        nargs="*",
        type=at.existing_file.as_text(),
        help="results JSON files written by `conceptforge evaluate --output` (at least one, unless --hub)",
    )
    parser.add_argument(
        "--hub",
        type=at.hub_repo_id,
        metavar="ORG/NAME",
        help="also fetch this benchmark dataset's leaderboard from the Hub and show it beside the results files: "
        "one row per source, model, task and protocol, marking the Hub's verified entries and this machine's",
    )
    parser.add_argument(
        "--revision",
        metavar="R",
        help="with --hub: show only local results measured on this revision (tag, branch or commit) of the dataset",
    )
    parser.add_argument(
        "--metrics",
        choices=("main", "all"),
        default="main",
        help="each task's headline metric (main) or every metric (all)",
    )
    for flag, metavar, what in (  # the files it may write beside printing the table
        ("--output", None, "also write the table to this markdown file"),
        (
            "--html",
            "PATH",
            "also write a static HTML page: the table, each task's breakdowns with bootstrap intervals "
            "(charts embedded) and paired differences between models that share items; reads the "
            "per-sample files <stem>.samples/ beside each results file",
        ),
        (
            "--json",
            "PATH",
            "also write the numbers unrounded as JSON: the table, and per task and dataset each model's "
            "breakdowns and every pair's paired differences (interval, exact McNemar/sign test); reads the "
            "per-sample files like --html",
        ),
    ):
        parser.add_argument(flag, type=at.output_file.as_text(), metavar=metavar, help=what)
    add_bootstrap_flags(parser, where="(--html, --json)")
    parser.add_check(_check_sources)


def _check_sources(args: argparse.Namespace) -> None:
    """Results files, ``--hub``, or both; ``--revision`` only with ``--hub`` (checked while parsing)."""
    from conceptforge.errors import InvalidArgumentError

    if args.revision and not args.hub:
        raise InvalidArgumentError(
            "--revision needs --hub ORG/NAME: it picks the dataset revision of the Hub comparison"
        )
    if not args.results and not args.hub:
        raise InvalidArgumentError("give results files (`conceptforge evaluate --output`), or --hub ORG/NAME")


def run(args: argparse.Namespace) -> int:
    return run_hub(args) if args.hub else run_files(args)


def _claim_table(path: str) -> None:
    """A user's file of that name is never replaced: only a table we wrote (either kind)."""
    from conceptforge.output import claim_files

    claim_files(
        [path],
        ours=lambda _path, head: (
            [cell.strip() for cell in head.split(b"\n", 1)[0].split(b"|")[1:4]]
            in ([b"model", b"kind", b"revision"], [b"where", b"rank", b"model"])
        ),
    )


def run_hub(args: argparse.Namespace) -> int:
    """The Hub's leaderboard of ``--hub`` beside the results files; everything read before any write."""
    from conceptforge.errors import InvalidArgumentError
    from conceptforge.loaders.analysis.hub_leaderboard import (
        board_markdown,
        fetch_hub_entries,
        hub_rows,
        local_rows,
        resolve_revision,
    )
    from conceptforge.loaders.analysis.leaderboard import load_results
    from conceptforge.serialization import atomic_write_bytes

    for flag, given in (("--html", args.html), ("--json", args.json)):
        if given:
            raise InvalidArgumentError(f"{flag} compares results files only: leave out --hub, or {flag}")
    if args.output:
        _claim_table(args.output)
    payloads = load_results(args.results) if args.results else []
    entries = fetch_hub_entries(args.hub)
    sha = resolve_revision(args.hub, args.revision) if args.revision else None
    configs = _configs(payloads)
    rows, notes = local_rows(payloads, args.hub, sha=sha, configs=configs)
    table = board_markdown(args.hub, [*hub_rows(entries), *rows], revision=args.revision, sha=sha, notes=notes)
    if args.output:
        atomic_write_bytes(args.output, table.encode("utf-8"))
    print(table, end="")
    return 0


def _configs(payloads) -> dict:
    """The configs each evaluated Hub dataset declares (the task ids name a config only where there
    are several, as ``--push-results`` files them)."""
    if not payloads:
        return {}
    from huggingface_hub import HfApi

    from conceptforge.external_errors import hub_failure
    from conceptforge.loaders.harness.push_results import run_dataset_configs

    api, found = HfApi(), {}
    try:
        for payload in payloads:
            found.update(run_dataset_configs(payload, api))
    except Exception as error:  # noqa: BLE001 - every Hub failure becomes one line
        raise hub_failure(error, "read the evaluated datasets' cards on the Hub") from None
    return found


def run_files(args: argparse.Namespace) -> int:
    from pathlib import Path

    from conceptforge.errors import InvalidArgumentError
    from conceptforge.loaders.analysis.leaderboard import leaderboard, load_results
    from conceptforge.serialization import atomic_write_bytes

    if args.output:
        _claim_table(args.output)
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
