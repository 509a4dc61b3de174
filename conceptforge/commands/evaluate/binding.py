"""``conceptforge evaluate binding``: CLIP zero-shot, CSP and CDSMs on a binding dataset (Does CLIP Bind Concepts?, Tables 2–7).

An alias of ``conceptforge evaluate --model CLIP --tasks binding-clip,binding-cdsm``: its flags
become task options and the one runner does the work (same results file, samples and tables).
The protocol flags are built from the two tasks' options (``options.py``); ``--models`` (which
tasks run, and ``binding-cdsm.models``), the dataset and the model are this alias's own.
"""

from __future__ import annotations

import argparse
import logging

from conceptforge import argtypes as at
from conceptforge.commands.shared_flags import add_results_output
from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)


BINDING_TASKS = ("binding-clip", "binding-cdsm")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from conceptforge.commands.evaluate.options import add_cache_and_device, add_task_options
    from conceptforge.loaders.binding.evaluate import ALL_MODELS
    from conceptforge.loaders.harness.model_ref import DEFAULT_CLIP

    parser.add_argument("--dataset", required=True, help="binding dataset dir (e.g. OUT/single-object) or Hub id")
    parser.add_argument("--revision", default=None, help="dataset revision on the Hub")
    parser.add_argument(
        "--models",
        default="clip,csp,add,mult,conv,tl,rf",
        help=f"comma-separated, from: {', '.join(ALL_MODELS)}: clip = task binding-clip (zero-shot), "
        "the others = task binding-cdsm (clip-ft = full fine-tuning, slow)",
    )
    parser.add_argument(
        "--clip-model",
        default=DEFAULT_CLIP,
        help="CLIP id or local dir (frozen image embeddings); the paper used openai/clip-vit-large-patch14",
    )
    parser.add_argument("--clip-revision", default=None)
    parser.add_argument("--batch-size", type=at.positive_int, default=32)
    add_cache_and_device(parser)
    add_results_output(parser.add_argument, help="write the results JSON here (samples beside it)")
    add_task_options(parser, BINDING_TASKS, skip=("models",))  # --models above picks the tasks and binding-cdsm.models


def run(args: argparse.Namespace) -> int:
    from conceptforge.commands.evaluate.options import given_options, refuse_unused
    from conceptforge.commands.evaluate.tasks import run_alias
    from conceptforge.loaders.binding.evaluate import ALL_MODELS
    from conceptforge.loaders.harness.runner import RunSettings

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in ALL_MODELS]
    if unknown or not models:
        raise InvalidArgumentError(
            f"unknown binding model(s) {', '.join(unknown) or '(none)'} (choose from {', '.join(ALL_MODELS)})"
        )
    trained = [m for m in models if m != "clip"]
    tasks = (["binding-clip"] if "clip" in models else []) + (["binding-cdsm"] if trained else [])
    # --calibrate (and every trained-model flag) with --models clip only would be silently ignored
    refuse_unused(args, BINDING_TASKS, tasks, skip=("models",), how=f"--models {','.join(models)}")
    at = f"@{args.revision}" if args.revision else ""
    settings = RunSettings(device=args.device, batch_size=args.batch_size, cache_dir=args.cache_dir)
    run_alias(
        model=args.clip_model,
        revision=args.clip_revision,
        tasks=",".join(tasks),
        datasets=[f"{task}={args.dataset}{at}" for task in tasks],
        options=[f"binding-cdsm.models={','.join(trained)}"] if trained else [],
        values=given_options(args, BINDING_TASKS, skip=("models",)),
        settings=settings,
        output=args.output,
        model_flag="--clip-model",
    )
    return 0
