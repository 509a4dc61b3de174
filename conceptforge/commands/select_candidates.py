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
import json
import logging
import os
from pathlib import Path
from typing import Any

from conceptforge.errors import InvalidArgumentError, SpecError

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from conceptforge.filters.classifier_oracle import DEFAULT_CUB_CLASSIFIER
    from conceptforge.filters.vqa import DEFAULT_VQA_MODEL

    sub = parser.add_subparsers(dest="selection", required=True, metavar="{birds,attributes}")

    birds = sub.add_parser("birds", help="reference birds: per-class accuracy of a CUB classifier on generated images")
    birds.add_argument("--references", required=True, type=Path,
                       help="dataset dir with columns image, bird (generate_sub.py --mode prompt-only --reference-selection)")
    birds.add_argument("--split", default=None, help="split to read (default: the only split in the directory)")
    birds.add_argument("--classifier", default=DEFAULT_CUB_CLASSIFIER, help=f"image classifier (default {DEFAULT_CUB_CLASSIFIER})")
    birds.add_argument("--min-accuracy", type=float, default=1.0, help="keep classes at or above this accuracy (paper: 1.0)")
    birds.add_argument("--batch-size", type=int, default=32)
    birds.add_argument("--device", default=None)
    birds.add_argument("--trust-remote-code", action="store_true")

    attrs = sub.add_parser("attributes", help="attribute candidates: VQA accuracy on real CUB images")
    attrs.add_argument("--cub-dir", type=Path, default=os.environ.get("CUB_DIR"), help="CUB_200_2011 directory [env CUB_DIR]")
    attrs.add_argument("--vqa-model", default=DEFAULT_VQA_MODEL)
    attrs.add_argument("--vqa-revision", default=None)
    attrs.add_argument("--trust-remote-code", action="store_true",
                       help="allow a checkpoint that ships its own Python code to run it (never implied)")
    attrs.add_argument("--groups", nargs="*", default=None, help="attribute groups to ask (default: all 28)")
    attrs.add_argument("--images-per-class", type=int, default=None, help="subsample CUB (default: all images, as the paper)")
    attrs.add_argument("--ground-truth", choices=("image", "class"), default="image",
                       help="CUB per-image annotations or class-level majority labels")
    attrs.add_argument("--metric", choices=("precision", "accuracy"), default="precision")
    attrs.add_argument("--threshold-min", type=float, default=0.60)
    attrs.add_argument("--threshold-max", type=float, default=0.95)
    attrs.add_argument("--threshold-step", type=float, default=0.01)
    attrs.add_argument("--min-support", type=int, default=10, help="images needed at a threshold for it to count")
    attrs.add_argument("--min-accuracy", type=float, default=0.9, help="keep attributes at or above this (paper: 0.9)")
    attrs.add_argument("--work", type=Path, default=None, help="score cache (default: <spec>.work/)")
    attrs.add_argument("--batch-size", type=int, default=8)
    attrs.add_argument("--device", default=None)
    attrs.add_argument("--no-answer-hint", action="store_true")
    attrs.add_argument("--num-shards", type=int, default=None)
    attrs.add_argument("--shard-index", type=int, default=None)

    for command in (birds, attrs):
        command.add_argument("--spec", required=True, type=Path, help="candidate spec JSON to write/update")


def _update_spec(path: Path, updates: dict[str, Any]) -> None:
    from conceptforge.serialization import atomic_write_bytes

    spec: dict[str, Any] = {}
    if path.exists():
        try:
            spec = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise SpecError(f"{path} is not a JSON candidate spec: {error}") from None
        if not isinstance(spec, dict):
            raise SpecError(f"{path} is not a JSON object")
    spec.update(updates)
    atomic_write_bytes(path, (json.dumps(spec, indent=1, sort_keys=True) + "\n").encode("utf-8"))


def run_birds(args: argparse.Namespace) -> int:
    from conceptforge.filters.candidate_selection import reference_bird_accuracy, select_birds
    from conceptforge.filters.classifier_oracle import ClassifierOracle
    from conceptforge.filters.dataset_io import open_split

    split = args.split
    if split is None:
        data = args.references / "data"
        names = sorted({p.name.split("-")[0] for p in data.glob("*.parquet")}) if data.is_dir() else []
        if len(names) > 1:
            raise InvalidArgumentError(f"{args.references} has splits {', '.join(names)}; pick one with --split")
        split = names[0] if names else "train"
    references = open_split(args.references, split, required=("image", "bird"), kind="reference-selection dataset")
    oracle = ClassifierOracle.from_pretrained(args.classifier, device=args.device, trust_remote_code=args.trust_remote_code)
    table = reference_bird_accuracy(references, oracle, batch_size=args.batch_size)
    birds = select_birds(table, min_accuracy=args.min_accuracy)
    print(f"{'bird':40s} {'images':>6s} {'correct':>7s} {'accuracy':>8s}")
    for row in table:
        mark = "  kept" if row.bird in birds else ""
        print(f"{row.bird:40s} {row.images:6d} {row.correct:7d} {row.accuracy:8.1%}{mark}")
    print(f"{len(birds)} of {len(table)} classes at >= {args.min_accuracy:.0%} -> {args.spec}")
    _update_spec(args.spec, {
        "birds": birds,
        "reference_selection": {
            "classifier": args.classifier,
            "classifier_revision": getattr(oracle.model.config, "_commit_hash", None),
            "references": str(args.references),
            "min_accuracy": args.min_accuracy,
            "per_class": [{"bird": r.bird, "images": r.images, "correct": r.correct, "accuracy": r.accuracy,
                           "unreadable": r.unreadable} for r in table],
        },
    })
    return 0


