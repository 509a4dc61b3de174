"""``conceptforge evaluate sub``: S+/S− accuracy of VLMs and CBMs on a SUB split (SUB, Tables 1–2).

An alias of ``conceptforge evaluate --model M --tasks sub-vlm`` (``--cbm``: ``sub-cbm``): its flags
become task options; each model is one run of the one runner, written to ``--output`` (several
models: ``<stem>.<model name>.json`` each), per-sample predictions beside it. The protocol flags
are built from the two tasks' options (``options.py``); the models and the data are this alias's.
"""

from __future__ import annotations

import argparse
import logging

from conceptforge import argtypes as at
from conceptforge.commands.shared_flags import add_cub_dir, add_results_output
from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)


SUB_TASKS = ("sub-vlm", "sub-cbm")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from conceptforge.commands.evaluate.options import add_cache_and_device, add_task_options

    parser.add_argument("--dataset", required=True, help="local SUB dataset dir or Hub id (ours or Jessica-bader/SUB)")
    parser.add_argument("--revision", default=None, help="dataset revision (tag/commit) on the Hub")
    parser.add_argument("--split", default="test")
    add_cub_dir(
        parser.add_argument, required=True, help="extracted CUB_200_2011 directory (attribute names, class labels)"
    )
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        help="VLM id or local dir (repeatable; task sub-vlm), e.g. openai/clip-vit-base-patch32",
    )
    parser.add_argument("--model-revision", default=None, help="revision of every --model")
    parser.add_argument(
        "--cbm",
        action="append",
        default=[],
        help="CBM factory 'package.module:function' (repeatable; task sub-cbm) returning a callable "
        "(PIL list -> logits), a torch module with .transform, or (module, transform)",
    )
    add_cache_and_device(parser)
    parser.add_argument("--batch-size", type=at.positive_int, default=32)
    parser.add_argument("--no-breakdowns", action="store_true", help="print only the summary table")
    add_results_output(parser.add_argument, help="results JSON (several models: one file each, <stem>.<model>.json)")
    add_task_options(parser, SUB_TASKS)


def run(args: argparse.Namespace) -> int:
    """Each --model (task sub-vlm) and --cbm (task sub-cbm) is one run of the one runner."""
    from conceptforge.commands.evaluate.options import given_options, refuse_unused
    from conceptforge.commands.evaluate.tasks import alias_output, run_alias
    from conceptforge.loaders.harness.runner import RunSettings

    if not args.model and not args.cbm:
        raise InvalidArgumentError("nothing to evaluate: pass --model (VLM) and/or --cbm (concept bottleneck model)")
    at = f"@{args.revision}" if args.revision else ""
    settings = RunSettings(
        device=args.device, batch_size=args.batch_size, cache_dir=args.cache_dir, cub_dir=args.cub_dir
    )
    running = (["sub-vlm"] if args.model else []) + (["sub-cbm"] if args.cbm else [])
    refuse_unused(args, SUB_TASKS, running, how="--model runs sub-vlm, --cbm sub-cbm")
    values = given_options(args, SUB_TASKS)
    runs = [("sub-vlm", model, args.model_revision) for model in args.model] + [
        ("sub-cbm", spec, None) for spec in args.cbm
    ]
    for task, model, revision in runs:
        run_alias(
            model=model,
            revision=revision,
            tasks=task,
            datasets=[f"{task}={args.dataset}{at}"],
            values=values,
            settings=settings,
            output=alias_output(args.output, model, len(runs) > 1),
            split=args.split,
            brief=args.no_breakdowns,
        )
    return 0
