"""``conceptforge verify``: check that a release regenerates from its recorded inputs.

    conceptforge verify DATASET [--config C] [--revision REV] [--sample N | --items ID,... | --all]
                                [--weights ROLE=PATH] [--device DEV] [--report FILE]

DATASET is a local dataset directory or a Hub id (``org/name`` or ``org/name@v1.0.0``). First the
release as a whole: every config's and split's rows must be the row list its ``provenance.json``
records (the same ids, once each, in order). Then the chosen items are regenerated through the
same stage code, in a temporary store, and compared with the released rows (images byte for byte,
or at the stated PSNR, whole image and every 8×8 window, where the bytes depend on the hardware;
every other column exactly). Prints the ids checked, one line per row-set problem, per tolerated
image (with its PSNR) and per differing item and column, the rule applied and a summary;
``--report FILE`` writes all of it as JSON. Exit 0: the rows are as recorded and every checked
item matches; 1: not; 2: bad input. See docs/publishing.md.
"""

from __future__ import annotations

import argparse
import logging

from conceptforge import argtypes as at
from conceptforge.errors import InvalidArgumentError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", metavar="DATASET", help="dataset directory, or Hub id ORG/NAME[@REVISION]")
    parser.add_argument("--config", default=None, help="only this config of a multi-config release")
    parser.add_argument("--revision", default=None, help="Hub revision (tag such as v1.0.0, branch or commit)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--sample",
        type=at.positive_int,
        metavar="N",
        help="N items picked deterministically across every split and config",
    )
    which.add_argument("--items", default=None, metavar="ID,...", help="these item ids (comma-separated)")
    which.add_argument("--all", action="store_true", help="every item (the default when nothing is chosen)")
    parser.add_argument(
        "--weights",
        action="append",
        default=[],
        metavar="ROLE=PATH",
        help="a model the card names as a local folder (e.g. diffusion=/models/FLUX.1-dev)",
    )
    parser.add_argument(
        "--device", type=at.device, default=None, help="device to regenerate on (default: the recorded one)"
    )
    parser.add_argument(
        "--tolerate-hardware",
        action="store_true",
        help="compare images under the PSNR rule where the release's generator regenerates byte for byte: "
        "for a release made on another kind of CPU (each image that is not byte-identical is named)",
    )
    parser.add_argument(
        "--report",
        type=at.output_file.as_text(),
        metavar="FILE",
        help="also write the outcome as JSON: every checked id with its result, the row-set problems, rules and warnings",
    )


def _weights(values: list[str]) -> dict[str, str]:
    weights = {}
    for value in values:
        role, sep, path = value.partition("=")
        if not sep or not role or not path:
            raise InvalidArgumentError(f"--weights {value!r} is not ROLE=PATH (e.g. diffusion=/models/flux)")
        weights[role] = path
    return weights


def run(args: argparse.Namespace) -> int:
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    from conceptforge.cards.release_source import open_release
    from conceptforge.generators.verify import verify_release

    items = [i.strip() for i in args.items.split(",") if i.strip()] if args.items is not None else None
    if items is not None and not items:
        raise InvalidArgumentError("--items needs at least one item id")
    weights = _weights(args.weights)
    if args.report:  # before any work: a file of that name that we did not write is never replaced
        from conceptforge.generators.verify import REPORT_FORMAT
        from conceptforge.output import claim_files

        claim_files(
            [args.report], flag="--report", ours=lambda _path, head: f'"format": "{REPORT_FORMAT}"'.encode() in head
        )
    source = open_release(args.dataset, revision=args.revision)
    report = verify_release(
        source,
        sample=args.sample,
        items=items,
        config=args.config,
        weights=weights,
        device=args.device,
        tolerate_hardware=args.tolerate_hardware,
    )
    if args.report:
        from conceptforge.files import write_json

        write_json(args.report, report.to_dict())
    print("\n".join(report.lines()))
    return 0 if report.ok else 1
