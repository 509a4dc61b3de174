"""``conceptforge publish``: publish a dataset directory to the Hugging Face Hub as an immutable, versioned release.

    conceptforge publish DIR --repo-id ORG/NAME --version vMAJOR.MINOR.PATCH [--private] [--dry-run]

Uploads the data shards, the card and the sample grid in one commit, then tags it with the
version; prints the commit id and the exact ``load_dataset`` line. Rerunning after a failure
completes the release; rerunning after success changes nothing. The token comes from ``HF_TOKEN``
or ``hf auth login``; the endpoint from ``HF_ENDPOINT``. See docs/publishing.md.
"""

from __future__ import annotations

import argparse
import logging

from conceptforge import argtypes as at


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
    parser.add_argument(
        "--dry-run", action="store_true", help="validate and show what would be uploaded; change nothing"
    )
    parser.add_argument("--num-threads", type=at.positive_int, default=4, help="parallel file uploads (default 4)")


def run(args: argparse.Namespace) -> int:
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # the Hub client's per-request lines
    from conceptforge.cards.publish import publish_dataset

    result = publish_dataset(
        args.directory,
        repo_id=args.repo_id,
        version=args.version,
        private=args.private,
        dry_run=args.dry_run,
        num_threads=max(1, args.num_threads),
    )
    print(result.summary())
    return 0
