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
import sys

from conceptforge import argtypes as at
from conceptforge import gpu_costs
from conceptforge.commands.base import (
    add_executor_arguments,
    add_run_options,
    check_chunk_size,
    executor_for,
    settings_from_args,
    shard_of,
)
from conceptforge.commands.shared_flags import add_cub_dir, add_dataset_out
from conceptforge.commands.spec_flags import add_spec_or_preset
from conceptforge.engine.runner import check_output
from conceptforge.errors import InvalidArgumentError
from conceptforge.generators.sub.options import (
    ATTENTION_BACKENDS,
    CHUNK_SIZE,
    COMPILE_MODES,
    DEFAULT_GUIDANCE,
    DEFAULT_MAX_SEQUENCE_LENGTH,
    DEFAULT_MODEL,
    DEFAULT_RESOLUTION,
    DEFAULT_STEPS,
    FLUX_DEV_DEFAULT_LICENSE,
    QUANTIZE_MODES,
)
from conceptforge.generators.sub.own_benchmark import SubBenchmark, carried, load_sub_benchmark, without_paper_preset
from conceptforge.generators.sub.plan import PlanRequest, build_plan, resolve_dtype_name, strip_run_only_options
from conceptforge.generators.sub.spec import SUB_PAPER_PRESET, PairPlan
from conceptforge.gpu_costs import VQA_WORKLOAD

# The model code (torch, diffusers) and the stage (``datasets``) are imported where a run starts,
# not here: --help, --dry-run and a bad flag answer without them (generators/sub/options.py).

logger = logging.getLogger(__name__)

