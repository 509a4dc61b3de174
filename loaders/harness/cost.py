"""``conceptforge evaluate --dry-run``: per (model, task) the items, the forwards and the GPU-hours.

Why from the model's config and the cost table: a lab planning 40 checkpoints wants the bill
before the first weight downloads. Nothing here loads weights or opens the network: the model's
size is counted on the meta device from its ``config.json`` (accelerate's ``init_empty_weights``
builds the architecture without allocating), the items from the task's dataset folder, and the
seconds per forward from the same table the generators' dry runs use
(``conceptforge/gpu_costs.json``, :mod:`conceptforge.gpu_costs`).

What a forward costs: one pass of the whole model over one image and one prompt of
:data:`PROMPT_TOKENS` tokens, ``2 x parameters x tokens`` FLOPs (the matmuls; attention's n^2 is
not counted), at the table's matmul rate for the GPU: 100% utilisation, so a floor, as the
table's ``flop-floor`` figures are. ``--seconds-per-forward`` replaces it with a measured time.
Forwards per item, by the capability the task runs with: ``match`` one per candidate text (an
ITM head or VQAScore scores each (image, text) pair), ``choose`` one (one next-token
distribution over the options), ``embed`` and ``concepts`` one (each image once; a dual
encoder's texts are embedded once per run and cached).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conceptforge import gpu_costs
from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)

PROMPT_TOKENS = 64  # a prompt's tokens in one forward (the table's VQA workload counts 64 too)
#: Modules whose parameters see the image tokens only (the vision tower of each family).
VISION_PREFIXES = ("vision_model", "vision_tower", "visual", "vision_encoder", "model.vision_tower", "model.visual")


@dataclass(frozen=True)
class ModelSize:
    """What a forward costs, counted from the config: parameters and tokens per forward."""

    parameters: int
    image_tokens: int
    text_tokens: int = PROMPT_TOKENS

    @property
    def tokens(self) -> int:
        return self.image_tokens + self.text_tokens

    @property
    def flops(self) -> float:
        return 2.0 * self.parameters * self.tokens


@dataclass(frozen=True)
class ServedModel:
    """An endpoint model as a dry run sees it: its spelling only. Its probability mode (which
    decides the family) would need a request, so it is planned as the ``endpoint`` family; a
    server without log-probabilities runs the by-answer protocols with the same request count."""

    id: str
    kind: str = "endpoint"


def resolve_offline(spec: str, revision: str | None) -> Any:
    """The model a dry run plans for, without a connection: a local folder or CBM factory as
    ``resolve_model`` reads it; a Hub id from the local Hub cache only (its ``config.json``), the
    revision as cached (``refs/<revision>``). Nothing is fingerprinted or downloaded."""
    import os

    from conceptforge.endpoint_spec import is_endpoint_spec, parse_endpoint_spec
    from conceptforge.loaders.harness.model_ref import _FACTORY, ModelRef, _kind_of_files, resolve_model

    if is_endpoint_spec(spec):  # a served model: planned in requests, the server is not asked
        parse_endpoint_spec(spec)  # a bad spelling is one line here too
        return ServedModel(spec)
    if os.path.isdir(spec) or _FACTORY.match(spec) or os.path.exists(spec):
        return resolve_model(spec, revision=revision)
    repo = spec.removeprefix("hf-hub:")
    files: dict[str, Any] = {}
    from huggingface_hub import try_to_load_from_cache

    from conceptforge.loaders.harness.adapters.base import FAMILY_FILES

    for name in FAMILY_FILES:
        cached = try_to_load_from_cache(repo, name, revision=revision)
        if isinstance(cached, str):
            files[name] = json.loads(Path(cached).read_text())
    if not files:
        raise InvalidArgumentError(
            f"--dry-run: {repo} has no config.json in the local Hub cache (a dry run opens no connection): "
            f"fetch it first (hf download {repo} config.json) or pass a model folder"
        )
    kind, model_type = _kind_of_files(files)
    return ModelRef(repo, kind, "hub", revision, None, model_type)


def _config(model: Any) -> dict[str, Any]:
    path = Path(model.id) / "config.json"
    if model.source == "local" and path.is_file():
        return json.loads(path.read_text())
    from huggingface_hub import hf_hub_download

    try:  # the Hub's local cache only: a dry run opens no connection
        return json.loads(
            Path(
                hf_hub_download(model.id, "config.json", revision=model.sha or model.revision, local_files_only=True)
            ).read_text()
        )
    except Exception:  # noqa: BLE001 - any miss: not in the cache
        raise InvalidArgumentError(
            f"--dry-run: {model.id}'s config.json is not on this machine (a dry run opens no connection): "
            "download it first (hf download MODEL config.json) or pass --seconds-per-forward"
        ) from None


def _image_tokens(config: dict[str, Any]) -> int:
    """Patches of one image: (image_size / patch_size)^2 of the vision config (+1 class token)."""
    vision = config.get("vision_config") or config
    size, patch = vision.get("image_size"), vision.get("patch_size")
    if isinstance(size, (list, tuple)):
        size = size[0]
    if not size or not patch:
        return 0
    return (int(size) // int(patch)) ** 2 + 1


def model_size(model: Any) -> ModelSize:
    """Parameters (built on the meta device from ``config.json``: no weights) and image tokens."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig

    from conceptforge.loaders.harness.adapters.base import ITM, VLM

    raw = _config(model)
    config = AutoConfig.for_model(**raw) if "model_type" in raw else None
    if config is None:
        raise InvalidArgumentError(f"--dry-run: {model.id}'s config.json has no model_type")
    with init_empty_weights():
        if model.kind == VLM:
            from transformers import AutoModelForImageTextToText as Auto
        elif model.kind == ITM and raw.get("model_type") == "blip":
            from transformers import BlipForImageTextRetrieval as Auto
        elif model.kind == ITM:
            from transformers import ViltForImageAndTextRetrieval as Auto
        else:
            from transformers import AutoModel as Auto
        built = Auto.from_config(config) if hasattr(Auto, "from_config") else Auto(config)
    parameters = sum(p.numel() for p in built.parameters())
    return ModelSize(parameters, _image_tokens(raw))


