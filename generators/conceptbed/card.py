"""The ConceptBed generated-images dataset: its schema, card text and assembly from a complete store.

Why apart from :mod:`conceptforge.generators.conceptbed.stage`: learning and sampling
(torch, diffusers) and what the published dataset looks like change for different reasons, and
the annotation app and test fixtures need the schema without the learners. The assembler keeps
the name it was first stored under, so runs started before this module existed still assemble.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from datasets import ClassLabel, Features, List, Value
from datasets import Image as ImageFeature
from PIL import Image

from conceptforge.cards import DatasetMetadata, assemble_dataset_dir, render_card
from conceptforge.cards.grid import grid_png
from conceptforge.cards.local_dataset import SPEC_FILE_NAME
from conceptforge.cards.provenance import local_fingerprint
from conceptforge.cards.run_record import config_entry, row_ids, run_record, write_run_record
from conceptforge.engine.assembly import register_assembler
from conceptforge.engine.store import ItemStore
from conceptforge.generators.conceptbed.concepts import library
from conceptforge.generators.conceptbed.validity import conceptbed_validity
from conceptforge.serialization import atomic_write_bytes

SPLITS = ("concept", "composition")
REFERENCE_COUNT = 3
REFERENCES_DIR = "references"  # in the store (OUT/.work), beside the chunks
REFERENCES_NOTE = (
    "The license covers the generated images. The concepts' reference images (ImageNet, CUB-200-2011, PACS) are "
    "not included: `reference_ids` names them by folder and file in your own copies, which keep their own terms."
)
EMBEDDED_REFERENCES_NOTE = (
    "The license covers the generated images only. `reference_images` holds downsized copies of the concepts' "
    "reference images, embedded on request (`--embed-references`) once per concept and split: they come from "
    "ImageNet, CUB-200-2011 or PACS and stay under those datasets' terms (non-commercial research use), not this "
    "license. Share or publish this dataset only where those terms allow it."
)
FEATURES = Features(
    {
        "image": ImageFeature(),
        "item_id": Value("string"),
        "concept": Value("string"),
        "concept_kind": Value("string"),
        "learner": Value("string"),
        "prompt": Value("string"),
        "caption": Value("string"),
        "category": Value("string"),
        "categories": List(Value("string")),
        "questions": List(Value("string")),
        "reference_ids": List(Value("string")),
        "reference_images": List(ImageFeature()),
        "seed": Value("int64"),
        # ``concept`` as a ClassLabel over ConceptBed's whole library (Table 9: 4 PACS styles, 80
        # ImageNet objects, 200 CUB classes), so label ids mean the same concept in every run
        "concept_label": ClassLabel(names=list(library())),
    }
)
COLUMN_DOCS = {
    "image": "generated image",
    "item_id": "stable work-item id `<concept>__c<index>` (concept) or `<concept>__p<index>` (composition)",
    "concept": "concept name from ConceptBed Table 9",
    "concept_kind": "`style`, `object` or `cub`",
    "learner": (
        "`textual-inversion`, `dreambooth` or `custom-diffusion` (on Stable Diffusion), "
        "`textual-inversion-ldm` (on a latent-diffusion model), or `none` (the base model alone)"
    ),
    "prompt": "prompt with the learned placeholder (V*)",
    "caption": "composite caption with the ground-truth subject (composition split)",
    "category": "first composition category (composition split)",
    "categories": "every composition category of the caption (a caption may have several)",
    "questions": "yes/no existence questions, all answered `yes` (composition split)",
    "reference_ids": "the concept's reference images as `<folder>/<file>` in the ImageNet/CUB/PACS copy the "
    "concept spec names (the images themselves are not part of the dataset)",
    "reference_images": "empty unless generated with `--embed-references`: then up to 3 reference thumbnails on the "
    "first row of each concept in each split (one copy per concept; see the license section)",
    "seed": "the image's seed",
    "concept_label": "`concept` as a ClassLabel over ConceptBed's 284 concepts (names through the features)",
}

#: The Hub card sections (cards.render_card fields).
CARD_SECTIONS = {
    "language": ["en"],
    "uses": (
        "Measuring how well a concept learner (Textual Inversion, DreamBooth, Custom Diffusion) captured a "
        "concept and keeps it composable: score the `concept` split with the concept oracles and the "
        "`composition` split with the VQA oracle, and report CCD against the real images "
        "(`conceptforge evaluate conceptbed`, ConceptBed Sec. 3)."
    ),
    "out_of_scope_use": (
        "Not real photographs and not a training set for recognising these concepts; not a measure of image "
        "quality or of a model's safety. The images follow the license of the diffusion model that made them."
    ),
    "bias_risks_limitations": (
        "Images come from a text-to-image diffusion model fine-tuned on a few reference images per concept: they "
        "inherit that model's biases and can copy details of the references (memorisation). Concepts and "
        "composition captions are the paper's (PACS styles, ImageNet objects, CUB birds), a narrow, "
        "English-only, western-centred vocabulary. The concept oracles are classifiers with their own errors, so "
        "CCD measures agreement with them, not ground truth."
    ),
    "annotations": (
        "No human annotation in this dataset. `concept`, `concept_kind`, `prompt` and `caption` are the "
        "generation inputs; the yes/no `questions` are derived from the composite caption's nouns and are all "
        "answered `yes` by construction. Human ratings (ConceptBed Sec. 4.2) can be added with "
        "`scripts/annotate.py` (docs/annotation.md)."
    ),
    "personal_data": (
        "None recorded. The images are generated from concept prompts (PACS styles, ImageNet objects, CUB birds); "
        "a generated image can show people when a prompt or a reference image does, but no real person's data, "
        "name or location is collected."
    ),
}
CITATION = """@inproceedings{patel2024conceptbed,
  title={ConceptBed: Evaluating Concept Learning Abilities of Text-to-Image Diffusion Models},
  author={Patel, Maitreya and Gokhale, Tejas and Baral, Chitta and Yang, Yezhou},
  booktitle={AAAI},
  year={2024}
}"""


def features_for(label_names: list[str] | None) -> Features:
    """The schema; a user's spec labels its own concepts (``concept_label`` over them, in spec order)."""
    if label_names is None:
        return FEATURES
    return Features({**FEATURES, "concept_label": ClassLabel(names=list(label_names))})


