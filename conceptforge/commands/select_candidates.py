"""``conceptforge select-candidates``: SUB reference birds and attribute candidates (SUB §4.2) into a candidate spec.

    # reference birds: classify images made by `conceptforge generate sub --mode prompt-only --reference-selection`
    conceptforge select-candidates birds --references outputs/sub-references --spec spec.json
    # attribute candidates: the VQA question on real CUB images, threshold searched in [0.60, 0.95]
    conceptforge select-candidates attributes --cub-dir data/CUB_200_2011 --spec spec.json

The spec (`{"birds": [...], "attributes": [...], ...report}`) is what `conceptforge generate sub
--candidate-spec` reads; each command updates its own keys and keeps the others.
"""

from __future__ import annotations

import argparse
import logging
import os

from conceptforge import argtypes as at
from conceptforge.commands.base import add_run_options, settings_from_args, shard_of
from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from conceptforge.filters.classifier_oracle import DEFAULT_CUB_CLASSIFIER
    from conceptforge.filters.vqa.scorer import DEFAULT_VQA_MODEL

    sub = parser.add_subparsers(dest="selection", required=True, metavar="{birds,attributes}")

    birds = sub.add_parser("birds", help="reference birds: per-class accuracy of a CUB classifier on generated images")
    birds.add_argument(
        "--references",
        required=True,
        type=at.existing_dir,
        help="dataset dir with columns image, bird (generate_sub.py --mode prompt-only --reference-selection)",
    )
    birds.add_argument("--split", default=None, help="split to read (default: the only split in the directory)")
    birds.add_argument(
        "--classifier", default=DEFAULT_CUB_CLASSIFIER, help=f"image classifier (default {DEFAULT_CUB_CLASSIFIER})"
    )
    birds.add_argument(
        "--min-accuracy", type=at.unit_interval, default=1.0, help="keep classes at or above this accuracy (paper: 1.0)"
    )
    birds.add_argument("--batch-size", type=at.positive_int, default=32)
    birds.add_argument("--device", type=at.device, default=None)
    birds.add_argument("--trust-remote-code", action="store_true")

    attrs = sub.add_parser("attributes", help="attribute candidates: VQA accuracy on real CUB images")
    attrs.add_argument(
        "--cub-dir",
        type=at.existing_dir,
        default=os.environ.get("CUB_DIR"),
        help="CUB_200_2011 directory [env CUB_DIR]",
    )
    attrs.add_argument("--vqa-model", default=DEFAULT_VQA_MODEL)
    attrs.add_argument("--vqa-revision", default=None)
    attrs.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow a checkpoint that ships its own Python code to run it (never implied)",
    )
    attrs.add_argument("--groups", nargs="*", default=None, help="attribute groups to ask (default: all 28)")
    attrs.add_argument(
        "--images-per-class",
        type=at.positive_int,
        help="subsample CUB (default: all images, as the paper)",
    )
    attrs.add_argument(
        "--ground-truth",
        choices=("image", "class"),
        default="image",
        help="CUB per-image annotations or class-level majority labels",
    )
    attrs.add_argument("--metric", choices=("precision", "accuracy"), default="precision")
    attrs.add_argument("--threshold-min", type=at.unit_interval, default=0.60)
    attrs.add_argument("--threshold-max", type=at.unit_interval, default=0.95)
    attrs.add_argument("--threshold-step", type=at.fraction_above_zero, default=0.01)
    attrs.add_argument(
        "--min-support", type=at.positive_int, default=10, help="images needed at a threshold for it to count"
    )
    attrs.add_argument(
        "--min-accuracy", type=at.unit_interval, default=0.9, help="keep attributes at or above this (paper: 0.9)"
    )
    attrs.add_argument("--work", type=at.output_dir, default=None, help="score cache (default: <spec>.work/)")
    attrs.add_argument("--batch-size", type=at.positive_int, default=8)
    attrs.add_argument("--device", type=at.device, default=None)
    attrs.add_argument("--no-answer-hint", action="store_true")
    add_run_options(attrs)

    for command in (birds, attrs):
        command.add_argument("--spec", required=True, type=at.output_file, help="candidate spec JSON to write/update")


def run_birds(args: argparse.Namespace) -> int:
    from conceptforge.external_errors import require_model
    from conceptforge.filters.sub.candidate_spec import BirdSelectionConfig, select_reference_birds, update_spec

    require_model(args.classifier, "--classifier")  # before any image is read
    result = select_reference_birds(settings_from_args(BirdSelectionConfig, args))
    table, birds = result.table, result.birds
    print(f"{'bird':40s} {'images':>6s} {'correct':>7s} {'accuracy':>8s}")
    for row in table:
        mark = "  kept" if row.bird in birds else ""
        print(f"{row.bird:40s} {row.images:6d} {row.correct:7d} {row.accuracy:8.1%}{mark}")
    print(f"{len(birds)} of {len(table)} classes at >= {args.min_accuracy:.0%} -> {args.spec}")
    update_spec(args.spec, result.spec_updates)
    return 0


def run_attributes(args: argparse.Namespace) -> int:
    from conceptforge.endpoint_spec import is_endpoint_spec
    from conceptforge.external_errors import require_model
    from conceptforge.filters.sub.candidate_spec import AttributeSelectionConfig, select_attributes, update_spec

    if getattr(args, "executor", "local") == "local" and not is_endpoint_spec(args.vqa_model):  # before --work is made
        require_model(args.vqa_model, "--vqa-model")
    config = settings_from_args(AttributeSelectionConfig, args, answer_hint="" if args.no_answer_hint else None)
    result = select_attributes(config, shard=lambda: shard_of(args))
    counts = result.counts
    if result.table is None:
        print(
            f"scored {counts['total'] - counts['missing']} of {counts['total']} questions; the other shards' questions are "
            "still missing: run every shard, then rerun this command to select"
        )
        return 0
    table, chosen = result.table, result.chosen
    print(f"{'attribute':45s} {'threshold':>9s} {args.metric:>9s} {'support':>7s} {'answered':>8s}")
    for row in table:
        threshold = f"{row.threshold:.2f}" if row.threshold is not None else "-"
        print(
            f"{row.attribute:45s} {threshold:>9s} {row.accuracy:9.1%} {row.support:7d} {row.answered:8d}"
            f"{'  kept' if row.selected else ''}"
        )
    unsupported = sum(row.threshold is None for row in table)
    support_note = f"; {unsupported} never reach --min-support {args.min_support}" if unsupported else ""
    print(
        f"{len(chosen)} of {len(table)} attributes kept ({args.metric} >= {args.min_accuracy:.0%} on at least "
        f"{args.min_support} images{support_note}) -> {args.spec}"
    )
    update_spec(args.spec, result.spec_updates)
    return 0


def run(args: argparse.Namespace) -> int:
    from conceptforge.filters.sub.candidate_spec import claim_spec

    if args.batch_size < 1:
        raise InvalidArgumentError(f"--batch-size must be >= 1, got {args.batch_size}")
    claim_spec(args.spec)  # a user's JSON of that name: refused before any model loads
    return run_birds(args) if args.selection == "birds" else run_attributes(args)
