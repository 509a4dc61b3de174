"""SUB candidate generation: pairs x images -> work items -> item store -> dataset directory.

One work item = (bird, substitution, image index); its seed is derived from exactly that
identity and the run seed, so the TDG image and its prompt-only baseline of the same item start
from the same noise, and a rerun, a resume or any sharding gives the same pixels. The heavy part
(one FLUX generation per item) runs through the run engine (:mod:`conceptforge.engine.runner`) as the stage
:func:`build_stage` makes from a :class:`SubStageConfig`; assembly
(:mod:`conceptforge.generators.sub.card`) writes the "SUB candidates" schema (docs/schemas.md) with
a card and a sample grid.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from conceptforge.cards.grid import png_bytes
from conceptforge.cards.provenance import resolve_model_revision
from conceptforge.engine.runner import RunDir, RunReport, Stage, run_stage
from conceptforge.engine.store import ItemResult, join
from conceptforge.engine.workitems import ShardSpec, WorkItem, derive_seed
from conceptforge.errors import InvalidArgumentError

# the assembler's stored name points here: importing this module registers it
from conceptforge.generators.sub.card import ASSEMBLER, SPLIT, card_metadata

# the fast paths have their own module; their names are importable from here too, beside the settings
from conceptforge.generators.sub.fast_paths import (  # noqa: F401
    ATTENTION_BACKENDS,
    COMPILE_MODES,
    QUANTIZE_MODES,
    apply_fast_paths,
    check_fast_paths,
    check_quantize,
    check_quantize_name,
)
from conceptforge.generators.sub.flux_tdg import (
    DEFAULT_GUIDANCE,
    DEFAULT_MAX_SEQUENCE_LENGTH,
    DEFAULT_MODEL,
    DEFAULT_RESOLUTION,
    DEFAULT_STEPS,
    PairRequest,
    TDGFlux,
    _execution_device,
)
from conceptforge.generators.sub.options import CHUNK_SIZE, FLUX_DEV_DEFAULT_LICENSE, MODES  # noqa: F401
from conceptforge.generators.sub.spec import NEEDS_CUB, Pair, PairPlan
from conceptforge.generators.sub.tdg import TDGParams
from conceptforge.output import WORK_DIR

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GenerationSettings:
    """Everything that changes the pixels of an item (bound to the store: a resume must match)."""

    mode: str = "tdg"
    model: str = DEFAULT_MODEL
    revision: str | None = None
    resolution: int = DEFAULT_RESOLUTION
    steps: int = DEFAULT_STEPS
    guidance_scale: float = DEFAULT_GUIDANCE
    max_sequence_length: int = DEFAULT_MAX_SEQUENCE_LENGTH
    seed: int = 0
    dtype: str = "auto"
    # Fast paths (off by default). Bound to the store like the rest: on a GPU they may change the
    # last bits of an image (fused kernels, other matmul shapes), so a resume must keep them.
    pairs_per_batch: int = 1  # TDG pairs (or prompt-only images) per transformer batch
    compile: bool = False  # torch.compile the transformer
    attention_backend: str | None = None  # diffusers' attention backend, e.g. "_native_cudnn"
    quantize: str | None = None  # torchao quantisation of the transformer's Linear layers (QUANTIZE_MODES)
    fuse_qkv: bool = False  # q, k, v projections as one matmul (exact)
    aot: bool = False  # an ahead-of-time compiled transformer, cached on disk (generators/sub/aot.py)
    compile_mode: str | None = None  # with compile or aot: COMPILE_MODES (None: inductor's default)
    cuda_graphs: bool = False  # the transformer's pass replayed as a CUDA graph
    vae_channels_last: bool = False  # the VAE decode in channels-last memory format

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InvalidArgumentError(f"unknown mode {self.mode!r}; use one of {', '.join(MODES)}")
        if self.resolution <= 0 or self.steps <= 0:
            raise InvalidArgumentError("--resolution and --steps must be positive")
        if self.pairs_per_batch < 1:
            raise InvalidArgumentError(f"--pairs-per-batch must be >= 1, got {self.pairs_per_batch}")
        check_quantize_name(self.quantize)
        if self.compile and self.aot:
            raise InvalidArgumentError("--compile and --aot both compile the transformer: choose one")
        if self.compile_mode is not None and (self.compile_mode not in COMPILE_MODES or not (self.compile or self.aot)):
            raise InvalidArgumentError(
                f"--compile-mode {self.compile_mode!r} needs --compile or --aot and one of {', '.join(COMPILE_MODES)}"
            )

    def to_config(self) -> dict[str, Any]:
        """The settings as stored; the fast paths only when on, so runs made before they existed
        (and runs that leave them off) keep the same settings and resume."""
        config = asdict(self)
        for name, default in FAST_PATH_DEFAULTS.items():
            if config[name] == default:
                del config[name]
        return config


FAST_PATH_DEFAULTS = {
    "pairs_per_batch": 1,
    "compile": False,
    "attention_backend": None,
    "quantize": None,
    "fuse_qkv": False,
    "aot": False,
    "compile_mode": None,
    "cuda_graphs": False,
    "vae_channels_last": False,
}


def item_id(pair: Pair, index: int, images_per_pair: int) -> str:
    width = max(5, len(str(max(images_per_pair - 1, 0))))
    return f"{pair.bird}__{pair.slug}__{index:0{width}d}"


def build_work_items(plan: PairPlan, *, images_per_pair: int, run_seed: int) -> list[WorkItem]:
    """Items in plan order (pair-major), seeds from (run seed, bird, attribute, index)."""
    if images_per_pair < 1:
        raise InvalidArgumentError(f"--images-per-pair must be >= 1, got {images_per_pair}")
    items = []
    for pair in plan.pairs:
        payload = {
            "bird": pair.bird,
            "attribute": pair.attribute,
            "group": pair.group,
            "value": pair.value,
            "category": pair.category,
            "removed_attribute": pair.removed_attribute,
            "guidance_bird": pair.guidance_bird,
            "prompt_reference": pair.prompt_reference,
            "prompt_guidance": pair.prompt_guidance,
            "tdg": pair.tdg.to_dict() if pair.tdg else None,
        }
        for index in range(images_per_pair):
            seed = derive_seed(run_seed, pair.bird, pair.attribute, index)
            items.append(
                WorkItem(item_id(pair, index, images_per_pair), seed, SPLIT, {**payload, "image_index": index})
            )
    return items


def _request(item: WorkItem, settings: GenerationSettings) -> tuple[bool, PairRequest]:
    """Whether ``item`` is a TDG pair, and what to generate for it."""
    p = item.payload
    tdg = settings.mode == "tdg" and bool(p["attribute"])
    if settings.mode == "tdg" and not tdg:
        raise InvalidArgumentError("reference-bird selection has no guidance prompt: use --mode prompt-only")
    params = TDGParams(**p["tdg"]) if tdg else None
    return tdg, PairRequest(p["prompt_reference"], p["prompt_guidance"] if tdg else None, item.seed, params)


def _result(
    item: WorkItem, tdg: bool, params: TDGParams | None, result: Any, generator: TDGFlux, settings: GenerationSettings
) -> ItemResult:
    p = item.payload
    files = {"png": png_bytes(result.reference)}
    if result.guidance is not None:
        files["guidance.png"] = png_bytes(result.guidance)
    nan = float("nan")
    metadata = {
        "bird": p["bird"],
        "attribute": p["attribute"],
        "group": p["group"],
        "value": p["value"],
        "category": p["category"],
        "removed_attribute": p["removed_attribute"],
        "prompt_reference": p["prompt_reference"],
        "prompt_guidance": p["prompt_guidance"] if tdg else "",
        "image_index": p["image_index"],
        "tdg_k": params.k if params else nan,
        "tdg_tmin": params.tmin if params else nan,
        "tdg_tmax": params.tmax if params else nan,
        "guidance_scale": settings.guidance_scale,
        "num_inference_steps": settings.steps,
        "model_id": generator.model_id or settings.model,
        "model_revision": generator.model_revision,
        "generation_mode": settings.mode,
        "guidance_bird": p["guidance_bird"] if tdg else "",
        "etas": result.etas,
    }
    return ItemResult(files=files, metadata=metadata)


def make_batch_function(
    generator: TDGFlux, settings: GenerationSettings, *, save_guidance: bool = False
) -> Callable[[Sequence[WorkItem]], list[ItemResult]]:
    """``make_batch(items) -> [ItemResult]``: up to ``settings.pairs_per_batch`` consecutive items
    of the same kind (TDG pair or prompt-only) per transformer batch. Every item's seed, noise and
    tie are its own: on the CPU a batch gives the bytes of one item at a time (tested)."""

    def make_batch(items: Sequence[WorkItem]) -> list[ItemResult]:
        planned = [(item, *_request(item, settings)) for item in items]
        results: list[ItemResult] = []
        start = 0
        while start < len(planned):
            tdg = planned[start][1]
            end = start + 1
            while end < len(planned) and end - start < settings.pairs_per_batch and planned[end][1] == tdg:
                end += 1
            group = planned[start:end]
            made = generator.generate_batch(
                [request for _, _, request in group],
                mode="tdg" if tdg else "prompt-only",
                height=settings.resolution,
                width=settings.resolution,
                num_inference_steps=settings.steps,
                guidance_scale=settings.guidance_scale,
                return_guidance=save_guidance and tdg,
            )
            for (item, _, request), pair in zip(group, made):
                results.append(_result(item, tdg, request.params, pair, generator, settings))
            start = end
        return results

    return make_batch


def make_item_function(
    generator: TDGFlux, settings: GenerationSettings, *, save_guidance: bool = False
) -> Callable[[WorkItem], ItemResult]:
    """The per-item generator for ``run_work_items``: one FLUX run -> R image + metadata row."""
    make_batch = make_batch_function(generator, settings, save_guidance=save_guidance)

    def make(item: WorkItem) -> ItemResult:
        return make_batch([item])[0]

    return make


@dataclass
class RunSummary:
    pairs: int
    items: int
    made: int
    skipped: int
    assembled: bool
    out_dir: str
    store_dir: str
    counts: dict[str, int] = field(default_factory=dict)
    report: RunReport | None = None


@dataclass
class SubStageConfig:
    """Everything one SUB run needs: what to make (``plan``, ``images_per_pair``, ``settings``,
    ``license``) and how this process makes it (``generator``, ``device``, ``offload``)."""

    plan: PairPlan
    images_per_pair: int
    settings: GenerationSettings
    license: str
    generator: TDGFlux | None = None
    device: str = "auto"
    offload: bool = False
    save_guidance: bool = False
    reference_selection: bool = False
    extra_config: dict[str, Any] | None = None
    chunk_size: int = CHUNK_SIZE
    command: Sequence[str] | None = None
    #: ``--aot``'s packages: a local folder (``--compile-cache``, or the run's work folder by default)
    compile_cache: str | None = None
    #: a user spec's run: what the dataset carries (``own_benchmark.carried``); None for the paper's
    benchmark: dict[str, Any] | None = None


def build_stage(config: SubStageConfig) -> Stage:
    """SUB candidates as an engine stage (checks the plan first; the model loads lazily).

    ``config.generator`` reuses an already loaded :class:`TDGFlux`; otherwise
    ``settings.model`` is loaded (on ``device``, with ``offload``) only when this shard has
    something left to make, so a failed load leaves nothing that blocks the corrected rerun.
    """
    plan, settings, generator = config.plan, config.settings, config.generator
    images_per_pair, license, reference_selection = config.images_per_pair, config.license, config.reference_selection
    device, offload, save_guidance = config.device, config.offload, config.save_guidance
    extra_config, chunk_size, command = config.extra_config, config.chunk_size, config.command
    if not plan.pairs:
        raise InvalidArgumentError("the plan has no pairs to generate (all dropped or filtered out)")
    if any(pair.guidance_bird == NEEDS_CUB for pair in plan.pairs):
        raise InvalidArgumentError("the plan was made without CUB (a dry run's); give --cub-dir to generate")
    if reference_selection and settings.mode != "prompt-only":
        raise InvalidArgumentError("--reference-selection generates plain bird prompts: use --mode prompt-only")
    if not license or not license.strip():  # checked before hours of generation, not at assembly
        raise InvalidArgumentError("a dataset license is required (--license), e.g. cc-by-nc-4.0")
    items = build_work_items(plan, images_per_pair=images_per_pair, run_seed=settings.seed)
    # before the engine writes anything or the model loads
    check_fast_paths(settings, _execution_device(generator.pipe.transformer) if generator else device)
    loaded: dict[str, Any] = {}

    def prepare() -> None:
        if "make" not in loaded:
            model = generator
            if model is None:
                dtype = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(settings.dtype)
                import torch

                model = TDGFlux.from_pretrained(
                    settings.model,
                    revision=settings.revision,
                    device=device,
                    dtype=getattr(torch, dtype) if dtype else None,
                    offload=offload,
                    max_sequence_length=settings.max_sequence_length,
                )
            apply_fast_paths(model, settings, compile_cache=config.compile_cache)
            loaded["make"] = make_batch_function(model, settings, save_guidance=save_guidance)

    def make(item: WorkItem) -> ItemResult:
        prepare()
        return loaded["make"]([item])[0]

    def make_batch(items: Sequence[WorkItem]) -> list[ItemResult]:
        prepare()
        return loaded["make"](items)

    metadata = card_metadata(
        license=license,
        settings=settings,
        plan=plan,
        images_per_pair=images_per_pair,
        model_revision=settings.revision or "",
        command=command,
        reference_selection=reference_selection,
        benchmark=config.benchmark,
    )
    return Stage(
        name="sub/candidates",
        items=items,
        settings={**settings.to_config(), **(extra_config or {})},
        # several pairs per transformer batch come from the engine's chunks (chunk >= batch)
        **({"process_batch": make_batch} if settings.pairs_per_batch > 1 else {"make_item": make}),
        prepare=prepare,
        assembler=ASSEMBLER,
        assembly_args={
            "metadata": asdict(metadata),
            "rebuild": {
                "settings": settings.to_config(),
                "pairs": [asdict(pair) for pair in plan.pairs],
                "images_per_pair": images_per_pair,
                "device": device,
                "model": {"id": settings.model, "revision": resolve_model_revision(settings.model, settings.revision)},
                # a spec's run: the label names of its rows (the paper's are the module's)
                **({"labels": _label_names(config.benchmark)} if config.benchmark is not None else {}),
            },
            **({"benchmark": config.benchmark} if config.benchmark is not None else {}),
        },
        chunk_size=chunk_size,
        description="SUB images",
        unit="img",
    )


def _label_names(benchmark: dict[str, Any]) -> dict[str, list[str]]:
    return {"classes": list(benchmark["classes"]), "substitutions": list(benchmark["substitutions"])}


#: The folder of ``--aot``'s packages inside the run's work folder (``OUT/.work``), when no
#: ``--compile-cache`` is given: every rank and every resumed task of the run finds them there.
AOT_CACHE_DIR = "compiled"


def aot_cache_folder(settings: GenerationSettings, out: Any, compile_cache: str | Path | None) -> str | None:
    """Where ``--aot`` keeps its packages: ``compile_cache``, else ``OUT/.work/compiled``. Packages
    are loaded as shared libraries, so the folder must be local: a run whose work folder is a URL
    (``s3://…``) is told to give ``--compile-cache``."""
    if not settings.aot:
        return None
    if compile_cache is not None:
        return str(compile_cache)
    work = out.work if isinstance(out, RunDir) else join(str(out), WORK_DIR)
    if "://" in str(work) and not str(work).startswith("file://"):
        raise InvalidArgumentError(
            f"--aot keeps compiled packages in a local folder and the work folder is {work}: give --compile-cache DIR"
        )
    return join(str(work).removeprefix("file://"), AOT_CACHE_DIR)


def generate(
    *,
    out: str | Path | RunDir,
    plan: PairPlan,
    images_per_pair: int,
    settings: GenerationSettings,
    license: str,
    generator: TDGFlux | None = None,
    shard: ShardSpec = ShardSpec(),
    device: str = "auto",
    offload: bool = False,
    save_guidance: bool = False,
    max_items: int | None = None,
    assemble_when_complete: bool = True,
    reference_selection: bool = False,
    extra_config: dict[str, Any] | None = None,
    chunk_size: int = CHUNK_SIZE,
    command: Sequence[str] | None = None,
    compile_cache: str | Path | None = None,
    benchmark: dict[str, Any] | None = None,
) -> RunSummary:
    """Generate this shard's items of ``plan`` into ``out/.work`` (a local folder or an fsspec
    URL); the run engine assembles ``out`` once every item exists (see :func:`build_stage`)."""
    stage = build_stage(
        SubStageConfig(
            plan=plan,
            images_per_pair=images_per_pair,
            settings=settings,
            license=license,
            generator=generator,
            device=device,
            offload=offload,
            save_guidance=save_guidance,
            reference_selection=reference_selection,
            extra_config=extra_config,
            chunk_size=chunk_size,
            command=command,
            compile_cache=aot_cache_folder(settings, out, compile_cache),
            benchmark=benchmark,
        )
    )
    report = run_stage(
        stage,
        out if isinstance(out, RunDir) else str(out),
        shard=shard,
        max_items=max_items,
        assemble=assemble_when_complete,
    )
    return RunSummary(
        pairs=len(plan.pairs),
        items=len(stage.items),
        made=report.made,
        skipped=report.skipped,
        assembled=report.assembled,
        out_dir=str(out),
        store_dir=join(out, WORK_DIR),
        counts=report.as_counts(),
        report=report,
    )