def run_attributes(args: argparse.Namespace) -> int:
    from conceptforge.filters.candidate_selection import group_answers, score_cub_groups, search_thresholds, threshold_grid
    from conceptforge.cub import CubDataset
    from conceptforge.filters.questions import DEFAULT_ANSWER_HINT, QuestionBuilder
    from conceptforge.filters.vqa import VQAScorer
    from conceptforge import ItemStore, resolve_shard

    if args.cub_dir is None:
        raise InvalidArgumentError("--cub-dir is required (the CUB_200_2011 directory)")
    cub = CubDataset.load(args.cub_dir)
    answer_hint = "" if args.no_answer_hint else DEFAULT_ANSWER_HINT
    questions = QuestionBuilder(cub.vocabulary.groups, answer_hint=answer_hint)
    groups = args.groups or sorted(cub.vocabulary.groups)
    for group in groups:
        questions(group)  # unknown group -> clear error before any model time
    thresholds = threshold_grid(args.threshold_min, args.threshold_max, args.threshold_step)
    store = ItemStore(args.work or args.spec.with_name(args.spec.name + ".work"))
    settings = {"stage": "cub-vqa", "vqa_model": args.vqa_model, "vqa_revision": args.vqa_revision,
                "answer_hint": answer_hint, "cub_dir": str(args.cub_dir.resolve())}
    shard = resolve_shard(args.num_shards, args.shard_index)
    counts = score_cub_groups(
        cub,
        lambda: VQAScorer.from_pretrained(args.vqa_model, trust_remote_code=args.trust_remote_code,
                                          revision=args.vqa_revision, device=args.device),
        questions, store, groups=groups, images_per_class=args.images_per_class, shard=shard, batch_size=args.batch_size,
        settings=settings,
    )
    if counts["missing"]:
        print(f"scored {counts['total'] - counts['missing']} of {counts['total']} questions; the other shards' questions are "
              "still missing: run every shard, then rerun this command to select")
        return 0
    answers = [a for a in group_answers(cub, store, ground_truth=args.ground_truth) if a.group in set(groups)]
    table = search_thresholds(answers, cub.vocabulary.groups, thresholds=thresholds, metric=args.metric,
                              min_support=args.min_support, min_accuracy=args.min_accuracy)
    chosen = [row.attribute for row in table if row.selected]
    print(f"{'attribute':45s} {'threshold':>9s} {args.metric:>9s} {'support':>7s} {'answered':>8s}")
    for row in table:
        threshold = f"{row.threshold:.2f}" if row.threshold is not None else "-"
        print(f"{row.attribute:45s} {threshold:>9s} {row.accuracy:9.1%} {row.support:7d} {row.answered:8d}"
              f"{'  kept' if row.selected else ''}")
    unsupported = sum(row.threshold is None for row in table)
    support_note = f"; {unsupported} never reach --min-support {args.min_support}" if unsupported else ""
    print(
        f"{len(chosen)} of {len(table)} attributes kept ({args.metric} >= {args.min_accuracy:.0%} on at least "
        f"{args.min_support} images{support_note}) -> {args.spec}"
    )
    _update_spec(args.spec, {
        "attributes": chosen,
        "attribute_selection": {
            "vqa_model": args.vqa_model,
            "ground_truth": args.ground_truth,
            "metric": args.metric,
            "thresholds": [thresholds[0], thresholds[-1], args.threshold_step],
            "min_support": args.min_support,
            "min_accuracy": args.min_accuracy,
            "images_per_class": args.images_per_class,
            "table": [{"attribute": r.attribute, "threshold": r.threshold, "accuracy": r.accuracy,
                       "support": r.support, "answered": r.answered, "selected": r.selected} for r in table],
        },
    })
    return 0


def run(args: argparse.Namespace) -> int:
    if args.batch_size < 1:
        raise InvalidArgumentError(f"--batch-size must be >= 1, got {args.batch_size}")
    return run_birds(args) if args.selection == "birds" else run_attributes(args)

