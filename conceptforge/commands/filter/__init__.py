"""``conceptforge filter sub``: turn generated candidates into the benchmark dataset."""

from __future__ import annotations

import argparse

from conceptforge.commands.base import Entry, add_subcommands, run_entry

FILTERS: dict[str, Entry] = {
    "sub": Entry("conceptforge.commands.filter.sub", "SUB: VQA multiple-choice ranking of the candidates"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_subcommands(parser, FILTERS, dest="filter", title="datasets")


def run(args: argparse.Namespace) -> int:
    return run_entry(FILTERS, args.filter, args)