DESCRIPTION = (
    "Generate SUB candidates with Tied Diffusion Guidance over FLUX "
    "(SUB: Benchmarking CBM Generalization via Synthetic Attribute Substitutions)."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = DESCRIPTION
    p.add_argument(
        "--mode",
        choices=["tdg", "prompt-only"],
        default="tdg",
        help="TDG (default) or the prompt-only baseline (Fig. 4)",
    )
    add_cub_dir(
        p.add_argument,
        help="local CUB_200_2011 directory (classes, attributes, class-level labels); required except for --dry-run",
    )
    add_dataset_out(p.add_argument, help="output dataset directory or fsspec URL (item store in OUT/.work)")
    what = p.add_argument_group("what to generate")
    add_spec_or_preset(
        what,
        spec_help="a SUB benchmark spec (YAML/JSON; docs/sub.md 'Your own SUB benchmark'): classes, attribute "
        "groups, substitutions, prompts, VQA question, TDG; the dataset carries it (benchmark_spec.yaml)",
        preset_help="a built-in spec (default: the paper's, sub-cub-paper)",
    )
    what.add_argument(
        "--candidate-spec",
        type=at.existing_file.as_text(),
        help="JSON {birds: [...], attributes: [...]}: the full grid birds x attributes",
    )
    what.add_argument(
        "--reference-selection",
        action="store_true",
        help="prompt-only images of CUB classes with the plain bird prompt",
    )
    what.add_argument("--classes", nargs="+", help="with --reference-selection: these CUB classes instead of all 200")
    what.add_argument(
        "--pairs", nargs="+", metavar="SEL", help="subset: BIRD=ATTRIBUTE pairs, BIRD names or ATTRIBUTEs (union)"
    )
    what.add_argument(
        "--images-per-pair", type=at.positive_int, default=500, help="images per pair (paper: 500 candidates)"
    )
    what.add_argument(
        "--drop-present",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="drop pairs whose bird already has S+ (default: on for the paper spec, off for --candidate-spec)",
    )
    what.add_argument(
        "--tdg", action="append", default=[], metavar="CAT=K,TMIN,TMAX", help="override a category's schedule"
    )
    gen = p.add_argument_group("model and sampling")
    gen.add_argument("--model", default=DEFAULT_MODEL, help="FLUX pipeline: Hub id or local folder")
    gen.add_argument("--revision", default=None, help="model revision (branch, tag or commit)")
    gen.add_argument(
        "--resolution",
        type=at.IntRange(
            16,
            4096,
            name="resolution (16-4096)",
            multiple_of=16,
            why="FLUX packs 2x2 latent patches of 1/8 the image",
            bound_why="FLUX.1 makes images of up to about 2 megapixels; 4096 px is 16",
        ),
        default=DEFAULT_RESOLUTION,
    )
    gen.add_argument("--steps", type=at.positive_int, default=DEFAULT_STEPS)
    gen.add_argument("--guidance", type=at.non_negative_float, default=DEFAULT_GUIDANCE)
    gen.add_argument(
        "--max-sequence-length",
        type=at.IntRange(1, 512, name="max sequence length (1-512)"),
        default=DEFAULT_MAX_SEQUENCE_LENGTH,
    )
    gen.add_argument("--seed", type=at.seed, default=0, help="run seed; item seeds derive from it")
    gen.add_argument("--device", type=at.device_name, default="auto", help="auto, cuda, cuda:N or cpu")
    gen.add_argument(
        "--dtype",
        type=at.dtype,
        choices=at.DTYPES,
        default="auto",
        help="auto: bfloat16 on CUDA, float32 on CPU (fp32, fp16, bf16 accepted)",
    )
    gen.add_argument("--offload", action="store_true", help="model CPU offload for GPUs with less memory")
    fast = p.add_argument_group("fast paths (off by default; see docs/sub.md and BENCHMARKS.md)")
    fast.add_argument(
        "--pairs-per-batch",
        type=at.positive_int,
        default=1,
        help="TDG pairs (or prompt-only images) per transformer batch (default 1); at most --chunk-size",
    )
    fast.add_argument(
        "--fast",
        action="store_true",
        help="all of the below at once (flux-fast's recipe): --fuse-qkv --quantize fp8-dynamic --aot "
        "--compile-mode max-autotune --cuda-graphs --attention-backend best --vae-channels-last; "
        "needs an Ada/Hopper GPU; options given explicitly win",
    )
    fast.add_argument("--fuse-qkv", action="store_true", help="fuse the q, k, v projections into one matmul (exact)")
    fast.add_argument(
        "--compile", action="store_true", help="torch.compile the FLUX transformer, full graph (warm-up per process)"
    )
    fast.add_argument(
        "--aot",
        action="store_true",
        help="compile the transformer ahead of time once per shape (torch.export + AOTInductor), cached in "
        "--compile-cache and loaded by every rank and resumed task",
    )
    fast.add_argument(
        "--compile-mode",
        choices=COMPILE_MODES,
        default=None,
        help="with --compile or --aot: inductor's default, or max-autotune (GEMM autotuning; minutes more warm-up)",
    )
    fast.add_argument(
        "--compile-cache",
        type=at.output_dir,
        default=None,
        metavar="DIR",
        help="local folder of --aot's compiled packages, shareable between runs (default: OUT/.work/compiled)",
    )
    fast.add_argument(
        "--cuda-graphs", action="store_true", help="replay the transformer's pass as a CUDA graph (static shapes; CUDA)"
    )
    fast.add_argument(
        "--attention-backend",
        choices=ATTENTION_BACKENDS,
        default=None,
        help="diffusers' attention backend for the transformer (default: PyTorch SDPA's own choice; best: "
        "Flash-Attention 3 where installed on Hopper, cuDNN SDPA on other GPUs)",
    )
    fast.add_argument(
        "--quantize",
        choices=QUANTIZE_MODES,
        default=None,
        help="torchao quantisation of the transformer's Linear layers after loading: int8-weight, fp8-weight "
        "(weight-only) or fp8-dynamic (activations and weights, per-row scales); fp8 needs compute "
        "capability >= 8.9; pip install 'conceptforge[quantize]'",
    )
    fast.add_argument("--vae-channels-last", action="store_true", help="decode with the VAE in channels-last memory")
    gen.add_argument("--save-guidance", action="store_true", help="also keep the G image in the item store")
    run = p.add_argument_group("run")
    run.add_argument(
        "--license",
        type=at.hub_license,
        default=None,
        help=f"dataset license (default {FLUX_DEV_DEFAULT_LICENSE} for {DEFAULT_MODEL}; required otherwise)",
    )
    add_run_options(
        run,
        chunk_size=CHUNK_SIZE,
        chunk_help=f"images per store chunk (default {CHUNK_SIZE}; a kill loses at most one chunk)",
        max_items_flag="--max-items",
        max_items_help="stop after this many new images (resume later)",
    )
    add_executor_arguments(p)
    gpu_costs.add_dry_run_arguments(
        run,
        "print the plan and exit",
        per_image_help="your measured GPU time per image: overrides the cost table in --dry-run's GPU-hour estimate",
    )


def print_plan(plan: PairPlan, args: argparse.Namespace, benchmark: SubBenchmark | None = None) -> None:
    """The plan as numbers. Without ``--cub-dir`` the numbers CUB decides are marked as such."""
    images = len(plan.pairs) * args.images_per_pair
    no_cub = not args.cub_dir and (benchmark is None or benchmark.table is None)
    noun = "bird" if benchmark is None or benchmark.table is None else "class"  # the paper's words for CUB
    if benchmark is not None:
        spec = benchmark.benchmark
        source = benchmark.table.description if benchmark.table is not None else "CUB (--cub-dir)"
        print(f"spec: {benchmark.spec_file.name} ({spec.domain}; source {source})")
        print(f"classes: {len(spec.classes)}, groups: {len(spec.groups)}, substitutions: {len(spec.substitutions)}")
    upper = (
        " (at most: pairs whose bird already has S+ are dropped with --cub-dir)"
        if no_cub and not args.reference_selection
        else ""
    )
    by_category: dict[str, int] = {}
    for pair in plan.pairs:
        by_category[pair.category or "plain"] = by_category.get(pair.category or "plain", 0) + 1
    print(f"mode: {args.mode}{' (reference selection)' if args.reference_selection else ''}")
    print(f"pairs: {len(plan.pairs)}{upper} ({', '.join(f'{k} {v}' for k, v in sorted(by_category.items()))})")
    print(
        f"{'birds' if noun == 'bird' else 'classes'}: {len({p.bird for p in plan.pairs})}, "
        f"attributes: {len({p.attribute for p in plan.pairs if p.attribute})}"
    )
    if no_cub:
        if not args.reference_selection:
            print("dropped (bird already has S+): needs --cub-dir (CUB's class-level labels)")
    else:
        print(f"dropped ({noun} already has S+): {len(plan.dropped)}")
    print(
        f"images: {images}{' (at most)' if upper else ''} ({args.images_per_pair} per pair) at {args.resolution}px, {args.steps} steps"
    )
    for line in gpu_hour_lines(images, args, upper_bound=bool(upper)):
        print(line)
    for pair in plan.pairs[:5]:
        removed = pair.removed_attribute or ("needs --cub-dir" if no_cub and pair.attribute else "-")
        print(
            f"  {pair.bird} | {pair.attribute or '-'} | S-={removed} | {pair.prompt_reference!r} | {pair.prompt_guidance!r}"
        )
    if len(plan.pairs) > 5:
        print(f"  ... {len(plan.pairs) - 5} more")
    if no_cub:
        print("without --cub-dir: bird and attribute names are not checked against CUB")


def gpu_hour_lines(images: int, args: argparse.Namespace, *, upper_bound: bool = False) -> list[str]:
    """The GPU-hours of generating ``images`` (cost table, or ``--seconds-per-image``), then of
    VQA-filtering them (``conceptforge filter sub``)."""
    tdg = args.mode == "tdg" and not args.reference_selection
    unit = "TDG pair (one kept image)" if tdg else "image"
    if args.seconds_per_image:
        generation = gpu_costs.given(args.seconds_per_image, unit, "--seconds-per-image")
    else:
        generation = generation_estimate(args, tdg)
    lines = gpu_costs.plan_lines([("generate", images, generation)], upper_bound=upper_bound)
    if getattr(args, "fast", False) and generation.workload != "sub/tdg-pair-fast" and not args.seconds_per_image:
        lines.append(
            f"  (--fast: no measured figure on {generation.gpu} yet (benchmarks/gpu_check.sh): the plain path's figure above)"
        )
    if not args.seconds_per_image:
        lines.append("  (--seconds-per-image S overrides the table with your own measured time per image)")
    if tdg:
        vqa = gpu_costs.estimate(VQA_WORKLOAD, gpu=args.gpu_model)
        lines.append(
            f"then filter sub (VQA, 1 tile per image): {gpu_costs.format_hours(vqa.hours(images))} GPU-hours more "
            f"at {vqa.seconds:.3g} s per image ({vqa.describe()})"
        )
    return lines


def generation_estimate(args: argparse.Namespace, tdg: bool) -> gpu_costs.Estimate:
    """Seconds per TDG pair (or prompt-only image) from the cost table: with ``--fast``, the
    measured ``--fast`` figure of this GPU model where the device check has written one (a floor
    from FLOPs would not show the speed-up: the FLOPs are the same), else the plain path's."""
    where = dict(gpu=args.gpu_model, resolution=args.resolution, steps=args.steps)
    if getattr(args, "fast", False) and tdg:
        fast = gpu_costs.estimate("sub/tdg-pair-fast", **where)
        if fast.kind == "measured":
            return fast
    return gpu_costs.estimate("sub/tdg-pair" if tdg else "sub/prompt-only-image", **where)


def plan_request(args: argparse.Namespace) -> PlanRequest:
    """The flags that decide the plan (each field is the flag of its name)."""
    from conceptforge.commands.base import settings_from_args

    return settings_from_args(PlanRequest, args)


def fast_path_settings(args: argparse.Namespace) -> dict:
    """The fast-path settings of the command line: ``--fast`` expanded (refused in one line where it
    cannot run whole), then each option given explicitly on top; ``--attention-backend best``
    resolved to this machine's kernel (the stored setting names the kernel that ran)."""
    from conceptforge.generators.sub.fast_paths import fast_recipe, resolve_attention_backend

    fast = fast_recipe(args.device) if args.fast else {}
    if args.compile:  # --fast --compile: torch.compile instead of the ahead-of-time package
        fast.pop("aot", None)
    settings = {
        "compile": args.compile,
        "aot": args.aot or fast.get("aot", False),
        "compile_mode": args.compile_mode or fast.get("compile_mode"),
        "fuse_qkv": args.fuse_qkv or fast.get("fuse_qkv", False),
        "quantize": args.quantize or fast.get("quantize"),
        "cuda_graphs": args.cuda_graphs or fast.get("cuda_graphs", False),
        "vae_channels_last": args.vae_channels_last or fast.get("vae_channels_last", False),
        "attention_backend": resolve_attention_backend(args.attention_backend, args.device)
        or fast.get("attention_backend"),
    }
    if args.compile_cache and not settings["aot"]:
        raise InvalidArgumentError("--compile-cache keeps --aot's packages: add --aot (or --fast)")
    if args.offload and (settings["aot"] or settings["cuda_graphs"]):
        raise InvalidArgumentError(
            "--aot and --cuda-graphs call the transformer's compiled pass directly, past --offload's hooks "
            "that move it onto the GPU: leave --offload off (or drop --aot / --cuda-graphs / --fast)"
        )
    return settings


def load_benchmark(args: argparse.Namespace) -> SubBenchmark | None:
    """``--spec`` / ``--preset`` validated (one line naming the field), else ``None``: the paper's plan."""
    if not args.spec and not args.preset:
        return None
    return load_sub_benchmark(args.spec, preset=args.preset)


def recorded_command(args: argparse.Namespace) -> list[str]:
    """The command line the card records (``--preset sub-cub-paper`` left out: it is the default)."""
    argv = strip_run_only_options(getattr(args, "argv", None) or list(sys.argv))
    return without_paper_preset(argv) if args.preset == SUB_PAPER_PRESET else argv


def run(args: argparse.Namespace) -> int:
    benchmark = load_benchmark(args)
    needs_cub = benchmark is None or benchmark.table is None
    if needs_cub and not args.cub_dir and not args.dry_run:
        raise InvalidArgumentError(
            "--cub-dir is required to generate (CUB_200_2011's class-level labels set S+ and S-); --dry-run works without it"
        )
    plan, plan_info = build_plan(plan_request(args), benchmark)
    if args.dry_run:
        print_plan(plan, args, benchmark)
        return 0
    from conceptforge.generators.sub.stage import GenerationSettings, check_fast_paths, generate

    license = args.license or (FLUX_DEV_DEFAULT_LICENSE if args.model == DEFAULT_MODEL else None)
    if not license:
        raise InvalidArgumentError(
            f"--license is required for models other than {DEFAULT_MODEL} (e.g. --license cc-by-nc-4.0)"
        )
    settings = settings_from_args(
        GenerationSettings,
        args,
        guidance_scale=args.guidance,
        dtype=resolve_dtype_name(at.SHORT_DTYPES[args.dtype], args.device),
        **fast_path_settings(args),
    )
    check_fast_paths(settings, args.device)  # fp8 or CUDA graphs on a CPU, no torchao: before anything is written
    from conceptforge.external_errors import require_model

    if getattr(args, "executor", "local") == "local":  # Ray workers have their own disks and GPUs
        from conceptforge.generators.sub.flux_tdg import resolve_device

        # the device first: its line names a missing GPU and missing weights together
        resolve_device(args.device, model=args.model, revision=args.revision, offload=args.offload)
        require_model(args.model, "--model")  # a mistyped folder, an uncached model offline: before anything is written
    check_chunk_size(args)
    if args.pairs_per_batch > args.chunk_size:
        raise InvalidArgumentError(
            f"--pairs-per-batch {args.pairs_per_batch} exceeds --chunk-size {args.chunk_size}: a batch never spans chunks; "
            "raise --chunk-size"
        )
    shard = shard_of(args)
    out = check_output(
        args.out, stage="sub/candidates"
    )  # a foreign folder or another stage's run: refused before any model loads
    with executor_for(args):
        summary = generate(
            out=out,
            plan=plan,
            images_per_pair=args.images_per_pair,
            settings=settings,
            license=license,
            reference_selection=args.reference_selection,
            extra_config=plan_info,
            command=recorded_command(args),
            shard=shard,
            device=args.device,
            offload=args.offload,
            save_guidance=args.save_guidance,
            max_items=args.max_items,
            chunk_size=args.chunk_size,
            compile_cache=args.compile_cache,
            benchmark=carried(benchmark, plan),
        )
    if summary.report.assembly is not None and summary.report.assembly.status == "assembled":
        print(f"wrote {summary.items} images ({summary.pairs} pairs) to {args.out} (card README.md, grid.png)")
    else:
        print(summary.report.message(str(args.out)))
    return 0