def benchmark_section(benchmark: dict[str, Any], stats: list[Any]) -> str:
    """The card's account of a user's benchmark: its domain, concepts with their class nouns and
    images, the templates and the counts, so the card says what was measured without the spec."""
    concepts = benchmark["concepts"]
    rows = {getattr(s, "name", ""): getattr(s, "num_examples", None) for s in stats}
    prompts = benchmark.get("prompts", {})
    lines = [
        "## Benchmark spec",
        "",
        f"Made from the ConceptBed spec `{benchmark['name']}` (`benchmark_spec.yaml` beside this card, "
        "validated and with every default filled in: `conceptforge generate conceptbed --spec benchmark_spec.yaml` "
        "makes it again where the reference images are at the paths it names)."
        + (f" {benchmark['description']}" if benchmark.get("description") else ""),
        "",
        f"- concepts: {len(concepts)} ({', '.join(f'{n} {k}' for k, n in sorted(_count_kinds(concepts).items()))})",
        f"- reference images per concept: at most {benchmark['max_reference_images']}",
        f"- concept prompt: `{prompts.get('concept')}`"
        + (
            f"; style prompt: `{prompts.get('style')}` over {', '.join(prompts.get('style_subjects', []))}"
            if any(c["kind"] == "style" for c in concepts)
            else ""
        ),
        "- composition templates ('{}' is the class noun, replaced by V*): "
        + (", ".join(f"`{t}`" for t in benchmark.get("composition_templates", [])) or "none"),
        f"- composite captions file: {'yes' if benchmark.get('captions') else 'none'}",
        f"- images per concept: {benchmark['sampling']['num_images']}; rows: "
        + ", ".join(f"{name} {count}" for name, count in rows.items() if count is not None),
        "",
        "| concept | kind | class noun | reference images |",
        "|---|---|---|---|",
    ]
    for concept in concepts:
        images = concept["images"]
        where = (
            next(f"{kind} `{images[kind]}`" for kind in ("folder", "pacs", "imagenet", "cub") if kind in images)
            if ("dataset" not in images)
            else f"dataset label `{images['label']}`"
        )
        lines.append(f"| {concept['name']} | {concept['kind']} | {concept['class_noun']} | {where} |")
    return "\n".join(lines) + "\n"


