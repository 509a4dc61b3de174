"""``conceptforge publish``: publish a dataset directory to the Hugging Face Hub as an immutable, versioned release.

    conceptforge publish DIR --repo-id ORG/NAME --version vMAJOR.MINOR.PATCH [--private] [--dry-run]
        [--eval-framework NAME --eval-tasks TASK,...] [--cub-dir CUB]

Uploads the data shards, the card, the sample grid, ``provenance.json``, ``croissant.json``
(Croissant with Responsible-AI fields) and the harness exports (``exports/``: lmms-eval,
VLMEvalKit and inspect-ai tasks for SUB and binding data) in one commit, then tags it with the version; prints the
commit id and the exact ``load_dataset`` line. ``--eval-framework`` (the dataset owner's request)
adds the root ``eval.yaml`` that makes the dataset a Hub benchmark, with one task per leaderboard
metric of ``--eval-tasks`` (the ids ``evaluate --push-results`` files results under). Rerunning after a failure
completes the release; rerunning after success changes nothing. The token comes from ``HF_TOKEN``
or ``hf auth login``; the endpoint from ``HF_ENDPOINT``. See docs/publishing.md.
"""

from __future__ import annotations

import argparse
import logging

from conceptforge import argtypes as at
from conceptforge.commands.shared_flags import add_cub_dir, add_dry_run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory",
        metavar="DIR",
        type=at.existing_dir.as_text(),
        help="dataset directory (README.md, grid.png, data/*.parquet)",
    )
    parser.add_argument("--repo-id", required=True, type=at.hub_repo_id, help="ORG/NAME of the dataset repository")
    parser.add_argument("--version", required=True, help="release version, vMAJOR.MINOR.PATCH (never reused)")
    parser.add_argument(
        "--private", action="store_true", help="create the repository as private (new repositories only)"
    )
    add_dry_run(parser.add_argument, help="validate and show what would be uploaded; change nothing")
    parser.add_argument("--num-threads", type=at.positive_int, default=4, help="parallel file uploads (default 4)")
    parser.add_argument(
        "--eval-framework",
        metavar="NAME",
        help="write eval.yaml (a Hub benchmark) with this evaluation_framework, one the Hub lists "
        "(docs/publishing.md, 'Registering a benchmark')",
    )
    parser.add_argument(
        "--eval-tasks",
        metavar="TASK,...",
        help="with --eval-framework: the conceptforge tasks whose results the leaderboard lists (e.g. "
        "binding-clip,binding-cdsm; `conceptforge evaluate --tasks list`)",
    )
    add_cub_dir(
        parser.add_argument,
        help="CUB directory: a paper SUB release's harness exports take their options and S- from it (without it "
        "such a release goes out without exports; a release made from a spec reads its benchmark_spec.yaml)",
    )
    parser.add_argument("--eval-name", default=None, help="eval.yaml name (default: the card's pretty name)")
    parser.add_argument("--eval-description", default=None, help="eval.yaml description (default: the card's summary)")


def run(args: argparse.Namespace) -> int:
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # the Hub client's per-request lines
    from conceptforge.cards.publish import publish_dataset
    from conceptforge.loaders.exports import release_exports

    result = publish_dataset(
        args.directory,
        repo_id=args.repo_id,
        version=args.version,
        private=args.private,
        dry_run=args.dry_run,
        num_threads=max(1, args.num_threads),
        benchmark=_benchmark(args),
        cub_dir=args.cub_dir,
        exports=release_exports,
    )
    print(result.summary())
    return 0


def _benchmark(args: argparse.Namespace):
    """The owner's eval.yaml request (None without --eval-framework), checked before anything runs."""
    from conceptforge.errors import InvalidArgumentError

    if args.eval_framework is None:
        for flag in ("eval_tasks", "eval_name", "eval_description"):
            if getattr(args, flag):
                raise InvalidArgumentError(f"--{flag.replace('_', '-')} goes with --eval-framework NAME")
        return None
    from conceptforge.cards.hub_eval import Benchmark, check_framework
    from conceptforge.cards.local_dataset import read_dataset_dir
    from conceptforge.loaders.harness.push_results import benchmark_tasks

    check_framework(args.eval_framework)
    names = [n.strip() for n in (args.eval_tasks or "").split(",") if n.strip()]
    if not names:
        raise InvalidArgumentError(
            "--eval-framework needs --eval-tasks TASK,... (the tasks whose results the leaderboard lists, e.g. "
            "binding-clip,binding-cdsm; `conceptforge evaluate --tasks list`)"
        )
    local = read_dataset_dir(args.directory)
    splits: dict[str, list[str]] = {}
    for split in local.splits:
        splits.setdefault(split.config, []).append(split.name)
    summary = " ".join(local.metadata.summary.strip().split("\n\n")[0].split())  # the first paragraph
    return Benchmark(
        framework=args.eval_framework,
        tasks=tuple(benchmark_tasks(names, splits, framework=args.eval_framework)),
        name=args.eval_name or local.metadata.pretty_name,
        description=args.eval_description or summary,
    )
