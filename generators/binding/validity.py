"""The binding datasets' validity report (cards.validity): blind baselines and held-out checks.

Blind baselines, per config and split, from the rows alone (no image):

- *chance*: a uniform guess among the candidates (1/5);
- *position majority (train)*: always the candidate slot that held the true caption most often
  in train (candidates are shuffled per item, so this stays near chance unless the shuffle is biased);
- *caption prior (train)*: the candidate that was the true caption most often in train; a caption
  never seen as a train label scores 0 (this is what a model learns from the labels' frequencies);
- *candidate consensus (no training)*: the candidate sharing the most words, position by
  position, with the other candidates (:func:`cards.validity.consensus_scores`): distractors made
  by changing one part of the true caption can give it away without any image.

Held-out checks follow the split rule of :mod:`generators.binding.compositions`: a picture may
show train compositions and its own split's only. For every split and every *other* held-out
split, we count the items whose picture shows one of that split's compositions: adjective–noun
pairs of every object (single- and two-object), and every relation fact that holds between the
two objects in either order under CLEVR's rule (relational), recomputed from the recorded object
positions and camera.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from conceptforge.cards.validity import (
    baseline_row,
    chance_accuracy,
    consensus_choice_accuracy,
    held_out_row,
    majority_accuracy,
    not_applicable,
    prior_choice_accuracy,
    validity_report,
)
from conceptforge.generators.binding.benchmark import paper_vocabulary
from conceptforge.generators.binding.compositions import SPLITS
from conceptforge.generators.binding.scene import Camera, PlacementRules, SceneObject, relations_between
from conceptforge.generators.binding.vocab import Vocabulary

Rows = Callable[[str], Iterable[Mapping[str, Any]]]  # split -> the rows' metadata (callable again and again)

BINDING_LEGEND = {
    "chance": "a uniform guess among the item's candidate captions",
    "position majority (train)": "always the candidate slot that held the true caption most often in train",
    "caption prior (train)": "the candidate that was the true caption most often in train (ties split evenly)",
    "candidate consensus (no training)": "the candidate sharing the most words, position by position, with the "
    "other candidates: distractors made by editing the true caption can give it away",
}
BINDING_BASELINE_NOTE = (
    "None of these baselines looks at the image. A blind baseline well above chance means the text alone "
    "explains that much of a score; compare a model's accuracy with the best blind row of its split."
)
#: The paper the binding datasets follow, as a reader finds it (cards and provenance name it so).
BINDING_PAPER = (
    "Lewis et al., *Does CLIP Bind Concepts? Probing Compositionality in Large Image Models* (EACL Findings 2024)"
)
BINDING_HELD_OUT_NOTE = (
    f"Pictures may show train compositions and their own split's only (Section 3 of {BINDING_PAPER}, and the objects "
    "and relations in the picture, not only the label). `found` counts items whose picture shows a "
    "composition of another held-out split; it should be 0."
)
BINDING_AGREEMENT_REASON = (
    "no human annotation: every label is computed from the scene description that produced the image "
    "(no automatic filter to check against people)"
)


def _shown(dataset: str, meta: Mapping[str, Any]) -> set[tuple[str, ...]]:
    """Every composition the item's picture shows (see the module docstring)."""
    objects = meta.get("objects") or []
    if dataset != "relational":
        return {(o["color"], o["shape"]) for o in objects}
    camera_meta = meta.get("camera") or {}
    camera = Camera(location=tuple(camera_meta["location"]), lens=camera_meta.get("lens", Camera.lens))
    placed = [
        SceneObject(o["shape"], o["color"], o["material"], o["size"], o["x"], o["y"], o["rotation"]) for o in objects
    ]
    threshold = PlacementRules().relation_threshold
    facts: set[tuple[str, ...]] = set()
    for a in placed:
        for b in placed:
            if a is not b:
                facts |= {(a.shape, r, b.shape) for r in relations_between(a, b, camera, threshold)}
    return facts


def _held_out(dataset: str, vocab: Vocabulary | None = None) -> Mapping[str, tuple[tuple[str, ...], ...]]:
    v = paper_vocabulary() if vocab is None else vocab
    return dict(v.relation_held_out if dataset == "relational" else v.adj_noun_held_out)


def config_validity(dataset: str, rows: Rows, splits: Iterable[str], vocab: Vocabulary | None = None) -> dict[str, Any]:
    """Baseline and held-out rows of one config (``rows(split)`` may be called several times);
    ``vocab``: a spec's own vocabulary (None: the paper's)."""
    splits = [s for s in SPLITS if s in set(splits)]
    positions: Counter = Counter()
    captions: Counter = Counter()
    for meta in rows("train") if "train" in splits else ():
        positions[int(meta["label_index"])] += 1
        captions[str(meta["label"])] += 1
    held = _held_out(dataset, vocab)
    baselines, checks = [], []
    for split in splits:
        items, split_positions, found = [], Counter(), Counter()
        for meta in rows(split):
            items.append((list(meta["candidates"]), int(meta["label_index"])))
            split_positions[int(meta["label_index"])] += 1
            shown = _shown(dataset, meta)
            for other, compositions in held.items():
                if other != split and shown & set(compositions):
                    found[other] += 1
        n = len(items)
        fit_note = {} if "train" in splits else {"fit": "no train split: not computed"}
        for name, (accuracy, count) in (
            ("chance", chance_accuracy(len(c) for c, _ in items)),
            ("position majority (train)", (majority_accuracy(positions, split_positions), n)),
            ("caption prior (train)", prior_choice_accuracy(captions, items) if captions else (None, n)),
            ("candidate consensus (no training)", consensus_choice_accuracy(items)),
        ):
            extra = fit_note if "(train)" in name else {}
            baselines.append(
                baseline_row(config=dataset, split=split, baseline=name, accuracy=accuracy, n=count, **extra)
            )
        for other, compositions in held.items():
            if other != split:
                checks.append(
                    held_out_row(
                        config=dataset,
                        check=f"{other} compositions in {split} pictures",
                        checked=n,
                        held_out=len(compositions),
                        found=found[other],
                    )
                )
    return {"baselines": baselines, "held_out": checks}


def binding_validity(per_config: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The repo's report from each config's :func:`config_validity` (in the given config order)."""
    baselines = [row for part in per_config.values() for row in part["baselines"]]
    checks = [row for part in per_config.values() for row in part["held_out"]]
    return validity_report(
        blind_baselines={"rows": baselines, "legend": BINDING_LEGEND, "note": BINDING_BASELINE_NOTE},
        held_out={"rows": checks, "note": BINDING_HELD_OUT_NOTE},
        agreement=not_applicable(BINDING_AGREEMENT_REASON),
    )
