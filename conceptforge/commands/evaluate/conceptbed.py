"""``conceptforge evaluate conceptbed``: score generated ConceptBed datasets with the oracles, print tables.

Example::

    conceptforge evaluate conceptbed --generated out/ti out/dreambooth out/custom-diffusion \\
        --concepts spec.json --style-oracle oracles/pacs --object-oracle oracles/imagenet

Prints the paper's Table 1 (concept alignment CCD per task), Table 2 (VQA accuracy and CCD per
composition category) and Table 7 (accuracy, MSP, ECE, CCD) with one row per learner and an
"original" row for the real images. ``--save-scores`` keeps the per-image oracle scores;
``--from-scores`` re-reports them without loading any model.

An alias of ``conceptforge evaluate --model GENERATED --tasks conceptbed-ccd --concepts SPEC``:
its flags become task options; each ``--generated`` dataset is one run of the one runner
(``--output``: one results file per dataset when there are several), samples beside it.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from conceptforge import argtypes as at
from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from conceptforge.filters.conceptbed_oracles import (
        DEFAULT_CUB_ORACLE,
        DEFAULT_OBJECT_ORACLE,
        DEFAULT_STYLE_ORACLE,
        DEFAULT_VQA_ORACLE,
    )

    parser.add_argument(
        "--generated", nargs="+", default=[], help="generated dataset folders or Hub ids (one per learner)"
    )
    parser.add_argument("--revision", default=None, help="revision of Hub datasets")
    parser.add_argument(
        "--concepts",
        type=at.existing_file,
        default=None,
        help="concept spec: real images (and captions) for the original row",
    )
    parser.add_argument(
        "--style-oracle", default=DEFAULT_STYLE_ORACLE, help="classifier over the PACS styles (fine-tuned)"
    )
    parser.add_argument(
        "--object-oracle", default=DEFAULT_OBJECT_ORACLE, help="classifier over the ImageNet concepts (fine-tuned)"
    )
    parser.add_argument("--cub-oracle", default=DEFAULT_CUB_ORACLE, help="classifier over the 200 CUB classes")
    parser.add_argument("--vqa-model", default=DEFAULT_VQA_ORACLE, help="ViLT VQA model for composite prompts")
    parser.add_argument("--no-vqa", action="store_true", help="skip the VQA composition oracle")
    parser.add_argument("--vqa-probability", choices=("softmax", "sigmoid"), default="softmax")
    parser.add_argument("--categoriser", default="rules", help="'rules' or module:function, for the real captions")
    parser.add_argument(
        "--max-real-images",
        type=at.positive_int,
        default=None,
        help="real images per concept (default: all in the spec)",
    )
    parser.add_argument("--batch-size", type=at.positive_int, default=32)
    parser.add_argument("--device", type=at.device, default=None)
    parser.add_argument("--ece-bins", type=at.positive_int, default=15)
    parser.add_argument("--per-concept", action="store_true", help="also print per-concept CCD")
    parser.add_argument("--save-scores", type=at.output_file, default=None, help="write per-image scores (JSONL)")
    parser.add_argument(
        "--output", type=at.output_file, default=None, help="results JSON (every metric, each CCD aggregation named)"
    )
    parser.add_argument(
        "--from-scores", type=at.existing_file, nargs="+", default=[], help="report saved scores; no models loaded"
    )


def run(args: argparse.Namespace) -> int:
    """Each --generated dataset is one run of task conceptbed-ccd (the dataset is the "model");
    --from-scores re-prints the tables of saved oracle scores (no model, no results file)."""
    from conceptforge.commands.evaluate.tasks import alias_output, run_alias
    from conceptforge.loaders.eval_run import RunSettings

    if args.from_scores:
        return _from_scores(args)
    if not args.generated:
        raise InvalidArgumentError("nothing to evaluate: pass --generated DIR ... or --from-scores FILE")
    if args.concepts is None:
        raise InvalidArgumentError(
            "--generated needs --concepts SPEC: CCD compares the generated images with the spec's real ones"
        )
    options = [
        ("style_oracle", args.style_oracle),
        ("object_oracle", args.object_oracle),
        ("cub_oracle", args.cub_oracle),
        ("vqa_model", "none" if args.no_vqa else args.vqa_model),
        ("vqa_probability", args.vqa_probability),
        ("categoriser", args.categoriser),
        ("max_real_images", args.max_real_images or 0),
        ("ece_bins", args.ece_bins),
        ("per_concept", args.per_concept),
    ]
    settings = RunSettings(device=args.device, batch_size=args.batch_size, concepts=str(args.concepts))
    if args.save_scores:  # a user's file of that name: refused before any oracle loads
        from conceptforge.loaders.conceptbed import claim_scores_file

        for source in args.generated:
            claim_scores_file(_scores_path(args, source))
    for source in args.generated:
        output = alias_output(str(args.output) if args.output else None, str(source), len(args.generated) > 1)
        samples = run_alias(
            model=str(source),
            revision=args.revision,
            tasks="conceptbed-ccd",
            options=[f"conceptbed-ccd.{name}={value}" for name, value in options],
            settings=settings,
            output=output,
            model_flag="--generated",
        )
        if args.save_scores:
            from conceptforge.loaders.conceptbed import save_records
            from conceptforge.loaders.conceptbed_tasks import rows_to_records

            path = _scores_path(args, source)
            save_records(path, rows_to_records(samples["conceptbed-ccd"]))
            logger.info("wrote the oracle scores to %s", path)
    return 0


def _scores_path(args: argparse.Namespace, source: str) -> Path:
    from conceptforge.commands.evaluate.tasks import alias_output

    if len(args.generated) == 1:
        return Path(args.save_scores)
    return Path(alias_output(str(args.save_scores), str(source), True))


def _from_scores(args: argparse.Namespace) -> int:
    from conceptforge.loaders.conceptbed import evaluate, load_records, report

    if args.generated or args.output:
        raise InvalidArgumentError(
            "--from-scores re-prints saved scores' tables; for a results file rescore a run's samples "
            "folder: conceptforge evaluate --from-predictions DIR"
        )
    records = [r for path in args.from_scores for r in load_records(path)]
    if not records:
        raise InvalidArgumentError("no scores in --from-scores")
    print(
        report(
            records, per_concept=args.per_concept, n_bins=args.ece_bins, results=evaluate(records, n_bins=args.ece_bins)
        )
    )
    return 0
