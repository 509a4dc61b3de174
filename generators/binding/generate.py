"""Generate one binding dataset directory: render this shard's items, then assemble.

Assembly runs in whichever process finds every item complete (under a file lock), so sharded
runs need no coordinator: the last shard to finish writes the dataset, and rerunning any shard
after a kill resumes and assembles.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import logging
import multiprocessing
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from PIL import Image

from conceptforge.cards import DatasetMetadata, assemble_dataset_dir, collect_provenance, render_card
from conceptforge.cards.grid import grid_png
from conceptforge.generators.binding.compositions import SPLITS
from conceptforge.generators.binding.dataset import COLUMN_DOCS, FEATURES, BindingConfig, make_item_factory, plan_items
from conceptforge.runner import run_work_items
from conceptforge.store import ItemStore
from conceptforge.workitems import ShardSpec, select_shard
from tqdm.auto import tqdm

logger = logging.getLogger(__name__)

WORK_DIR = ".work"

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


def _get_renderer():
    """One Blender renderer per process, created on first use (bpy is imported lazily)."""
    global _RENDERER
    if _RENDERER is None:
        from conceptforge.generators.binding.render_blender import BlenderRenderer

        _RENDERER = BlenderRenderer(**_RENDER_OPTIONS)
    return _RENDERER


def _init_worker(options: dict) -> None:
    _RENDER_OPTIONS.update(options)


def _worker_make(args: tuple[BindingConfig, str, object]) -> str:
    config, store_root, item = args
    store = ItemStore(store_root)
    store.write(item, make_item_factory(config, _get_renderer)(item))
    return item.item_id


@contextmanager
def _assembly_lock(path: Path) -> Iterator[bool]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def render_items(
    config: BindingConfig,
    store: ItemStore,
    *,
    shard: ShardSpec,
    num_workers: int = 1,
    device: str = "cpu",
    max_items: int | None = None,
) -> dict[str, int]:
    items = plan_items(config)
    cpu_count = os.cpu_count() or 1
    if num_workers <= 1:
        _RENDER_OPTIONS.update({"device": device})
        return run_work_items(
            items,
            make_item_factory(config, _get_renderer),
            store,
            shard=shard,
            description=f"{config.dataset} scenes",
            unit="img",
            max_items=max_items,
        )
    mine = select_shard(items, shard)
    todo = [item for item in mine if not store.is_complete(item)][:max_items]
    options = {"device": device, "threads": max(1, cpu_count // num_workers)}
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(num_workers, mp_context=context, initializer=_init_worker, initargs=(options,)) as pool:
        jobs = [(config, str(store.root), item) for item in todo]
        for _ in tqdm(pool.map(_worker_make, jobs), total=len(jobs), desc=f"{config.dataset} scenes", unit="img"):
            pass
    return {"total": len(mine), "skipped": len(mine) - len(todo), "made": len(todo)}


def _grid(store: ItemStore, per_split: int = 4) -> bytes | None:
    def samples():
        for split in SPLITS:
            for record in list(store.records(split))[:per_split]:
                with Image.open(record.file_path("png")) as image:
                    yield image.convert("RGB"), f"{split}: {record.metadata['label']}"

    return grid_png(samples(), thumb_width=240)


def _rows(store: ItemStore, split: str):
    for record in store.records(split):
        meta = record.metadata
        yield {
            "image": {"bytes": record.read_file("png"), "path": f"{record.item_id}.png"},
            "item_id": record.item_id,
            **{key: meta[key] for key in ("label", "candidates", "label_index", "candidate_kinds", "objects", "relation", "camera", "seed")},
        }


def provenance(config: BindingConfig, command_line: list[str]) -> dict:
    # Blender's version is the bpy package's (importing bpy here would break spawned workers).
    extra = {"paper": "Lewis et al., Does CLIP Bind Concepts? (EACL Findings 2024), Section 3"}
    return collect_provenance(
        generator="conceptforge generators.binding (Blender Cycles, CLEVR-style scenes)",
        parameters=config.to_dict(),
        seeds=config.seed,
        argv=command_line,
        packages=("conceptforge", "bpy", "datasets", "pyarrow", "numpy", "pillow"),
        extra=extra,
    )


def assemble(config: BindingConfig, store: ItemStore, out_dir: Path, command_line: list[str]) -> Path | None:
    """Write the dataset directory if every item is complete; return it (None if not yet)."""
    items = plan_items(config)
    missing = [item for item in items if not store.is_complete(item)]
    if missing:
        logger.info("%s: %d of %d items still missing; assembly waits for them", config.dataset, len(missing), len(items))
        return None
    with _assembly_lock(store.root / "assemble.lock") as acquired:
        if not acquired:
            logger.info("%s: another process is assembling", config.dataset)
            return None
        metadata = DatasetMetadata(
            pretty_name=f"Concept binding: {config.dataset}",
            license="cc-by-4.0",
            summary=SUMMARIES[config.dataset]
            + "\n\nRendered with conceptforge following Section 3 of *Does CLIP Bind Concepts?* (Lewis et al.). "
            "Each image has 5 candidate labels (1 true + 4 distractors) in a per-example shuffled order.",
            task_categories=["zero-shot-image-classification"],
            tags=["compositionality", "concept-binding", "clevr", "synthetic", "conceptforge"],
            citation=CITATION,
            column_docs=COLUMN_DOCS,
            provenance=provenance(config, command_line),
            paper_title="Does CLIP Bind Concepts? Probing Compositionality in Large Image Models",
            paper_url="https://arxiv.org/abs/2212.10537",
            license_note="Synthetic renders made by conceptforge; colours, shapes and materials follow CLEVR (CC BY 4.0).",
        )
        splits = {split: (lambda split=split: _rows(store, split)) for split in SPLITS if config.split_sizes.get(split, 0)}
        assemble_dataset_dir(
            out_dir,
            splits=splits,
            features=FEATURES,
            render_card=lambda stats: render_card(metadata, FEATURES, stats),
            grid_png=_grid(store),
        )
    return out_dir


def canonical_command(config: BindingConfig) -> list[str]:
    """The command that reproduces the data (shard/worker options do not change the bytes)."""
    command = [
        "python", "scripts/generate_binding.py", "--dataset", config.dataset, "--preset", config.preset,
        "--seed", str(config.seed), "--resolution", f"{config.width}x{config.height}", "--samples", str(config.samples),
    ]
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
) -> Path | None:
    """Render (resuming) and assemble one dataset; returns the directory once complete."""
    out_dir = Path(out_dir)
    store = ItemStore(out_dir / WORK_DIR)
    store.bind_config(config.to_dict())
    render_items(config, store, shard=shard, num_workers=num_workers, device=device, max_items=max_items)
    return assemble(config, store, out_dir, command_line or canonical_command(config))
