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
(``--output``: one results file per dataset when there are several), samples beside it. The
oracle and metric flags are built from the task's options (``options.py``).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from conceptforge import argtypes as at
from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)


CONCEPTBED_TASK = "conceptbed-ccd"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from conceptforge.commands.evaluate.options import add_task_options

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
    parser.add_argument("--no-vqa", action="store_true", help="skip the VQA composition oracle (--vqa-model none)")
    parser.add_argument("--batch-size", type=at.positive_int, default=32)
    parser.add_argument("--device", type=at.device, default=None)
    parser.add_argument("--save-scores", type=at.output_file, default=None, help="write per-image scores (JSONL)")
    parser.add_argument(
        "--output", type=at.output_file, default=None, help="results JSON (every metric, each CCD aggregation named)"
    )
    parser.add_argument(
        "--from-scores", type=at.existing_file, nargs="+", default=[], help="report saved scores; no models loaded"
    )
    add_task_options(parser, (CONCEPTBED_TASK,))


def run(args: argparse.Namespace) -> int:
    """Each --generated dataset is one run of task conceptbed-ccd (the dataset is the "model");
    --from-scores re-prints the tables of saved oracle scores (no model, no results file)."""
    from conceptforge.commands.evaluate.options import given_options
    from conceptforge.commands.evaluate.tasks import alias_output, run_alias
    from conceptforge.loaders.harness.runner import RunSettings

    if args.from_scores:
        return _from_scores(args)
    if not args.generated:
        raise InvalidArgumentError("nothing to evaluate: pass --generated DIR ... or --from-scores FILE")
    if args.concepts is None:
        raise InvalidArgumentError(
            "--generated needs --concepts SPEC: CCD compares the generated images with the spec's real ones"
        )
    values = given_options(args, (CONCEPTBED_TASK,))
    if args.no_vqa:
        values["vqa_model"] = "none"
    settings = RunSettings(device=args.device, batch_size=args.batch_size, concepts=str(args.concepts))
    if args.save_scores:  # a user's file of that name: refused before any oracle loads
        from conceptforge.loaders.conceptbed.metrics import claim_scores_file

        for source in args.generated:
            claim_scores_file(_scores_path(args, source))
    for source in args.generated:
        output = alias_output(str(args.output) if args.output else None, str(source), len(args.generated) > 1)
        samples = run_alias(
            model=str(source),
            revision=args.revision,
            tasks=CONCEPTBED_TASK,
            values=values,
            settings=settings,
            output=output,
            model_flag="--generated",
        )
        if args.save_scores:
            from conceptforge.loaders.conceptbed.metrics import save_records
            from conceptforge.loaders.conceptbed.tasks import rows_to_records

            path = _scores_path(args, source)
            save_records(path, rows_to_records(samples[CONCEPTBED_TASK]))
            logger.info("wrote the oracle scores to %s", path)
    return 0


def _scores_path(args: argparse.Namespace, source: str) -> Path:
    from conceptforge.commands.evaluate.tasks import alias_output

    if len(args.generated) == 1:
        return Path(args.save_scores)
    return Path(alias_output(str(args.save_scores), str(source), True))


def _from_scores(args: argparse.Namespace) -> int:
    from conceptforge.commands.evaluate.options import flag_name, given_options, task_values
    from conceptforge.loaders.conceptbed.metrics import evaluate, load_records, report

    if args.generated or args.output:
        raise InvalidArgumentError(
            "--from-scores re-prints saved scores' tables; for a results file rescore a run's samples "
            "folder: conceptforge evaluate --from-predictions DIR"
        )
    ignored = [name for name in given_options(args, (CONCEPTBED_TASK,)) if name not in ("ece_bins", "per_concept")]
    if ignored or args.no_vqa:  # the saved scores are re-reported: no oracle or model is loaded
        flag = flag_name(ignored[0]) if ignored else "--no-vqa"
        raise InvalidArgumentError(
            f"{flag} does nothing with --from-scores (the saved scores are re-reported): drop it"
        )
    records = [r for path in args.from_scores for r in load_records(path)]
    if not records:
        raise InvalidArgumentError("no scores in --from-scores")
    options = task_values(args, (CONCEPTBED_TASK,))
    bins = options["ece_bins"]
    print(report(records, per_concept=options["per_concept"], n_bins=bins, results=evaluate(records, n_bins=bins)))
    return 0
