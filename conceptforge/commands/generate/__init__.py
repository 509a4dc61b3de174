"""``conceptforge generate {sub,conceptbed,binding}``: make a dataset directory."""

from __future__ import annotations

import argparse

from conceptforge.commands.base import Entry, add_subcommands, run_entry

GENERATORS: dict[str, Entry] = {
    "sub": Entry("conceptforge.commands.generate.sub", "SUB candidates with Tied Diffusion Guidance over FLUX"),
    "conceptbed": Entry(
        "conceptforge.commands.generate.conceptbed", "ConceptBed: learn concepts with one learner and sample them"
    ),
    "binding": Entry(
        "conceptforge.commands.generate.binding", "concept binding: render CLEVR-style scenes with Blender"
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_subcommands(parser, GENERATORS, dest="generator", title="datasets")


def run(args: argparse.Namespace) -> int:
    return run_entry(GENERATORS, args.generator, args)
