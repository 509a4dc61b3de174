"""``conceptforge evaluate compmap``: CompMap usefulness and interpretability on CUB or MIT-States.

Prints paper-style tables (Tables 1–4 of "Do Vision-Language Pretrained Models Learn Composable
Primitive Concepts?") and writes every number to a JSON file. An alias of ``conceptforge evaluate
--model M --tasks compmap-cub`` (``--cub-dir``) or ``compmap-mit-states`` (``--mit-states-dir``):
its flags become task options and the one runner writes the one results format. The protocol
flags are built from the two tasks' options (``options.py``); a flag of the other task than
``--benchmark`` names is not used.
"""

from __future__ import annotations

import argparse
import logging

from conceptforge import argtypes as at
from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)

COMPMAP_TASKS = {"cub": "compmap-cub", "mit-states": "compmap-mit-states"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from conceptforge.commands.evaluate.options import add_cache_and_device, add_task_options
    from conceptforge.loaders.harness.model_ref import DEFAULT_CLIP

    # Stored as ``args.dataset`` (``args.benchmark`` is the sub-command name, ``compmap``).
    parser.add_argument(
        "--benchmark",
        dest="dataset",
        choices=tuple(COMPMAP_TASKS),
        required=True,
        help="cub: task compmap-cub (n-way k-shot); mit-states: task compmap-mit-states (generalized CZSL)",
    )
    parser.add_argument(
        "--data-dir",
        required=True,
        type=at.existing_dir.as_text(),
        help="CUB_200_2011 directory, or the MIT-States root",
    )
    parser.add_argument(
        "--model",
        default=DEFAULT_CLIP,
        help="dual encoder (CLIP, SigLIP) or ITM model (ViLT, BLIP); Hub id or local dir",
    )
    parser.add_argument("--model-kind", choices=("auto", "dual", "itm"), default="auto")
    parser.add_argument("--revision", default=None)
    parser.add_argument(
        "--output",
        type=at.output_file.as_text(),
        help="JSON results file (default: compmap-<benchmark>.json)",
    )
    add_cache_and_device(parser, cache_help="embedding and activation cache (default: the shared embedding cache)")
    parser.add_argument("--batch-size", type=at.positive_int, default=32)
    add_task_options(parser, tuple(COMPMAP_TASKS.values()))


def run(args: argparse.Namespace) -> int:
    """Flags -> options of task compmap-cub or compmap-mit-states, then the one runner."""
    from conceptforge.commands.evaluate.options import given_options, refuse_unused, task_values
    from conceptforge.commands.evaluate.tasks import run_alias
    from conceptforge.loaders.compmap.prompts import parse_templates
    from conceptforge.loaders.harness.runner import RunSettings

    task = COMPMAP_TASKS[args.dataset]
    refuse_unused(args, tuple(COMPMAP_TASKS.values()), (task,), how=f"--benchmark {args.dataset}")
    options = task_values(args, (task,))
    parse_templates(options["templates"])  # a bad --templates fails before any model or data is read
    output = args.output or f"compmap-{args.dataset}.json"
    from conceptforge.loaders.evaluation import check_output

    check_output(output, samples=True)  # the results file is refused before the data and the model are read
    if args.dataset == "cub":
        from conceptforge.loaders.compmap.cub_arrays import cub_primitives

        cub_primitives(args.data_dir)  # the folder's files are checked before the model loads
        settings = RunSettings(
            device=args.device, batch_size=args.batch_size, cache_dir=args.cache_dir, cub_dir=args.data_dir
        )
    else:
        from conceptforge.loaders.compmap.mit_states import load_mit_states

        # same: data first
        load_mit_states(args.data_dir, split_dir=options["split_dir"], metadata=options["metadata"] or None)
        settings = RunSettings(
            device=args.device, batch_size=args.batch_size, cache_dir=args.cache_dir, mit_states_dir=args.data_dir
        )
    if args.model_kind != "auto":
        from conceptforge.loaders.harness.model_ref import resolve_model

        kind = resolve_model(args.model, revision=args.revision).kind
        if kind not in {"dual": ("clip", "open_clip"), "itm": ("itm",)}[args.model_kind]:
            raise InvalidArgumentError(f"--model-kind {args.model_kind}: {args.model} is a {kind} model")
    run_alias(
        model=args.model,
        revision=args.revision,
        tasks=task,
        values=given_options(args, (task,)),
        settings=settings,
        output=output,
    )
    return 0
