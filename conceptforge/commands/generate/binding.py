"""``conceptforge generate binding``: render the concept-binding datasets of "Does CLIP Bind Concepts?"
(single-object, two-object, relational).

Writes ONE Hub-layout repo folder at --out with a config per dataset (data/<config>/*.parquet,
CLEVR scene files under scenes/<config>/, one README.md card, grid.png):
``load_dataset(OUT, "relational")``. Resumable: rerun the same command after an interruption. Shard with
--num-shards/--shard-index, Slurm (srun, job arrays), torchrun/accelerate or MPI; the last
shard to finish a config assembles it and rewrites the card (or run `conceptforge assemble OUT`).
--out may be an fsspec URL such as s3://bucket/binding.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from conceptforge import argtypes as at
from conceptforge import gpu_costs
from conceptforge.commands.base import add_executor_arguments, add_run_options, check_chunk_size, executor_for, shard_of
from conceptforge.commands.shared_flags import add_dataset_out
from conceptforge.commands.spec_flags import add_spec_or_preset
from conceptforge.engine.runner import check_output
from conceptforge.engine.store import join
from conceptforge.errors import InvalidArgumentError
from conceptforge.generators.binding.benchmark import PRESET_ALIASES
from conceptforge.generators.binding.compositions import DATASETS
from conceptforge.generators.binding.dataset import PRESETS, BindingConfig
from conceptforge.generators.binding.release import spec_configs, spec_plan_lines
from conceptforge.generators.binding.stage import CHUNK_SIZE, generate_binding

logger = logging.getLogger(__name__)

#: The preset files' names for the short names runs record (``--preset binding-demo`` is ``--preset demo``).
PRESET_NAMES = {file: short for short, file in PRESET_ALIASES.items()}

# The whole item loop (layout, Cycles + passes, OIDN, PNG) at the defaults (320x240, 16 samples,
# Cycles on the CPU with 2 render threads): median 0.96 s per image in BENCHMARKS.md's full
# render_binding run (0.89 s in the quick one). The earlier 6.7 s came from a demo run timed on
# 2 cores shared with other jobs (load average ~10), with Blender's start-up in it: ~7x too high.
# A default for --dry-run; scaled by pixels x samples for other settings.
MEASURED_SECONDS_PER_IMAGE = 0.96
MEASURED_AT = (320 * 240, 16)


def parse_resolution(text: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise InvalidArgumentError(f"--resolution must look like 320x240, got {text!r}") from None
    return width, height


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset", default="all", help=f"one of {', '.join(DATASETS)}, a comma-separated list, or all"
    )
    add_spec_or_preset(
        parser,
        preset_help=f"one of {', '.join(PRESETS)} (paper = Table 1 sizes; also binding-demo, binding-clevr-paper); "
        "default demo",
        spec_help="your own binding benchmark: a spec file (vocabulary from a CLEVR properties.json and shape "
        ".blend files, relations, held-out compositions, split sizes); see docs/binding.md",
        preset_metavar=None,
        preset_first=True,
    )
    add_dataset_out(
        parser.add_argument,
        help="output repo folder or fsspec URL such as s3://bucket/binding (one config per dataset)",
    )
    parser.add_argument("--seed", type=at.seed, default=0, help="run seed; every image's seed derives from it")
    parser.add_argument("--resolution", type=at.Resolution(), default="320x240", help="WIDTHxHEIGHT (default 320x240)")
    parser.add_argument(
        "--samples", type=at.positive_int, default=16, help="Cycles samples per pixel (default 16; CLEVR used 512)"
    )
    parser.add_argument(
        "--min-pixels",
        type=at.non_negative_int,
        default=None,
        help="visible pixels required per object (default: 200 at 320x240, scaled)",
    )
    parser.add_argument("--num-workers", type=at.positive_int, default=1, help="Blender processes on this machine")
    parser.add_argument(
        "--restart-workers-every",
        type=at.positive_int,
        default=None,
        metavar="N",
        help="replace each Blender process with a fresh one after N images (bounds leaked memory)",
    )
    parser.add_argument(
        "--no-denoise",
        action="store_true",
        help="skip Open Image Denoise (grainy at 16 samples: ~38 dB vs ~48 dB PSNR against 512 samples)",
    )
    add_run_options(
        parser,
        chunk_size=CHUNK_SIZE,
        chunk_help=f"scenes per store chunk (default {CHUNK_SIZE}; a kill loses at most one chunk)",
        max_items_flag="--max-items",
        max_items_help=argparse.SUPPRESS,
    )  # --max-items: interrupt simulation
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="Cycles device")
    gpu_costs.add_dry_run_arguments(
        parser,
        "print the images to render and a time estimate; render nothing",
        per_image_help="your measured render time per image (e.g. from a --preset demo run), for --dry-run's estimate",
        gpu_model=False,  # Blender renders on the CPU by default: no GPU cost table
    )
    add_executor_arguments(parser)


def plan_lines(configs: Sequence[BindingConfig], *, seconds_per_image: float | None, num_workers: int = 1) -> list[str]:
    """What --dry-run prints: images per dataset and split, and the render time they take."""
    first = configs[0]
    source = f"spec {first.preset}" if first.spec is not None else f"preset {first.preset}"
    lines = [f"binding plan: {source}, {first.width}x{first.height}, {first.samples} samples per pixel"]
    total = 0
    for config in configs:
        count = sum(config.split_sizes.values())
        total += count
        splits = ", ".join(f"{split} {size}" for split, size in config.split_sizes.items())
        lines.append(f"  {config.dataset}: {count} images ({splits})")
    lines.append(f"total: {total} images")
    if seconds_per_image is None:
        scale = (first.width * first.height / MEASURED_AT[0]) * (first.samples / MEASURED_AT[1])
        seconds_per_image = MEASURED_SECONDS_PER_IMAGE * scale
        source = (
            f"default: {MEASURED_SECONDS_PER_IMAGE:g} s measured at 320x240, 16 samples with 2 render threads (BENCHMARKS.md)"
            + (", scaled by pixels x samples" if abs(scale - 1) > 1e-9 else "")
            + "; pass --seconds-per-image from a --preset demo run on your machine"
        )
    else:
        source = "--seconds-per-image"
    seconds = total * seconds_per_image
    lines.append(
        f"estimated render time: {_duration(seconds)} for one Blender worker at {seconds_per_image:.2g} s/image ({source})"
    )
    if num_workers > 1:
        lines.append(
            f"  with --num-workers {num_workers}, given a core or GPU per worker: about {_duration(seconds / num_workers)}"
        )
    return lines


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} hours"


def run(args: argparse.Namespace) -> int:
    width, height = parse_resolution(args.resolution)
    settings = {
        "seed": args.seed,
        "width": width,
        "height": height,
        "samples": args.samples,
        "denoise": not args.no_denoise,
        "min_pixels": args.min_pixels,
    }
    spec_file = None
    preset = PRESET_NAMES.get(args.preset, args.preset)  # binding-demo is demo: the same run, the same bytes
    if args.spec is None and preset is not None and preset not in PRESETS:
        known = [*PRESETS, *PRESET_NAMES]
        raise InvalidArgumentError(f"unknown preset {preset!r}; choose from {', '.join(known)}, or give --spec FILE")
    if args.spec is not None:
        # validated, its files checked and its held-out splits computed before anything is written
        spec_file, configs = spec_configs(args.spec, dataset=args.dataset, settings=settings)
    else:
        datasets = (
            list(DATASETS)
            if args.dataset == "all"
            else [name.strip() for name in args.dataset.split(",") if name.strip()]
        )
        configs = [
            BindingConfig(dataset=name, preset=preset or "demo", **settings) for name in datasets
        ]  # validated up front: a bad --dataset/--preset fails before anything is written
    check_chunk_size(args)
    if args.num_workers < 1:
        raise InvalidArgumentError(f"--num-workers must be >= 1, got {args.num_workers}")
    if args.seconds_per_image is not None and args.seconds_per_image <= 0:
        raise InvalidArgumentError(f"--seconds-per-image must be > 0, got {args.seconds_per_image}")
    if args.dry_run:
        lines = plan_lines(configs, seconds_per_image=args.seconds_per_image, num_workers=args.num_workers)
        if spec_file is not None:
            lines = spec_plan_lines(spec_file, configs) + lines
        print("\n".join(lines))
        return 0
    from conceptforge.generators.binding.render_blender import require_bpy

    require_bpy()  # fail early and clearly when Blender is missing
    shard = shard_of(args)
    run = check_output(
        args.out, stage="binding"
    )  # refuse a foreign --out or another stage's run before anything is rendered
    if args.executor != "local" and args.num_workers > 1:
        raise InvalidArgumentError("--num-workers is for the local executor; a Ray cluster's workers are its own")
    waiting, finished = [], []
    with executor_for(args):  # one executor (one Ray cluster) for every config
        for config in configs:
            report = generate_binding(
                config,
                run,
                shard=shard,
                num_workers=args.num_workers,
                device=args.device,
                max_items=args.max_items,
                chunk_size=args.chunk_size,
                restart_workers_every=args.restart_workers_every,
            )
            if report.assembled:
                finished.append(config.dataset)
                print(f'{args.out}: config {config.dataset}: load_dataset("{args.out}", "{config.dataset}")')
            else:
                waiting.append(f"{config.dataset}: {report.message(args.out)}")
    if finished:
        print(f"card {join(args.out, 'README.md')}  grid {join(args.out, 'grid.png')}")
    for line in waiting:
        print(line, file=sys.stderr)
    return 0
