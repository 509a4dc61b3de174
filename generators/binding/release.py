"""A binding benchmark made from a user's spec: its configs, its plan, and what its release says.

A release made from a spec carries the spec, as validated and normalised (the vocabulary inline,
the held-out compositions written out, every default filled in), as ``benchmark_spec.yaml`` beside
the card, and the card gets a section saying the vocabulary, the rules applied and the counts.
Preset runs (``demo``, ``paper``) write neither: their bytes stay what they always were.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from conceptforge.cards.local_dataset import SPEC_FILE_NAME, SPEC_FILES_DIR
from conceptforge.errors import InvalidArgumentError
from conceptforge.generators.binding.benchmark import load_binding_spec, spec_vocabulary
from conceptforge.generators.binding.compositions import DATASETS, SPLITS, split_classes
from conceptforge.generators.binding.dataset import BindingConfig
from conceptforge.generators.binding.vocab import Vocabulary, adjective_noun, relation_label
from conceptforge.specs import BenchmarkSpecFile

RELEASE_SHAPE_DIR, RELEASE_MATERIAL_DIR = f"{SPEC_FILES_DIR}/shapes", f"{SPEC_FILES_DIR}/materials"

RULES = (
    "Paper 004 §3 rules, applied to this vocabulary: the true labels of train, val and gen never overlap; "
    "every colour, shape and relation occurs in train; a relational held-out split is an image type "
    "(`a R b` together with its converse `b S a`, S the opposite relation); no picture shows a composition "
    "held out in another split (not even as the second object or along the other axis). Distractors: "
    "single-object, 4 random other compositions; two-object, the two attribute swaps (hard) and 2 random; "
    "relational, bRa, aSb, aRc and cRb (c a third shape)."
)


def normalised_spec(spec_file: BenchmarkSpecFile, vocab: Vocabulary) -> dict[str, Any]:
    """The spec as validated: vocabulary inline, held-out compositions written out, defaults filled in."""
    vocabulary: dict[str, Any] = {
        "shapes": dict(vocab.shape_objects),
        "colors": {name: list(rgb) for name, rgb in vocab.colors},
        "materials": dict(vocab.material_objects),
        "sizes": dict(vocab.sizes),
    }
    # the release carries the shape and material files (release_files), so its spec resolves on its own
    if vocab.shape_files:
        vocabulary["shape_dir"] = RELEASE_SHAPE_DIR
    if vocab.material_files:
        vocabulary["material_dir"] = RELEASE_MATERIAL_DIR
    spec = {
        "method": "binding",
        "spec_version": spec_file.spec_version,
        "name": spec_file.name,
    }
    if spec_file.description:
        spec["description"] = spec_file.description
    return spec | {
        "vocabulary": vocabulary,
        "relations": list(vocab.relations),
        "held_out": {
            "adjective_noun": {split: [list(c) for c in held] for split, held in vocab.adj_noun_held_out},
            "relational": {split: [list(f) for f in held] for split, held in vocab.relation_held_out},
            "seed": spec_file.spec.held_out.seed,
        },
        "splits": {
            dataset: {"train": sizes.train, "val": sizes.val, "gen": sizes.gen}
            for dataset, sizes in spec_file.spec.splits.items()
        },
    }


def release_files(vocab: Vocabulary) -> dict[str, Path]:
    """The shape and material ``.blend`` files a spec release carries: release path -> source file."""
    files = {f"{RELEASE_SHAPE_DIR}/{Path(path).name}": Path(path) for _, path in vocab.shape_files}
    files |= {f"{RELEASE_MATERIAL_DIR}/{Path(path).name}": Path(path) for _, path in vocab.material_files}
    return files


def spec_yaml(spec: dict[str, Any]) -> str:
    return yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, default_flow_style=None, width=100)


def spec_configs(
    spec_path: str | Path, *, dataset: str, settings: dict[str, Any]
) -> tuple[BenchmarkSpecFile, list[BindingConfig]]:
    """One config per dataset the spec sizes (``--dataset all``) or per named one."""
    spec_file = load_binding_spec(spec_path)
    vocab = spec_vocabulary(spec_file)
    sized = [name for name in DATASETS if name in spec_file.spec.splits]
    if dataset == "all":
        datasets = sized
    else:
        datasets = [name.strip() for name in dataset.split(",") if name.strip()]
        for name in datasets:
            if name not in DATASETS:
                raise InvalidArgumentError(f"unknown dataset {name!r}; choose from {', '.join(DATASETS)} or all")
            if name not in sized:
                raise InvalidArgumentError(
                    f"--dataset {name}: the spec gives no sizes for it (splits: {', '.join(sized)}); "
                    f"add 'splits.{name}' to the spec or pick another"
                )
    spec = normalised_spec(spec_file, vocab)
    configs = [
        BindingConfig(
            dataset=name,
            preset=spec_file.name,
            split_sizes=dict(spec["splits"][name]),
            vocabulary=vocab.to_dict(),
            spec=spec_yaml(spec),
            **settings,
        )
        for name in datasets
    ]
    return spec_file, configs


def class_counts(config: BindingConfig) -> dict[str, int]:
    return {split: len(split_classes(config.dataset, split, config.own_vocabulary)) for split in SPLITS}


def spec_plan_lines(spec_file: BenchmarkSpecFile, configs: Sequence[BindingConfig]) -> list[str]:
    """What --dry-run prints about a spec before the render plan: vocabulary, held-out splits, classes."""
    vocab = configs[0].vocab
    files = dict(vocab.shape_files)
    shapes = ", ".join(f"{s} ({Path(files[s]).name})" if s in files else s for s in vocab.shapes)
    lines = [
        f"spec {spec_file.name} ({spec_file.path}): {len(vocab.shapes)} shapes, {len(vocab.colors)} colours, "
        f"{len(vocab.materials)} materials, {len(vocab.sizes)} sizes, relations {', '.join(vocab.relations)}",
        f"  shapes: {shapes}",
        f"  colours: {', '.join(vocab.color_names)}",
        f"  materials: {', '.join(vocab.materials)}; sizes: "
        + ", ".join(f"{name} {radius:g}" for name, radius in vocab.sizes),
    ]
    for split, held in vocab.adj_noun_held_out:
        lines.append(f"  held out ({split}): " + (", ".join(adjective_noun(*c) for c in held) or "none"))
    if any(config.dataset == "relational" for config in configs):
        for split, held in vocab.relation_held_out:
            lines.append(f"  held out relational ({split}): " + ", ".join(relation_label(*f) for f in held))
    for config in configs:
        counts = class_counts(config)
        lines.append(f"  {config.dataset} classes: " + ", ".join(f"{s} {n}" for s, n in counts.items()))
    return lines


def spec_card_section(configs: Sequence[BindingConfig]) -> str:
    """The card's section for a release made from a spec: domain, vocabulary, rules, counts."""
    spec = yaml.safe_load(configs[0].spec or "{}")
    vocab = configs[0].vocab
    files = dict(vocab.shape_files)
    rows = []
    for shape, object_name in vocab.shape_objects:
        origin = f"`{Path(files[shape]).name}`" if shape in files else "built in"
        rows.append(f"| shape | {shape} | Blender object `{object_name}` ({origin}) |")
    rows += [f"| colour | {name} | sRGB {tuple(rgb)} |" for name, rgb in vocab.colors]
    rows += [f"| material | {name} | `{blender}` |" for name, blender in vocab.material_objects]
    rows += [f"| size | {name} | radius {radius:g} |" for name, radius in vocab.sizes]
    rows += [f"| relation | {name} | CLEVR's camera-relative rule |" for name in vocab.relations]
    held = [
        f"- {split} (adjective–noun): " + ", ".join(adjective_noun(*c) for c in comps)
        for split, comps in vocab.adj_noun_held_out
    ]
    if any(config.dataset == "relational" for config in configs):
        held += [
            f"- {split} (relational): " + ", ".join(relation_label(*f) for f in facts)
            for split, facts in vocab.relation_held_out
        ]
    counts = [
        f"| {config.dataset} | "
        + " | ".join(f"{class_counts(config)[s]} / {config.split_sizes.get(s, 0)}" for s in SPLITS)
        + " |"
        for config in configs
    ]
    return "\n".join(
        [
            "## Benchmark spec",
            "",
            f"Made from the binding spec **{spec.get('name', configs[0].preset)}** (`{SPEC_FILE_NAME}` in this "
            "repository, as validated; the shape and material files it names are under `vocabulary/`): CLEVR-style "
            "Blender renders of this vocabulary, not the paper's. " + (spec.get("description") or ""),
            "",
            "| kind | word | look |",
            "| --- | --- | --- |",
            *rows,
            "",
            "**Rules applied.** " + RULES,
            "",
            "**Held-out compositions:**",
            "",
            *held,
            "",
            "**Counts** (classes / images per split):",
            "",
            "| config | train | val | gen |",
            "| --- | --- | --- | --- |",
            *counts,
            "",
        ]
    )
