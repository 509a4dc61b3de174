"""``conceptforge evaluate conceptbed``: score generated ConceptBed datasets with the oracles, print tables.

Example::

    conceptforge evaluate conceptbed --generated out/ti out/dreambooth out/custom-diffusion \\
        --concepts spec.json --style-oracle oracles/pacs --object-oracle oracles/imagenet

Prints the paper's Table 1 (concept alignment CCD per task), Table 2 (VQA accuracy and CCD per
composition category) and Table 7 (accuracy, MSP, ECE, CCD) with one row per learner and an
"original" row for the real images. ``--save-scores`` keeps the per-image oracle scores;
``--from-scores`` re-reports them without loading any model.
"""

from __future__ import annotations

import argparse
import logging

from conceptforge import argtypes as at

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError, one_line

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from conceptforge.filters.conceptbed_oracles import DEFAULT_CUB_ORACLE, DEFAULT_OBJECT_ORACLE, DEFAULT_STYLE_ORACLE, DEFAULT_VQA_ORACLE

    parser.add_argument("--generated", nargs="+", default=[], help="generated dataset folders or Hub ids (one per learner)")
    parser.add_argument("--revision", default=None, help="revision of Hub datasets")
    parser.add_argument("--concepts", type=at.existing_file, default=None, help="concept spec: real images (and captions) for the original row")
    parser.add_argument("--style-oracle", default=DEFAULT_STYLE_ORACLE, help="classifier over the PACS styles (fine-tuned)")
    parser.add_argument("--object-oracle", default=DEFAULT_OBJECT_ORACLE, help="classifier over the ImageNet concepts (fine-tuned)")
    parser.add_argument("--cub-oracle", default=DEFAULT_CUB_ORACLE, help="classifier over the 200 CUB classes")
    parser.add_argument("--vqa-model", default=DEFAULT_VQA_ORACLE, help="ViLT VQA model for composite prompts")
    parser.add_argument("--no-vqa", action="store_true", help="skip the VQA composition oracle")
    parser.add_argument("--vqa-probability", choices=("softmax", "sigmoid"), default="softmax")
    parser.add_argument("--categoriser", default="rules", help="'rules' or module:function, for the real captions")
    parser.add_argument("--max-real-images", type=at.positive_int, default=None, help="real images per concept (default: all in the spec)")
    parser.add_argument("--batch-size", type=at.positive_int, default=32)
    parser.add_argument("--device", type=at.device, default=None)
    parser.add_argument("--ece-bins", type=at.positive_int, default=15)
    parser.add_argument("--per-concept", action="store_true", help="also print per-concept CCD")
    parser.add_argument("--save-scores", type=at.output_file, default=None, help="write per-image scores (JSONL)")
    parser.add_argument("--output", type=at.output_file, default=None, help="write every metric as JSON (each CCD aggregation named)")
    parser.add_argument("--from-scores", type=at.existing_file, nargs="+", default=[], help="report saved scores; no models loaded")


def run(args: argparse.Namespace) -> int:
    from conceptforge.loaders.conceptbed import evaluate, load_records, report, results_to_json, save_records

    records = [r for path in args.from_scores for r in load_records(path)]
    if args.generated:
        records += _score(args)
    if not records:
        raise InvalidArgumentError("nothing to evaluate: pass --generated DIR ... or --from-scores FILE")
    if args.save_scores:
        save_records(args.save_scores, records)
        logger.info("wrote %d scores to %s", len(records), args.save_scores)
    results = evaluate(records, n_bins=args.ece_bins)
    print(report(records, per_concept=args.per_concept, n_bins=args.ece_bins, results=results))
    if args.output:
        from conceptforge.loaders.reports import write_json

        path = write_json(args.output, {"benchmark": "conceptbed", **results_to_json(results)})
        logger.info("wrote %s", path)
    return 0


def _score(args: argparse.Namespace) -> list:
    from datasets import load_dataset

    from conceptforge.filters.conceptbed_scoring import OracleSet, score_generated, score_real
    from conceptforge.generators.conceptbed.generate import prepare_captions
    from conceptforge.generators.conceptbed.spec import load_spec

    oracles = OracleSet(
        {"style": args.style_oracle, "object": args.object_oracle, "cub": args.cub_oracle},
        vqa_model=None if args.no_vqa else args.vqa_model,
        vqa_probability=args.vqa_probability,
        device=args.device,
    )
    records = []
    kinds: set[str] = set()
    for source in args.generated:
        try:
            dataset = load_dataset(str(source), revision=args.revision)
        except (FileNotFoundError, ValueError, ConnectionError) as error:  # ConnectionError: no such folder, Hub offline
            raise DataNotFoundError(f"cannot load generated dataset {source}: {one_line(error)}") from None
        missing = {"concept_kind", "concept", "learner", "image"} - set(next(iter(dataset.values())).column_names)
        if missing:
            raise DataFormatError(f"{source} is not a ConceptBed generated dataset (missing {', '.join(sorted(missing))})")
        for split in dataset.values():
            kinds.update(split.unique("concept_kind"))
        records += score_generated(dataset, oracles, batch_size=args.batch_size, use_vqa=not args.no_vqa)
    if args.concepts is None:
        logger.warning("no --concepts spec: no real images, so no CCD (accuracy, MSP and ECE only)")
        return records
    spec = load_spec(args.concepts)
    captions = prepare_captions(spec, args.categoriser, None)
    records += score_real(spec, captions, oracles, batch_size=args.batch_size, max_images=args.max_real_images, kinds=kinds, use_vqa=not args.no_vqa)
    return records
