"""Generate one binding dataset directory: the binding stage of the run engine.

The stage supplies the items (one scene each), how to render them (in this process, or over a
pool of Blender processes that die with their parent) and how to assemble the dataset; the
engine (:mod:`conceptforge.runner`) shards, resumes, stores chunks and assembles exactly once.
"""

from __future__ import annotations

import concurrent.futures
import io
import itertools
import logging
import multiprocessing
import os
from pathlib import Path

from PIL import Image

from conceptforge.cards import DatasetMetadata, assemble_dataset_dir, collect_provenance, render_card
from conceptforge.cards.grid import grid_png
from conceptforge.generators.binding.compositions import SPLITS
from conceptforge.generators.binding.dataset import COLUMN_DOCS, FEATURES, BindingConfig, make_item_factory, plan_items
from conceptforge.runner import RunReport, Stage, run_stage
from conceptforge.store import ItemResult, ItemStore
from conceptforge.workitems import ShardSpec

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
CHUNK_SIZE = 4  # ~12 s of Cycles at 320x240 / 16 spp on 2 cores: little is lost to a kill


def _get_renderer():
    """One Blender renderer per process, created on first use (bpy is imported lazily)."""
    global _RENDERER
    if _RENDERER is None:
        from conceptforge.generators.binding.render_blender import BlenderRenderer

        _RENDERER = BlenderRenderer(**_RENDER_OPTIONS)
    return _RENDERER


def _die_with_parent(parent_pid: int) -> None:
    """Make this worker exit when the parent dies, even by ``kill -9`` (no orphaned Blenders).

    Linux delivers SIGKILL on the parent's death (``PR_SET_PDEATHSIG``); elsewhere, and as a
    back-up, a thread notices that the parent process is gone.
    """
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)

    def watch() -> None:
        import time

        while True:
            time.sleep(1.0)
            if os.getppid() != parent_pid:
                os._exit(1)

    import threading

    threading.Thread(target=watch, daemon=True).start()


def _init_worker(options: dict, parent_pid: int) -> None:
    _die_with_parent(parent_pid)
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

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


def binding_stage(
    config: BindingConfig, *, make_item=None, process_batch=None, command_line: list[str] | None = None, chunk_size: int = CHUNK_SIZE
) -> Stage:
    """The binding dataset as an engine stage; assembly is :func:`assemble_from_store`."""
    return Stage(
        name=f"binding/{config.dataset}",
        items=plan_items(config),
        settings=config.to_dict(),
        make_item=make_item,
        process_batch=process_batch,
        assembler="conceptforge.generators.binding.generate:assemble_from_store",
        assembly_args={"config": config.to_dict(), "command_line": command_line or canonical_command(config)},
        chunk_size=chunk_size,
        description=f"{config.dataset} scenes",
        unit="img",
    )


def _grid(store: ItemStore, splits, per_split: int = 4) -> bytes | None:
    def samples():
        for split in splits:
            for record in itertools.islice(store.records(split), per_split):
                with Image.open(io.BytesIO(record.read_file("png"))) as image:
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


def assemble_from_store(store: ItemStore, out_dir: Path, args: dict) -> None:
    """Write the dataset directory into ``out_dir`` from a complete store (the engine publishes it)."""
    config = BindingConfig(**args["config"])
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
        provenance=provenance(config, args["command_line"]),
        paper_title="Does CLIP Bind Concepts? Probing Compositionality in Large Image Models",
        paper_url="https://arxiv.org/abs/2212.10537",
        license_note="Synthetic renders made by conceptforge; colours, shapes and materials follow CLEVR (CC BY 4.0).",
    )
    splits = [split for split in SPLITS if config.split_sizes.get(split, 0)]
    assemble_dataset_dir(
        out_dir,
        splits={split: (lambda split=split: _rows(store, split)) for split in splits},
        features=FEATURES,
        render_card=lambda stats: render_card(metadata, FEATURES, stats),
        grid_png=_grid(store, splits),
    )


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
    chunk_size: int = CHUNK_SIZE,
) -> RunReport:
    """Render this shard's missing chunks (resuming) and assemble once every chunk exists.

    ``out_dir`` is a local folder or an fsspec URL such as ``s3://bucket/binding/relational``.
    """
    if num_workers <= 1:
        _RENDER_OPTIONS.update({"device": device})
        stage = binding_stage(config, make_item=make_item_factory(config, _get_renderer), command_line=command_line, chunk_size=chunk_size)
        return run_stage(stage, str(out_dir), shard=shard, max_items=max_items)
    batches = _PoolBatches(config, num_workers, device)
    try:
        stage = binding_stage(config, process_batch=batches, command_line=command_line, chunk_size=chunk_size)
        return run_stage(stage, str(out_dir), shard=shard, max_items=max_items)
    finally:
        batches.close()
