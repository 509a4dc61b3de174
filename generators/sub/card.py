"""The SUB candidates dataset: its schema, card and assembly from a complete store.

Why apart from :mod:`conceptforge.generators.sub.stage`: generation (FLUX, work items) and
what the published dataset looks like change for different reasons; the filter and the test
fixtures need the schema and the card text without the generation code. The assembler keeps the
name it was first stored under, so runs started before this module existed still assemble.
"""

from __future__ import annotations

import io
import math
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from datasets import ClassLabel, Features, Value
from datasets import Image as ImageFeature

from conceptforge.cards import DatasetMetadata, assemble_dataset_dir, render_card
from conceptforge.cards.grid import grid_png
from conceptforge.cards.provenance import command_line, package_versions, strip_local_path
from conceptforge.cards.run_record import config_entry, row_ids, run_record, write_run_record
from conceptforge.cub import display_name, group_words
from conceptforge.engine.assembly import register_assembler
from conceptforge.engine.store import ItemStore
from conceptforge.generators.sub.spec import PairPlan, load_spec, published_attribute
from conceptforge.generators.sub.validity import sub_validity
from conceptforge.specs.release import write_release_spec

SPLIT = "candidates"
CARD_PACKAGES = (
    "conceptforge",
    "torch",
    "diffusers",
    "transformers",
    "accelerate",
    "datasets",
    "huggingface_hub",
    "pyarrow",
    "numpy",
    "pillow",
)

#: The SUB-candidates columns of docs/schemas.md (test fixtures build datasets in exactly these).
SCHEMA_FEATURES = Features(
    {
        "image": ImageFeature(),
        "item_id": Value("string"),
        "bird": Value("string"),
        "attribute": Value("string"),
        "group": Value("string"),
        "value": Value("string"),
        "category": Value("string"),
        "removed_attribute": Value("string"),
        "prompt_reference": Value("string"),
        "prompt_guidance": Value("string"),
        "image_index": Value("int32"),
        "seed": Value("int64"),
        "tdg_k": Value("float32"),
        "tdg_tmin": Value("float32"),
        "tdg_tmax": Value("float32"),
        "guidance_scale": Value("float32"),
        "num_inference_steps": Value("int32"),
        "model_id": Value("string"),
        "model_revision": Value("string"),
    }
)
_SPEC = load_spec()
#: ``bird_label`` names: SUB's 33 reference birds (CUB class names without number, paper App. A).
BIRD_LABELS = ClassLabel(names=list(_SPEC.reference_birds))
#: ``attr_label`` names: SUB's substitutions written as the published SUB writes them, ``has_<group>--<value>``.
ATTRIBUTE_LABELS = ClassLabel(names=[published_attribute(a) for a in _SPEC.substitutions])
#: The closed-set label columns of the published ``Jessica-bader/SUB``, beside our string columns
#: (-1 where the row has none: a bird outside SUB's 33, or reference-bird selection without S+).
LABEL_FEATURES = {"bird_label": BIRD_LABELS, "attr_label": ATTRIBUTE_LABELS}
FEATURES = Features(
    {
        **SCHEMA_FEATURES,
        # Additions to the schema (docs/sub.md):
        "generation_mode": Value("string"),
        "guidance_bird": Value("string"),
        **LABEL_FEATURES,
    }
)


def features_for(benchmark: dict[str, Any] | None) -> Features:
    """The paper's features, or a spec's: ``bird_label``/``attr_label`` over its classes and S+."""
    if benchmark is None:
        return FEATURES
    return Features(
        {
            **{name: feature for name, feature in FEATURES.items() if name not in LABEL_FEATURES},
            "bird_label": ClassLabel(names=list(benchmark["classes"])),
            "attr_label": ClassLabel(names=[published_attribute(a) for a in benchmark["substitutions"]]),
        }
    )


def label_columns(bird: str, attribute: str, features: Features = FEATURES) -> dict[str, int]:
    """``bird_label``/``attr_label`` of a row (ClassLabel indices; -1 when not one of SUB's names)."""
    birds, attributes = features["bird_label"].names, features["attr_label"].names
    published = published_attribute(attribute) if attribute else ""
    return {
        "bird_label": birds.index(bird) if bird in birds else -1,
        "attr_label": attributes.index(published) if published in attributes else -1,
    }


