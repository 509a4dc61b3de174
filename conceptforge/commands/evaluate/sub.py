"""``conceptforge evaluate sub``: S+/S− accuracy of VLMs and CBMs on a SUB split (SUB, Tables 1–2)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from conceptforge import argtypes as at

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="local SUB dataset dir or Hub id (ours or Jessica-bader/SUB)")
    parser.add_argument("--revision", default=None, help="dataset revision (tag/commit) on the Hub")
    parser.add_argument("--split", default="test")
    parser.add_argument("--cub-dir", required=True, type=at.existing_dir.as_text(), help="extracted CUB_200_2011 directory (attribute names, class labels)")
    parser.add_argument("--model", action="append", default=[], help="VLM id or local dir (repeatable), e.g. openai/clip-vit-base-patch32")
    parser.add_argument("--model-revision", default=None, help="revision of every --model")
    parser.add_argument("--cbm", action="append", default=[], help="CBM factory 'package.module:function' returning a callable "
                        "(PIL list -> logits), a torch module with .transform, or (module, transform)")
    parser.add_argument("--concept-names", type=at.existing_file.as_text(), default=None, help="file with one CUB attribute per line: the CBM's output order")
    parser.add_argument("--outputs", choices=["logits", "probabilities"], default="logits")
    parser.add_argument("--threshold", type=at.finite_float, default=0.5)
    parser.add_argument("--template", type=at.Template(allowed={"group", "value"}, required={"value"}), default=None,
                        help="VLM attribute prompt, with {value} (and {group})")
    parser.add_argument("--none-prompt", default=None, help="VLM prompt of the 'none' option")
    parser.add_argument("--cache-dir", type=at.output_dir.as_text(), default=None, help="embedding cache (default ~/.cache/conceptforge/embeddings)")
    parser.add_argument("--device", type=at.device, default=None)
    parser.add_argument("--batch-size", type=at.positive_int, default=32)
    parser.add_argument("--s-minus", choices=("paper", "any-original"), default="paper",
                        help="paper: S- checks the bird's class-wise CBM label of the group (App. F); "
                             "any-original: right only if none of the bird's original attributes of the group is detected")
    parser.add_argument("--cbm-min-classes", type=at.positive_int, default=10,
                        help="CBM label subset for S-: attributes present (class level) in >= N classes (10 = Koh et al.'s 112)")
    parser.add_argument("--no-breakdowns", action="store_true", help="print only the summary table")
    parser.add_argument("--output", type=at.output_file.as_text(), default=None, help="write all reports as JSON here")


def run(args: argparse.Namespace) -> int:
    from conceptforge.loaders import sub
    from conceptforge.cub import load_cub
    from conceptforge.loaders.reports import write_json

    if not args.model and not args.cbm:
        raise InvalidArgumentError("nothing to evaluate: pass --model (VLM) and/or --cbm (concept bottleneck model)")
    cub = load_cub(args.cub_dir, need="votes")
    items = sub.load_sub(args.dataset, split=args.split, revision=args.revision, cub=cub)
    if not items:
        raise DataFormatError(f"split {args.split!r} of {args.dataset} is empty")
    reports = []
    if args.cbm_min_classes < 1:
        raise InvalidArgumentError("--cbm-min-classes must be >= 1")
    options = {}
    scoring = {"s_minus": args.s_minus, "cbm_min_classes": args.cbm_min_classes}
    if args.template:
        options["template"] = args.template
    if args.none_prompt:
        options["none_prompt"] = args.none_prompt
    for model_id in args.model:
        reports.append(
            sub.evaluate_vlm(model_id, items, cub=cub, revision=args.model_revision, cache_dir=args.cache_dir,
                             device=args.device, batch_size=args.batch_size, **options, **scoring)
        )
    concept_names = None
    if args.concept_names:
        path = Path(args.concept_names)
        if not path.is_file():
            raise DataNotFoundError(f"--concept-names file {path} does not exist")
        concept_names = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    for spec in args.cbm:
        made = sub.load_cbm_factory(spec)
        model, transform = made if isinstance(made, tuple) else (made, getattr(made, "transform", None))
        reports.append(
            sub.evaluate_cbm(model, items, cub=cub, concept_names=concept_names, transform=transform, outputs=args.outputs,
                             threshold=args.threshold, name=spec, batch_size=args.batch_size, device=args.device or "cpu", **scoring)
        )
    for report in reports:
        text = report.format()
        print(text if not args.no_breakdowns else text.split("\n\n")[0])
        print()
    if args.output:
        path = write_json(args.output, {"benchmark": "sub", "dataset": args.dataset, "revision": args.revision,
                                        "split": args.split, "s_minus": args.s_minus, "reports": [r.to_dict() for r in reports]})
        logger.info("wrote %s", path)
    return 0
