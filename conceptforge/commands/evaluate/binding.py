"""``conceptforge evaluate binding``: CLIP zero-shot, CSP and CDSMs on a binding dataset (Does CLIP Bind Concepts?, Tables 2–7).

An alias of ``conceptforge evaluate --model CLIP --tasks binding-clip,binding-cdsm``: its flags
become task options and the one runner does the work (same results file, samples and tables).
"""

from __future__ import annotations

import argparse
import logging

from conceptforge import argtypes as at
from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from conceptforge.loaders.binding.evaluate import ALL_MODELS, PAPER_CLIP

    parser.add_argument("--dataset", required=True, help="binding dataset dir (e.g. OUT/single-object) or Hub id")
    parser.add_argument("--revision", default=None, help="dataset revision on the Hub")
    parser.add_argument(
        "--config",
        default=None,
        help="config of a repo with several (single-object, two-object, relational); omit for a one-config repo",
    )
    parser.add_argument(
        "--models",
        default="clip,csp,add,mult,conv,tl,rf",
        help=f"comma-separated, from: {', '.join(ALL_MODELS)} (clip-ft = full fine-tuning, slow)",
    )
    parser.add_argument("--clip-model", default=PAPER_CLIP, help="CLIP id or local dir (frozen image embeddings)")
    parser.add_argument("--clip-revision", default=None)
    parser.add_argument("--seeds", type=at.ListOf(at.seed, name="seeds"), default=[0, 1, 2, 3, 4])
    parser.add_argument("--epochs", type=at.positive_int, default=20)
    parser.add_argument("--batch-size", type=at.positive_int, default=32)
    parser.add_argument(
        "--lr", type=at.positive_float, default=None, help="override Appendix A's per-model learning rate"
    )
    parser.add_argument("--weight-decay", type=at.non_negative_float, default=1e-5)
    parser.add_argument(
        "--cdsm-score",
        choices=("dot", "scaled-cosine"),
        default="dot",
        help="CDSM scores: dot = paper Algorithm 1 (raw dot product, N(0,1) init, no scale); "
        "scaled-cosine = CLIP's logit_scale x cosine, N(0,1/d) init",
    )
    parser.add_argument("--calibrate", action="store_true", help="calibrated stacking (Appendix C; single-object only)")
    parser.add_argument(
        "--template",
        type=at.Template(allowed={"label"}, required={"label"}),
        default="a photo of {label}",
        help="zero-shot prompt, with {label}",
    )
    parser.add_argument(
        "--cache-dir",
        type=at.output_dir.as_text(),
        default=None,
        help="embedding cache (default ~/.cache/conceptforge/embeddings)",
    )
    parser.add_argument("--device", type=at.device, default=None)
    parser.add_argument(
        "--output", type=at.output_file.as_text(), default=None, help="write the results JSON here (samples beside it)"
    )


def run(args: argparse.Namespace) -> int:
    from conceptforge.commands.evaluate.tasks import run_alias
    from conceptforge.loaders.binding.evaluate import ALL_MODELS
    from conceptforge.loaders.harness.runner import RunSettings

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in ALL_MODELS]
    if unknown or not models:
        raise InvalidArgumentError(
            f"unknown binding model(s) {', '.join(unknown) or '(none)'} (choose from {', '.join(ALL_MODELS)})"
        )
    if args.epochs < 1:
        raise InvalidArgumentError("--epochs must be at least 1")
    if not args.seeds:
        raise InvalidArgumentError("--seeds needs at least one seed")
    if "{label}" not in args.template:
        raise InvalidArgumentError("--template must contain {label}")
    trained = [m for m in models if m != "clip"]
    tasks = (["binding-clip"] if "clip" in models else []) + (["binding-cdsm"] if trained else [])
    at = f"@{args.revision}" if args.revision else ""
    options = [f"binding-clip.template={args.template}"] if "clip" in models else []
    if trained:
        options += [
            f"binding-cdsm.models={','.join(trained)}",
            f"binding-cdsm.seeds={','.join(map(str, args.seeds))}",
            f"binding-cdsm.epochs={args.epochs}",
            f"binding-cdsm.lr={args.lr}",
            f"binding-cdsm.weight_decay={args.weight_decay}",
            f"binding-cdsm.calibrate={args.calibrate}",
            f"binding-cdsm.cdsm_score={args.cdsm_score}",
        ]
    if args.config:
        options += [f"{task}.config={args.config}" for task in tasks]
    settings = RunSettings(device=args.device, batch_size=args.batch_size, cache_dir=args.cache_dir)
    run_alias(
        model=args.clip_model,
        revision=args.clip_revision,
        tasks=",".join(tasks),
        datasets=[f"{task}={args.dataset}{at}" for task in tasks],
        options=options,
        settings=settings,
        output=args.output,
        model_flag="--clip-model",
    )
    return 0
