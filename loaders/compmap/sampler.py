"""Seeded n-way k-shot episode sampler (the CUB protocol of paper 002, after Snell et al.).

Why: 600 episodes per setting must be the same on every machine and in every rerun, and an
episode must not depend on how many episodes were drawn before it. Each episode therefore gets
its own generator seeded by ``derive_seed(seed, n_way, k_shot, n_query, index)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from conceptforge.errors import InvalidArgumentError
from conceptforge.workitems import derive_seed


@dataclass(frozen=True)
class EpisodeSpec:
    """``n_way`` classes, ``k_shot`` support and ``n_query`` query images per class."""

    n_way: int
    k_shot: int
    n_query: int = 15
    n_episodes: int = 600
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.n_way, self.k_shot, self.n_query, self.n_episodes) < 1:
            raise InvalidArgumentError(f"episode settings must all be >= 1, got {self}")


@dataclass(frozen=True)
class Episodes:
    """Indices into the image list; labels are episode-local class ids in ``[0, n_way)``.

    ``support`` is [E, n_way * k_shot], ``query`` [E, n_way * n_query]; ``classes`` [E, n_way]
    holds the dataset class id of each episode-local label.
    """

    spec: EpisodeSpec
    classes: np.ndarray
    support: np.ndarray
    support_labels: np.ndarray
    query: np.ndarray
    query_labels: np.ndarray


def sample_episodes(labels: np.ndarray, spec: EpisodeSpec) -> Episodes:
    """Draw ``spec.n_episodes`` episodes from images with class ids ``labels``.

    Only classes with at least ``k_shot + n_query`` images are eligible; support and query
    images of an episode never overlap.
    """
    labels = np.asarray(labels)
    per_class = {int(c): np.flatnonzero(labels == c) for c in np.unique(labels)}
    need = spec.k_shot + spec.n_query
    eligible = np.array(sorted(c for c, idx in per_class.items() if len(idx) >= need))
    if len(eligible) < spec.n_way:
        raise InvalidArgumentError(
            f"{spec.n_way}-way {spec.k_shot}-shot with {spec.n_query} queries needs {spec.n_way} classes "
            f"with >= {need} images each; only {len(eligible)} have that many"
        )
    E, n, k, q = spec.n_episodes, spec.n_way, spec.k_shot, spec.n_query
    classes = np.empty((E, n), dtype=np.int64)
    support = np.empty((E, n * k), dtype=np.int64)
    query = np.empty((E, n * q), dtype=np.int64)
    for e in range(E):
        rng = np.random.default_rng(derive_seed(spec.seed, "episode", n, k, q, e))
        chosen = np.sort(rng.choice(eligible, size=n, replace=False))
        classes[e] = chosen
        for j, c in enumerate(chosen):
            picked = rng.choice(per_class[int(c)], size=need, replace=False)
            support[e, j * k : (j + 1) * k] = picked[:k]
            query[e, j * q : (j + 1) * q] = picked[k:]
    local = np.arange(n)
    return Episodes(
        spec=spec,
        classes=classes,
        support=support,
        support_labels=np.broadcast_to(np.repeat(local, k), (E, n * k)).copy(),
        query=query,
        query_labels=np.broadcast_to(np.repeat(local, q), (E, n * q)).copy(),
    )
