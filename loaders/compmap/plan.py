"""The plan of a CompMap run (``evaluate compmap --dry-run``): what the data holds and what the
model will be asked, read from the data alone (no model loads, nothing is written).

Why counts of forwards: a dual encoder embeds each image once and each concept prompt once, but
an ITM model (ViLT, BLIP) or a generative VLM scores every (image, concept) pair, so the same
benchmark costs images × concepts forwards there; a researcher sizing a run needs both numbers.
"""

from __future__ import annotations

from typing import Any


def _forwards(images: int, concepts: int) -> str:
    return (
        f"forwards: {images:,} images + {concepts:,} concept prompts (dual encoder), "
        f"{images * concepts:,} image-concept pairs (ITM or VLM)"
    )


def czsl_plan(name: str, data: Any, options: dict[str, Any]) -> list[str]:
    """Lines for a CZSL run on ``data`` (a :class:`~.mit_states.MitStatesData`)."""
    splits = ("train", "val", "test")
    seen = set(data.seen_pairs)
    unseen = {p for s in ("val", "test") for p in data.pairs[s]} - seen
    images = sum(len(data.samples[s]) for s in splits)
    worlds = ("closed", "open") if options["world"] == "both" else (options["world"],)
    return [
        f"CompMap {name}: czsl (generalized compositional zero-shot learning) on {data.root}",
        f"  attributes {len(data.attrs)}, objects {len(data.objs)}; pairs train/val/test "
        + "/".join(str(len(data.pairs[s])) for s in splits)
        + f" (seen {len(seen)}, unseen {len(unseen)})",
        "  images train/val/test " + "/".join(str(len(data.samples[s])) for s in splits),
        "  candidates: "
        + ", ".join(f"{w} world {len(data.candidate_pairs(w)):,} pairs" for w in worlds)
        + f"; composition model {options['epochs']} epochs, width {options['dim']}, lr {options['lr']:g}, "
        f"seed {options['seed']}",
        "  " + _forwards(images, len(data.attrs) + len(data.objs)),
    ]


def few_shot_plan(name: str, data: Any, options: dict[str, Any]) -> list[str]:
    """Lines for an n-way k-shot run on ``data`` (CUB or a :class:`~.spec_data.ClassTableData`)."""
    settings = [f"{n}-way {k}-shot" for n in options["ways"] for k in options["shots"]]
    n_images = len(data.labels)
    return [
        f"CompMap {name}: few_shot (n-way k-shot usefulness and interpretability)",
        f"  classes {len(data.class_names)}, attributes {len(data.attributes)} in {len(data.groups)} groups; "
        f"images {n_images} (train {int(data.is_train.sum())}, test {int((~data.is_train).sum())})",
        f"  settings: {', '.join(settings)}, {options['episodes']} episodes each ({options['protocol']} protocol)"
        + (f"; full shot {len(data.class_names)}-way" if options["full_shot"] else ""),
        "  " + _forwards(n_images, len(data.attributes)),
    ]
