"""CompMap metrics: usefulness (accuracy, generalized CZSL), interpretability, weight analysis.

Generalized CZSL (CompMap paper §4.1 and Appendix A.6.2, after Purushwalkam et al. 2019). A
calibration bias b is added to the score of every unseen pair; a sample is correct when fewer than
k other pairs score strictly higher than its ground truth. Two bias curves are implemented:

* ``curve="paper"`` (default), A.6.2 as written: for every test sample of an unseen pair,
  Δ = (best — for top-k: k-th best — seen-pair score) − (ground-truth score); sort Δ, split it
  into 20 chunks (``np.array_split``) and take the first Δ of each chunk, minus ``1e-4`` so no
  sample sits exactly on a tie, as the 20 biases. The curve has exactly these 20 points. Sample
  i becomes correct once b > Δ_i, so the largest bias leaves the last chunk wrong: best unseen
  can stay below 100% by up to one chunk (1/20 of the unseen samples).
* ``curve="authors"``: the released code of CompMap paper (``get_overall_metrics`` in
  vlm_primitive_concepts' ``train_retrieval_model.py``): first evaluate at a closing bias of
  ``1e3`` (unseen always wins, seen accuracy ≈ 0); keep only the unseen samples that are correct
  at that bias, take their Δ − 1e-4, sort, and use every ``max(len // 20, 1)``-th one as a bias
  (so 20 or a few more); the closing point comes last. AUC is the trapezoid over the points in
  that order.

AUC is the area under seen accuracy as a function of unseen accuracy (both as fractions), in
percent of the unit square. "Best HM": the paper's Eq. (1) and the authors' code compute
``sqrt(seen * unseen)`` under the name "harmonic mean"; that is the *geometric* mean, reported
as ``best_gm`` (the number to compare with the paper's "HM" column). The true harmonic mean
``2·seen·unseen/(seen+unseen)`` is reported as ``best_hm``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import Tensor

NUM_BIASES = 20
TIE_EPSILON = 1e-4
CZSL_CURVES = ("paper", "authors")
AUTHORS_CLOSING_BIAS = 1e3  # the authors' "unseen always wins" bias
_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy < 2 has only trapz


def accuracy(predictions: Tensor | np.ndarray, labels: Tensor | np.ndarray) -> float:
    """Fraction of ``predictions`` equal to ``labels`` (as a percentage, 0–100)."""
    predictions, labels = torch.as_tensor(predictions), torch.as_tensor(labels)
    if predictions.numel() == 0:
        return float("nan")
    return 100.0 * float((predictions == labels).double().mean())


def intervene_full(pred: Tensor, gt: Tensor) -> Tensor:
    """Interv(Full): the composition model sees the binary ground-truth primitives only."""
    return gt.to(pred.dtype).clone()


def intervene_partial(pred: Tensor, gt: Tensor) -> Tensor:
    """Interv(Partial): ground-truth-positive entries set to 1, all others left as predicted."""
    return torch.where(gt.to(torch.bool), torch.ones_like(pred), pred)


def interpretability_delta(interv_metric: float, oracle_metric: float) -> float:
    """Δ = Metric(H_pred(e_gt)) − Metric(H_gt(e_gt)) (Section 3.2): 0 is ideal, negative is worse.

    Table 3 of the paper prints the gap ``−Δ`` (positive numbers); the report tables say which.
    """
    return float(interv_metric) - float(oracle_metric)


@dataclass(frozen=True)
class CzslResult:
    """Generalized CZSL summary; accuracies in percent, AUC in percent of the unit square."""

    topk: int
    curve: str
    auc: float
    best_seen: float
    best_unseen: float
    best_hm: float
    best_gm: float
    biases: list[float]
    seen_curve: list[float]
    unseen_curve: list[float]

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class CzslRowStats:
    """What the bias sweep needs from each sample's score row, so the [M, P] score matrix
    (13k × 28k in the open world) never has to be held or re-scanned per bias.

    ``seen_top``/``unseen_top`` [M, K]: the K best seen / unseen pair scores (−inf padded);
    ``gt`` [M]: the ground-truth score; ``gt_seen`` [M]: whether the ground-truth pair is seen.
    """

    seen_top: Tensor
    unseen_top: Tensor
    gt: Tensor
    gt_seen: Tensor
    seen_index: Tensor | None = None  # [M, K] candidate-pair index of each kept score (per-sample rows)
    unseen_index: Tensor | None = None

    @staticmethod
    def cat(parts: list[CzslRowStats]) -> CzslRowStats:
        fields = ("seen_top", "unseen_top", "gt", "gt_seen", "seen_index", "unseen_index")
        return CzslRowStats(
            *(
                torch.cat([getattr(p, f) for p in parts]) if all(getattr(p, f) is not None for p in parts) else None
                for f in fields
            )
        )


def czsl_row_stats(scores: Tensor, labels: Tensor, seen_pairs: Tensor, *, max_k: int = 3) -> CzslRowStats:
    """Reduce a block of score rows [M, P] to :class:`CzslRowStats` (rows can come in blocks)."""
    scores = torch.as_tensor(scores)
    labels = torch.as_tensor(labels).long()
    seen_pairs = torch.as_tensor(seen_pairs).bool()

    def top(mask: Tensor) -> tuple[Tensor, Tensor]:
        cols = scores[:, mask]
        k = min(max_k, cols.shape[1])
        out = torch.full((scores.shape[0], max_k), -torch.inf, dtype=torch.float64)
        where = torch.full((scores.shape[0], max_k), -1, dtype=torch.long)
        if k:
            best = cols.topk(k, dim=1)
            out[:, :k] = best.values.double()
            where[:, :k] = torch.nonzero(mask).squeeze(1)[best.indices]
        return out, where

    (seen_top, seen_index), (unseen_top, unseen_index) = top(seen_pairs), top(~seen_pairs)
    return CzslRowStats(
        seen_top=seen_top,
        unseen_top=unseen_top,
        gt=scores.gather(1, labels[:, None]).squeeze(1).double(),
        gt_seen=seen_pairs[labels],
        seen_index=seen_index,
        unseen_index=unseen_index,
    )


def _hits(stats: CzslRowStats, bias: float, k: int) -> Tensor:
    """Ground truth within the top ``k`` after adding ``bias`` to unseen pairs: fewer than k
    other pairs score strictly higher (only the k best of each kind can matter)."""
    seen_top, unseen_top = stats.seen_top[:, :k], stats.unseen_top[:, :k] + bias
    gt = torch.where(stats.gt_seen, stats.gt, stats.gt + bias)
    # the ground truth itself is in one of the lists; '>' never counts it
    above = (seen_top > gt[:, None]).sum(1) + (unseen_top > gt[:, None]).sum(1)
    return above < k


def unseen_gaps_from_stats(stats: CzslRowStats, *, topk: int = 1) -> Tensor:
    """Sorted Δ = (k-th best seen score) − (ground-truth score) over samples of unseen pairs."""
    unseen = ~stats.gt_seen
    if not bool(unseen.any()) or not bool(torch.isfinite(stats.seen_top[:, 0]).any()):
        return torch.zeros(1, dtype=torch.float64)
    kth = stats.seen_top[unseen, min(topk, stats.seen_top.shape[1]) - 1]
    kth = torch.where(torch.isfinite(kth), kth, stats.seen_top[unseen, 0])
    return torch.sort(kth - stats.gt[unseen]).values


def biases_from_gaps(delta: Tensor, num_biases: int = NUM_BIASES) -> Tensor:
    chunks = np.array_split(np.arange(len(delta)), min(num_biases, len(delta)))
    return torch.stack([delta[c[0]] for c in chunks]) - TIE_EPSILON


def unseen_score_gaps(scores: Tensor, labels: Tensor, seen_pairs: Tensor, *, topk: int = 1) -> Tensor:
    """Sorted Δ = (k-th best seen score) − (ground-truth score) over samples of unseen pairs."""
    return unseen_gaps_from_stats(czsl_row_stats(scores, labels, seen_pairs, max_k=topk), topk=topk)


def calibration_biases(
    scores: Tensor, labels: Tensor, seen_pairs: Tensor, *, topk: int = 1, num_biases: int = NUM_BIASES
) -> Tensor:
    """The ``num_biases`` calibration biases of Appendix A.6.2.

    Sorted Δ (:func:`unseen_score_gaps`) is split into ``num_biases`` contiguous chunks; each
    chunk contributes its first (smallest) value, minus ``1e-4`` as in the reference CZSL code so
    that no sample sits exactly on a tie. Adding bias b to the unseen scores makes the samples
    with Δ < b beat the seen pairs, so the biases sweep from "seen wins" towards "unseen wins".
    """
    return biases_from_gaps(unseen_score_gaps(scores, labels, seen_pairs, topk=topk), num_biases)


def generalized_czsl(
    scores: Tensor,
    labels: Tensor,
    seen_pairs: Tensor,
    *,
    topk: int = 1,
    num_biases: int = NUM_BIASES,
    curve: str = "paper",
) -> CzslResult:
    """Seen/unseen accuracy sweep over calibration biases, with AUC and best seen/unseen/HM/GM.

    ``scores`` [M, P] over the candidate pairs (closed world: the split's pairs; open world: all
    attribute×object pairs), ``labels`` [M] the ground-truth pair index, ``seen_pairs`` [P] bool.
    A sample is seen or unseen by its ground-truth pair. ``curve`` picks the bias list (module
    docstring): ``"paper"`` (A.6.2, ``num_biases`` points) or ``"authors"`` (the released code).
    """
    stats = czsl_row_stats(scores, labels, seen_pairs, max_k=topk)
    return generalized_czsl_from_stats(stats, topk=topk, num_biases=num_biases, curve=curve)


def authors_biases(stats: CzslRowStats, *, topk: int = 1, num_biases: int = NUM_BIASES) -> Tensor:
    """The authors' bias list: Δ − 1e-4 of the unseen samples correct at the closing bias, sorted,
    every ``max(len // num_biases, 1)``-th value (the closing bias itself is not included)."""
    unseen = ~stats.gt_seen
    correct = _hits(stats, AUTHORS_CLOSING_BIAS, topk)[unseen]
    kth = stats.seen_top[unseen, topk - 1]
    kth = torch.where(torch.isfinite(kth), kth, stats.seen_top[unseen, 0])
    gaps = torch.sort((kth - stats.gt[unseen])[correct] - TIE_EPSILON).values
    gaps = gaps[torch.isfinite(gaps)]
    skip = max(len(gaps) // num_biases, 1)
    return gaps[::skip]


def generalized_czsl_from_stats(
    stats: CzslRowStats, *, topk: int = 1, num_biases: int = NUM_BIASES, curve: str = "paper"
) -> CzslResult:
    """:func:`generalized_czsl` on precomputed :class:`CzslRowStats` (``topk`` <= their K)."""
    if topk > stats.seen_top.shape[1]:
        raise ValueError(f"topk {topk} exceeds the {stats.seen_top.shape[1]} scores kept per row")
    if curve not in CZSL_CURVES:
        raise ValueError(f"unknown CZSL curve {curve!r} (choose from {', '.join(CZSL_CURVES)})")
    if curve == "paper":
        biases = biases_from_gaps(unseen_gaps_from_stats(stats, topk=topk), num_biases)
        points = biases.tolist()
    else:
        biases = authors_biases(stats, topk=topk, num_biases=num_biases)
        points = [*biases.tolist(), AUTHORS_CLOSING_BIAS]
    seen_samples = stats.gt_seen
    seen_curve, unseen_curve = [], []
    for b in points:
        hits = _hits(stats, b, topk)
        seen_curve.append(100.0 * float(hits[seen_samples].double().mean()) if seen_samples.any() else float("nan"))
        unseen_curve.append(
            100.0 * float(hits[~seen_samples].double().mean()) if (~seen_samples).any() else float("nan")
        )
    seen_arr, unseen_arr = np.array(seen_curve), np.array(unseen_curve)
    # paper: the area under seen(unseen), points ordered by unseen accuracy; authors: np.trapz
    # over the points in bias order (the same unless unseen accuracy ever drops along the sweep)
    order = np.argsort(unseen_arr, kind="stable") if curve == "paper" else np.arange(len(points))
    # Area under seen(unseen) in the unit square, in percent: both axes are fractions.
    auc = 100.0 * float(_trapezoid(seen_arr[order] / 100.0, unseen_arr[order] / 100.0)) if len(order) > 1 else 0.0
    total = seen_arr + unseen_arr
    hm = np.where(total > 0, 2.0 * seen_arr * unseen_arr / np.where(total > 0, total, 1.0), 0.0)
    gm = np.sqrt(seen_arr * unseen_arr)
    return CzslResult(
        topk=topk,
        curve=curve,
        auc=auc,
        best_seen=float(np.nanmax(seen_arr)),
        best_unseen=float(np.nanmax(unseen_arr)),
        best_hm=float(np.nanmax(hm)),
        best_gm=float(np.nanmax(gm)),
        biases=[float(b) for b in points],
        seen_curve=seen_curve,
        unseen_curve=unseen_curve,
    )


@dataclass(frozen=True)
class WeightAnalysis:
    """Table 4: do the largest weights of each composite concept pick its true primitives?

    ``acc_instance``: over all (class, true primitive) slots, the share covered by the class's
    top-k weights (k = number of true primitives of that class). ``acc_class``: share of classes
    whose top-k weights are exactly their true primitives. ``per_group`` (optional) is the
    instance accuracy restricted to the true primitives inside each named group of dimensions
    (Acc-Attribute / Acc-Object on MIT-States, per attribute group on CUB).
    """

    acc_instance: float
    acc_class: float
    per_group: dict[str, float]

    def to_dict(self) -> dict:
        return asdict(self)


def weight_analysis(
    weights: Tensor, gt_primitives: Tensor, *, groups: dict[str, np.ndarray] | None = None
) -> WeightAnalysis:
    """Acc-Instance / Acc-Class of composition weights [Q, P] against binary ground truth [Q, P]."""
    weights = torch.as_tensor(weights).double()
    gt = torch.as_tensor(gt_primitives).bool()
    if weights.shape != gt.shape:
        raise ValueError(f"weights {tuple(weights.shape)} and ground truth {tuple(gt.shape)} differ")
    counts = gt.sum(1)
    valid = counts > 0
    hit_mask = torch.zeros_like(gt)
    for q in torch.nonzero(valid).squeeze(1).tolist():
        top = weights[q].topk(int(counts[q])).indices
        hit_mask[q, top] = True
    covered = (hit_mask & gt).sum(1)
    acc_instance = 100.0 * float(covered[valid].sum()) / max(float(counts[valid].sum()), 1.0)
    acc_class = 100.0 * float((covered[valid] == counts[valid]).double().mean()) if valid.any() else float("nan")
    per_group = {}
    for name, dims in (groups or {}).items():
        dims_t = torch.as_tensor(np.asarray(dims), dtype=torch.long)
        g_gt = gt[:, dims_t]
        total = float(g_gt.sum())
        per_group[name] = 100.0 * float((hit_mask[:, dims_t] & g_gt).sum()) / total if total else float("nan")
    return WeightAnalysis(acc_instance, acc_class, per_group)
