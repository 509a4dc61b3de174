"""Generate the binding datasets as ONE Hub repo with a config per dataset: a run-engine stage per config.

Layout of ``--out`` (a local folder or an fsspec URL such as ``s3://bucket/binding``)::

    README.md, grid.png                      one card for every assembled config
    data/<config>/<split>-NNNNN-of-NNNNN.parquet
    scenes/<config>/<split>.json             CLEVR scene files (never a config's data file)
    .work/<config>/                          the config's item store (chunks, resume, shards)
    .work/                                   the repo's own record (card assembly)

Each config is one stage of the run engine (:mod:`conceptforge.engine.runner`), built by
:func:`build_stage` like every generator's: the engine shards, resumes, stores chunks and
assembles the config exactly once (its create-if-absent lock in ``.work/<config>/``); the
assembler writes only ``data/<config>/`` and ``scenes/<config>/``. The repo as a whole (its
card over every assembled config, and ``conceptforge assemble OUT``) is
:mod:`conceptforge.generators.binding.repo`.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import multiprocessing
import os
from dataclasses import asdict
from pathlib import Path

from conceptforge.cards.dataset_dir import assemble_config_dir
from conceptforge.engine.assembly import mark_repo, register_assembler
from conceptforge.engine.processes import init_worker, stop_pool
from conceptforge.engine.runner import RunDir, RunReport, Stage, check_output, run_stage
from conceptforge.engine.store import ItemResult, ItemStore, io_error
from conceptforge.engine.workitems import ShardSpec
from conceptforge.generators.binding.clevr import clevr_scene, clevr_scene_file
from conceptforge.generators.binding.compositions import SPLITS
from conceptforge.generators.binding.dataset import (
    BindingConfig,
    binding_command,
    binding_features,
    make_batch_factory,
    make_item_factory,
    plan_items,
)
from conceptforge.generators.binding.repo import CONFIG_RECORD, REPO_ASSEMBLER, assemble_card
from conceptforge.generators.binding.validity import config_validity
from conceptforge.serialization import canonical_json

logger = logging.getLogger(__name__)

CHUNK_SIZE = 4  # ~12 s of Cycles at 320x240 / 16 spp on 2 cores: little is lost to a kill


@functools.cache
def _renderer(device: str = "cpu", threads: int | None = None):
    """One Blender renderer per process and options, created on first use (bpy is imported
    lazily); the options travel with each call, never through module state."""
    from conceptforge.generators.binding.render_blender import BlenderRenderer

    return BlenderRenderer(**({"device": device} if threads is None else {"device": device, "threads": threads}))


def _init_worker(parent_pid: int) -> None:
    # Dies with the parent, even by kill -9 (PR_SET_PDEATHSIG + parent check); Ctrl+C is the parent's.
    init_worker(parent_pid)


def _worker_make(args: tuple[BindingConfig, object, dict]) -> ItemResult:
    config, item, options = args
    return make_item_factory(config, functools.partial(_renderer, **options))(item)


class _PoolBatches:
    """``process_batch`` over a pool of Blender processes (spawned once, reused for every chunk).

    ``restart_every``: the pool's processes are replaced by fresh ones once they have rendered
    that many images each (``restart_every`` x ``num_workers`` images per pool; Blender leaks
    memory over thousands of renders). Not ``ProcessPoolExecutor(max_tasks_per_child=)``: on
    Python 3.11 to 3.14 a pool with a backlog never replaces a worker that exits at that limit
    and hangs for ever for any limit above 1 (CPython gh-115634). A pool broken by a dead worker
    is dropped, so the engine's retry of the batch's items starts a fresh one.
    """

    def __init__(self, config: BindingConfig, num_workers: int, device: str, restart_every: int | None = None) -> None:
        self.config, self.num_workers, self.device = config, num_workers, device
        #: images one pool renders before its processes are replaced (None: never)
        self.share = None if restart_every is None else restart_every * num_workers
        self.rendered = 0  # by the current pool
        self.pool: concurrent.futures.ProcessPoolExecutor | None = None
        cpu_count = os.cpu_count() or 1
        self.options = {"device": self.device, "threads": max(1, cpu_count // self.num_workers)}

    def __call__(self, items):
        items = list(items)
        results = []
        while len(results) < len(items):
            if self.pool is not None and self.share is not None and self.rendered >= self.share:
                self.close()  # this pool's processes rendered their share: fresh ones for the rest
            if self.pool is None:
                self.pool = concurrent.futures.ProcessPoolExecutor(
                    self.num_workers,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_init_worker,
                    initargs=(os.getpid(),),
                )
                self.rendered = 0
            start = len(results)
            end = len(items) if self.share is None else min(len(items), start + self.share - self.rendered)
            try:
                results += self.pool.map(_worker_make, [(self.config, item, self.options) for item in items[start:end]])
            except concurrent.futures.BrokenExecutor:
                self.stop()  # a worker died (killed, out of memory): the next call starts a fresh pool
                raise
            self.rendered += end - start
        return results

    def stop(self) -> None:
        if self.pool is not None:
            stop_pool(self.pool)
            self.pool = None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


def build_stage(
    config: BindingConfig,
    *,
    device: str = "cpu",
    num_workers: int = 1,
    chunk_size: int = CHUNK_SIZE,
    command_line: list[str] | None = None,
    restart_workers_every: int | None = None,
) -> Stage:
    """One binding config as an engine stage; assembly is :data:`ASSEMBLER`.

    ``config`` is all that fixes the bytes (it is the run's stored ``settings``:
    ``BindingConfig(**settings)`` rebuilds it); ``device`` and ``num_workers`` only say where it
    renders. One worker renders in this process, a chunk as one batch: each image is finished
    (OIDN, PNG) on a thread while the next one renders (:func:`make_batch_factory`). More render
    in a pool of spawned Blender processes (a ``_PoolBatches`` whose ``stop``/``close`` end the
    pool; the other workers' renders fill the cores), as does any ``restart_workers_every``
    (workers replaced after that many items).
    """
    if num_workers <= 1 and restart_workers_every is None:
        # A chunk at a time: image i is denoised and encoded while image i+1 renders.
        work = {"process_batch": make_batch_factory(config, functools.partial(_renderer, device=device))}
    else:
        work = {"process_batch": _PoolBatches(config, max(1, num_workers), device, restart_every=restart_workers_every)}
    return Stage(
        name=f"binding/{config.dataset}",
        items=plan_items(config),
        settings=config.to_dict(),
        **work,
        assembler=ASSEMBLER,
        assembly_args={
            "config": config.to_dict(),
            "command_line": command_line or binding_command(config),
            "device": device,
        },
        chunk_size=chunk_size,
        description=f"{config.dataset} scenes",
        unit="img",
    )


def split_rows(store: ItemStore, split: str):
    for record in store.records(split):
        meta = record.metadata
        yield {
            "image": {"bytes": record.read_file("png"), "path": f"{record.item_id}.png"},
            "item_id": record.item_id,
            **{
                key: meta[key]
                for key in (
                    "label",
                    "candidates",
                    "label_index",
                    "candidate_kinds",
                    "objects",
                    "relation",
                    "camera",
                    "seed",
                )
            },
        }


def _clevr_scenes(config: BindingConfig, store: ItemStore, split: str) -> bytes:
    scenes = (
        clevr_scene(
            record.metadata,
            split=split,
            image_index=index,
            image_filename=f"{record.item_id}.png",
            width=config.width,
            height=config.height,
        )
        for index, record in enumerate(store.records(split))
    )
    return clevr_scene_file(scenes, split=split, version="1.0", license="Creative Commons Attribution (CC BY 4.0)")


def assemble_from_store(store: ItemStore, staging: Path, args: dict) -> None:
    """The engine's assembler for one config: ``data/<config>/`` and ``scenes/<config>/`` into
    ``staging`` (the engine publishes them into the repo); the config's split statistics go to
    its store for the repo card, which :func:`assemble_card` writes afterwards."""
    config = BindingConfig(**args["config"])
    splits = {
        split: (lambda split=split: split_rows(store, split)) for split in SPLITS if config.split_sizes.get(split, 0)
    }
    scenes = {f"{split}.json": _clevr_scenes(config, store, split) for split in splits}
    stats = assemble_config_dir(
        staging,
        config=config.dataset,
        splits=splits,
        features=binding_features(config.dataset, config.own_vocabulary),
        side_files=scenes,
    )
    # the blind baselines and held-out checks of this config, for the repo card (cards.validity)
    validity = config_validity(
        config.dataset, lambda split: (r.metadata for r in store.records(split)), splits, config.own_vocabulary
    )
    record = {
        "config": config.to_dict(),
        "device": args.get("device", "cpu"),
        "splits": [asdict(s) for s in stats],
        "validity": validity,
    }
    try:
        store.location.write(CONFIG_RECORD, canonical_json(record))
    except OSError as error:
        raise io_error(error, "write to", str(store)) from None


#: Stored in every binding config's run (the name first stored: old runs stay valid).
ASSEMBLER = register_assembler("conceptforge.generators.binding.generate:assemble_from_store", assemble_from_store)


def generate_binding(
    config: BindingConfig,
    out_dir: str | Path | RunDir,
    *,
    shard: ShardSpec = ShardSpec(),
    num_workers: int = 1,
    device: str = "cpu",
    max_items: int | None = None,
    command_line: list[str] | None = None,
    chunk_size: int = CHUNK_SIZE,
    restart_workers_every: int | None = None,
) -> RunReport:
    """Render this shard's missing chunks of one config (resuming); once every chunk exists the
    engine assembles the config into the repo at ``out_dir`` and the card is rewritten over
    every assembled config. ``out_dir`` is a local folder or an fsspec URL (``s3://bucket/binding``).
    """
    run = check_output(
        out_dir, stage="binding"
    )  # refuse a foreign folder or another stage's run before anything is written
    out = str(run)
    run.record_stage("binding")
    mark_repo(run.store(), REPO_ASSEMBLER)
    config_run = run.child(config.dataset)
    stage = build_stage(
        config,
        device=device,
        num_workers=num_workers,
        chunk_size=chunk_size,
        command_line=command_line,
        restart_workers_every=restart_workers_every,
    )
    batches = stage.process_batch if isinstance(stage.process_batch, _PoolBatches) else None
    try:
        report = run_stage(stage, config_run, shard=shard, max_items=max_items)
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
