"""Generate the binding datasets as ONE Hub repo with a config per dataset: a run-engine stage per config.

Layout of ``--out`` (a local folder or an fsspec URL such as ``s3://bucket/binding``)::

    README.md, grid.png                      one card for every assembled config
    data/<config>/<split>-NNNNN-of-NNNNN.parquet
    scenes/<config>/<split>.json             CLEVR scene files (never a config's data file)
    .work/<config>/                          the config's item store (chunks, resume, shards)
    .work/                                   the repo's own record (card assembly)

Each config is one stage of the run engine (:mod:`conceptforge.runner`): the engine shards,
resumes, stores chunks and assembles the config exactly once (its create-if-absent lock in
``.work/<config>/``); the assembler writes only ``data/<config>/`` and ``scenes/<config>/``.
The shared card is then a second one-assembly step with its own lock in ``.work/``: it is a pure
function of the configs assembled so far, recomputed under that lock, so two configs that finish
together cannot leave a card that misses one of them. ``conceptforge assemble OUT`` runs both
steps for every finished config.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import io
import itertools
import json
import logging
import multiprocessing
import os
from dataclasses import asdict
from pathlib import Path

from PIL import Image

from conceptforge.assembly import AssemblyOutcome, assemble_once, read_done
from conceptforge.cards import DatasetMetadata, collect_provenance, render_card
from conceptforge.cards.dataset_dir import CARD_NAME, GRID_NAME, SplitStats, assemble_config_dir
from conceptforge.cards.grid import grid_png
from conceptforge.errors import ConceptforgeError
from conceptforge.generators.binding.clevr import clevr_scene, clevr_scene_file
from conceptforge.generators.binding.compositions import DATASETS, SPLITS
from conceptforge.generators.binding.dataset import COLUMN_DOCS, BindingConfig, binding_features, make_item_factory, plan_items
from conceptforge.processes import init_worker, stop_pool
from conceptforge.runner import ASSEMBLY_ARGS, WORK_DIR, RunReport, Stage, assemble_run, check_output, run_stage
from conceptforge.store import ItemResult, ItemStore, io_error, is_store, join
from conceptforge.serialization import canonical_json
from conceptforge.workitems import ShardSpec

logger = logging.getLogger(__name__)

#: Per config store: the config and its split statistics, written by its assembler (the card reads them).
CONFIG_RECORD = "config-stats.json"
#: The repo's ``.work/assembly.json`` names this: ``conceptforge assemble OUT`` finishes every config, then the card.
REPO_ASSEMBLER = "conceptforge.generators.binding.generate:assemble_repo"


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

_RENDERER = None
_RENDER_OPTIONS: dict = {}
CHUNK_SIZE = 4  # ~12 s of Cycles at 320x240 / 16 spp on 2 cores: little is lost to a kill


def _get_renderer():
    """One Blender renderer per process, created on first use (bpy is imported lazily)."""
    global _RENDERER
    if _RENDERER is None:
        from conceptforge.generators.binding.render_blender import BlenderRenderer

        _RENDERER = BlenderRenderer(**_RENDER_OPTIONS)
    return _RENDERER


def _init_worker(options: dict, parent_pid: int) -> None:
    # Dies with the parent, even by kill -9 (PR_SET_PDEATHSIG + parent check); Ctrl+C is the parent's.
    init_worker(parent_pid)
    _RENDER_OPTIONS.update(options)


def _worker_make(args: tuple[BindingConfig, object]) -> ItemResult:
    config, item = args
    return make_item_factory(config, _get_renderer)(item)


class _PoolBatches:
    """``process_batch`` over a pool of Blender processes (spawned once, reused for every chunk)."""

    def __init__(self, config: BindingConfig, num_workers: int, device: str) -> None:
        self.config, self.num_workers, self.device = config, num_workers, device
        self.pool: concurrent.futures.ProcessPoolExecutor | None = None

    def __call__(self, items):
        if self.pool is None:
            cpu_count = os.cpu_count() or 1
            options = {"device": self.device, "threads": max(1, cpu_count // self.num_workers)}
            self.pool = concurrent.futures.ProcessPoolExecutor(
                self.num_workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(options, os.getpid()),
            )
        return list(self.pool.map(_worker_make, [(self.config, item) for item in items]))

    def stop(self) -> None:
        if self.pool is not None:
            stop_pool(self.pool)
            self.pool = None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


def binding_stage(
    config: BindingConfig, *, make_item=None, process_batch=None, command_line: list[str] | None = None,
    chunk_size: int = CHUNK_SIZE, device: str = "cpu",
) -> Stage:
    """One binding config as an engine stage; assembly is :func:`assemble_from_store`."""
    return Stage(
        name=f"binding/{config.dataset}",
        items=plan_items(config),
        settings=config.to_dict(),
        make_item=make_item,
        process_batch=process_batch,
        assembler="conceptforge.generators.binding.generate:assemble_from_store",
        assembly_args={"config": config.to_dict(), "command_line": command_line or canonical_command(config), "device": device},
        chunk_size=chunk_size,
        description=f"{config.dataset} scenes",
        unit="img",
    )


def _grid(stores: dict[str, ItemStore], per_config: int = 4) -> bytes | None:
    """One row of samples per config (train/val/gen mixed), labels under each image."""
    def samples():
        for dataset, store in stores.items():
            picked = []
            for split in SPLITS:
                picked += [(record, split) for record in itertools.islice(store.records(split), 2)]
            for record, split in picked[:per_config]:
                with Image.open(io.BytesIO(record.read_file("png"))) as image:
                    yield image.convert("RGB"), f"{dataset} {split}: {record.metadata['label']}"

    return grid_png(samples(), columns=per_config, thumb_width=240)


def _rows(store: ItemStore, split: str):
    for record in store.records(split):
        meta = record.metadata
        yield {
            "image": {"bytes": record.read_file("png"), "path": f"{record.item_id}.png"},
            "item_id": record.item_id,
            **{key: meta[key] for key in ("label", "candidates", "label_index", "candidate_kinds", "objects", "relation", "camera", "seed")},
        }


def _clevr_scenes(config: BindingConfig, store: ItemStore, split: str) -> bytes:
    scenes = (
        clevr_scene(record.metadata, split=split, image_index=index, image_filename=f"{record.item_id}.png",
                    width=config.width, height=config.height)
        for index, record in enumerate(store.records(split))
    )
    return clevr_scene_file(scenes, split=split, version="1.0", license="Creative Commons Attribution (CC BY 4.0)")


def render_device(device: str, denoise: bool) -> str:
    """What rendered the images, for the card (the denoiser always runs on the CPU, outside Cycles)."""
    from conceptforge.generators.binding.render_blender import DENOISE_QUALITY  # no bpy import

    cycles = "Cycles GPU (bpy)" if device == "gpu" else "Cycles CPU (bpy)"
    return f"{cycles}, Open Image Denoise quality {DENOISE_QUALITY} on CPU (pyoidn)" if denoise else cycles


def provenance(configs: list[BindingConfig], command_line: list[str], devices: list[str] | None = None) -> dict:
    # Blender's version is the bpy package's (importing bpy here would break spawned workers).
    devices = sorted(set(devices or ["cpu"]))
    extra = {
        "paper": "Lewis et al., Does CLIP Bind Concepts? (EACL Findings 2024), Section 3",
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



def assemble_from_store(store: ItemStore, staging: Path, args: dict) -> None:
    """The engine's assembler for one config: ``data/<config>/`` and ``scenes/<config>/`` into
    ``staging`` (the engine publishes them into the repo); the config's split statistics go to
    its store for the repo card, which :func:`assemble_card` writes afterwards."""
    config = BindingConfig(**args["config"])
    splits = {split: (lambda split=split: _rows(store, split)) for split in SPLITS if config.split_sizes.get(split, 0)}
    scenes = {f"{split}.json": _clevr_scenes(config, store, split) for split in splits}
    stats = assemble_config_dir(staging, config=config.dataset, splits=splits, features=binding_features(config.dataset),
                                side_files=scenes)
    record = {"config": config.to_dict(), "device": args.get("device", "cpu"), "splits": [asdict(s) for s in stats]}
    try:
        store.location.write(CONFIG_RECORD, canonical_json(record))
    except OSError as error:
        raise io_error(error, "write to", str(store)) from None


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


def _card_files(out: str, staging: Path) -> None:
    """README.md and grid.png over every assembled config (called under the repo's assembly lock)."""
    assembled = _assembled(out)
    if not assembled:
        raise ConceptforgeError(f"{out}: no config is assembled yet; nothing to describe in a card")
    configs = [config for config, *_ in assembled]
    names = [config.dataset for config in configs]
    metadata = DatasetMetadata(
        pretty_name="Concept binding (CLEVR-style renders)",
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
        out_of_scope_use=OUT_OF_SCOPE,
        bias_risks_limitations=BIAS_RISKS,
        annotations=ANNOTATIONS,
        config_summaries={name: SUMMARIES[name] for name in names},
        grid_caption="One row per config: rendered samples with their true labels",
    )
    splits = [s for _, _, stats, *_ in assembled for s in stats]
    features = {config.dataset: binding_features(config.dataset) for config in configs}
    grid = _grid({config.dataset: store for config, *_, store in assembled})
    if grid is not None:
        (staging / GRID_NAME).write_bytes(grid)
    (staging / CARD_NAME).write_text(render_card(metadata, features, splits, has_grid=grid is not None), encoding="utf-8")


def assemble_card(out: str | os.PathLike[str], *, force: bool = False, wait: float = 600.0) -> AssemblyOutcome:
    """(Re)write the repo card over every assembled config, exactly once per set of configs.

    The engine's one-assembly step on the repo's own ``.work/``: its lock serializes card
    writers, and the card is recomputed under it from the configs published so far, so the last
    writer always describes every config (two configs finishing together cannot drop one).
    """
    out = str(out)
    repo = ItemStore(join(out, WORK_DIR))
    fingerprint = hashlib.sha256(canonical_json([[c.dataset, fp] for c, _, _, fp, _ in _assembled(out)])).hexdigest()
    return assemble_once(out, repo, lambda staging: _card_files(out, staging), fingerprint=fingerprint, force=force, wait=wait)


def assemble_repo(out: str | os.PathLike[str], *, force: bool = False, wait: float = 600.0) -> AssemblyOutcome:
    """``conceptforge assemble OUT`` on a binding repo: assemble every finished config, then the card."""
    out = str(out)
    lines, waiting = [], []
    for dataset in DATASETS:
        work = join(out, WORK_DIR, dataset)
        if not is_store(work):
            continue
        try:
            outcome = assemble_run(out, store=ItemStore(work), force=force, wait=wait)
        except ConceptforgeError as error:
            waiting.append(f"{dataset}: {error}")
            continue
        lines.append(f"{dataset}: {outcome.message}")
        if outcome.status == "busy":
            waiting.append(dataset)
    if not lines:
        raise ConceptforgeError(f"{out}: no binding config is finished yet; " + ("; ".join(waiting) or "run the stage first"))
    card = assemble_card(out, force=force, wait=wait)
    status = "busy" if waiting or card.status == "busy" else card.status
    message = "; ".join(lines + [f"card: {card.message}"] + [f"not assembled: {w}" for w in waiting])
    return AssemblyOutcome(status, message, card.files)


def _repo_command(configs: list[BindingConfig]) -> list[str]:
    command = canonical_command(configs[0])
    if len(configs) == len(DATASETS):
        command[command.index("--dataset") + 1] = "all"
    else:
        command[command.index("--dataset") + 1] = ",".join(c.dataset for c in configs)
    return command


def canonical_command(config: BindingConfig) -> list[str]:
    """The command that reproduces the data (shard/worker options do not change the bytes)."""
    command = [
        "conceptforge", "generate", "binding", "--dataset", config.dataset, "--preset", config.preset,
        "--seed", str(config.seed), "--resolution", f"{config.width}x{config.height}", "--samples", str(config.samples),
    ]
    if not config.denoise:
        command.append("--no-denoise")
    if config.min_pixels is not None:
        command += ["--min-pixels", str(config.min_pixels)]
    return command


def generate_binding(
    config: BindingConfig,
    out_dir: str | Path,
    *,
    shard: ShardSpec = ShardSpec(),
    num_workers: int = 1,
    device: str = "cpu",
    max_items: int | None = None,
    command_line: list[str] | None = None,
    chunk_size: int = CHUNK_SIZE,
) -> RunReport:
    """Render this shard's missing chunks of one config (resuming); once every chunk exists the
    engine assembles the config into the repo at ``out_dir`` and the card is rewritten over
    every assembled config. ``out_dir`` is a local folder or an fsspec URL (``s3://bucket/binding``).
    """
    out = str(out_dir)
    check_output(out)  # refuse a foreign folder before anything is written
    repo = ItemStore(join(out, WORK_DIR))
    try:
        repo.location.write(ASSEMBLY_ARGS, canonical_json({"repo_assembler": REPO_ASSEMBLER}))
    except OSError as error:
        raise io_error(error, "write to", str(repo)) from None
    store = _config_store(out, config.dataset)
    batches = None
    if num_workers <= 1:
        _RENDER_OPTIONS.update({"device": device})
        stage = binding_stage(config, make_item=make_item_factory(config, _get_renderer), command_line=command_line,
                              chunk_size=chunk_size, device=device)
    else:
        batches = _PoolBatches(config, num_workers, device)
        stage = binding_stage(config, process_batch=batches, command_line=command_line, chunk_size=chunk_size, device=device)
    try:
        report = run_stage(stage, out, shard=shard, max_items=max_items, store=store)
    except BaseException:
        if batches is not None:
            batches.stop()  # interrupted or failed: kill the workers now, do not wait for their items
        raise
    finally:
        if batches is not None:
            batches.close()
    if report.assembled:
        card = assemble_card(out)
        if card.status == "busy":
            report.assembly = card
    return report