def _count_kinds(concepts: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for concept in concepts:
        counts[concept["kind"]] = counts.get(concept["kind"], 0) + 1
    return counts


def with_section(card: str, section: str) -> str:
    """``section`` before the card's Version section (at the end when it has none)."""
    marker = "\n## Version"
    at = card.find(marker)
    return card + "\n" + section if at < 0 else card[:at] + "\n" + section + card[at:]


def _references(store: ItemStore, concept: str) -> list[dict[str, Any]]:
    folder = f"{REFERENCES_DIR}/{concept}"
    names = sorted(
        (n for n in store.location.listdir(folder) if n.endswith(".png")), key=lambda n: int(n.split(".")[0])
    )
    return [{"bytes": store.location.read(f"{folder}/{name}"), "path": None} for name in names]


def split_rows(
    store: ItemStore, split: str, reference_ids: dict[str, list[str]], embed: bool
) -> Iterator[dict[str, Any]]:
    embedded: set[str] = set()  # concepts whose thumbnails this split already holds (one copy each)
    for record in store.records(split):
        meta = record.metadata
        concept = meta["concept"]
        thumbnails: list[dict[str, Any]] = []
        if embed and concept not in embedded:
            thumbnails = _references(store, concept)
            embedded.add(concept)
        yield {
            "image": {"bytes": record.read_file("png"), "path": None},
            "item_id": record.item_id,
            "concept": meta["concept"],
            "concept_kind": meta["concept_kind"],
            "learner": meta["learner"],
            "prompt": meta["prompt"],
            "caption": meta.get("caption", ""),
            "category": meta.get("category", ""),
            "categories": meta.get("categories", []),
            "questions": meta.get("questions", []),
            "reference_ids": list(reference_ids.get(concept, [])),
            "reference_images": thumbnails,
            "seed": int(meta["seed"]),
            "concept_label": meta["concept"],  # ClassLabel encodes the name
        }


def _grid_png(store: ItemStore) -> bytes | None:
    """Up to 8 concept images (first of each concept, then more) and 4 composition images."""
    concept_records = list(itertools.islice(store.records("concept"), 64))
    firsts = {}
    for record in concept_records:
        firsts.setdefault(record.metadata["concept"], record)
    chosen = list(firsts.values())[:8]
    chosen += [r for r in concept_records if all(r is not c for c in chosen)][: 8 - len(chosen)]
    chosen += list(itertools.islice(store.records("composition"), 4))
    samples = []
    for record in chosen:
        with Image.open(io.BytesIO(record.read_file("png"))) as image:
            # the concept named first: a learner's placeholder ("<object>") is the same for every concept
            samples.append((image.convert("RGB"), f"{record.metadata['concept']}: {record.metadata['prompt']}"))
    return grid_png(samples, thumb_width=192, caption_lines=3)


def assemble_from_store(store: ItemStore, out_dir: Path, args: dict[str, Any]) -> None:
    """The engine's assembler: the two splits, card and grid from a complete store."""
    metadata = DatasetMetadata(**args["metadata"])
    metadata.reproducible = "rebuild" in args
    metadata.validity = conceptbed_validity({split: (r.metadata for r in store.records(split)) for split in SPLITS})
    grid = _grid_png(store)
    features = features_for(args.get("label_names"))
    benchmark = args.get("benchmark")  # a user's spec (None: the paper's concepts, the card as it always was)

    def card_text(stats: list[Any]) -> str:
        card = render_card(metadata, features, stats, has_grid=grid is not None)
        return with_section(card, benchmark_section(benchmark, stats)) if benchmark else card

    stats = assemble_dataset_dir(
        out_dir,
        splits={
            split: (
                lambda s=split: split_rows(store, s, args.get("reference_ids", {}), bool(args.get("embed_references")))
            )
            for split in SPLITS
        },
        features=features,
        render_card=card_text,
        grid_png=grid,
        max_shard_size=args["max_shard_size"],
    )
    if benchmark:
        write_benchmark_spec(out_dir, benchmark)
    if "rebuild" in args:  # what `conceptforge verify` samples the rows again from (cards.run_record)
        rebuild = {key: value for key, value in args["rebuild"].items() if key != "work_dir"}
        artifacts = Path(args["rebuild"]["work_dir"]) / "artifacts"
        rebuild["learners"] = {
            c["name"]: local_fingerprint(artifacts / c["name"]) if (artifacts / c["name"]).is_dir() else None
            for c in rebuild["concepts"]
        }
        write_run_record(
            out_dir,
            run_record(
                "conceptbed",
                {
                    "default": config_entry(
                        store.stored_config(), rebuild=rebuild, device="auto", rows=row_ids(out_dir, stats)
                    )
                },
                validity=metadata.validity,
            ),
        )


def write_benchmark_spec(out_dir: Path, benchmark: dict[str, Any]) -> None:
    """The spec travels with the release: what was validated, every default filled in."""
    import yaml

    text = "# The ConceptBed spec this dataset was made from (validated; defaults filled in).\n" + yaml.safe_dump(
        benchmark, sort_keys=False, allow_unicode=True, width=100
    )
    atomic_write_bytes(Path(out_dir) / SPEC_FILE_NAME, text.encode("utf-8"))


#: Stored in every ConceptBed run (the name is the one first stored: old runs stay valid).
ASSEMBLER = register_assembler("conceptforge.generators.conceptbed.generate:assemble_from_store", assemble_from_store)
