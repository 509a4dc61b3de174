"""``conceptforge evaluate compmap``: CompMap usefulness and interpretability on CUB or MIT-States.

Prints paper-style tables (Tables 1–4 of "Do Vision-Language Pretrained Models Learn Composable
Primitive Concepts?") and writes every number to a JSON file. An alias of ``conceptforge evaluate
--model M --tasks compmap-cub`` (``--cub-dir``) or ``compmap-mit-states`` (``--mit-states-dir``):
its flags become task options and the one runner writes the one results format.
"""

from __future__ import annotations

import argparse
import logging

from conceptforge import argtypes as at
from conceptforge.errors import InvalidArgumentError
from conceptforge.loaders.harness.model_ref import DEFAULT_CLIP

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Stored as ``args.dataset`` (``args.benchmark`` is the sub-command name, ``compmap``).
    parser.add_argument("--benchmark", dest="dataset", choices=("cub", "mit-states"), required=True)
    parser.add_argument(
        "--data-dir",
        required=True,
        type=at.existing_dir.as_text(),
        help="CUB_200_2011 directory, or the MIT-States root",
    )
    parser.add_argument(
        "--model",
        default=DEFAULT_CLIP,
        help="dual encoder (CLIP, SigLIP) or ITM model (ViLT, BLIP); Hub id or local dir",
    )
    parser.add_argument("--model-kind", choices=("auto", "dual", "itm"), default="auto")
    parser.add_argument("--revision", default=None)
    parser.add_argument("--name", default=None, help="model name in the tables (default: derived from --model)")
    parser.add_argument("--templates", default="paper", help="paper | a3 | a3:<ids> (Table A3 templates, ensembled)")
    parser.add_argument(
        "--no-group-softmax",
        action="store_true",
        help="raw scaled cosines / ITM scores instead of a softmax per attribute group",
    )
    parser.add_argument(
        "--output",
        type=at.output_file.as_text(),
        default=None,
        help="JSON results file (default: compmap-<benchmark>.json)",
    )
    parser.add_argument(
        "--cache-dir",
        type=at.output_dir.as_text(),
        default=None,
        help="embedding and activation cache (default: the shared embedding cache)",
    )
    parser.add_argument("--device", type=at.device, default=None)
    parser.add_argument("--batch-size", type=at.positive_int, default=32)
    parser.add_argument("--seed", type=at.seed, default=0)
    cub = parser.add_argument_group("CUB (n-way k-shot)")
    cub.add_argument("--ways", type=at.IntRange(2, name="ways (>= 2)"), nargs="+", default=[5, 10, 100, 200])
    cub.add_argument("--shots", type=at.positive_int, nargs="+", default=[1, 5])
    cub.add_argument("--episodes", type=at.positive_int, default=600)
    cub.add_argument(
        "--protocol",
        choices=("authors", "episodic"),
        default="authors",
        help="authors: k support from the train split, every test image of the n classes as a query (CompMap paper's code); "
        "episodic: k support + --queries per class drawn from all of CUB",
    )
    cub.add_argument(
        "--queries", type=at.positive_int, default=15, help="query images per class and episode (--protocol episodic)"
    )
    cub.add_argument("--no-full-shot", action="store_true")
    cub.add_argument(
        "--C", type=at.positive_float, default=1.0, help="inverse L2 strength of the logistic regression (sklearn's C)"
    )
    mit = parser.add_argument_group("MIT-States (generalized CZSL)")
    mit.add_argument("--split-dir", default="compositional-split-natural")
    mit.add_argument(
        "--metadata", default=None, help="metadata file relative to --data-dir (default metadata_<split-dir>.t7)"
    )
    mit.add_argument("--world", choices=("closed", "open", "both"), default="closed")
    mit.add_argument(
        "--targets",
        choices=("text", "primitives"),
        default="text",
        help="composite-concept features of the contrastive model",
    )
    mit.add_argument(
        "--target-model",
        default=DEFAULT_CLIP,
        help="dual encoder for pair text embeddings when --model is an ITM model",
    )
    mit.add_argument("--topk", type=at.positive_int, nargs="+", default=[1, 2, 3])
    mit.add_argument(
        "--czsl-curve",
        choices=("paper", "authors"),
        default="paper",
        help="paper: A.6.2's 20 biases from the unseen samples; authors: the released code's curve closed at bias 1e3",
    )
    mit.add_argument("--epochs", type=at.positive_int, default=20)
    mit.add_argument("--dim", type=at.positive_int, default=256)
    mit.add_argument("--lr", type=at.positive_float, default=1e-3)


def run(args: argparse.Namespace) -> int:
    """Flags -> options of task compmap-cub or compmap-mit-states, then the one runner."""
    from conceptforge.commands.evaluate.tasks import run_alias
    from conceptforge.loaders.compmap.prompts import parse_templates
    from conceptforge.loaders.harness.runner import RunSettings

    parse_templates(args.templates)  # a bad --templates fails before any model or data is read
    if args.batch_size < 1:
        raise InvalidArgumentError("--batch-size must be >= 1")
    output = args.output or f"compmap-{args.dataset}.json"
    from conceptforge.loaders.evaluation import check_output

    check_output(output, samples=True)  # the results file is refused before the data and the model are read
    common = [
        ("templates", args.templates),
        ("group_softmax", not args.no_group_softmax),
        ("seed", args.seed),
        ("name", args.name or ""),
    ]
    if args.dataset == "cub":
        from conceptforge.loaders.compmap.cub_arrays import cub_primitives

        cub_primitives(args.data_dir)  # the folder's files are checked before the model loads
        task = "compmap-cub"
        values = [
            ("ways", ",".join(map(str, args.ways))),
            ("shots", ",".join(map(str, args.shots))),
            ("episodes", args.episodes),
            ("queries", args.queries),
            ("full_shot", not args.no_full_shot),
            ("C", args.C),
            ("protocol", args.protocol),
        ]
        settings = RunSettings(
            device=args.device, batch_size=args.batch_size, cache_dir=args.cache_dir, cub_dir=args.data_dir
        )
    else:
        from conceptforge.loaders.compmap.mit_states import load_mit_states

        load_mit_states(args.data_dir, split_dir=args.split_dir, metadata=args.metadata)  # same: data first
        task = "compmap-mit-states"
        values = [
            ("split_dir", args.split_dir),
            ("metadata", args.metadata or ""),
            ("world", args.world),
            ("targets", args.targets),
            ("target_model", args.target_model),
            ("topk", ",".join(map(str, args.topk))),
            ("czsl_curve", args.czsl_curve),
            ("epochs", args.epochs),
            ("dim", args.dim),
            ("lr", args.lr),
        ]
        settings = RunSettings(
            device=args.device, batch_size=args.batch_size, cache_dir=args.cache_dir, mit_states_dir=args.data_dir
        )
    if args.model_kind != "auto":
        from conceptforge.loaders.harness.model_ref import resolve_model

        kind = resolve_model(args.model, revision=args.revision).kind
        if kind != {"dual": "clip", "itm": "itm"}[args.model_kind]:
            raise InvalidArgumentError(f"--model-kind {args.model_kind}: {args.model} is a {kind} model")
    run_alias(
        model=args.model,
        revision=args.revision,
        tasks=task,
        options=[f"{task}.{name}={value}" for name, value in common + values],
        settings=settings,
        output=output,
    )
    return 0
