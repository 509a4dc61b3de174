#!/usr/bin/env python
"""Evaluate models on conceptforge benchmarks: ``evaluate.py --model M --tasks a,b`` or ``evaluate.py {sub,binding,conceptbed,compmap} …``.

Each benchmark's command line lives beside its protocol in ``loaders/<name>_cli.py`` (functions
``add_arguments(parser)`` and ``run(args) -> int``), the all-tasks run in ``loaders/tasks_cli.py``;
this file only dispatches.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from conceptforge.cli import run_cli, setup_logging

BENCHMARKS = {
    "sub": ("conceptforge.loaders.sub_cli", "SUB: S+/S- accuracy of VLMs and CBMs"),
    "binding": ("conceptforge.loaders.binding_cli", "concept binding: CLIP zero-shot, CSP and CDSMs"),
    "conceptbed": ("conceptforge.loaders.conceptbed_cli", "ConceptBed: oracles, CCD, accuracy, ECE"),
    "compmap": ("conceptforge.loaders.compmap_cli", "CompMap: usefulness and interpretability"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true")
    from conceptforge.loaders import tasks_cli

    tasks_cli.add_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="{sub,binding,conceptbed,compmap}", required=False)
    for name, (module_name, help_text) in BENCHMARKS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name != module_name:
                raise
            continue
        module.add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    if args.command is None:
        from conceptforge.loaders import tasks_cli

        if not tasks_cli.wants_tasks(args):
            parser.error("pass --model ID_OR_PATH --tasks TASKS (or --tasks list), or a benchmark sub-command")
        return int(tasks_cli.run(args) or 0)
    module = importlib.import_module(BENCHMARKS[args.command][0])
    return int(module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(run_cli(main))
