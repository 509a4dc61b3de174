"""``conceptforge evaluate {sub,binding,conceptbed,compmap} …``: evaluate models on a benchmark.

Each benchmark's command line is a module beside this one (``add_arguments(parser)`` and
``run(args) -> int``); this package only dispatches. Flags that apply to every benchmark go in
:func:`add_arguments` before the benchmark sub-parsers; a mode that runs without a benchmark
sub-command passes ``required=False`` to ``add_subcommands`` and branches in :func:`run` on
``args.benchmark is None``.
"""

from __future__ import annotations

import argparse

from conceptforge.commands.base import Entry, add_subcommands, run_entry

BENCHMARKS: dict[str, Entry] = {
    "sub": Entry("conceptforge.commands.evaluate.sub", "SUB: S+/S- accuracy of VLMs and CBMs"),
    "binding": Entry("conceptforge.commands.evaluate.binding", "concept binding: CLIP zero-shot, CSP and CDSMs"),
    "conceptbed": Entry("conceptforge.commands.evaluate.conceptbed", "ConceptBed: oracles, CCD, accuracy, ECE"),
    "compmap": Entry("conceptforge.commands.evaluate.compmap", "CompMap: usefulness and interpretability"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_subcommands(parser, BENCHMARKS, dest="benchmark", title="benchmarks")


def run(args: argparse.Namespace) -> int:
    return run_entry(BENCHMARKS, args.benchmark, args)
