"""``conceptforge generate sub`` (also ``python scripts/generate_sub.py``): SUB candidates with TDG over FLUX.

Examples::

    conceptforge generate sub --cub-dir ~/data/CUB_200_2011 --out outputs/sub-candidates --dry-run
    accelerate launch -m conceptforge generate sub --cub-dir ~/data/CUB_200_2011 --out outputs/sub-candidates
    conceptforge generate sub --mode prompt-only --reference-selection --images-per-pair 20 \\
        --cub-dir ~/data/CUB_200_2011 --out outputs/sub-reference-selection

See docs/sub.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Sequence

from conceptforge import argtypes as at
from conceptforge.commands.base import add_executor_arguments, executor_for

from conceptforge.errors import InvalidArgumentError
from conceptforge.cub import load_cub
from conceptforge.generators.sub.flux_tdg import (
    DEFAULT_GUIDANCE,
    DEFAULT_MAX_SEQUENCE_LENGTH,
    DEFAULT_MODEL,
    DEFAULT_RESOLUTION,
    DEFAULT_STEPS,
)
from conceptforge.generators.sub.generate import CHUNK_SIZE, FLUX_DEV_DEFAULT_LICENSE, GenerationSettings, generate
from conceptforge.generators.sub.spec import PairPlan, load_spec, plan_pairs, plan_reference_selection, read_candidate_spec
from conceptforge.generators.sub.tdg import TDGParams
from conceptforge.runner import check_output
from conceptforge.workitems import resolve_shard

logger = logging.getLogger(__name__)

DESCRIPTION = "Generate SUB candidates with Tied Diffusion Guidance over FLUX (SUB: Benchmarking CBM Generalization via Synthetic Attribute Substitutions)."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = DESCRIPTION
    p.add_argument("--mode", choices=["tdg", "prompt-only"], default="tdg", help="TDG (default) or the prompt-only baseline (Fig. 4)")
    p.add_argument(
        "--cub-dir", type=at.existing_dir.as_text(),
        help="local CUB_200_2011 directory (classes, attributes, class-level labels); required except for --dry-run",
    )
    p.add_argument("--out", required=True, type=at.output_location, help="output dataset directory or fsspec URL (item store in OUT/.work)")
    what = p.add_argument_group("what to generate")
    what.add_argument("--candidate-spec", type=at.existing_file.as_text(), help="JSON {birds: [...], attributes: [...]}: the full grid birds x attributes")
    what.add_argument("--reference-selection", action="store_true", help="prompt-only images of CUB classes with the plain bird prompt")
    what.add_argument("--classes", nargs="+", help="with --reference-selection: these CUB classes instead of all 200")
    what.add_argument("--pairs", nargs="+", metavar="SEL", help="subset: BIRD=ATTRIBUTE pairs, BIRD names or ATTRIBUTEs (union)")
    what.add_argument("--images-per-pair", type=at.positive_int, default=500, help="images per pair (paper: 500 candidates)")
    what.add_argument(
        "--drop-present",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="drop pairs whose bird already has S+ (default: on for the paper spec, off for --candidate-spec)",
    )
    what.add_argument("--tdg", action="append", default=[], metavar="CAT=K,TMIN,TMAX", help="override a category's schedule")
    gen = p.add_argument_group("model and sampling")
    gen.add_argument("--model", default=DEFAULT_MODEL, help="FLUX pipeline: Hub id or local folder")
    gen.add_argument("--revision", default=None, help="model revision (branch, tag or commit)")
    gen.add_argument("--resolution", type=at.IntRange(16, name="resolution (>= 16)"), default=DEFAULT_RESOLUTION)
    gen.add_argument("--steps", type=at.positive_int, default=DEFAULT_STEPS)
    gen.add_argument("--guidance", type=at.non_negative_float, default=DEFAULT_GUIDANCE)
    gen.add_argument("--max-sequence-length", type=at.IntRange(1, 512, name="max sequence length (1-512)"), default=DEFAULT_MAX_SEQUENCE_LENGTH)
    gen.add_argument("--seed", type=at.seed, default=0, help="run seed; item seeds derive from it")
    gen.add_argument("--device", type=at.device_name, default="auto", help="auto, cuda, cuda:N or cpu")
    gen.add_argument("--dtype", choices=["auto", "bf16", "fp16", "fp32"], default="auto", help="auto: bf16 on CUDA, fp32 on CPU")
    gen.add_argument("--offload", action="store_true", help="model CPU offload for GPUs with less memory")
    gen.add_argument("--save-guidance", action="store_true", help="also keep the G image in the item store")
    run = p.add_argument_group("run")
    run.add_argument("--license", default=None, help=f"dataset license (default {FLUX_DEV_DEFAULT_LICENSE} for {DEFAULT_MODEL}; required otherwise)")
    run.add_argument("--chunk-size", type=at.positive_int, default=CHUNK_SIZE, help=f"images per store chunk (default {CHUNK_SIZE}; a kill loses at most one chunk)")
    run.add_argument("--num-shards", type=at.positive_int, default=None)
    run.add_argument("--shard-index", type=at.non_negative_int, default=None)
    run.add_argument("--max-items", type=at.non_negative_int, default=None, help="stop after this many new images (resume later)")
    add_executor_arguments(p)
    run.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    run.add_argument("--seconds-per-image", type=at.positive_float, default=None, help="measured time per image, for --dry-run's GPU-hour estimate")


def parse_tdg_overrides(values: Sequence[str]) -> dict[str, TDGParams]:
    overrides = {}
    for value in values:
        category, _, numbers = value.partition("=")
        parts = numbers.split(",")
        if category not in {"colour", "shape", "pattern"} or len(parts) != 3:
            raise InvalidArgumentError(f"--tdg {value!r}: expected CATEGORY=K,TMIN,TMAX with CATEGORY colour, shape or pattern")
        try:
            k, tmin, tmax = (float(x) for x in parts)
        except ValueError:
            raise InvalidArgumentError(f"--tdg {value!r}: K, TMIN and TMAX must be numbers") from None
        overrides[category] = TDGParams(k=k, tmin=tmin, tmax=tmax)
    return overrides


def _matches(selector: str, bird: str, attribute: str) -> bool:
    wanted_bird, eq, wanted_attribute = selector.partition("=")
    if eq:
        return bird == wanted_bird and attribute == wanted_attribute
    return selector in (bird, attribute)


def select_pairs(plan: PairPlan, selectors: Sequence[str] | None) -> PairPlan:
    """Keep pairs matching any selector: ``BIRD=ATTRIBUTE``, a bird name, or an attribute."""
    if not selectors:
        return plan
    unused = [s for s in selectors if not any(_matches(s, p.bird, p.attribute) for p in plan.pairs)]
    if unused:
        dropped = set(plan.dropped)
        notes = [
            f"{s} (dropped: the bird already has S+ in CUB; use --no-drop-present)"
            if "=" in s and tuple(s.split("=", 1)) in dropped
            else s
            for s in unused
        ]
        raise InvalidArgumentError(f"--pairs selects nothing for: {', '.join(notes)}")
    return PairPlan(
        pairs=[p for p in plan.pairs if any(_matches(s, p.bird, p.attribute) for s in selectors)],
        # Only the dropped pairs the selection would have held: the card counts what was asked for.
        dropped=[d for d in plan.dropped if any(_matches(s, *d) for s in selectors)],
    )


def build_plan(args: argparse.Namespace) -> tuple[PairPlan, dict]:
    """The pairs to generate. Without ``--cub-dir`` (dry runs only) nothing is dropped or checked."""
    cub = load_cub(args.cub_dir) if args.cub_dir else None
    spec = load_spec()
    if args.reference_selection:
        if args.candidate_spec:
            raise InvalidArgumentError("--reference-selection and --candidate-spec exclude each other")
        if cub is None and not args.classes:
            raise InvalidArgumentError("--reference-selection without --classes lists CUB's 200 classes: pass --cub-dir or --classes")
        plan = plan_reference_selection(cub, args.classes, spec=spec)
        # Which classes is not bound to the store: a later run may add classes to the same folder.
        return select_pairs(plan, args.pairs), {"plan": "reference-selection"}
    if args.classes:
        raise InvalidArgumentError("--classes only applies to --reference-selection")
    overrides = parse_tdg_overrides(args.tdg)
    if args.candidate_spec:
        candidate = read_candidate_spec(args.candidate_spec)
        drop = False if args.drop_present is None else args.drop_present
        plan = plan_pairs(
            candidate.birds, candidate.attributes, cub=cub, drop_present=drop,
            guidance_birds=candidate.guidance_birds, tdg_overrides=overrides, spec=spec,
        )
        info = {"plan": "candidate-grid", "guidance_birds": dict(candidate.guidance_birds)}
    else:
        drop = True if args.drop_present is None else args.drop_present
        plan = plan_pairs(spec.reference_birds, spec.substitutions, cub=cub, drop_present=drop, tdg_overrides=overrides, spec=spec)
        info = {"plan": "paper"}
    info["tdg_overrides"] = {k: v.to_dict() for k, v in overrides.items()}
    return select_pairs(plan, args.pairs), info


# Options that say how this process runs, not what the data is: left out of the card's command line,
# so every shard and rerun records (and assembles) the same card.
_RUN_ONLY = {"--num-shards": 1, "--shard-index": 1, "--max-items": 1, "--chunk-size": 1, "--device": 1,
             "--offload": 0, "-v": 0, "--verbose": 0, "--executor": 1, "--ray-address": 1}


def canonical_command(argv: Sequence[str]) -> list[str]:
    """``argv`` without the run-only options (shards, chunking, device, verbosity)."""
    out: list[str] = []
    skip = 0
    for arg in argv:
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in _RUN_ONLY:
            skip = 0 if "=" in arg else _RUN_ONLY[name]
            continue
        out.append(arg)
    return out


def resolve_dtype_name(dtype: str, device: str) -> str:
    if dtype != "auto":
        return dtype
    import torch

    on_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    return "bf16" if on_cuda else "fp32"


def print_plan(plan: PairPlan, args: argparse.Namespace) -> None:
    """The plan as numbers. Without ``--cub-dir`` the numbers CUB decides are marked as such."""
    images = len(plan.pairs) * args.images_per_pair
    no_cub = not args.cub_dir
    upper = " (at most: pairs whose bird already has S+ are dropped with --cub-dir)" if no_cub and not args.reference_selection else ""
    by_category: dict[str, int] = {}
    for pair in plan.pairs:
        by_category[pair.category or "plain"] = by_category.get(pair.category or "plain", 0) + 1
    print(f"mode: {args.mode}{' (reference selection)' if args.reference_selection else ''}")
    print(f"pairs: {len(plan.pairs)}{upper} ({', '.join(f'{k} {v}' for k, v in sorted(by_category.items()))})")
    print(f"birds: {len({p.bird for p in plan.pairs})}, attributes: {len({p.attribute for p in plan.pairs if p.attribute})}")
    if no_cub:
        if not args.reference_selection:
            print("dropped (bird already has S+): needs --cub-dir (CUB's class-level labels)")
    else:
        print(f"dropped (bird already has S+): {len(plan.dropped)}")
    print(f"images: {images}{' (at most)' if upper else ''} ({args.images_per_pair} per pair) at {args.resolution}px, {args.steps} steps")
    if args.seconds_per_image:
        hours = images * args.seconds_per_image / 3600
        print(f"estimated GPU-hours: {hours:.1f}{' (at most)' if upper else ''} at {args.seconds_per_image:g} s/image")
    else:
        print("estimated GPU-hours: pass --seconds-per-image (measured) for an estimate")
    for pair in plan.pairs[:5]:
        removed = pair.removed_attribute or ("needs --cub-dir" if no_cub and pair.attribute else "-")
        print(f"  {pair.bird} | {pair.attribute or '-'} | S-={removed} | {pair.prompt_reference!r} | {pair.prompt_guidance!r}")
    if len(plan.pairs) > 5:
        print(f"  ... {len(plan.pairs) - 5} more")
    if no_cub:
        print("without --cub-dir: bird and attribute names are not checked against CUB")


def run(args: argparse.Namespace) -> int:
    if not args.cub_dir and not args.dry_run:
        raise InvalidArgumentError("--cub-dir is required to generate (CUB_200_2011's class-level labels set S+ and S-); --dry-run works without it")
    plan, plan_info = build_plan(args)
    if args.dry_run:
        print_plan(plan, args)
        return 0
    license = args.license or (FLUX_DEV_DEFAULT_LICENSE if args.model == DEFAULT_MODEL else None)
    if not license:
        raise InvalidArgumentError(f"--license is required for models other than {DEFAULT_MODEL} (e.g. --license cc-by-nc-4.0)")
    settings = GenerationSettings(
        mode=args.mode,
        model=args.model,
        revision=args.revision,
        resolution=args.resolution,
        steps=args.steps,
        guidance_scale=args.guidance,
        max_sequence_length=args.max_sequence_length,
        seed=args.seed,
        dtype=resolve_dtype_name(args.dtype, args.device),
    )
    if args.chunk_size < 1:
        raise InvalidArgumentError(f"--chunk-size must be >= 1, got {args.chunk_size}")
    shard = resolve_shard(args.num_shards, args.shard_index)
    out = check_output(args.out, stage="sub/candidates")  # a foreign folder or another stage's run: refused before any model loads
    with executor_for(args):
        summary = generate(
            out=out,
            plan=plan,
            images_per_pair=args.images_per_pair,
            settings=settings,
            license=license,
            reference_selection=args.reference_selection,
            extra_config=plan_info,
            command=canonical_command(getattr(args, "argv", None) or list(sys.argv)),
            shard=shard,
            device=args.device,
            offload=args.offload,
            save_guidance=args.save_guidance,
            max_items=args.max_items,
            chunk_size=args.chunk_size,
        )
    if summary.report.assembly is not None and summary.report.assembly.status == "assembled":
        print(f"wrote {summary.items} images ({summary.pairs} pairs) to {args.out} (card README.md, grid.png)")
    else:
        print(summary.report.message(str(args.out)))
    return 0