COLUMN_DOCS = {
    "image": "the R image (the G image of TDG is discarded)",
    "item_id": "`<bird>__<attribute-slug>__<index>`",
    "bird": "reference bird R, CUB class name without number",
    "attribute": "S+, `has_<group>::<value>` (empty for reference-bird selection)",
    "group": "attribute group of S+",
    "value": "S+ value",
    "category": "`colour`, `shape` or `pattern`",
    "removed_attribute": "S-: the bird's class-level (majority-vote) attribute of the group; empty if none",
    "prompt_reference": "c_R",
    "prompt_guidance": "c_G (empty in prompt-only mode)",
    "image_index": "index of the image within its pair",
    "seed": "work-item seed (noise drawn on the CPU from it)",
    "tdg_k": "TDG schedule exponent (NaN in prompt-only mode)",
    "tdg_tmin": "TDG: no tying below this diffusion time (NaN in prompt-only mode)",
    "tdg_tmax": "TDG: full tying above this diffusion time (NaN in prompt-only mode)",
    "guidance_scale": "FLUX distilled guidance scale",
    "num_inference_steps": "denoising steps",
    "model_id": "FLUX pipeline: its Hub id, or `.../<folder name>` for a local folder (no local path is published)",
    "model_revision": "resolved commit of the model (`local-sha256:<fingerprint>` for a local folder)",
    "generation_mode": "`tdg` or `prompt-only`",
    "guidance_bird": "G (`bird` for colour substitutions; empty in prompt-only mode)",
    "bird_label": "`bird` as a ClassLabel over SUB's 33 reference birds (the published SUB's `bird_label`; -1 if not one of them)",
    "attr_label": "S+ as a ClassLabel named `has_<group>--<value>` (the published SUB's `attr_label`; -1 if none)",
}

#: Card sections shared by the SUB candidates and the filtered SUB (cards.render_card fields).
CARD_SECTIONS = {
    "language": ["en"],
    "source_datasets": ["extended|cub-200-2011"],
    "uses": (
        "Testing whether concept-bottleneck models (CBMs) and vision-language models detect a substituted "
        "attribute S+ and stop detecting the bird's own attribute S- (SUB paper, Sec. 5): score each image's "
        "concepts and report S+/S- accuracy per attribute and per bird (`conceptforge evaluate sub`). The "
        "`bird_label`/`attr_label` ClassLabels match the published `Jessica-bader/SUB`, so code written for it "
        "reads these rows unchanged."
    ),
    "out_of_scope_use": (
        "Not a training set for bird classifiers or for real-world species identification: images are generated "
        "and one attribute is deliberately wrong for the species. Not for commercial use: FLUX.1-dev outputs and "
        "CUB-200-2011 carry non-commercial / research-only terms."
    ),
    "bias_risks_limitations": (
        "Generated by FLUX.1 [dev] from text prompts: images inherit that model's biases and artefacts (plumage "
        "that drifts toward the guidance bird, extra or missing body parts, painterly backgrounds). The 33 birds "
        "and 32 substitutions follow the paper and cover a small, North-American-heavy slice of CUB-200-2011. "
        "S- is the class-level (majority-vote) CUB attribute, which individual real birds may lack. No people "
        "or personal data are depicted."
    ),
    "annotations": (
        "No human annotation. `bird` and `attribute` (S+) are the prompt's intent, taken from the paper's plan "
        "(App. A/C); `removed_attribute` (S-) comes from CUB-200-2011's class-level attribute labels. Candidates "
        "are unchecked; the filtered SUB keeps only images whose VQA answer is S+ and ranks them by the S+ "
        "probability (the `vqa_*` columns record the check), as in Sec. 4.2 of the paper."
    ),
    "personal_data": (
        "None. The images are generated pictures of birds (CUB-200-2011 species); no person, face, voice, "
        "location or other personal or sensitive information is depicted or recorded."
    ),
}


