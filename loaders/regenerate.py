"""Rebuild a released dataset's stage from its ``provenance.json``: one adapter per generator.

Why one place: ``verify`` must regenerate items through the *same* stage code that made them
(``make_item``/``process_batch`` and the assembler's row function). Each adapter turns one config
entry of the record (:mod:`cards.run_record`) back into that stage, says which comparison rule
applies (bytes, or a PSNR tolerance where the bytes depend on the hardware) and which weights it
needs. Binding's adapter is the generator's own ``build_stage(config)``; SUB's and ConceptBed's
rebuild the stage from the record by hand, because the record gives what their stage configs do
not take (a weights folder in place of the recorded model id; ConceptBed's processed captions).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conceptforge.cards.provenance import local_fingerprint, strip_local_path
from conceptforge.errors import InvalidArgumentError, WeightsUnavailableError
from conceptforge.runner import Stage
from conceptforge.store import ItemStore

logger = logging.getLogger(__name__)

#: PSNR (dB) two renders of the same item must reach where the bytes depend on the hardware.
TOLERANCE_PSNR = 40.0


@dataclass(frozen=True)
class Rule:
    """How a regenerated row is compared with the released one.

    ``min_psnr`` None: images byte for byte. Otherwise images must reach ``min_psnr`` dB (identical
    images count as infinite) and every other column must still be equal.
    """

    name: str
    why: str
    min_psnr: float | None = None

    def describe(self) -> str:
        return f"{self.name} ({self.why})"


EXACT = Rule("byte-identical images, equal metadata", "deterministic on any machine of the recorded kind")


def tolerance(why: str) -> Rule:
    return Rule(f"images PSNR >= {TOLERANCE_PSNR:g} dB, equal metadata", why, TOLERANCE_PSNR)


@dataclass
class Rebuilt:
    """One config's stage as it made the release, and how to turn its store into released rows."""

    stage: Stage
    rows: Callable[[ItemStore, str], Iterator[dict[str, Any]]]
    rule: Rule
    #: Columns holding a local path (compared with the folder part elided, as cards publish them).
    path_columns: tuple[str, ...] = ()
    close: Callable[[], None] = field(default=lambda: None)


def weight_location(role: str, recorded: Mapping[str, Any], weights: Mapping[str, str]) -> str:
    """Where the weights of ``role`` are: ``--weights ROLE=PATH``, else the recorded Hub id.

    A recorded local folder (``.../tiny-flux``) cannot be found on another machine: one line says
    which weights are missing. A given folder must have the recorded fingerprint.
    """
    model_id, revision = str(recorded.get("id", "")), str(recorded.get("revision", ""))
    given = weights.get(role)
    if given is not None:
        path = Path(given).expanduser()
        if not path.is_dir():
            raise WeightsUnavailableError(f"--weights {role}={given} is not a folder")
        if revision.startswith("local-sha256:") and local_fingerprint(path) != revision:
            raise WeightsUnavailableError(
                f"--weights {role}={given} is not the model the card names ({model_id}, {revision}; this folder is "
                f"{local_fingerprint(path)})"
            )
        return str(path)
    if model_id.startswith(".../") or revision.startswith("local-sha256:"):
        raise WeightsUnavailableError(
            f"missing weights: {role} model {model_id} ({revision}) was a local folder; pass --weights {role}=PATH"
        )
    return model_id


# -- binding ----------------------------------------------------------------------------------------
def _binding(entry: Mapping[str, Any], weights: Mapping[str, str], device: str | None, out: Path) -> Rebuilt:
    from conceptforge.generators.binding import generate as binding
    from conceptforge.generators.binding.dataset import BindingConfig

    config = BindingConfig(**entry["rebuild"]["config"])
    recorded = entry.get("device", "cpu")
    device = device or recorded
    stage = binding.build_stage(config, device=device)  # one worker, in this process
    rule = (
        EXACT
        if device == recorded == "cpu"
        else tolerance(f"Cycles renders on {device}, recorded on {recorded}: the bytes depend on the GPU")
    )
    return Rebuilt(stage, binding._rows, rule)


# -- SUB --------------------------------------------------------------------------------------------
def _sub(entry: Mapping[str, Any], weights: Mapping[str, str], device: str | None, out: Path) -> Rebuilt:
    import importlib

    from conceptforge.generators.sub.card import _row
    from conceptforge.generators.sub.spec import Pair, PairPlan
    from conceptforge.generators.sub.tdg import TDGParams

    sub = importlib.import_module(
        "conceptforge.generators.sub.generate"
    )  # the package re-exports a function of that name
    rebuild = entry["rebuild"]
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
        sub.apply_fast_paths(model, settings)  # --compile / --attention-backend, as the run had them
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
        return (_row(record) for record in store.records(split))

    return Rebuilt(
        stage,
        rows,
        tolerance("FLUX sampling: floating-point results depend on the device and kernels"),
        path_columns=("model_id",),
    )


