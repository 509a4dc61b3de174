#!/usr/bin/env python
"""Render the concept-binding datasets of paper 004 (single-object, two-object, relational).

Writes one dataset directory per dataset under --out (Hub layout: data/*.parquet, README.md card,
grid.png). Resumable: rerun the same command after an interruption. Shard with
--num-shards/--shard-index, Slurm (srun, job arrays), torchrun/accelerate or MPI; the last
shard to finish assembles (or run `conceptforge assemble OUT/<dataset>`). --out may be an fsspec
URL such as s3://bucket/binding.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Sequence

from conceptforge.generators.binding.compositions import DATASETS
from conceptforge.generators.binding.dataset import PRESETS, BindingConfig
from conceptforge.generators.binding.generate import CHUNK_SIZE, generate_binding
from conceptforge.cli import run_cli, setup_logging
from conceptforge.errors import ConceptforgeError
from conceptforge.runner import check_output
from conceptforge.store import join
from conceptforge.workitems import resolve_shard

logger = logging.getLogger("generate_binding")


def parse_resolution(text: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise ConceptforgeError(f"--resolution must look like 320x240, got {text!r}") from None
    return width, height


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="all", help=f"one of {', '.join(DATASETS)} or all")
    parser.add_argument("--preset", default="demo", help=f"one of {', '.join(PRESETS)} (paper = Table 1 sizes)")
    parser.add_argument("--out", required=True, help="output folder or fsspec URL such as s3://bucket/binding (one dataset directory per dataset)")
    parser.add_argument("--seed", type=int, default=0, help="run seed; every image's seed derives from it")
    parser.add_argument("--resolution", default="320x240", help="WIDTHxHEIGHT (default 320x240)")
    parser.add_argument("--samples", type=int, default=16, help="Cycles samples per pixel (default 16; CLEVR used 512)")
    parser.add_argument("--min-pixels", type=int, default=None, help="visible pixels required per object (default: 200 at 320x240, scaled)")
    parser.add_argument("--num-workers", type=int, default=1, help="Blender processes on this machine")
    parser.add_argument("--num-shards", type=int, default=None)
    parser.add_argument("--shard-index", type=int, default=None)
    parser.add_argument("--chunk-size", type=int, default=CHUNK_SIZE, help=f"scenes per store chunk (default {CHUNK_SIZE}; a kill loses at most one chunk)")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="Cycles device")
    parser.add_argument("--max-items", type=int, default=None, help=argparse.SUPPRESS)  # interrupt simulation
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    datasets = list(DATASETS) if args.dataset == "all" else [args.dataset]
    width, height = parse_resolution(args.resolution)
    configs = [
        BindingConfig(dataset=name, preset=args.preset, seed=args.seed, width=width, height=height,
                      samples=args.samples, min_pixels=args.min_pixels)
        for name in datasets
    ]  # validated up front: a bad --dataset/--preset fails before anything is written
    if args.chunk_size < 1:
        raise ConceptforgeError(f"--chunk-size must be >= 1, got {args.chunk_size}")
    if args.num_workers < 1:
        raise ConceptforgeError(f"--num-workers must be >= 1, got {args.num_workers}")
    from conceptforge.generators.binding.render_blender import require_bpy

    require_bpy()  # fail early and clearly when Blender is missing
    shard = resolve_shard(args.num_shards, args.shard_index)
    check_output(args.out, run_children=DATASETS)  # refuse a foreign --out before anything is rendered
    waiting = []
    for config in configs:
        out_dir = join(args.out, config.dataset)
        report = generate_binding(
            config, out_dir, shard=shard, num_workers=args.num_workers,
            device=args.device, max_items=args.max_items, chunk_size=args.chunk_size,
        )
        if report.assembled:
            print(f"{out_dir}: card {join(out_dir, 'README.md')}  grid {join(out_dir, 'grid.png')}")
        else:
            waiting.append(f"{config.dataset}: {report.message(out_dir)}")
    for line in waiting:
        print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