def card_sections(benchmark: dict[str, Any] | None) -> dict[str, Any]:
    """The card's sections: the paper's (CUB birds) for a preset run; for a user spec's run the same
    sections in its domain's words, since a card about cars that speaks of birds misleads its readers
    and no CUB data went into it."""
    if benchmark is None:
        return CARD_SECTIONS
    domain = benchmark["domain"]
    return {
        **CARD_SECTIONS,
        "source_datasets": [],
        "uses": (
            f"Testing whether concept-bottleneck models (CBMs) and vision-language models detect a substituted "
            f"attribute S+ and stop detecting the {domain}'s own attribute S- (the SUB paper's protocol, Sec. 5, "
            f"on the spec's domain: {domain}): score each image's concepts and report S+/S- accuracy per "
            "attribute and per class (`conceptforge evaluate --tasks sub-vlm:ORG/NAME@REV`, or sub-cbm)."
        ),
        "out_of_scope_use": (
            f"Not a training set for {domain} classifiers or for recognising real {domain} classes: images are "
            "generated and one attribute is deliberately wrong for the class. Check the terms of the image model "
            "(FLUX.1-dev outputs are non-commercial) and of the source dataset the spec names."
        ),
        "bias_risks_limitations": (
            "Generated by a text-to-image model from text prompts: images inherit that model's biases and "
            "artefacts (appearance that drifts toward the guidance class, extra or missing parts). The classes, "
            "attributes and substitutions are the spec's (its section below); S- is the class-level attribute "
            "by the spec's presence rule, which individual real instances may lack."
        ),
        "annotations": (
            "No human annotation. The class and `attribute` (S+) are the prompt's intent, taken from the spec's "
            "plan; `removed_attribute` (S-) comes from the source dataset's labels by the spec's presence rule. "
            "Candidates are unchecked; the filtered SUB keeps only images whose VQA answer is S+."
        ),
        "personal_data": (
            f"The images are generated pictures of {domain} classes; whether people or personal data can "
            "appear depends on the spec's domain and source dataset: check them before publishing."
        ),
    }


CITATION = """@article{bader2025sub,
  title   = {SUB: Benchmarking CBM Generalization via Synthetic Attribute Substitutions},
  author  = {Bader, Jessica and Girrbach, Leander and Alaniz, Stephan and Akata, Zeynep},
  journal = {arXiv preprint},
  year    = {2025}
}"""


def record_row(record, features: Features = FEATURES) -> dict[str, Any]:
    meta = record.metadata
    row = {name: meta.get(name) for name in features if name not in {"image", "item_id", "seed"}}
    row.update(
        # published data names the model by its Hub id or folder name, never this machine's path
        model_id=strip_local_path(meta["model_id"]) if isinstance(meta.get("model_id"), str) else meta.get("model_id"),
        image={"bytes": record.read_file("png"), "path": f"{record.item_id}.png"},
        item_id=record.item_id,
        seed=meta["seed"],
        **label_columns(meta.get("bird") or "", meta.get("attribute") or "", features),
    )
    for name in ("tdg_k", "tdg_tmin", "tdg_tmax"):
        if row[name] is None:  # JSON has no NaN in canonical form -> None
            row[name] = float("nan")
    return row


def _grid(records: Sequence, max_tiles: int = 12) -> bytes | None:
    """First image of up to ``max_tiles`` pairs spread over the pair list."""
    firsts = {}
    for record in records:
        key = (record.metadata["bird"], record.metadata["attribute"])
        firsts.setdefault(key, record)
    chosen = list(firsts.values())
    step = max(1, math.ceil(len(chosen) / max_tiles))
    chosen = chosen[::step][:max_tiles]
    samples = []
    from PIL import Image

    for record in chosen:
        meta = record.metadata
        samples.append((Image.open(io.BytesIO(record.read_file("png"))), grid_caption(meta)))
    return grid_png(samples, thumb_width=256)


def grid_caption(meta: dict[str, Any]) -> str:
    """``Blue Jay + red crown color``: the class, and the substituted value with its group's words
    (a spec's group ``handle_shape`` reads ``handle shape``; CUB's ``has_`` prefix is dropped)."""
    if not meta["attribute"]:
        return display_name(meta["bird"])
    return f"{display_name(meta['bird'])} + {meta['value'].replace('_', ' ')} {group_words(meta['group'])}"


def assemble_from_store(store: ItemStore, out_dir: Path, args: dict[str, Any]) -> None:
    """Write the dataset directory (Hub layout) into ``out_dir`` from a complete store.

    Called by the engine exactly once per run (or by ``conceptforge assemble OUT``); ``args``
    holds the card metadata, recorded in the store when the run started.
    """
    metadata = DatasetMetadata(**args["metadata"])
    metadata.reproducible = "rebuild" in args
    first = next(store.records(SPLIT), None)
    if first is not None and first.metadata.get("model_revision"):  # the revision the model resolved to
        metadata.provenance = {**metadata.provenance, "model_revision": first.metadata["model_revision"]}
    metadata.validity = sub_validity({SPLIT: (r.metadata for r in store.records(SPLIT))})
    benchmark = args.get("benchmark")
    features = features_for(benchmark)
    stats = assemble_dataset_dir(
        out_dir,
        splits={SPLIT: lambda: (record_row(r, features) for r in store.records(SPLIT))},
        features=features,
        render_card=lambda stats: render_card(metadata, features, stats),
        grid_png=_grid(list(_grid_records(store))),
    )
    if benchmark is not None:  # the spec travels with the dataset (and into the filtered release)
        write_release_spec(out_dir, benchmark["spec_yaml"])
    if "rebuild" in args:  # what `conceptforge verify` regenerates the rows from (cards.run_record)
        entry = config_entry(
            store.stored_config(),
            rebuild=args["rebuild"],
            device=args["rebuild"]["device"],
            rows=row_ids(out_dir, stats),
        )
        write_run_record(out_dir, run_record("sub", {"default": entry}, validity=metadata.validity))


