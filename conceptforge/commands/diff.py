"""``conceptforge diff A B``: what changed between two releases of a dataset.

    conceptforge diff A B [--all-ids]

A and B are dataset directories or Hub ids ``org/name@REVISION``. Prints, per split, the item ids
added, removed, changed (rows compared by content hash, images included) and moved (the same
rows in another order), and the ids B holds more than once, then the changes of the features and of the card's settings (provenance, column
meanings, license…) with their old and new values. Exit 0: no difference; 1: they differ (as
``git diff --exit-code``); 2: bad input. The same computation writes a release card's "Changes
since" section (``conceptforge publish``). See docs/publishing.md.
"""

from __future__ import annotations

import argparse
import logging


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", metavar="A", help="the earlier release: directory or ORG/NAME@REVISION")
    parser.add_argument("new", metavar="B", help="the later release: directory or ORG/NAME@REVISION")
    parser.add_argument("--all-ids", action="store_true", help="list every id (default: the first 10 per kind)")


def run(args: argparse.Namespace) -> int:
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    from conceptforge.cards.release_diff import diff_dirs
    from conceptforge.cards.release_source import resolve_release

    old, new = resolve_release(args.old), resolve_release(args.new)
    diff = diff_dirs(old.directory, new.directory, old_label=old.label, new_label=new.label)
    lines = diff.summary_lines(max_ids=None if args.all_ids else 10)
    print(f"{old.label} -> {new.label}: " + ("no change" if diff.empty else f"{len(lines)} change line(s)"))
    print("\n".join(lines))
    return 0 if diff.empty else 1