# -- ConceptBed -------------------------------------------------------------------------------------
def _learners(rebuild: Mapping[str, Any], weights: Mapping[str, str]) -> Path:
    """The folder holding ``artifacts/<concept>/`` with the learned weights the record fingerprints."""
    from conceptforge.cards.provenance import local_fingerprint

    recorded = rebuild.get("learners") or {}
    learner = rebuild["learner"]["learner"]
    given = weights.get("learners")
    if given is None:
        raise WeightsUnavailableError(
            f"missing weights: the learned {learner} artifacts of {', '.join(sorted(recorded)) or 'the concepts'} are not "
            "part of the release; pass --weights learners=WORK_DIR (the folder holding artifacts/<concept>/)"
        )
    folder = Path(given).expanduser()
    wrong = [
        name
        for name, fingerprint in recorded.items()
        if not (folder / "artifacts" / name).is_dir() or local_fingerprint(folder / "artifacts" / name) != fingerprint
    ]
    if wrong:
        raise WeightsUnavailableError(
            f"--weights learners={given}: the learned artifacts of {', '.join(wrong)} are missing or not the ones the "
            "release records (artifacts/<concept>/ fingerprints differ)"
        )
    return folder


def _conceptbed(entry: Mapping[str, Any], weights: Mapping[str, str], device: str | None, out: Path) -> Rebuilt:
    from conceptforge.generators.conceptbed import generate as conceptbed
    from conceptforge.generators.conceptbed.card import _rows
    from conceptforge.generators.conceptbed.composition import Caption
    from conceptforge.generators.conceptbed.learners import LearnerConfig
    from conceptforge.generators.conceptbed.spec import Concept, ConceptSpec

    rebuild = entry["rebuild"]
    model = weight_location("diffusion", rebuild["model"], weights)
    learners = _learners(rebuild, weights)
    config = LearnerConfig(**{**rebuild["learner"], "model_id": model})
    spec = ConceptSpec(concepts=tuple(Concept(c["name"], c["kind"], c["parent"]) for c in rebuild["concepts"]))
    options = conceptbed.GenerateOptions(
        config=config,
        out=out,
        num_images=int(rebuild["num_images"]),
        work_dir=learners,
        embed_references=bool(rebuild.get("embed_references")),
    )
    generator = conceptbed.ConceptBedGenerator(spec, options)
    generator.captions = {
        name: [
            Caption(**{**c, "categories": tuple(c["categories"]), "questions": tuple(c["questions"])}) for c in captions
        ]
        for name, captions in rebuild["captions"].items()
    }
    generator.items = conceptbed.build_items(spec, config, generator.captions, num_images=options.num_images)
    generator._concept_of = {item.item_id: c for c in spec.concepts for item in generator.items[c.name]}
    reference_ids = rebuild.get("reference_ids") or {}  # the rows name the references as the release did
    embed = bool(rebuild.get("embed_references"))

    def rows(store: ItemStore, split: str) -> Iterator[dict[str, Any]]:
        return _rows(store, split, reference_ids, embed)

    return Rebuilt(
        generator.stage(),
        rows,
        tolerance("diffusion sampling with learned concept weights: the bytes depend on the device"),
    )


ADAPTERS: dict[str, Callable[[Mapping[str, Any], Mapping[str, str], str | None, Path], Rebuilt]] = {
    "binding": _binding,
    "sub": _sub,
    "conceptbed": _conceptbed,
}


def rebuild_config(
    generator: str, entry: Mapping[str, Any], *, weights: Mapping[str, str], out: Path, device: str | None = None
) -> Rebuilt:
    """The stage of one config of a release (see module docstring); ``out`` is the temporary run
    folder the stage will write its store to (``out/.work``)."""
    adapter = ADAPTERS.get(generator)
    if adapter is None:
        raise InvalidArgumentError(
            f"cannot regenerate a {generator!r} dataset: verify knows {', '.join(sorted(ADAPTERS))}"
        )
    if "rebuild" not in entry:
        raise InvalidArgumentError("the provenance record has no rebuild section for this config")
    return adapter(entry, weights, device, out)


def elide(value: Any) -> Any:
    """A path column's value as a card would publish it."""
    return strip_local_path(value) if isinstance(value, str) else value
