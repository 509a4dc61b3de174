"""``conceptforge export``: add the harness exports (lmms-eval, VLMEvalKit, inspect-ai) to a dataset folder.

    conceptforge export DIR [--formats lmms-eval,vlmevalkit,inspect-ai] [--repo-id ORG/NAME]
        [--version vX.Y.Z] [--cub-dir CUB]

Writes ``DIR/exports/`` (docs/publishing.md, "Harness exports"): the files ``publish`` puts in
every release, for a folder published earlier or to look at before publishing. The exports load
the release from the Hub at its tag, so they name one: ``--repo-id``/``--version``, by default
the ones the folder's card records. Only files conceptforge wrote are replaced (listed in
``exports/MANIFEST.json``); any other file in the way is refused before anything is written.
"""

from __future__ import annotations

import argparse

from conceptforge import argtypes as at
from conceptforge.commands.shared_flags import add_cub_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory", metavar="DIR", type=at.existing_dir.as_text(), help="dataset directory (README.md, data/*.parquet)"
    )
    parser.add_argument(
        "--formats",
        metavar="NAME,...",
        default=None,
        help="which exports: lmms-eval, vlmevalkit, inspect-ai (default: all three)",
    )
    parser.add_argument(
        "--repo-id", type=at.hub_repo_id, default=None, help="the release's ORG/NAME (default: the card's repo_id)"
    )
    parser.add_argument("--version", default=None, help="the release's tag vMAJOR.MINOR.PATCH (default: the card's)")
    add_cub_dir(
        parser.add_argument,
        help="CUB directory (attributes and class labels): a paper SUB release's options and S- come from it "
        "(a release made from a spec reads its own benchmark_spec.yaml)",
    )


def run(args: argparse.Namespace) -> int:
    from conceptforge.cards.local_dataset import read_dataset_dir
    from conceptforge.cards.versions import parse_version
    from conceptforge.errors import InvalidArgumentError
    from conceptforge.loaders.exports import parse_formats, release_exports, write_exports

    formats = parse_formats(args.formats)
    metadata = read_dataset_dir(args.directory).metadata
    repo_id = args.repo_id or getattr(metadata, "repo_id", None)
    version = args.version or getattr(metadata, "version", None)
    if not repo_id or not version:
        raise InvalidArgumentError(
            "the exports load the release from the Hub at its tag: pass --repo-id ORG/NAME and --version vX.Y.Z "
            "(the folder's card names neither)"
        )
    tag = str(parse_version(version))
    files, why_not = release_exports(
        args.directory,
        repo_id=repo_id,
        tag=tag,
        cub_dir=args.cub_dir,
        formats=formats,
        pretty_name=metadata.pretty_name,
    )
    if not files:
        raise InvalidArgumentError(f"nothing to export from {args.directory}: {why_not}")
    written = write_exports(args.directory, files)
    print(
        f"wrote {len(written)} export file(s) for {repo_id} {tag} ({', '.join(formats)}) under {args.directory}/exports"
    )
    return 0