#: Stored in every SUB run (the name is the one first stored: old runs stay valid).
ASSEMBLER = register_assembler("conceptforge.generators.sub.generate:assemble_from_store", assemble_from_store)


def _grid_records(store: ItemStore):
    """The first image of every pair, without keeping every image in memory."""
    seen = set()
    for record in store.records(SPLIT):
        key = (record.metadata["bird"], record.metadata["attribute"])
        if key not in seen:
            seen.add(key)
            yield record


def own_summary(summary: str, benchmark: dict[str, Any]) -> str:
    """The paper's words made the spec's (its domain for CUB's birds) and the spec's card section."""
    domain = benchmark["domain"]
    summary = summary.replace("CUB birds", f"{domain} classes").replace("CUB classes", f"{domain} classes")
    summary = summary.replace("Reference-bird", "Reference-class")
    return f"{summary}\n\n{benchmark['card_section']}"


def card_metadata(
    *,
    license: str,
    settings: Any,  # generate.GenerationSettings (not imported: generate imports this module)
    plan: PairPlan,
    images_per_pair: int,
    model_revision: str,
    reference_selection: bool,
    command: Sequence[str] | None = None,
    benchmark: dict[str, Any] | None = None,
) -> DatasetMetadata:
    """The candidates card. ``command`` is the command line of the run (default: sys.argv);
    ``benchmark`` (a user spec's run): the card names its domain and carries its spec section."""
    if reference_selection:
        summary = (
            "Reference-bird selection candidates for SUB (the SUB paper, Sec. 4.2): images of CUB classes "
            "generated with the plain prompt, to be scored by a CUB classifier."
        )
    elif settings.mode == "tdg":
        summary = (
            "SUB candidates: CUB birds with one attribute substituted, generated with Tied Diffusion "
            "Guidance (TDG) over FLUX (the SUB paper). Unfiltered: run the VQA filter to build SUB."
        )
    else:
        summary = (
            "Prompt-only baseline for SUB (the SUB paper, Fig. 4): the reference prompt c_R alone, from the "
            "same initial noise as the TDG candidates of the same item."
        )
    if benchmark is None:
        summary += " CUB-200-2011 metadata (Wah et al.) is used under its research-only terms."
    else:
        summary = own_summary(summary, benchmark)
    categories = sorted({p.category for p in plan.pairs if p.category})
    return DatasetMetadata(
        pretty_name="SUB candidates" if not reference_selection else "SUB reference-bird selection",
        license=license,
        summary=summary,
        task_categories=["image-classification"],
        tags=["synthetic", "cub-200-2011", "concept-bottleneck-models", "flux", "tied-diffusion-guidance"]
        if benchmark is None
        else ["synthetic", "concept-bottleneck-models", "flux", "tied-diffusion-guidance"],
        citation=CITATION,
        column_docs=COLUMN_DOCS,
        **card_sections(benchmark),
        provenance={
            "generator": "conceptforge generators.sub",
            "mode": "reference-selection" if reference_selection else settings.mode,
            "model_id": settings.model,
            "model_revision": model_revision,
            "resolution": settings.resolution,
            "num_inference_steps": settings.steps,
            "guidance_scale": settings.guidance_scale,
            "max_sequence_length": settings.max_sequence_length,
            "run_seed": settings.seed,
            "dtype": settings.dtype,
            "images_per_pair": images_per_pair,
            "pairs": len(plan.pairs),
            "birds": len({p.bird for p in plan.pairs}),
            "attributes": len({p.attribute for p in plan.pairs if p.attribute}),
            "dropped_pairs_already_present": len(plan.dropped),
            "tdg_params": {
                c: next(p.tdg.to_dict() for p in plan.pairs if p.category == c and p.tdg) for c in categories
            }
            if settings.mode == "tdg"
            else {},
            "packages": package_versions(CARD_PACKAGES),
            "python": platform.python_version(),
            "command_line": command_line(command),
        },
    )
