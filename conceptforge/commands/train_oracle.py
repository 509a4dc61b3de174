"""``conceptforge train-oracle``: fine-tune a ConceptBed concept oracle on the concepts' reference images (Table 6).

Examples::

    conceptforge train-oracle --task style  --concepts pacs.json     --out oracles/pacs
    conceptforge train-oracle --task object --concepts imagenet.json --out oracles/imagenet \\
        --outliers /data/imagenet/val_other
    conceptforge train-oracle --task object --concepts my-concepts.yaml --out oracles/mine
"""

from __future__ import annotations

import argparse
from pathlib import Path

from conceptforge import argtypes as at
from conceptforge.commands.base import settings_from_args

DEFAULT_MODELS = {
    "style": "microsoft/resnet-18",
    "object": "facebook/convnext-base-224",
    "cub": "Emiel/cub-200-bird-classifier-swin",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--task",
        required=True,
        choices=sorted(DEFAULT_MODELS),
        help="which concepts: styles, objects (ImageNet's, or a spec's object concepts) or CUB",
    )
    parser.add_argument(
        "--concepts",
        required=True,
        type=at.existing_file,
        help="the concepts: a ConceptBed benchmark spec (YAML, your own concepts) or the paper's JSON concept spec; "
        "the reference images of its concepts of this kind are the training data",
    )
    parser.add_argument("--out", required=True, type=at.output_dir)
    parser.add_argument(
        "--model-id", default=None, help="pre-trained classifier (default: ResNet-18 / ConvNeXt-base / CUB Swin)"
    )
    parser.add_argument(
        "--outliers", type=at.existing_dir, default=None, help="folder of outlier images (outlier exposure)"
    )
    parser.add_argument("--outlier-weight", type=at.non_negative_float, default=0.5)
    parser.add_argument("--epochs", type=at.positive_int, default=3)
    parser.add_argument("--learning-rate", type=at.positive_float, default=1e-4)
    parser.add_argument("--batch-size", type=at.positive_int, default=32)
    parser.add_argument("--validation-fraction", type=at.fraction_below_one, default=0.1)
    parser.add_argument("--seed", type=at.seed, default=0)


def run(args: argparse.Namespace) -> int:
    from conceptforge.errors import DataNotFoundError, SpecError
    from conceptforge.filters.conceptbed.oracle_training import OracleTrainingConfig, finetune_oracle
    from conceptforge.generators.conceptbed.spec import IMAGE_SUFFIXES
    from conceptforge.generators.conceptbed.spec_resolution import load_concepts_file

    spec = load_concepts_file(args.concepts)
    samples = [(path, c.name) for c in spec.concepts if c.kind == args.task for path in c.reference_images]
    if not samples:
        raise SpecError(f"the spec selects no {args.task} concepts")
    outliers: list[Path] = []
    if args.outliers is not None:
        if not args.outliers.is_dir():
            raise DataNotFoundError(f"--outliers {args.outliers} is not a directory")
        outliers = sorted(p for p in args.outliers.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
        if not outliers:
            raise DataNotFoundError(f"no images in --outliers {args.outliers}")
    config = settings_from_args(
        OracleTrainingConfig,
        args,
        defaults=("mixed_precision",),  # no flag: "auto" (bf16 on CUDA)
        model_id=args.model_id or DEFAULT_MODELS[args.task],
    )
    result = finetune_oracle(samples, args.out, config, outliers=outliers)
    accuracy = "n/a" if result.validation_accuracy is None else f"{result.validation_accuracy:.3f}"
    print(f"oracle with {len(result.labels)} concepts saved to {args.out} (validation accuracy {accuracy})")
    return 0
