"""``conceptforge generate binding``: render the concept-binding datasets of "Does CLIP Bind Concepts?"
(single-object, two-object, relational).

Writes one dataset directory per dataset under --out (Hub layout: data/*.parquet, README.md card,
grid.png). Resumable: rerun the same command after an interruption. Shard with
--num-shards/--shard-index or `accelerate launch`; the last shard to finish assembles.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from conceptforge.generators.binding.compositions import DATASETS
from conceptforge.generators.binding.dataset import PRESETS, BindingConfig
from conceptforge.generators.binding.generate import generate_binding
from conceptforge.errors import InvalidArgumentError
from conceptforge.workitems import resolve_shard

logger = logging.getLogger(__name__)


def parse_resolution(text: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise InvalidArgumentError(f"--resolution must look like 320x240, got {text!r}") from None
    return width, height


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="all", help=f"one of {', '.join(DATASETS)} or all")
    parser.add_argument("--preset", default="demo", help=f"one of {', '.join(PRESETS)} (paper = Table 1 sizes)")
    parser.add_argument("--out", required=True, type=Path, help="output folder (one dataset directory per dataset)")
    parser.add_argument("--seed", type=int, default=0, help="run seed; every image's seed derives from it")
    parser.add_argument("--resolution", default="320x240", help="WIDTHxHEIGHT (default 320x240)")
    parser.add_argument("--samples", type=int, default=16, help="Cycles samples per pixel (default 16; CLEVR used 512)")
    parser.add_argument("--min-pixels", type=int, default=None, help="visible pixels required per object (default: 200 at 320x240, scaled)")
    parser.add_argument("--num-workers", type=int, default=1, help="Blender processes on this machine")
    parser.add_argument("--num-shards", type=int, default=None)
    parser.add_argument("--shard-index", type=int, default=None)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="Cycles device")
    parser.add_argument("--max-items", type=int, default=None, help=argparse.SUPPRESS)  # interrupt simulation


def run(args: argparse.Namespace) -> int:
    datasets = list(DATASETS) if args.dataset == "all" else [args.dataset]
    width, height = parse_resolution(args.resolution)
    configs = [
        BindingConfig(dataset=name, preset=args.preset, seed=args.seed, width=width, height=height,
                      samples=args.samples, min_pixels=args.min_pixels)
        for name in datasets
    ]  # validated up front: a bad --dataset/--preset fails before anything is written
    if args.num_workers < 1:
        raise InvalidArgumentError(f"--num-workers must be >= 1, got {args.num_workers}")
    from conceptforge.generators.binding.render_blender import require_bpy

    require_bpy()  # fail early and clearly when Blender is missing
    shard = resolve_shard(args.num_shards, args.shard_index)
    finished = []
    for config in configs:
        out_dir = generate_binding(
            config, args.out / config.dataset, shard=shard, num_workers=args.num_workers,
            device=args.device, max_items=args.max_items,
        )
        if out_dir is not None:
            finished.append(out_dir)
    for out_dir in finished:
        print(f"{out_dir}: card {out_dir / 'README.md'}  grid {out_dir / 'grid.png'}")
    if len(finished) < len(configs):
        print("some datasets wait for other shards; rerun the same command to finish them", file=sys.stderr)
    return 0