@dataclass(frozen=True)
class TaskPlan:
    """One (model, task) of a dry run: items, forwards per item, what they cost and why."""

    task: str
    items: int | None
    forwards_per_item: float
    note: str = ""

    @property
    def forwards(self) -> float | None:
        return None if self.items is None else self.items * self.forwards_per_item


def _splits(selection: Any) -> list[str] | None:
    split = selection.split or selection.task.split  # binding reads several: "train,val,gen"
    return [name.strip() for name in split.split(",") if name.strip()] if split else None


def count_items(selection: Any) -> tuple[int | None, float, str]:
    """(rows the task reads, mean candidates per row, note) from its dataset folder; rows of a
    dataset that is not a local folder are not counted (no network)."""
    repo, _ = selection.data_source()
    if not repo or not Path(str(repo)).is_dir():
        where = f"dataset {repo} is not a local folder" if repo else "the task reads a folder given by flag"
        return None, 1.0, f"items not counted ({where}; a dry run opens no connection)"
    import datasets

    from conceptforge.loaders.harness.data import load_split

    # binding: the config the user named (--task-option binding-clip.config=...), else the task's own
    config = selection.options.get("config") if "config" in selection.given else selection.task.config
    names = _splits(selection)
    if names is None:
        names = list(datasets.load_dataset(str(repo), config).keys())
    rows = candidates = 0
    for name in names:
        split = load_split(str(repo), name, config=config)
        rows += len(split)
        if "candidates" in split.column_names:
            candidates += sum(len(c) for c in split["candidates"])
    mean = candidates / rows if rows and candidates else 1.0
    return rows, mean, f"{', '.join(names)} of {repo}"


def plan_task(model: Any, selection: Any) -> TaskPlan:
    from conceptforge.loaders.harness.adapters.base import MATCH

    capability = selection.task.capability_for(model.kind)
    items, candidates, note = count_items(selection)
    per_item = candidates if capability == MATCH else 1.0
    return TaskPlan(selection.task.name, items, per_item, f"{capability}: {note}")


def forward_estimate(model: Any, *, gpu: str | None, seconds_per_forward: float | None) -> gpu_costs.Estimate:
    """Seconds per forward: ``--seconds-per-forward`` as given, else the FLOPs of one forward at
    the cost table's matmul rate for ``gpu`` (its ``flop-floor`` figure)."""
    if seconds_per_forward is not None:
        return gpu_costs.given(seconds_per_forward, "forward", "--seconds-per-forward")
    size = model_size(model)
    table = gpu_costs.load_table()
    gpu = gpu or gpu_costs.DEFAULT_GPU
    figure = next(f for f in table["figures"] if f["gpu"] == gpu and f["workload"] == "*" and f["kind"] == "flop-floor")
    seconds = size.flops / (figure["tflops"] * 1e12)
    source = (
        f"2 x {size.parameters:,} parameters (config.json on the meta device) x {size.tokens} tokens "
        f"({size.image_tokens} image + {size.text_tokens} prompt) = {size.flops:.4g} FLOP per forward "
        f"{figure['source']} (conceptforge/gpu_costs.json)"
    )
    return gpu_costs.Estimate("evaluate/forward", "forward", gpu, seconds, "flop-floor", source)


def dry_run_lines(
    models: Sequence[Any], selections: Sequence[Any], *, gpu: str | None, seconds_per_forward: float | None
) -> list[str]:
    """The dry run's lines: per model its forward's cost, per task its items, forwards and hours."""
    lines: list[str] = []
    for model in models:
        lines.append(f"model {model.id} ({model.kind})")
        runnable = [s for s in selections if s.task.capability_for(model.kind)]
        for selection in selections:
            if selection not in runnable:
                lines.append(f"  {selection.task.name}: skipped ({model.kind} models cannot run it)")
        if not runnable:
            continue
        if isinstance(model, ServedModel):
            total = 0.0
            for selection in runnable:
                plan = plan_task(model, selection)
                if plan.items is None:
                    lines.append(f"  {plan.task}: {plan.note}")
                    continue
                total += plan.forwards
                lines.append(
                    f"  {plan.task}: {plan.items:,} items x {plan.forwards_per_item:.3g} requests = "
                    f"{plan.forwards:,.0f} requests ({plan.note})"
                )
            lines.append(
                f"  requests in all: {total:,.0f} at most (cached answers are not asked again; --max-requests "
                "caps them); GPU-hours: the server's, not estimated here"
            )
            continue
        estimate = forward_estimate(model, gpu=gpu, seconds_per_forward=seconds_per_forward)
        parts = []
        for selection in runnable:
            plan = plan_task(model, selection)
            if plan.items is None:
                lines.append(f"  {plan.task}: {plan.note}")
                continue
            lines.append(
                f"  {plan.task}: {plan.items:,} items x {plan.forwards_per_item:.3g} forwards = "
                f"{plan.forwards:,.0f} forwards ({plan.note})"
            )
            parts.append((f"{model.id.rstrip('/').split('/')[-1]} / {plan.task}", plan.forwards, estimate))
        if parts:
            lines += ["  " + line for line in gpu_costs.plan_lines(parts)]
    return lines
