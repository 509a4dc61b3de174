"""How verify rebuilds a SUB candidates release's stage from its provenance record: the record gives
a weights folder in place of the recorded model id, which the stage config does not take, so the
stage is assembled here from the generator's own parts (work items, TDG model, row function)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from conceptforge.engine.runner import Stage
from conceptforge.engine.store import ItemStore
from conceptforge.generators.rebuild import Rebuilt, tolerance, weight_location

GENERATOR = "sub"


def rebuild(entry: Mapping[str, Any], weights: Mapping[str, str], device: str | None, out: Path) -> Rebuilt:
    import importlib

    from conceptforge.generators.sub.card import features_for, record_row
    from conceptforge.generators.sub.spec import Pair, PairPlan
    from conceptforge.generators.sub.tdg import TDGParams

    sub = importlib.import_module("conceptforge.generators.sub.stage")  # the package re-exports a function of that name
    rebuild = entry["rebuild"]
    features = features_for(rebuild.get("labels"))  # a spec's run: its classes and substitutions
    settings = sub.GenerationSettings(**rebuild["settings"])
    location = weight_location("diffusion", rebuild["model"], weights)
    pairs = [Pair(**{**p, "tdg": TDGParams(**p["tdg"]) if p.get("tdg") else None}) for p in rebuild["pairs"]]
    items = sub.build_work_items(
        PairPlan(pairs=pairs), images_per_pair=int(rebuild["images_per_pair"]), run_seed=settings.seed
    )
    loaded: dict[str, Any] = {}

    def prepare() -> None:
        if "make" in loaded:
            return
        import torch

        from conceptforge.generators.sub.flux_tdg import TDGFlux

        dtype = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(settings.dtype)
        model = TDGFlux.from_pretrained(
            location,
            revision=settings.revision,
            device=device or rebuild.get("device", "auto"),
            dtype=getattr(torch, dtype) if dtype else None,
            max_sequence_length=settings.max_sequence_length,
        )
        model.model_id = settings.model  # the row names the model as the run did
        sub.apply_fast_paths(
            model, settings
        )  # every fast path as the run had them (--aot: built in a temporary folder)
        loaded["make"] = sub.make_item_function(model, settings)

    def make(item):
        prepare()
        return loaded["make"](item)

    stage = Stage(
        name="sub/candidates",
        items=items,
        settings=entry.get("settings", {}),
        make_item=make,
        prepare=prepare,
        chunk_size=sub.CHUNK_SIZE,
        description="SUB images",
        unit="img",
    )

    def rows(store: ItemStore, split: str) -> Iterator[dict[str, Any]]:
        return (record_row(record, features) for record in store.records(split))

    return Rebuilt(
        stage,
        rows,
        tolerance("FLUX sampling: floating-point results depend on the device and kernels"),
        path_columns=("model_id",),
        revision_columns=("model_revision",),
    )
