"""``conceptforge evaluate --model M --tasks a,b`` (every benchmark in one run) or
``conceptforge evaluate {sub,binding,conceptbed,compmap} …`` (one benchmark, its own flags).

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
    from conceptforge.commands.evaluate import tasks

    tasks.add_arguments(parser)  # --model/--tasks: every benchmark in one run, no sub-command
    add_subcommands(parser, BENCHMARKS, dest="benchmark", title="benchmarks", required=False)


def run(args: argparse.Namespace) -> int:
    if args.benchmark is None:
        from conceptforge.commands.evaluate import tasks
        from conceptforge.errors import InvalidArgumentError

        if not tasks.wants_tasks(args):
            raise InvalidArgumentError(
                "pass --model ID_OR_PATH --tasks TASKS (or --tasks list), or a benchmark: "
                f"conceptforge evaluate {{{','.join(BENCHMARKS)}}} ..."
            )
        return tasks.run(args)
    return run_entry(BENCHMARKS, args.benchmark, args)
