"""CompMap composition model: batched torch L-BFGS logistic regression vs scikit-learn per episode.

Ours: ``loaders.compmap.logreg.fit_logreg`` (every episode of a chunk in one ``bmm``). Baseline,
what a user would otherwise write: scikit-learn's ``LogisticRegression(C=1)`` (lbfgs, the paper's
setting) fitted per episode. Same episodes of 200-way 5-shot (15 queries per class) on a
synthetic CUB-shaped activation set: 200 classes x 59 images, 312 attributes in 28 softmax groups.
"""

from __future__ import annotations

import numpy as np
import torch

from benchmarks._harness import Result, compare
from conceptforge.loaders.compmap.logreg import LogRegConfig, fit_logreg
from conceptforge.loaders.compmap.sampler import EpisodeSpec, sample_episodes


def synthetic_cub(seed: int = 0, num_classes: int = 200, per_class: int = 59, num_groups: int = 28, dims: int = 312):
    """Noisy class-level one-hot logits, softmaxed per attribute group (CLIP's grouped activations' shape)."""
    g = torch.Generator().manual_seed(seed)
    sizes = [dims // num_groups + (1 if i < dims % num_groups else 0) for i in range(num_groups)]
    labels = torch.arange(num_classes).repeat_interleave(per_class)
    parts = []
    for size in sizes:
        proto = torch.randint(0, size, (num_classes,), generator=g)[labels]
        flip = torch.rand(len(labels), generator=g) < 0.4
        value = torch.where(flip, torch.randint(0, size, (len(labels),), generator=g), proto)
        logits = torch.randn(len(labels), size, generator=g)
        logits[torch.arange(len(labels)), value] += 1.5
        parts.append(torch.softmax(2.0 * logits, dim=1))
    return torch.cat(parts, 1), labels.numpy()


def run(quick: bool) -> list[Result]:
    from sklearn.linear_model import LogisticRegression

    episodes_n, repeats = (32, 5) if quick else (128, 7)
    acts, labels = synthetic_cub()
    episodes = sample_episodes(labels, EpisodeSpec(200, 5, 15, episodes_n, 0))
    sup, qry = torch.as_tensor(episodes.support), torch.as_tensor(episodes.query)
    ys, yq = torch.as_tensor(episodes.support_labels), torch.as_tensor(episodes.query_labels)
    config = LogRegConfig()
    acts_np, ys_np = acts.numpy(), ys.numpy()
    predictions: dict[str, list] = {}

    def ours(_round: int) -> None:
        out = []
        for lo in range(0, episodes_n, config.chunk_size):
            hi = min(lo + config.chunk_size, episodes_n)
            out.append(fit_logreg(acts[sup[lo:hi]], ys[lo:hi], 200, config=config).predict(acts[qry[lo:hi]]))
        predictions["ours"] = out

    def sklearn(_round: int) -> None:
        predictions["sklearn"] = [
            LogisticRegression(C=1.0, max_iter=100).fit(acts_np[sup[e]], ys_np[e]).predict(acts_np[qry[e]])
            for e in range(episodes_n)
        ]

    ours(0)  # warm-up
    LogisticRegression(C=1.0, max_iter=100).fit(acts_np[sup[0]], ys_np[0])
    result = compare(
        "CompMap logistic regression",
        ("ours: batched torch L-BFGS", ours),
        ("scikit-learn LogisticRegression per episode", sklearn),
        repeats,
        work=f"{episodes_n} episodes of 200-way 5-shot, 15 queries/class",
    )
    ours_pred = torch.cat(predictions["ours"])
    sk_pred = torch.as_tensor(np.stack(predictions["sklearn"]))
    ours_t = result.ours
    result.extra = {
        "query accuracy ours / scikit-learn": f"{100 * float((ours_pred == yq).double().mean()):.2f}% / "
        f"{100 * float((sk_pred == yq).double().mean()):.2f}%",
        "query predictions identical to scikit-learn's": f"{100 * float((ours_pred == sk_pred).double().mean()):.2f}%",
        "600 episodes (the paper's count) at ours' median": f"{600 / episodes_n * sorted(ours_t)[len(ours_t) // 2]:.1f} s",
    }
    return [result]
