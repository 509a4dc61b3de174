"""ConceptBed generation: learn each concept, then sample its concept and composition images.

Work is organised per concept (the unit that owns a learned artifact):

    OUT/.work/                                 the run's item store (chunks, markers, settings)
    OUT/.work/references/<concept>/N.png       up to 3 reference thumbnails for the dataset rows
    WORK/class-images/<concept>/NNNN.png       prior-preservation images (DreamBooth, CD)
    WORK/artifacts/<concept>/                  learned artifact (learner.json written last)
    OUT/{data/,README.md,grid.png}             the assembled dataset (once every item exists)

OUT is a local folder or an fsspec URL (``s3://bucket/conceptbed``); WORK is a local folder
(``--work-dir``; default ``OUT/.work`` for a local OUT, see :func:`default_work_dir`).

Concepts are split round-robin over ``--num-shards``/accelerate ranks, so a process only ever
samples concepts whose artifacts it trained; every step skips what already exists. The stage is
:func:`build_stage` of a :class:`ConceptBedStageConfig`; the dataset's schema, card text and
assembly are :mod:`conceptforge.generators.conceptbed.card`.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from conceptforge.cards import DatasetMetadata
from conceptforge.cards.grid import png_bytes
from conceptforge.cards.provenance import collect_provenance, resolve_model_revision, strip_local_path
from conceptforge.engine.runner import Stage, assemble_run, check_output, plan_chunks, run_stage
from conceptforge.engine.store import ItemResult, ItemStore, is_store, is_url
from conceptforge.engine.workitems import ShardSpec, WorkItem, derive_seed
from conceptforge.errors import InvalidArgumentError
from conceptforge.generators.conceptbed.artifacts import (
    ARTIFACT_MADE_BY,
    AppliedArtifact,
    artifact_complete,
    train_and_save,
)

# the assembler's stored name points here: importing this module registers it
from conceptforge.generators.conceptbed.card import (
    ASSEMBLER,
    CARD_SECTIONS,
    CITATION,
    COLUMN_DOCS,
    EMBEDDED_REFERENCES_NOTE,
    REFERENCE_COUNT,
    REFERENCES_DIR,
    REFERENCES_NOTE,
    SPLITS,
)
from conceptforge.generators.conceptbed.composition import (
    Caption,
    load_captions,
    load_categoriser,
    substitute_subject,
    with_questions_and_categories,
)
from conceptforge.generators.conceptbed.learners import LearnerConfig, concept_phrase, load_components
from conceptforge.generators.conceptbed.pipelines import STABLE_DIFFUSION, check_model_family
from conceptforge.generators.conceptbed.sampling import (
    concept_prompts,
    ensure_class_images,
    generate_image,
    load_pipeline,
    reference_thumbnails,
)
from conceptforge.generators.conceptbed.spec import Concept, ConceptSpec
from conceptforge.output import claim_folder, mark_folder

logger = logging.getLogger(__name__)


@dataclass
class GenerateOptions:
    config: LearnerConfig
    out: Path
    num_images: int = 100
    categoriser: str | None = None
    max_captions: int | None = None
    shard: ShardSpec = field(default_factory=ShardSpec)
    license: str = "creativeml-openrail-m"
    # The reference images are the user's ImageNet/CUB/PACS files, under those datasets' terms, not
    # the model licence: rows name them by id; embedding thumbnails is an explicit choice.
    embed_references: bool = False
    max_shard_size: str = "500MB"
    max_items: int | None = None  # stop after this many new images (tests, smoke runs)
    assemble: bool = True
    # Local folder for learned weights and class images (default OUT/.work, or a cache folder
    # when OUT is a URL): they are large, read back by the process that learned them, and never
    # part of the dataset, so they need not live in object storage.
    work_dir: Path | None = None
    # False: ``work_dir`` is only read (verify rebuilds from artifacts whose fingerprints it
    # checked); it is neither claimed nor marked as this run's.
    claim_work: bool = True


def default_work_dir(out: str) -> Path:
    """Where learned concept weights go: ``OUT/.work`` for a local OUT; for a URL, a folder per
    OUT under ``$CONCEPTFORGE_WORK_DIR`` or ``$XDG_CACHE_HOME/conceptforge/conceptbed-work``."""
    if not is_url(out) or out.startswith("file://"):
        return Path(out.removeprefix("file://")) / ".work"
    base = os.environ.get("CONCEPTFORGE_WORK_DIR") or Path(
        os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"), "conceptforge", "conceptbed-work"
    )
    return Path(base) / hashlib.sha256(out.rstrip("/").encode()).hexdigest()[:16]


def _item_id(concept: str, kind: str, index: int) -> str:
    return f"{concept}__{kind}{index:04d}"


def composite_prompt(caption: Caption, concept: Concept, phrase: str) -> str | None:
    subjects = [s for s in (caption.subject, concept.parent, concept.class_noun, concept.name) if s]
    return substitute_subject(caption.caption, subjects, phrase)


def build_items(
    spec: ConceptSpec,
    config: LearnerConfig,
    captions: dict[str, list[Caption]],
    *,
    num_images: int,
) -> dict[str, list[WorkItem]]:
    """All work items, grouped by concept: a pure function of the spec and settings."""
    out: dict[str, list[WorkItem]] = {}
    for concept in spec.concepts:
        phrase = concept_phrase(config, concept)
        items = []
        for index, prompt in enumerate(concept_prompts(concept, phrase, num_images, spec.prompts)):
            seed = derive_seed(config.seed, config.learner, concept.name, "concept", index)
            items.append(
                WorkItem(
                    _item_id(concept.name, "c", index), seed, "concept", {"concept": concept.name, "prompt": prompt}
                )
            )
        skipped = 0
        for index, caption in enumerate(captions.get(concept.name, [])):
            prompt = composite_prompt(caption, concept, phrase)
            if prompt is None:
                skipped += 1
                continue
            seed = derive_seed(config.seed, config.learner, concept.name, "composition", caption.caption)
            payload = {
                "concept": concept.name,
                "prompt": prompt,
                "caption": caption.caption,
                "categories": list(caption.categories),
                "questions": list(caption.questions),
            }
            items.append(WorkItem(_item_id(concept.name, "p", index), seed, "composition", payload))
        if skipped:
            logger.warning(
                "%s: %d caption(s) do not mention %r and were skipped", concept.name, skipped, concept.parent
            )
        out[concept.name] = items
    return out


def template_captions(spec: ConceptSpec) -> dict[str, list[Caption]]:
    """A spec's composition templates for each concept: the class noun in the slot is the subject
    that V* replaces ("a {} on a beach" -> "a mug on a beach" -> "a <object> on a beach")."""
    return {
        c.name: [
            Caption(c.name, template.format(c.parent), subject=c.parent) for template in spec.composition_templates
        ]
        for c in spec.concepts
    }


def prepare_captions(spec: ConceptSpec, categoriser: str | None, max_captions: int | None) -> dict[str, list[Caption]]:
    if spec.captions is None and not spec.composition_templates:
        return {}
    raw = load_captions(spec.captions, [c.name for c in spec.concepts]) if spec.captions is not None else {}
    if spec.composition_templates:
        raw = {name: [*raw.get(name, []), *made] for name, made in template_captions(spec).items()}
    function = load_categoriser(categoriser)
    return {
        name: with_questions_and_categories(items[:max_captions] if max_captions else items, function)
        for name, items in raw.items()
    }


class ConceptBedGenerator:
    """Owns the paths of one output folder and runs learn -> sample -> assemble."""

    def __init__(self, spec: ConceptSpec, options: GenerateOptions) -> None:
        self.spec = spec
        self.options = options
        self.out = str(options.out)
        self.work = Path(options.work_dir) if options.work_dir else default_work_dir(self.out)
        if self.work.exists() and not self.work.is_dir():
            raise InvalidArgumentError(
                f"--work-dir {self.work} is a file: pass a folder for the learned concept weights"
            )
        # A --work-dir of the user's: learned concepts and class images are read back from it, so a
        # folder of someone else's files (an artifacts/<concept>/learner.json of theirs) would be
        # taken as learned. Ours carries a marker; the default (OUT/.work) is the run's own store.
        # (The work folder of another ConceptBed run, its OUT/.work item store, is ours as well: that
        # is where its learned concepts are, and what `verify --weights learners=` points at.)
        self._own_work = options.work_dir is not None and options.claim_work and not is_store(self.work)
        if self._own_work:
            claim_folder(self.work, made_by=ARTIFACT_MADE_BY, flag="--work-dir")
        # The config's pipeline family must be the model's own (the command line reads it from the
        # model; a Python caller's config is checked here, before anything is written).
        check_model_family(options.config.model_id, options.config.revision, options.config.pipeline)
        self.run_dir = check_output(self.out, stage="conceptbed")  # read only: the store is made with the first work
        self.captions = prepare_captions(spec, options.categoriser, options.max_captions)
        self.items = build_items(spec, options.config, self.captions, num_images=options.num_images)
        self._concept_of = {item.item_id: concept for concept in spec.concepts for item in self.items[concept.name]}
        self._pipe: Any = None

    @property
    def store(self) -> ItemStore:
        return self.run_dir.store()

    # -- paths ----------------------------------------------------------------------------------
    def artifact_dir(self, concept: Concept) -> Path:
        return self.work / "artifacts" / concept.name

    def class_image_dir(self, concept: Concept) -> Path:
        return self.work / "class-images" / concept.name

    def run_settings(self) -> dict[str, Any]:
        """What a resume must match. The pipeline family and DDIM's eta are recorded only off their
        defaults, so a Stable Diffusion run started before they existed still resumes."""
        learner = self.options.config.to_json()
        for name, default in (("pipeline", STABLE_DIFFUSION), ("eta", 0.0)):
            if learner.get(name) == default:
                del learner[name]
        settings = {
            "learner": learner,
            "num_images": self.options.num_images,
            "categoriser": self.options.categoriser or "rules",
            "max_captions": self.options.max_captions,
        }
        if self.spec.benchmark is not None:  # a user's spec: resuming with another one is refused
            settings["benchmark"] = self.spec.benchmark
        return settings

    @property
    def pipe(self) -> Any:
        if self._pipe is None:
            config = self.options.config
            self._pipe = load_pipeline(config.model_id, config.revision)
        return self._pipe

    # -- stages ---------------------------------------------------------------------------------
    def learn(self, concept: Concept) -> Path | None:
        """The concept's learned artifact (trained now unless present); None without a learner."""
        config = self.options.config
        directory = self.artifact_dir(concept)
        if not config.trains:
            return None
        if artifact_complete(directory):
            return directory
        if self._own_work:
            mark_folder(self.work, made_by=ARTIFACT_MADE_BY)  # checked free in __init__: ours from now on
        class_images: list[Path] = []
        if config.uses_prior:
            class_images = ensure_class_images(
                self.pipe,
                concept,
                self.class_image_dir(concept),
                int(config.num_class_images or 0),
                run_seed=config.seed,
                num_inference_steps=config.num_inference_steps,
                guidance_scale=config.guidance_scale,
                resolution=config.resolution,
            )
        components = load_components(config.model_id, config.revision)
        try:
            return train_and_save(concept, config, directory, class_images=class_images, components=components)
        finally:
            del components
            if torch.cuda.is_available():
                torch.cuda.empty_cache()  # the next concept loads fresh weights

    def save_references(self, concept: Concept) -> None:
        """Thumbnails go to the store (OUT/.work/references/<concept>/), local or a URL: the
        assembler, possibly another machine, embeds them from there."""
        location = self.store.location
        folder = f"{REFERENCES_DIR}/{concept.name}"
        if location.exists(f"{folder}/done"):
            return
        for index, thumb in enumerate(reference_thumbnails(concept, count=REFERENCE_COUNT)):
            location.write(f"{folder}/{index}.png", thumb["bytes"])
        location.write(f"{folder}/done", b"")

    def make_concept_items(self, items: list[WorkItem]) -> list[ItemResult]:
        """The engine's ``process_batch``: one chunk = one concept's items (learned once)."""
        config = self.options.config
        concept = self._concept_of[items[0].item_id]
        self.save_references(concept)
        learned = self.learn(concept)
        results = []
        with AppliedArtifact(self.pipe, learned) if learned is not None else contextlib.nullcontext():
            for item in items:
                payload = item.payload
                image = generate_image(
                    self.pipe,
                    payload["prompt"],
                    item.seed,
                    num_inference_steps=config.num_inference_steps,
                    guidance_scale=config.guidance_scale,
                    resolution=config.resolution,
                    **config.family.sample_kwargs(config.eta),
                )
                categories = list(payload.get("categories", []))
                metadata = {
                    "concept": concept.name,
                    "concept_kind": concept.kind,
                    "learner": config.label,
                    "prompt": payload["prompt"],
                    "caption": payload.get("caption", ""),
                    "category": categories[0] if categories else "",
                    "categories": categories,
                    "questions": list(payload.get("questions", [])),
                }
                results.append(ItemResult(files={"png": png_bytes(image)}, metadata=metadata))
        return results

    def stage(self) -> Stage:
        """ConceptBed as an engine stage: chunks never span concepts (one learned model each)."""
        ordered = [item for concept in self.spec.concepts for item in self.items[concept.name]]
        largest = max((len(items) for items in self.items.values()), default=1)
        return Stage(
            name="conceptbed",
            items=ordered,
            settings=self.run_settings(),
            process_batch=self.make_concept_items,
            assembler=ASSEMBLER,
            assembly_args={
                "metadata": asdict(self.card_metadata()),
                "reference_ids": {
                    c.name: [f"{p.parent.name}/{p.name}" for p in c.reference_images[:REFERENCE_COUNT]]
                    for c in self.spec.concepts
                },
                "embed_references": self.options.embed_references,
                "max_shard_size": self.options.max_shard_size,
                "rebuild": self.rebuild_record(),
                # a user's spec only (the paper's run keeps its stored arguments as they were)
                **(
                    {"label_names": list(self.spec.label_names), "benchmark": self.spec.benchmark}
                    if self.spec.benchmark is not None
                    else {}
                ),
            },
            chunk_size=max(1, largest),  # one concept per chunk: no concept is learned twice
            group=lambda item: self._concept_of[item.item_id].name,
            description="ConceptBed images",
            unit="img",
        )

    def rebuild_record(self) -> dict[str, Any]:
        """What ``conceptforge verify`` needs to plan and sample these items again (cards.run_record):
        the learner settings, the concepts and their processed captions (no reference images)."""
        config = self.options.config
        return {
            "learner": config.to_json(),
            "model": {"id": config.model_id, "revision": resolve_model_revision(config.model_id, config.revision)},
            "num_images": self.options.num_images,
            "embed_references": self.options.embed_references,
            "concepts": [
                {
                    "name": c.name,
                    "kind": c.kind,
                    "parent": c.parent,
                    **({"prompt_words": c.prompt_words} if c.prompt_words else {}),
                }
                for c in self.spec.concepts
            ],
            "reference_ids": {
                c.name: [f"{p.parent.name}/{p.name}" for p in c.reference_images[:REFERENCE_COUNT]]
                for c in self.spec.concepts
            },
            "captions": {
                name: [
                    {
                        "concept": c.concept,
                        "caption": c.caption,
                        "categories": list(c.categories),
                        "subject": c.subject,
                        "questions": list(c.questions),
                    }
                    for c in captions
                ]
                for name, captions in self.captions.items()
            },
            "work_dir": str(self.work),  # read at assembly for the artifacts' fingerprints; not published
            **(
                {"prompts": asdict(self.spec.prompts), "label_names": list(self.spec.label_names or ())}
                if self.spec.benchmark is not None
                else {}
            ),
        }

    def run(self) -> dict[str, Any]:
        report = run_stage(
            self.stage(),
            self.run_dir,
            shard=self.options.shard,
            max_items=self.options.max_items,
            assemble=self.options.assemble,
        )
        self.report = report
        return {
            "concepts": len(self.spec.concepts),
            "made": report.made,
            "missing": report.missing_items,
            "assembled": report.assembled,
            "splits": {
                split: sum(1 for items in self.items.values() for i in items if i.split == split) for split in SPLITS
            },
            "message": report.message(self.out),
        }

    def missing_items(self) -> int:
        done = self.store.chunk_states()
        return sum(
            len(chunk.items)
            for chunk in plan_chunks(self.stage().items, self.stage().chunk_size, self.stage().group)
            if chunk.index not in done
        )

    def card_metadata(self) -> DatasetMetadata:
        config = self.options.config
        if config.trains:
            pretty_name = f"ConceptBed generated images ({config.label})"
            made_by = (
                f"Images generated by {config.learner} concept learners trained per concept on "
                f"{strip_local_path(config.model_id)} ({config.family.pipeline_class}; ConceptBed, Patel et al.) "
                f"with the `{config.preset}` preset"
            )
        else:
            pretty_name = "ConceptBed generated images (base model, no learner)"
            made_by = (
                f"Images generated by the base model {strip_local_path(config.model_id)} "
                f"({config.family.pipeline_class}) with no learned concept "
                "(ConceptBed, Patel et al., Table 2's base-model row): V* is the concept's class noun"
            )
        return DatasetMetadata(
            pretty_name=pretty_name,
            license=self.options.license,
            summary=(
                made_by
                + (
                    f" (DreamBooth {'full UNet fine-tuning' if config.dreambooth_mode == 'full' else f'LoRA rank {config.lora_rank}'}"
                    f", lr {config.learning_rate:g}, {config.steps} steps)"
                    if config.learner == "dreambooth"
                    else ""
                )
                + ". Split `concept` holds 'A photo of V*' "
                "(styles: 'A photo of a <entity> in the style of V*') images; split `composition` "
                "holds one image per composite caption with its yes/no questions."
            ),
            task_categories=["text-to-image"],
            tags=["conceptbed", "concept-learning", config.label if config.trains else "base-model"],
            license_note=self._license_note(),
            citation=CITATION,
            column_docs=COLUMN_DOCS,
            **CARD_SECTIONS,
            provenance=collect_provenance(
                generator="conceptforge generate conceptbed",
                models={"diffusion": (config.model_id, config.revision)},
                parameters=self.run_settings(),
                seeds={"run_seed": config.seed},
                extra={"concepts": [c.name for c in self.spec.concepts]},
            ),
        )

    def _license_note(self) -> str:
        if self.spec.benchmark is None:
            return EMBEDDED_REFERENCES_NOTE if self.options.embed_references else REFERENCES_NOTE
        return "The license covers the generated images. " + (
            "`reference_images` holds downsized copies of the concepts' reference images (`--embed-references`), "
            "which keep their own terms."
            if self.options.embed_references
            else "The concepts' reference images are not included: `reference_ids` names them by folder and file."
        )

    def assemble(self) -> Any:
        """Assemble now (idempotent; exactly once across processes)."""
        return assemble_run(self.run_dir, store=self.store)


@dataclass
class ConceptBedStageConfig:
    """One ConceptBed run: the concepts and how to learn and sample them (``options.config`` is the
    learner, ``options`` also says where the output and the learned weights go)."""

    spec: ConceptSpec
    options: GenerateOptions


def build_stage(config: ConceptBedStageConfig) -> Stage:
    """ConceptBed as an engine stage, like every generator's (``ConceptBedGenerator.stage``):
    one chunk per concept; its ``process_batch`` learns the concept once, then samples it.
    Checks the output (read only: the store is made with the first work); no model is loaded until a batch runs."""
    return ConceptBedGenerator(config.spec, config.options).stage()
