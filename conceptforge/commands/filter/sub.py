"""``conceptforge filter sub``: filter SUB candidates with VQA multiple-choice ranking into the SUB dataset (SUB §4.2).

    conceptforge filter sub --candidates outputs/sub-candidates --out outputs/sub \
        --cub-dir data/CUB_200_2011 [--vqa-model ID] [--keep-fraction 0.1] [--batch-size 8]

Scores are cached per image id under OUT/.work, so a rerun never re-scores; --num-shards /
--shard-index (and accelerate ranks) split the scoring; the dataset is assembled once all
candidates are scored.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Any

from conceptforge import argtypes as at
from conceptforge import gpu_costs
from conceptforge.commands.base import (
    add_endpoint_flags,
    add_executor_arguments,
    add_run_options,
    endpoint_options,
    executor_for,
    shard_of,
)
from conceptforge.commands.spec_flags import add_spec_or_preset
from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from conceptforge.filters.vqa.questions import DEFAULT_ANSWER_HINT
    from conceptforge.filters.vqa.scorer import DEFAULT_VQA_MODEL

    parser.add_argument(
        "--candidates",
        required=True,
        type=at.existing_dir,
        help="SUB candidates dataset directory (generate_sub.py --out)",
    )
    parser.add_argument("--out", required=True, type=at.output_dir, help="output dataset directory (split `test`)")
    parser.add_argument(
        "--cub-dir",
        type=at.existing_path,
        default=os.environ.get("CUB_DIR"),
        help="CUB_200_2011 directory (or its attributes.txt): the options of each attribute group [env CUB_DIR]",
    )
    parser.add_argument(
        "--vqa-model",
        default=DEFAULT_VQA_MODEL,
        help=f"image-text-to-text model id or path (default {DEFAULT_VQA_MODEL}), or a served model "
        "endpoint:SERVED_NAME@BASE_URL whose server returns token log-probabilities (vLLM, SGLang)",
    )
    parser.add_argument("--vqa-revision", default=None, help="model revision (branch, tag or commit)")
    add_spec_or_preset(
        parser,
        spec_help="a SUB benchmark spec: its groups' values and VQA question (default: the candidates' "
        "benchmark_spec.yaml when they carry one, else the paper's)",
        preset_help="a built-in SUB spec (the paper's: sub-cub-paper)",
    )
    add_endpoint_flags(parser, budget=False)
    parser.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow a checkpoint that ships its own Python code to run it (never implied)",
    )
    for flag, kind, default, what in (  # which candidates and pairs survive the filter
        ("--keep-fraction", at.fraction_above_zero, 0.1, "share of each pair's candidates kept (0.1 = 50 of 500)"),
        (
            "--min-survivor-fraction",
            at.unit_interval,
            None,
            "drop a pair when fewer than this share answer S+ (default: --keep-fraction)",
        ),
        ("--min-splus-prob", at.unit_interval, 0.0, "extra floor on the S+ probability (default 0: none)"),
    ):
        parser.add_argument(flag, type=kind, default=default, help=what)
    parser.add_argument("--batch-size", type=at.positive_int, default=8, help="images per VQA forward")
    parser.add_argument("--device", type=at.device, default=None, help="torch device (default: cuda when available)")
    parser.add_argument(
        "--no-answer-hint",
        action="store_true",
        help=f"ask the paper's question verbatim, without the line {DEFAULT_ANSWER_HINT!r}",
    )
    parser.add_argument(
        "--license", type=at.hub_license, default=None, help="dataset license (default: the candidates card's license)"
    )
    add_run_options(
        parser,
        chunk_size=100,
        chunk_help="candidates per store chunk, within one parquet row group (default 100)",
        max_items_flag="--max-images",
        max_items_help="score at most this many new images, then stop",
    )
    add_executor_arguments(parser)
    gpu_costs.add_dry_run_arguments(
        parser,
        "print the candidates to score and their GPU-hours; load no model",
        per_image_help="your measured VQA time per image: overrides the cost table in --dry-run",
    )


def plan_lines(args: argparse.Namespace) -> list[str]:
    """What --dry-run prints: the candidates and the GPU-hours of scoring them."""
    from conceptforge.filters.sub.pipeline import open_candidates
    from conceptforge.filters.vqa.scorer import DEFAULT_VQA_MODEL

    images = open_candidates(args.candidates).num_rows()
    lines = [f"candidates: {images:,} images in {args.candidates}", f"VQA model: {args.vqa_model}"]
    if args.seconds_per_image:
        lines += gpu_costs.plan_lines(
            [("score", images, gpu_costs.given(args.seconds_per_image, "image scored", "--seconds-per-image"))]
        )
        return lines
    lines += gpu_costs.plan_lines([("score", images, gpu_costs.estimate(gpu_costs.VQA_WORKLOAD, gpu=args.gpu_model))])
    tiled = gpu_costs.estimate("filter/vqa-image-10-tiles", gpu=args.gpu_model)
    lines.append(
        f"  (a processor that tiles each 1024 px image 3x3 + thumbnail: {gpu_costs.format_hours(tiled.hours(images))} h;"
        " --seconds-per-image S overrides the table with your own measured time)"
    )
    if args.vqa_model != DEFAULT_VQA_MODEL:
        lines.append(f"  the table's figures are for {DEFAULT_VQA_MODEL}'s shape, not {args.vqa_model}")
    return lines


def served_vqa_scorer(config: Any) -> Any:
    """A served ``--vqa-model`` as the SUB filter's :class:`~conceptforge.filters.sub.stage.ServedScorer`:
    resolved through the harness (what the server says it serves), refused in one line when the
    server returns no token log-probabilities (the filter ranks by the option letters' ones)."""
    from functools import partial

    from conceptforge.filters.sub.stage import ServedScorer
    from conceptforge.loaders.harness.adapters.base import ENDPOINT, load_adapter
    from conceptforge.loaders.harness.model_ref import resolve_model

    served = resolve_model(config.vqa_model, endpoint=config.endpoint)
    if served.kind != ENDPOINT:
        raise InvalidArgumentError(
            f"--vqa-model {config.vqa_model} returns no token log-probabilities; the SUB filter ranks candidates "
            "by the option letters' probabilities, so it needs a server that gives them (vLLM, SGLang)"
        )
    return ServedScorer(served.sha, partial(load_adapter, served, device=None, dtype=None, cache_dir=None))


def run(args: argparse.Namespace) -> int:
    if args.dry_run:
        print("\n".join(plan_lines(args)))
        return 0
    from conceptforge.filters.sub.decision import FilterParams
    from conceptforge.filters.sub.stage import SubFilterConfig, filter_sub
    from conceptforge.filters.vqa.questions import DEFAULT_ANSWER_HINT
    from conceptforge.generators.sub.own_benchmark import load_sub_benchmark, without_paper_preset
    from conceptforge.generators.sub.spec import SUB_PAPER_PRESET

    benchmark = None
    if args.spec or args.preset:
        benchmark = load_sub_benchmark(args.spec, preset=args.preset, with_labels=False)
    argv = getattr(args, "argv", None)
    if argv and args.preset == SUB_PAPER_PRESET:
        argv = without_paper_preset(list(argv))
    config = SubFilterConfig(
        candidates=args.candidates,
        cub_dir=args.cub_dir,
        params=FilterParams(args.keep_fraction, args.min_survivor_fraction, args.min_splus_prob),
        vqa_model=args.vqa_model,
        vqa_revision=args.vqa_revision,
        trust_remote_code=args.trust_remote_code,
        answer_hint="" if args.no_answer_hint else DEFAULT_ANSWER_HINT,
        license=args.license,
        batch_size=args.batch_size,
        chunk_size=args.chunk_size,
        device=args.device,
        argv=argv,
        endpoint=endpoint_options(args),
        resolve_served=served_vqa_scorer,
        benchmark=benchmark,
    )
    from conceptforge.endpoint_spec import is_endpoint_spec
    from conceptforge.external_errors import require_model

    local = getattr(args, "executor", "local") == "local"  # Ray workers load from their own disks
    # A mistyped folder or an uncached model offline, before --out is made. A resumed run (its
    # store exists) is checked by the store first: a changed --vqa-model is "differs in: vqa_model",
    # and a model that then fails to load leaves nothing new (settings bind with the first chunk).
    resuming = "://" in str(args.out) or (Path(args.out) / ".work").exists()

    def check_model() -> None:
        if local and not resuming and not is_endpoint_spec(args.vqa_model):
            require_model(args.vqa_model, "--vqa-model")

    with executor_for(args):
        report, stats = filter_sub(
            config, args.out, shard=lambda: shard_of(args), max_images=args.max_images, check_model=check_model
        )
    if stats is None:
        scored = report.total_items - report.missing_items
        print(f"scored {scored} of {report.total_items} candidates; {report.message(str(args.out))}")
        return 0
    totals = stats["totals"]
    print(
        f"kept {totals['kept']} of {totals['candidates']} images in {totals['pairs_kept']} of {totals['pairs']} pairs "
        f"(wrong answer {totals['wrong_answer']}, below rank {totals['below_rank']}, in dropped pairs "
        f"{totals['in_dropped_pair']}, unreadable {totals['unreadable']}) -> {args.out}"
    )
    print(f"card: {args.out / 'README.md'}   grid: {args.out / 'grid.png'}")
    return 0
