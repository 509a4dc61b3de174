"""``conceptforge evaluate sub``: S+/S− accuracy of VLMs and CBMs on a SUB split (SUB, Tables 1–2).

An alias of ``conceptforge evaluate --model M --tasks sub-vlm`` (``--cbm``: ``sub-cbm``): its flags
become task options; each model is one run of the one runner, written to ``--output`` (several
models: ``<stem>.<model name>.json`` each), per-sample predictions beside it.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from conceptforge import argtypes as at
from conceptforge.errors import DataNotFoundError, InvalidArgumentError

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="local SUB dataset dir or Hub id (ours or Jessica-bader/SUB)")
    parser.add_argument("--revision", default=None, help="dataset revision (tag/commit) on the Hub")
    parser.add_argument("--split", default="test")
    parser.add_argument(
        "--cub-dir",
        required=True,
        type=at.existing_dir.as_text(),
        help="extracted CUB_200_2011 directory (attribute names, class labels)",
    )
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        help="VLM id or local dir (repeatable), e.g. openai/clip-vit-base-patch32",
    )
    parser.add_argument("--model-revision", default=None, help="revision of every --model")
    parser.add_argument(
        "--cbm",
        action="append",
        default=[],
        help="CBM factory 'package.module:function' returning a callable "
        "(PIL list -> logits), a torch module with .transform, or (module, transform)",
    )
    parser.add_argument(
        "--concept-names",
        type=at.existing_file.as_text(),
        default=None,
        help="file with one CUB attribute per line: the CBM's output order",
    )
    parser.add_argument("--outputs", choices=["logits", "probabilities"], default="logits")
    parser.add_argument("--threshold", type=at.finite_float, default=0.5)
    parser.add_argument(
        "--template",
        type=at.Template(allowed={"group", "value"}, required={"value"}),
        default=None,
        help="VLM attribute prompt, with {value} (and {group})",
    )
    parser.add_argument("--none-prompt", default=None, help="VLM prompt of the 'none' option")
    parser.add_argument(
        "--cache-dir",
        type=at.output_dir.as_text(),
        default=None,
        help="embedding cache (default ~/.cache/conceptforge/embeddings)",
    )
    parser.add_argument("--device", type=at.device, default=None)
    parser.add_argument("--batch-size", type=at.positive_int, default=32)
    parser.add_argument(
        "--s-minus",
        choices=("paper", "any-original"),
        default="paper",
        help="paper: S- checks the bird's class-wise CBM label of the group (App. F); "
        "any-original: right only if none of the bird's original attributes of the group is detected",
    )
    parser.add_argument(
        "--cbm-min-classes",
        type=at.positive_int,
        default=10,
        help="CBM label subset for S-: attributes present (class level) in >= N classes (10 = Koh et al.'s 112)",
    )
    parser.add_argument("--no-breakdowns", action="store_true", help="print only the summary table")
    parser.add_argument(
        "--output",
        type=at.output_file.as_text(),
        default=None,
        help="results JSON (several models: one file each, <stem>.<model>.json)",
    )


def run(args: argparse.Namespace) -> int:
    """Each --model (task sub-vlm) and --cbm (task sub-cbm) is one run of the one runner."""
    from conceptforge.commands.evaluate.tasks import alias_output, run_alias
    from conceptforge.loaders.harness.runner import RunSettings

    if not args.model and not args.cbm:
        raise InvalidArgumentError("nothing to evaluate: pass --model (VLM) and/or --cbm (concept bottleneck model)")
    if args.cbm_min_classes < 1:
        raise InvalidArgumentError("--cbm-min-classes must be >= 1")
    if args.concept_names and not Path(args.concept_names).is_file():
        raise DataNotFoundError(f"--concept-names file {args.concept_names} does not exist")
    at = f"@{args.revision}" if args.revision else ""
    settings = RunSettings(
        device=args.device, batch_size=args.batch_size, cache_dir=args.cache_dir, cub_dir=args.cub_dir
    )
    runs = [("sub-vlm", model, args.model_revision) for model in args.model] + [
        ("sub-cbm", spec, None) for spec in args.cbm
    ]
    for task, model, revision in runs:
        options = [f"{task}.s_minus={args.s_minus}", f"{task}.cbm_min_classes={args.cbm_min_classes}"]
        if task == "sub-vlm":
            options += [
                f"sub-vlm.{name}={value}"
                for name, value in (("template", args.template), ("none_prompt", args.none_prompt))
                if value
            ]
        else:
            options += [
                f"sub-cbm.threshold={args.threshold}",
                f"sub-cbm.outputs={args.outputs}",
                f"sub-cbm.concept_names={args.concept_names or ''}",
            ]
        run_alias(
            model=model,
            revision=revision,
            tasks=task,
            datasets=[f"{task}={args.dataset}{at}"],
            options=options,
            settings=settings,
            output=alias_output(args.output, model, len(runs) > 1),
            split=args.split,
            brief=args.no_breakdowns,
        )
    return 0
