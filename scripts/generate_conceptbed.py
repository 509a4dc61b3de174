#!/usr/bin/env python
"""Learn ConceptBed concepts with one learner and sample their concept and composition images.

Example::

    python scripts/generate_conceptbed.py --learner textual-inversion --concepts spec.json --out out/ti
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without install

from conceptforge.cli import run_cli, setup_logging  # noqa: E402
from conceptforge.generators.conceptbed.learners import DEFAULT_MODEL_ID, LEARNERS, LearnerConfig  # noqa: E402
from conceptforge.workitems import resolve_shard  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learner", required=True, choices=LEARNERS)
    parser.add_argument("--concepts", required=True, type=Path, help="concept spec JSON (see docs/conceptbed.md)")
    parser.add_argument("--out", required=True, type=Path, help="output dataset directory")
    parser.add_argument("--model-id", default=DEFAULT_MODEL_ID, help="SD-1.x diffusers model id or local folder")
    parser.add_argument("--revision", default=None)
    parser.add_argument("--num-images", type=int, default=100, help="concept-split images per concept (paper: 100)")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: Table 5)")
    parser.add_argument("--learning-rate", type=float, default=None, help="default: Table 5")
    parser.add_argument("--placeholder-token", default=None, help="default: Table 5 (<object>, sks, <new1>)")
    parser.add_argument("--initializer-token", default=None, help="default: the concept's parent word")
    parser.add_argument("--preset", choices=("paper", "lora"), default="paper",
                        help="paper: Table 5 (DreamBooth fine-tunes the whole UNet at lr 5e-6, 400 steps, 200 class images); "
                             "lora: the cheaper DreamBooth option, rank-4 LoRA at lr 1e-4 (other learners: Table 5 either way)")
    parser.add_argument("--dreambooth-mode", choices=("lora", "full"), default=None, help="override the preset's DreamBooth mode")
    parser.add_argument("--lora-rank", type=int, default=4)
    parser.add_argument("--num-class-images", type=int, default=None, help="regularisation images (default 200)")
    parser.add_argument("--prior-loss-weight", type=float, default=1.0)
    parser.add_argument("--resolution", type=int, default=None, help="train/sample size (default: the model's)")
    parser.add_argument("--train-batch-size", type=int, default=1)
    parser.add_argument("--num-inference-steps", type=int, default=50)
    parser.add_argument("--guidance-scale", type=float, default=7.5)
    parser.add_argument("--mixed-precision", choices=("auto", "no", "fp16", "bf16"), default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--categoriser", default="rules", help="'rules' or module:function (caption -> categories)")
    parser.add_argument("--max-captions", type=int, default=None, help="composite captions per concept (default all)")
    parser.add_argument("--license", default="creativeml-openrail-m", help="dataset card license")
    parser.add_argument("--max-shard-size", default="500MB")
    parser.add_argument("--num-shards", type=int, default=None)
    parser.add_argument("--shard-index", type=int, default=None)
    parser.add_argument("--max-items", type=int, default=None, help="stop after this many new images")
    parser.add_argument("--no-assemble", action="store_true", help="only learn and sample")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    from conceptforge.generators.conceptbed.generate import ConceptBedGenerator, GenerateOptions
    from conceptforge.generators.conceptbed.spec import load_spec
    from conceptforge.errors import ConceptforgeError

    if args.num_images < 0:
        raise ConceptforgeError("--num-images must be >= 0")
    config = LearnerConfig(
        learner=args.learner,
        model_id=args.model_id,
        revision=args.revision,
        steps=args.steps,
        learning_rate=args.learning_rate,
        placeholder_token=args.placeholder_token,
        initializer_token=args.initializer_token,
        preset=args.preset,
        dreambooth_mode=args.dreambooth_mode,
        lora_rank=args.lora_rank,
        num_class_images=args.num_class_images,
        prior_loss_weight=args.prior_loss_weight,
        resolution=args.resolution,
        train_batch_size=args.train_batch_size,
        num_inference_steps=args.num_inference_steps,
        guidance_scale=args.guidance_scale,
        mixed_precision=args.mixed_precision,
        seed=args.seed,
    )
    spec = load_spec(args.concepts)
    options = GenerateOptions(
        config=config,
        out=args.out,
        num_images=args.num_images,
        categoriser=args.categoriser,
        max_captions=args.max_captions,
        shard=resolve_shard(args.num_shards, args.shard_index),
        license=args.license,
        max_shard_size=args.max_shard_size,
        max_items=args.max_items,
        assemble=not args.no_assemble,
    )
    summary = ConceptBedGenerator(spec, options).run()
    if summary["assembled"]:
        rows = ", ".join(f"{name}={count}" for name, count in summary["splits"].items())
        print(f"wrote {args.out} ({rows}); card {args.out / 'README.md'}, grid {args.out / 'grid.png'}")
    print(summary["message"])
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
