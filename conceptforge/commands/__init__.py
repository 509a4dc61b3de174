"""The ``conceptforge`` command (also ``python -m conceptforge`` and the ``scripts/*.py`` wrappers).

Convention: each top-level sub-command is a module ``conceptforge.commands.<name>`` with
``add_arguments(parser)`` and ``run(args) -> int``, registered in :data:`COMMANDS` below (in the
order ``--help`` lists them). A sub-command with sub-commands of its own (``generate``,
``filter``, ``evaluate``) is a package that keeps the same convention one level down. Modules are
imported only when their sub-command runs, so ``conceptforge --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from conceptforge.commands.base import Entry, OneLineArgumentParser, add_subcommands, add_verbose, run_entry

COMMANDS: dict[str, Entry] = {
    "generate": Entry(
        "conceptforge.commands.generate", "generate a dataset: SUB candidates, ConceptBed images, binding scenes"
    ),
    "filter": Entry("conceptforge.commands.filter", "filter generated candidates into a dataset (SUB: VQA ranking)"),
    "select-candidates": Entry(
        "conceptforge.commands.select_candidates", "SUB: select reference birds and attribute candidates"
    ),
    "train-oracle": Entry(
        "conceptforge.commands.train_oracle", "ConceptBed: fine-tune a concept oracle on reference images"
    ),
    "publish": Entry(
        "conceptforge.commands.publish", "publish a dataset directory to the Hugging Face Hub as a versioned release"
    ),
    "export": Entry(
        "conceptforge.commands.export",
        "add the lmms-eval, VLMEvalKit and inspect-ai exports to a dataset folder (what publish puts in a release)",
    ),
    "verify": Entry(
        "conceptforge.commands.verify",
        "check that a release regenerates from its recorded provenance (local folder or Hub tag)",
    ),
    "diff": Entry(
        "conceptforge.commands.diff",
        "what changed between two releases: rows added/removed/changed per split, features, card",
    ),
    "evaluate": Entry(
        "conceptforge.commands.evaluate",
        "evaluate a model on every task (--model/--tasks) or on one benchmark: sub, binding, conceptbed, compmap",
    ),
    "leaderboard": Entry(
        "conceptforge.commands.leaderboard",
        "compare models: one table from several `conceptforge evaluate` results files; "
        "--hub ORG/NAME: the benchmark's Hub leaderboard beside them",
    ),
    "annotate": Entry("conceptforge.commands.annotate", "human validation studies: serve, export, apply"),
    "assemble": Entry("conceptforge.commands.assemble", "write the dataset of a finished (sharded) run, exactly once"),
    "status": Entry("conceptforge.commands.status", "how far a run is: items done per stage and shard"),
    "init": Entry(
        "conceptforge.commands.init",
        "write a starter benchmark spec from your dataset: conceptforge init METHOD --from SOURCE",
    ),
    "spec": Entry(
        "conceptforge.commands.spec",
        "benchmark specs: check a spec file, print a method's JSON Schema, list the built-in presets",
    ),
}

#: Commands that may download models or datasets: the Hub is probed once before they start.
#: ``publish`` is left out: it reports an unreachable Hub itself (a dry run says what it could not check).
HUB_COMMANDS = {"generate", "filter", "select-candidates", "train-oracle", "evaluate", "init"}

DESCRIPTION = "Generate, filter, publish and evaluate concept-learning benchmarks (SUB, ConceptBed, CompMap, binding)."


def build_parser() -> argparse.ArgumentParser:
    from conceptforge import __version__

    parser = OneLineArgumentParser(prog="conceptforge", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"conceptforge {__version__}")
    add_verbose(parser)
    add_subcommands(parser, COMMANDS, dest="command")
    return parser


def invoke(argv: Sequence[str]) -> int:
    """Parse ``argv`` and run the sub-command; errors propagate (library callers and tests).

    ``argv`` starts with the sub-command, e.g. ``["generate", "sub", "--cub-dir", ...]``.
    """
    from conceptforge.cli import quiet_library_progress, setup_logging

    argv = list(argv)
    quiet_library_progress()  # before parsing: choosing a sub-command imports its libraries
    args = build_parser().parse_args(argv)
    # The invocation as `conceptforge ...`, whichever wrapper started it (provenance records it).
    args.argv = ["conceptforge", *argv]
    from conceptforge.external_errors import bound_hub_timeouts

    bound_hub_timeouts()  # a Hub endpoint that never answers fails in seconds, not never
    setup_logging(getattr(args, "verbose", False))
    if (
        args.command in HUB_COMMANDS
        and not getattr(args, "dry_run", False)
        and getattr(args, "generator", None) != "binding"
        and not _needs_no_network(args)
    ):
        from conceptforge.external_errors import go_offline_if_unreachable

        go_offline_if_unreachable()  # seconds, not minutes of retries, when there is no network
    from conceptforge.engine.launchers import invoked_as
    from conceptforge.output import release_outputs

    try:
        with invoked_as(args.argv):  # shard reports keep it: `status` prints it after a kill -9
            return run_entry(COMMANDS, args.command, args)
    finally:
        release_outputs()  # the files this command claimed are free for the next one


def _needs_no_network(args: argparse.Namespace) -> bool:
    """Forms of a Hub command that load no model and no Hub dataset: the probe would only cost
    them its 2 s (``evaluate --tasks list`` prints the registry; rescoring reads saved files;
    ``init`` from a local folder or file reads only that)."""
    import os

    return (
        (args.command == "init" and os.path.exists(os.path.expanduser(args.source)))  # a local source
        or getattr(args, "eval_tasks", None) == "list"
        or bool(getattr(args, "eval_from_predictions", None))
        or bool(getattr(args, "from_scores", None))
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: run ``argv`` (default ``sys.argv[1:]``) and return the exit status.

    A :class:`~conceptforge.errors.ConceptforgeError` prints one ``error: ...`` line and returns 2.
    """
    from conceptforge.cli import run_cli

    return run_cli(invoke, list(sys.argv[1:] if argv is None else argv))
