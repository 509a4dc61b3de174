"""Seeded n-way k-shot episode samplers (the CUB protocol of CompMap paper, after Snell et al.).

Two protocols (``CUB_PROTOCOLS``):

* ``"authors"`` (the CUB default): the released code of CompMap paper (``nway_kshot_cub_clip.py``):
  n classes at random, k support images per class from CUB's *train* split, and *every* test-split
  image of those n classes as a query (:func:`sample_split_episodes`; ragged query lists are
  padded with ``-1``).
* ``"episodic"``: k support + ``n_query`` queries per class drawn from all of CUB, disjoint
  (:func:`sample_episodes`), the usual few-shot benchmark episode.

Why: 600 episodes per setting must be the same on every machine and in every rerun, and an
episode must not depend on how many episodes were drawn before it. Each episode therefore gets
its own generator seeded by ``derive_seed(seed, n_way, k_shot, n_query, index)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from conceptforge.engine.workitems import derive_seed
from conceptforge.errors import InvalidArgumentError

CUB_PROTOCOLS = ("authors", "episodic")
PAD = -1  # padding of ragged query lists (authors' protocol)


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
    holds the dataset class id of each episode-local label. Under the authors' protocol
    ``query``/``query_labels`` are [E, max queries] padded with ``PAD`` (-1).
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


def sample_split_episodes(labels: np.ndarray, is_train: np.ndarray, spec: EpisodeSpec) -> Episodes:
    """The authors' protocol: k support images per class from the train split, every test image
    of the episode's n classes as a query (``spec.n_query`` is ignored).

    Eligible classes have >= k train images and >= 1 test image. Seeds per episode as in
    :func:`sample_episodes` (prefix-stable), under their own tag so the two protocols differ.
    """
    labels, is_train = np.asarray(labels), np.asarray(is_train, dtype=bool)
    if labels.shape != is_train.shape:
        raise InvalidArgumentError(f"{len(labels)} labels but {len(is_train)} train/test flags")
    train = {int(c): np.flatnonzero((labels == c) & is_train) for c in np.unique(labels)}
    test = {int(c): np.flatnonzero((labels == c) & ~is_train) for c in np.unique(labels)}
    eligible = np.array(sorted(c for c in train if len(train[c]) >= spec.k_shot and len(test[c]) >= 1))
    if len(eligible) < spec.n_way:
        raise InvalidArgumentError(
            f"{spec.n_way}-way {spec.k_shot}-shot (authors' protocol) needs {spec.n_way} classes with >= {spec.k_shot} "
            f"train images and >= 1 test image; only {len(eligible)} have that"
        )
    E, n, k = spec.n_episodes, spec.n_way, spec.k_shot
    classes = np.empty((E, n), dtype=np.int64)
    support = np.empty((E, n * k), dtype=np.int64)
    queries: list[np.ndarray] = []
    query_labels: list[np.ndarray] = []
    for e in range(E):
        rng = np.random.default_rng(derive_seed(spec.seed, "episode-authors", n, k, e))
        chosen = np.sort(rng.choice(eligible, size=n, replace=False))
        classes[e] = chosen
        for j, c in enumerate(chosen):
            support[e, j * k : (j + 1) * k] = rng.choice(train[int(c)], size=k, replace=False)
        queries.append(np.concatenate([test[int(c)] for c in chosen]))
        query_labels.append(np.concatenate([np.full(len(test[int(c)]), j) for j, c in enumerate(chosen)]))
    width = max(len(q) for q in queries)
    query = np.full((E, width), PAD, dtype=np.int64)
    qlabels = np.full((E, width), PAD, dtype=np.int64)
    for e, (q, y) in enumerate(zip(queries, query_labels)):
        query[e, : len(q)], qlabels[e, : len(y)] = q, y
    return Episodes(
        spec=spec,
        classes=classes,
        support=support,
        support_labels=np.broadcast_to(np.repeat(np.arange(n), k), (E, n * k)).copy(),
        query=query,
        query_labels=qlabels,
    )
