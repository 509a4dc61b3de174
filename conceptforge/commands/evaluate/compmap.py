"""``conceptforge evaluate compmap``: CompMap usefulness and interpretability on CUB or MIT-States.

Prints paper-style tables (Tables 1–4 of "Do Vision-Language Pretrained Models Learn Composable
Primitive Concepts?") and writes every number to a JSON file.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from conceptforge.errors import InvalidArgumentError
from conceptforge.files import write_json

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "openai/clip-vit-base-patch32"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Stored as ``args.dataset`` (``args.benchmark`` is the sub-command name, ``compmap``).
    parser.add_argument("--benchmark", dest="dataset", choices=("cub", "mit-states"), required=True)
    parser.add_argument("--data-dir", required=True, help="CUB_200_2011 directory, or the MIT-States root")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="dual encoder (CLIP, SigLIP) or ITM model (ViLT, BLIP); Hub id or local dir")
    parser.add_argument("--model-kind", choices=("auto", "dual", "itm"), default="auto")
    parser.add_argument("--revision", default=None)
    parser.add_argument("--name", default=None, help="model name in the tables (default: derived from --model)")
    parser.add_argument("--templates", default="paper", help="paper | a3 | a3:<ids> (Table A3 templates, ensembled)")
    parser.add_argument("--no-group-softmax", action="store_true", help="raw scaled cosines / ITM scores instead of a softmax per attribute group")
    parser.add_argument("--output", default=None, help="JSON results file (default: compmap-<benchmark>.json)")
    parser.add_argument("--cache-dir", default=None, help="embedding and activation cache (default: the shared embedding cache)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    cub = parser.add_argument_group("CUB (n-way k-shot)")
    cub.add_argument("--ways", type=int, nargs="+", default=[5, 10, 100, 200])
    cub.add_argument("--shots", type=int, nargs="+", default=[1, 5])
    cub.add_argument("--episodes", type=int, default=600)
    cub.add_argument("--protocol", choices=("authors", "episodic"), default="authors",
                     help="authors: k support from the train split, every test image of the n classes as a query (CompMap paper's code); "
                          "episodic: k support + --queries per class drawn from all of CUB")
    cub.add_argument("--queries", type=int, default=15, help="query images per class and episode (--protocol episodic)")
    cub.add_argument("--no-full-shot", action="store_true")
    cub.add_argument("--C", type=float, default=1.0, help="inverse L2 strength of the logistic regression (sklearn's C)")
    mit = parser.add_argument_group("MIT-States (generalized CZSL)")
    mit.add_argument("--split-dir", default="compositional-split-natural")
    mit.add_argument("--metadata", default=None, help="metadata file relative to --data-dir (default metadata_<split-dir>.t7)")
    mit.add_argument("--world", choices=("closed", "open", "both"), default="closed")
    mit.add_argument("--targets", choices=("text", "primitives"), default="text", help="composite-concept features of the contrastive model")
    mit.add_argument("--target-model", default=DEFAULT_MODEL, help="dual encoder for pair text embeddings when --model is an ITM model")
    mit.add_argument("--topk", type=int, nargs="+", default=[1, 2, 3])
    mit.add_argument("--czsl-curve", choices=("paper", "authors"), default="paper",
                     help="paper: A.6.2's 20 biases from the unseen samples; authors: the released code's curve closed at bias 1e3")
    mit.add_argument("--epochs", type=int, default=20)
    mit.add_argument("--dim", type=int, default=256)
    mit.add_argument("--lr", type=float, default=1e-3)


def _cache_dirs(args) -> tuple[str | None, Path | None]:
    if args.cache_dir:
        return args.cache_dir, Path(args.cache_dir) / "activations"
    from conceptforge.loaders.embeddings import default_cache_dir

    return None, default_cache_dir() / "compmap-activations"


def run(args: argparse.Namespace) -> int:
    import torch

    from conceptforge.loaders.compmap.pipeline import activation_key, cached_tensor, load_vl_model
    from conceptforge.loaders.compmap.prompts import parse_templates

    templates = parse_templates(args.templates)
    output = Path(args.output or f"compmap-{args.dataset}.json")
    if args.batch_size < 1:
        raise InvalidArgumentError("--batch-size must be >= 1")
    emb_cache, act_cache = _cache_dirs(args)
    group_softmax = not args.no_group_softmax
    if args.dataset == "cub":
        from conceptforge.loaders.compmap.cub_arrays import cub_primitives
        from conceptforge.loaders.compmap.logreg import LogRegConfig
        from conceptforge.loaders.compmap.pipeline import cub_vocabulary
        from conceptforge.loaders.compmap.protocols import CubProtocol, evaluate_cub
        from conceptforge.loaders.compmap.report import cub_tables

        data = cub_primitives(args.data_dir)
        vocab = cub_vocabulary(data, templates)
        model = load_vl_model(args.model, kind=args.model_kind, revision=args.revision, device=args.device, cache_dir=emb_cache, name=args.name)
        images = [str(p) for p in data.image_paths]
        pred = cached_tensor(act_cache, activation_key(model, vocab, images, apply_group_softmax=group_softmax),
                             lambda: model.activations(images, vocab, apply_group_softmax=group_softmax, batch_size=args.batch_size))
        protocol = CubProtocol(tuple(args.ways), tuple(args.shots), args.queries, args.episodes, args.seed, not args.no_full_shot, LogRegConfig(C=args.C),
                               protocol=args.protocol)
        results = evaluate_cub(pred, torch.as_tensor(data.gt_primitives()), data.labels, data.is_train, data.class_attributes(), protocol, groups=data.groups)
        tables = cub_tables(results, model.name)
    else:
        from conceptforge.loaders.compmap.contrastive import ContrastiveConfig
        from conceptforge.loaders.compmap.mit_states import SPLITS, load_mit_states
        from conceptforge.loaders.compmap.pipeline import mit_vocabulary, text_targets
        from conceptforge.loaders.compmap.protocols import MitProtocol, evaluate_mit_states
        from conceptforge.loaders.compmap.report import mit_tables

        data = load_mit_states(args.data_dir, split_dir=args.split_dir, metadata=args.metadata)
        vocab = mit_vocabulary(data, templates)
        model = load_vl_model(args.model, kind=args.model_kind, revision=args.revision, device=args.device, cache_dir=emb_cache, name=args.name)
        pred = {}
        for split in SPLITS:
            images = [str(s.path) for s in data.samples[split]]
            pred[split] = cached_tensor(act_cache, activation_key(model, vocab, images, apply_group_softmax=group_softmax),
                                        lambda images=images: model.activations(images, vocab, apply_group_softmax=group_softmax, batch_size=args.batch_size))
        if args.targets == "primitives":
            def pair_targets(pairs):
                return torch.as_tensor(data.pair_primitives(list(pairs)))
        else:
            embedder = model.embedder
            if embedder is None:
                from conceptforge.loaders.embeddings import EmbeddingModel

                embedder = EmbeddingModel.from_pretrained(args.target_model, cache_dir=emb_cache, device=args.device)
            pair_targets = text_targets(embedder, templates)
        worlds = ("closed", "open") if args.world == "both" else (args.world,)
        protocol = MitProtocol(worlds, tuple(args.topk), ContrastiveConfig(dim=args.dim, epochs=args.epochs, lr=args.lr, seed=args.seed),
                               czsl_curve=args.czsl_curve)
        results = evaluate_mit_states(data, pred, pair_targets, protocol)
        tables = mit_tables(results, model.name)
    payload = {
        "benchmark": args.dataset,
        "model": args.model,
        "model_revision": model.revision,
        "model_kind": model.kind,
        "templates": templates.name,
        "group_softmax": group_softmax,
        "seed": args.seed,
        **({"protocol": results["protocol"]} if args.dataset == "cub" else {"czsl_curve": results["czsl_curve"]}),
        "results": results,
    }
    write_json(output, payload, sort_keys=True)
    print(tables)
    print(f"\nresults written to {output}")
    return 0
