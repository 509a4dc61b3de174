"""The two CompMap protocols over precomputed activations: CUB n-way k-shot and MIT-States CZSL.

Both take the VL model's activations ``pred`` and the ground-truth primitives ``gt`` of the same
images and produce the paper's rows: Oracle-Prim (trained and tested on ``gt``), Prim (trained
and tested on ``pred``: usefulness), Interv(Full) (trained on ``pred``, tested on ``gt``) and
Interv(Partial) (trained on ``pred``, tested on ``pred`` with the ``gt``-positive entries set
to 1); Δ = Interv(Full) − Oracle-Prim is the interpretability gap.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from conceptforge.loaders.compmap.ablations import TEXT_TARGET_ROWS, train_ablation_rows
from conceptforge.loaders.compmap.contrastive import ContrastiveConfig, train_contrastive
from conceptforge.loaders.compmap.logreg import LogRegConfig, LogRegModel, fit_logreg
from conceptforge.loaders.compmap.metrics import (
    CzslRowStats,
    accuracy,
    czsl_row_stats,
    generalized_czsl_from_stats,
    interpretability_delta,
    intervene_full,
    intervene_partial,
    weight_analysis,
)
from conceptforge.loaders.compmap.mit_states import MitStatesData
from conceptforge.loaders.compmap.sampler import CUB_PROTOCOLS, EpisodeSpec, sample_episodes, sample_split_episodes
from conceptforge.progress import tqdm

logger = logging.getLogger(__name__)

ROWS = ("oracle", "prim", "interv_full", "interv_partial")
_EVAL_BYTES = 4e8  # activations held per chunk of episodes


@dataclass(frozen=True)
class CubProtocol:
    """CUB settings. ``protocol``: ``"authors"`` (k support from the train split, every test
    image of the n classes as a query; ``n_query`` unused) or ``"episodic"`` (k support +
    ``n_query`` queries per class from all of CUB). See :mod:`.sampler`."""

    ways: tuple[int, ...] = (5, 10, 100, 200)
    shots: tuple[int, ...] = (1, 5)
    n_query: int = 15
    n_episodes: int = 600
    seed: int = 0
    full_shot: bool = True
    logreg: LogRegConfig = field(default_factory=LogRegConfig)
    protocol: str = "authors"

    def __post_init__(self) -> None:
        if self.protocol not in CUB_PROTOCOLS:
            raise ValueError(f"unknown CUB protocol {self.protocol!r} (choose from {', '.join(CUB_PROTOCOLS)})")


def _variants(pred: Tensor, gt: Tensor) -> dict[str, Tensor]:
    return {"prim": pred, "interv_full": intervene_full(pred, gt), "interv_partial": intervene_partial(pred, gt)}


def run_episodes(
    pred: Tensor,
    gt: Tensor,
    labels: np.ndarray,
    spec: EpisodeSpec,
    logreg: LogRegConfig,
    *,
    protocol: str = "episodic",
    is_train: np.ndarray | None = None,
    keep: dict | None = None,
) -> dict[str, dict]:
    """Mean per-sample accuracy (and its standard deviation over episodes) of every row.

    Each episode's accuracy is the share of its queries classified right; the reported number is
    the mean over episodes (both protocols; padded queries of the authors' protocol not counted).
    ``keep``, when given, receives each row's per-episode shares [E] and the episodes' classes.
    """
    if protocol == "authors":
        if is_train is None:
            raise ValueError("the authors' protocol needs the train/test split (is_train)")
        episodes = sample_split_episodes(labels, is_train, spec)
    else:
        episodes = sample_episodes(labels, spec)
    per_episode: dict[str, list[Tensor]] = {row: [] for row in ROWS}
    D = pred.shape[1]
    per_query = episodes.query.shape[1]
    chunk = int(max(1, min(logreg.chunk_size, _EVAL_BYTES // ((spec.n_way * spec.k_shot + 4 * per_query) * D * 4))))
    for start in tqdm(
        range(0, spec.n_episodes, chunk), desc=f"{spec.n_way}-way {spec.k_shot}-shot", unit="chunk", leave=False
    ):
        sup = torch.as_tensor(episodes.support[start : start + chunk])
        qry = torch.as_tensor(episodes.query[start : start + chunk])
        ys = torch.as_tensor(episodes.support_labels[start : start + chunk])
        yq = torch.as_tensor(episodes.query_labels[start : start + chunk])
        valid = yq >= 0
        count = valid.sum(1).double()
        qry = torch.where(valid, qry, torch.zeros_like(qry))  # padding: any image, not counted

        def share(predicted: Tensor, yq: Tensor = yq, valid: Tensor = valid, count: Tensor = count) -> Tensor:
            return ((predicted == yq) & valid).sum(1).double() / count

        oracle = fit_logreg(gt[sup], ys, spec.n_way, config=logreg)
        per_episode["oracle"].append(share(oracle.predict(gt[qry])))
        model = fit_logreg(pred[sup], ys, spec.n_way, config=logreg)
        for row, feats in _variants(pred[qry], gt[qry]).items():
            per_episode[row].append(share(model.predict(feats)))
    out = {}
    if keep is not None:
        keep.update(
            {"classes": episodes.classes, "shares": {row: torch.cat(parts) for row, parts in per_episode.items()}}
        )
    for row, parts in per_episode.items():
        acc = 100.0 * torch.cat(parts)
        out[row] = {
            "accuracy": float(acc.mean()),
            "std": float(acc.std()) if len(acc) > 1 else 0.0,
            "episodes": len(acc),
        }
    return out


def run_full_shot(
    pred: Tensor,
    gt: Tensor,
    labels: np.ndarray,
    is_train: np.ndarray,
    num_classes: int,
    logreg: LogRegConfig,
    keep: dict | None = None,
) -> tuple[dict, LogRegModel, LogRegModel]:
    """200-way full-shot: train on CUB's training images, test on its test images (``keep``
    receives the test images' indices and each row's predicted classes)."""
    train, test = torch.as_tensor(np.flatnonzero(is_train)), torch.as_tensor(np.flatnonzero(~is_train))
    y = torch.as_tensor(labels)
    oracle = fit_logreg(gt[train], y[train], num_classes, config=logreg)
    model = fit_logreg(pred[train], y[train], num_classes, config=logreg)
    predicted = {"oracle": oracle.predict(gt[test])[0]}
    for row, feats in _variants(pred[test], gt[test]).items():
        predicted[row] = model.predict(feats)[0]
    if keep is not None:
        keep.update({"test": test, "predicted": predicted})
    out = {row: {"accuracy": accuracy(p, y[test])} for row, p in predicted.items()}
    return out, oracle, model


def evaluate_cub(
    pred: Tensor,
    gt: Tensor,
    labels: np.ndarray,
    is_train: np.ndarray,
    class_gt: np.ndarray,
    protocol: CubProtocol,
    *,
    groups: dict[str, np.ndarray] | None = None,
    keep: dict | None = None,
) -> dict:
    """All CUB settings; returns a JSON-ready dict (Tables 2, 3 and 4). ``keep``, when given,
    receives per setting what :func:`run_episodes` / :func:`run_full_shot` keep."""
    pred, gt = pred.float(), gt.float()
    results: dict = {"protocol": protocol.protocol, "settings": {}, "interpretability": {}, "weights": {}}
    if protocol.protocol == "episodic":
        results["n_query"] = protocol.n_query
    for n in protocol.ways:
        for k in protocol.shots:
            spec = EpisodeSpec(n, k, protocol.n_query, protocol.n_episodes, protocol.seed)
            logger.info("CUB %d-way %d-shot, %d episodes (%s protocol)", n, k, protocol.n_episodes, protocol.protocol)
            results["settings"][f"{n}-way-{k}-shot"] = {
                "n_way": n,
                "k_shot": k,
                "protocol": protocol.protocol,
                **run_episodes(
                    pred,
                    gt,
                    labels,
                    spec,
                    protocol.logreg,
                    protocol=protocol.protocol,
                    is_train=is_train,
                    keep=None if keep is None else keep.setdefault(f"{n}-way-{k}-shot", {}),
                ),
            }
    if protocol.full_shot:
        logger.info("CUB full shot")
        full, oracle, model = run_full_shot(
            pred,
            gt,
            labels,
            is_train,
            len(class_gt),
            protocol.logreg,
            keep=None if keep is None else keep.setdefault("full-shot", {}),
        )
        results["settings"]["full-shot"] = {
            "n_way": len(class_gt),
            "k_shot": None,
            "protocol": "train/test split",
            **full,
        }
        results["weights"] = {
            "oracle": weight_analysis(oracle.coef[0], torch.as_tensor(class_gt), groups=groups).to_dict(),
            "prim": weight_analysis(model.coef[0], torch.as_tensor(class_gt), groups=groups).to_dict(),
        }
    for name, setting in results["settings"].items():
        results["interpretability"][name] = {
            "delta": interpretability_delta(setting["interv_full"]["accuracy"], setting["oracle"]["accuracy"]),
            "delta_partial": interpretability_delta(
                setting["interv_partial"]["accuracy"], setting["oracle"]["accuracy"]
            ),
        }
    return results


@dataclass(frozen=True)
class MitProtocol:
    worlds: tuple[str, ...] = ("closed",)
    topk: tuple[int, ...] = (1, 2, 3)
    contrastive: ContrastiveConfig = field(default_factory=ContrastiveConfig)
    czsl_curve: str = "paper"  # "paper" (A.6.2) or "authors" (released code); see .metrics


def evaluate_mit_states(
    data: MitStatesData,
    pred: dict[str, Tensor],
    pair_targets,
    protocol: MitProtocol,
    keep: dict | None = None,
    *,
    image_embeddings: dict[str, Tensor] | None = None,
    pair_texts: Callable[[list], Tensor] | None = None,
) -> dict:
    """Generalized CZSL for every row, split and world (Tables 1, 3 and 4).

    ``pred[split]`` are the activations of ``data.samples[split]``; ``pair_targets(pairs)``
    returns the [len(pairs), T] target features of composite concepts (text embeddings of
    "this is {attr} {obj}", or the pairs' primitive vectors). ``keep``, when given, receives
    the test split's per-sample :class:`CzslRowStats` per (world, row) and the candidate pairs.
    ``image_embeddings[split]`` (L2-normalised) and ``pair_texts(pairs)`` (the pairs' prompt
    embeddings), when given, add the rows of :mod:`.ablations` (Table 5's zero-shot, Table 6).
    """
    seen = data.seen_pairs
    gt = {s: torch.as_tensor(data.gt_primitives(s)) for s in pred}
    train_labels = torch.as_tensor(data.labels("train", seen))
    seen_targets = pair_targets(seen)
    logger.info("training composition models on %d images of %d seen pairs", len(train_labels), len(seen))
    oracle = train_contrastive(gt["train"], train_labels, seen_targets, config=protocol.contrastive)
    model = train_contrastive(pred["train"].float(), train_labels, seen_targets, config=protocol.contrastive)
    ablations = {}
    if image_embeddings is not None:
        if pair_texts is None:
            raise ValueError("the ablation rows need pair_texts (the zero-shot row scores the pairs' prompts)")
        ablations = train_ablation_rows(
            image_embeddings["train"],
            train_labels,
            seen_targets,
            num_primitives=pred["train"].shape[1],
            config=protocol.contrastive,
        )
    results: dict = {"czsl_curve": protocol.czsl_curve, "worlds": {}, "interpretability": {}, "weights": {}}
    for world in protocol.worlds:
        candidates = data.candidate_pairs(world)
        targets = pair_targets(candidates)
        texts = pair_texts(candidates) if ablations else None
        seen_set = set(seen)
        seen_mask = torch.tensor([p in seen_set for p in candidates])
        world_out: dict = {}
        for split in ("val", "test"):
            labels = torch.as_tensor(data.labels(split, candidates))
            rows = {"oracle": (oracle, gt[split], targets)}
            rows.update({row: (model, x, targets) for row, x in _variants(pred[split].float(), gt[split]).items()})
            for row, scorer in ablations.items():
                rows[row] = (scorer, image_embeddings[split], texts if row in TEXT_TARGET_ROWS else targets)
            split_out = {}
            for row, (net, x, row_targets) in rows.items():
                stats = CzslRowStats.cat(
                    [
                        czsl_row_stats(block, labels[part], seen_mask, max_k=max(protocol.topk))
                        for part, block in net.iter_scores(x, row_targets)
                    ]
                )
                if keep is not None and split == "test":
                    keep[(world, row)] = {"stats": stats, "candidates": candidates, "labels": labels}
                split_out[row] = {
                    f"top{k}": generalized_czsl_from_stats(stats, topk=k, curve=protocol.czsl_curve).to_dict()
                    for k in protocol.topk
                }
            world_out[split] = split_out
        results["worlds"][world] = world_out
        test = world_out["test"]
        results["interpretability"][world] = {
            key: interpretability_delta(test["interv_full"]["top1"][key], test["oracle"]["top1"][key])
            for key in ("auc", "best_seen", "best_unseen", "best_hm", "best_gm")
        }
    closed = data.candidate_pairs("closed")
    pair_gt = torch.as_tensor(data.pair_primitives(closed))
    groups = {"attribute": np.arange(len(data.attrs)), "object": len(data.attrs) + np.arange(len(data.objs))}
    targets = pair_targets(closed)
    results["weights"] = {
        "oracle": weight_analysis(oracle.composition_weights(targets), pair_gt, groups=groups).to_dict(),
        "prim": weight_analysis(model.composition_weights(targets), pair_gt, groups=groups).to_dict(),
    }
    return results
