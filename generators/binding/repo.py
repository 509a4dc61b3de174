"""The binding repo: ONE Hub repo with a config per dataset, and the card over all of them.

Each config is its own run of the engine in ``.work/<config>/`` (see
:mod:`conceptforge.generators.binding.stage`); this module is everything that belongs to the
repo as a whole, in one place: its record in ``.work/`` (which :class:`RepoAssembler` finishes
it), the per-config statistics the card reads (:data:`CONFIG_RECORD`), the shared card and grid
(a second one-assembly step with its own lock in ``.work/``: a pure function of the configs
assembled so far, recomputed under that lock, so two configs that finish together cannot leave a
card that misses one of them), and :func:`assemble_repo`, which ``conceptforge assemble OUT``
runs: every finished config, then the card.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import logging
import os
from pathlib import Path

from PIL import Image

from conceptforge.cards import DatasetMetadata, collect_provenance, render_card
from conceptforge.cards.dataset_dir import CARD_NAME, GRID_NAME, SplitStats
from conceptforge.cards.grid import grid_png
from conceptforge.cards.run_record import config_entry, row_ids, run_record, write_run_record
from conceptforge.engine.assembly import AssemblyOutcome, assemble_once, read_done, register_assembler
from conceptforge.engine.runner import assemble_run
from conceptforge.engine.store import ItemStore, is_store, join
from conceptforge.errors import ConceptforgeError
from conceptforge.generators.binding.compositions import DATASETS, SPLITS
from conceptforge.generators.binding.dataset import COLUMN_DOCS, BindingConfig, binding_command, binding_features
from conceptforge.generators.binding.validity import BINDING_PAPER, binding_validity, config_validity
from conceptforge.output import WORK_DIR
from conceptforge.serialization import canonical_json

logger = logging.getLogger(__name__)

#: Per config store: the config and its split statistics, written by its assembler (the card reads them).
CONFIG_RECORD = "config-stats.json"


CITATION = """@inproceedings{lewis2024clipbind,
  title     = {Does {CLIP} Bind Concepts? Probing Compositionality in Large Image Models},
  author    = {Lewis, Martha and Nayak, Nihal V. and Yu, Peilin and Yu, Qinan and Merullo, Jack and Bach, Stephen H. and Pavlick, Ellie},
  booktitle = {Findings of the Association for Computational Linguistics: EACL 2024},
  year      = {2024}
}"""

SUMMARIES = {
    "single-object": "Images of exactly one CLEVR-style object; the label is its colour and shape. "
    "Validation holds out brown cube and green cylinder; generalization holds out eight more adjective–noun pairs.",
    "two-object": "Images of two objects of different shapes and colours; the label names one of them. "
    "Two of the four distractors swap the objects' attributes (hard negatives).",
    "relational": "Images of two objects; the label is `subject relation object` with relations left, right, "
    "front, behind. Distractors: bRa, aSb, aRc, cRb. Validation holds out cube-in-front-of-sphere, "
    "generalization cylinder-in-front-of-cube.",
}


def _grid(stores: dict[str, ItemStore], per_config: int = 4) -> bytes | None:
    """One row of samples per config (train/val/gen mixed), labels under each image."""

    def samples():
        for dataset, store in stores.items():
            picked = []
            for split in SPLITS:
                picked += [(record, split) for record in itertools.islice(store.records(split), 2)]
            for record, split in picked[:per_config]:
                with Image.open(io.BytesIO(record.read_file("png"))) as image:
                    yield image.convert("RGB"), _caption(dataset, split, record.metadata)

    return grid_png(samples(), columns=per_config, thumb_width=240)


def _caption(dataset: str, split: str, meta: dict) -> str:
    """A grid panel's caption. A two-object picture shows two compositions and its label names one
    of them: both are said, the label first (the panel beside it would otherwise look mislabelled)."""
    caption = f"{dataset} {split}: {meta['label']}"
    if dataset == "two-object":
        shown = [f"{o['color']} {o['shape']}" for o in meta.get("objects", [])]
        others = [name for name in shown if name != meta["label"]]
        if others:
            caption += " + " + " + ".join(others)
    return caption


def render_device(device: str, denoise: bool) -> str:
    """What rendered the images, for the card (the denoiser always runs on the CPU, outside Cycles)."""
    from conceptforge.generators.binding.pixels import DENOISE_QUALITY  # no bpy import

    cycles = "Cycles GPU (bpy)" if device == "gpu" else "Cycles CPU (bpy)"
    return f"{cycles}, Open Image Denoise quality {DENOISE_QUALITY} on CPU (pyoidn)" if denoise else cycles


def provenance(configs: list[BindingConfig], command_line: list[str], devices: list[str] | None = None) -> dict:
    # Blender's version is the bpy package's (importing bpy here would break spawned workers).
    devices = sorted(set(devices or ["cpu"]))
    extra = {
        "paper": f"{BINDING_PAPER.replace('*', '')}, Section 3",
        "render_device": "; ".join(render_device(device, configs[0].denoise) for device in devices),
    }
    return collect_provenance(
        generator="conceptforge generators.binding (Blender Cycles, CLEVR-style scenes)",
        parameters={config.dataset: config.to_dict() for config in configs},
        seeds=configs[0].seed,
        argv=command_line,
        packages=("conceptforge", "bpy", "pyoidn", "OpenEXR", "datasets", "pyarrow", "numpy", "pillow"),
        extra=extra,
    )


USES = (
    "Probing whether image–text models bind attributes to objects and objects to relations: score the five "
    "candidate captions of each image (CLIP zero-shot, or the CDSMs of the paper trained on `train`), select "
    "on `val`, and report accuracy on `gen`, whose compositions never appear in `train` pictures. The CLEVR "
    "scene files under `scenes/` let CLEVR's own tools (question generation, scene-graph readers) run on the "
    "same images."
)
OUT_OF_SCOPE = (
    "Not a measure of real-photo understanding: the scenes are synthetic CLEVR-style renders with three shapes, "
    "eight colours and two materials. Not for training models meant for deployment, and accuracy here does "
    "not transfer to natural images or other vocabularies."
)
BIAS_RISKS = (
    "The vocabulary is tiny and closed, so high accuracy can come from shortcuts (colour or shape priors, "
    "candidate wording) rather than binding; the hard distractors (attribute swaps, bRa/aSb/aRc/cRb) are there "
    "to expose that. Relations follow CLEVR's camera-relative rule (a margin of 0.2 along the flattened camera "
    "axes), which may differ from a human's reading for near-ties. Images are rendered with 16 samples and "
    "denoised by Open Image Denoise: ~48 dB PSNR against 512-sample renders, but denoising smooths fine "
    "texture. No people or personal data are depicted."
)
ANNOTATIONS = (
    "No human annotation: every label is computed from the scene description that produced the image. The "
    "target composition comes from the item index, placement follows CLEVR's rules, relations are CLEVR's "
    "dot-product test, and the renderer's object-index pass checks that every object shows at least "
    "`min_pixels` pixels (else the layout is re-sampled from the item's seed). Tests check the labels against "
    "the rendered pixels (projected centres agree with left/right/front/behind) and that held-out "
    "compositions never appear in other splits' pictures."
)

PERSONAL_DATA = (
    "None. The images are synthetic renders of geometric objects (cubes, spheres, cylinders); no person, "
    "face, voice, location or other personal or sensitive information is depicted or recorded."
)


OWN_SUMMARIES = {
    "single-object": "Images of exactly one object; the label is its colour and shape. Val and gen hold out "
    "colour–shape compositions (see Benchmark spec).",
    "two-object": "Images of two objects of different shapes and colours; the label names one of them. "
    "Two of the four distractors swap the objects' attributes (hard negatives).",
    "relational": "Images of two objects; the label is `subject relation object`. Distractors: bRa, aSb, aRc, "
    "cRb. Val and gen each hold out one image type (see Benchmark spec).",
}
OWN_OUT_OF_SCOPE = (
    "Not a measure of real-photo understanding: the scenes are synthetic CLEVR-style renders of the small, "
    "closed vocabulary in the Benchmark spec section. Not for training models meant for deployment."
)
OWN_PERSONAL_DATA = (
    "None. The images are synthetic renders of the objects named in the Benchmark spec section; no person "
    "or personal information is depicted or recorded."
)


def _config_store(out: str, dataset: str) -> ItemStore:
    return ItemStore(join(out, WORK_DIR, dataset))


def _assembled(out: str) -> list[tuple[BindingConfig, str, list[SplitStats], str, ItemStore]]:
    """Configs whose assembly was published (the engine's ``assembled.json``), in DATASETS order."""
    found = []
    for dataset in DATASETS:
        work = join(out, WORK_DIR, dataset)
        if not is_store(work):
            continue
        store = ItemStore(work)
        done = read_done(store.location)
        if not done:
            continue
        try:
            record = json.loads(store.location.read(CONFIG_RECORD))
        except (FileNotFoundError, ValueError):
            continue
        config = BindingConfig(**{k: v for k, v in record["config"].items() if k in BindingConfig.__dataclass_fields__})
        # which assembly of the config this is: a re-assembly (``--force``) rewrites the card too
        stamp = f"{done.get('fingerprint', '')}@{done.get('time', '')}"
        found.append((config, record.get("device", "cpu"), [SplitStats(**s) for s in record["splits"]], stamp, store))
    return found


def _config_validity(config: BindingConfig, store: ItemStore) -> dict:
    """The config's validity part from its record (computed now for configs assembled before
    records carried one)."""
    try:
        record = json.loads(store.location.read(CONFIG_RECORD))
    except (FileNotFoundError, ValueError):
        record = {}
    if "validity" in record:
        return record["validity"]
    return config_validity(config.dataset, lambda split: (r.metadata for r in store.records(split)), SPLITS)


def _card_files(out: str, staging: Path) -> None:
    """README.md and grid.png over every assembled config (called under the repo's assembly lock)."""
    assembled = _assembled(out)
    if not assembled:
        raise ConceptforgeError(f"{out}: no config is assembled yet; nothing to describe in a card")
    configs = [config for config, *_ in assembled]
    names = [config.dataset for config in configs]
    own = configs[0].spec is not None  # a release made from a user's spec (not the paper's vocabulary)
    validity = binding_validity({config.dataset: _config_validity(config, store) for config, *_, store in assembled})
    metadata = DatasetMetadata(
        pretty_name=f"Concept binding: {configs[0].preset}" if own else "Concept binding (CLEVR-style renders)",
        license="cc-by-4.0",
        summary="Synthetic images for probing concept binding, one config per dataset of Section 3 of "
        "*Does CLIP Bind Concepts?* (Lewis et al.), rendered with Blender Cycles by conceptforge. Each image has "
        "5 candidate captions (1 true + 4 distractors) in a per-example shuffled order; the splits hold out "
        "compositions, not just images. Configs: " + ", ".join(f"`{n}`" for n in names) + ".",
        task_categories=["zero-shot-image-classification"],
        tags=["compositionality", "concept-binding", "clevr", "synthetic", "conceptforge"],
        citation=CITATION,
        column_docs=COLUMN_DOCS,
        provenance=provenance(configs, _repo_command(configs), [device for _, device, *_ in assembled]),
        paper_title="Does CLIP Bind Concepts? Probing Compositionality in Large Image Models",
        paper_url="https://arxiv.org/abs/2212.10537",
        license_note="Synthetic renders made by conceptforge; colours, shapes and materials follow CLEVR (CC BY 4.0). "
        "Each config also carries its scenes in CLEVR's scene-file format: `scenes/<config>/<split>.json`.",
        language=["en"],
        source_datasets=["original"],
        uses=USES,
        out_of_scope_use=OWN_OUT_OF_SCOPE if own else OUT_OF_SCOPE,
        bias_risks_limitations=BIAS_RISKS,
        annotations=ANNOTATIONS,
        config_summaries={name: (OWN_SUMMARIES if own else SUMMARIES)[name] for name in names},
        grid_caption="One row per config: rendered samples with their true labels",
        reproducible=True,
        validity=validity,
        personal_data=OWN_PERSONAL_DATA if own else PERSONAL_DATA,
    )
    splits = [s for _, _, stats, *_ in assembled for s in stats]
    features = {config.dataset: binding_features(config.dataset, config.own_vocabulary) for config in configs}
    grid = _grid({config.dataset: store for config, *_, store in assembled})
    if grid is not None:
        (staging / GRID_NAME).write_bytes(grid)
    write_run_record(
        staging,
        run_record(
            "binding",
            {
                config.dataset: config_entry(
                    store.stored_config(),
                    rebuild={"config": config.to_dict()},
                    device=device,
                    rows=row_ids(out, stats, config=config.dataset),
                )
                for config, device, stats, _, store in assembled
            },
            validity=validity,
        ),
    )
    card = render_card(metadata, features, splits, has_grid=grid is not None)
    if own:
        from conceptforge.generators.binding.release import SPEC_FILE_NAME, release_files, spec_card_section

        (staging / SPEC_FILE_NAME).write_text(configs[0].spec, encoding="utf-8")
        for name, source in release_files(configs[0].vocab).items():
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                target.write_bytes(source.read_bytes())
            except OSError as error:
                raise ConceptforgeError(f"{source}: cannot copy the spec's file into the release ({error})") from None
        card = card.rstrip("\n") + "\n\n" + spec_card_section(configs)
    (staging / CARD_NAME).write_text(card, encoding="utf-8")


def assemble_card(out: str | os.PathLike[str], *, force: bool = False, wait: float = 600.0) -> AssemblyOutcome:
    """(Re)write the repo card over every assembled config, exactly once per set of configs.

    The engine's one-assembly step on the repo's own ``.work/``: its lock serializes card
    writers, and the card is recomputed under it from the configs published so far, so the last
    writer always describes every config (two configs finishing together cannot drop one).
    """
    out = str(out)
    repo = ItemStore(join(out, WORK_DIR))
    fingerprint = hashlib.sha256(canonical_json([[c.dataset, fp] for c, _, _, fp, _ in _assembled(out)])).hexdigest()
    return assemble_once(
        out, repo, lambda staging: _card_files(out, staging), fingerprint=fingerprint, force=force, wait=wait
    )


def assemble_repo(
    out: str | os.PathLike[str], *, force: bool = False, wait: float = 600.0, allow_failed: bool = False
) -> AssemblyOutcome:
    """``conceptforge assemble OUT`` on a binding repo: assemble every finished config, then the card.

    ``allow_failed``: configs with items that failed every attempt are assembled without them
    (the repo card does not list them yet; ``conceptforge status OUT`` does).
    """
    out = str(out)
    lines, waiting = [], []
    for dataset in DATASETS:
        work = join(out, WORK_DIR, dataset)
        if not is_store(work):
            continue
        try:
            outcome = assemble_run(out, store=ItemStore(work), force=force, wait=wait, allow_failed=allow_failed)
        except ConceptforgeError as error:
            waiting.append(f"{dataset}: {error}")
            continue
        lines.append(f"{dataset}: {outcome.message}")
        if outcome.status == "busy":
            waiting.append(dataset)
    if not lines:
        raise ConceptforgeError(
            f"{out}: no binding config is finished yet; " + ("; ".join(waiting) or "run the stage first")
        )
    card = assemble_card(out, force=force, wait=wait)
    status = "busy" if waiting or card.status == "busy" else card.status
    message = "; ".join(lines + [f"card: {card.message}"] + [f"not assembled: {w}" for w in waiting])
    return AssemblyOutcome(status, message, card.files)


def _repo_command(configs: list[BindingConfig]) -> list[str]:
    command = binding_command(configs[0])
    if len(configs) == len(DATASETS):
        command[command.index("--dataset") + 1] = "all"
    else:
        command[command.index("--dataset") + 1] = ",".join(c.dataset for c in configs)
    return command


#: The repo's ``.work/assembly.json`` names this (the name first stored: old repos stay valid):
#: ``conceptforge assemble OUT`` finishes every config, then the card.
REPO_ASSEMBLER = register_assembler("conceptforge.generators.binding.generate:assemble_repo", assemble_repo, repo=True)
