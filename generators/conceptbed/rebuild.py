"""How verify rebuilds a ConceptBed release's stage from its provenance record: the record's
processed captions and the learned artifacts' fingerprints, which the stage config does not take."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from conceptforge.engine.store import ItemStore
from conceptforge.errors import WeightsUnavailableError
from conceptforge.generators.rebuild import Rebuilt, tolerance, weight_location

GENERATOR = "conceptbed"


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


def rebuild(entry: Mapping[str, Any], weights: Mapping[str, str], device: str | None, out: Path) -> Rebuilt:
    from conceptforge.generators.conceptbed import stage as conceptbed
    from conceptforge.generators.conceptbed.card import split_rows
    from conceptforge.generators.conceptbed.composition import Caption
    from conceptforge.generators.conceptbed.learners import LearnerConfig
    from conceptforge.generators.conceptbed.spec import Concept, ConceptPrompts, ConceptSpec

    rebuild = entry["rebuild"]
    model = weight_location("diffusion", rebuild["model"], weights)
    config = LearnerConfig(**{**rebuild["learner"], "model_id": model})
    learners = _learners(rebuild, weights) if config.trains else None  # the base model alone has none
    concepts = tuple(Concept(c["name"], c["kind"], c["parent"], (), c.get("prompt_words")) for c in rebuild["concepts"])
    prompts = rebuild.get("prompts")  # a user's spec; the paper's prompts otherwise
    spec = ConceptSpec(
        concepts=concepts,
        prompts=ConceptPrompts(**{**prompts, "style_subjects": tuple(prompts["style_subjects"])})
        if prompts
        else ConceptPrompts(),
    )
    options = conceptbed.GenerateOptions(
        config=config,
        out=out,
        num_images=int(rebuild["num_images"]),
        work_dir=learners,
        claim_work=False,  # read only: the artifacts' fingerprints were checked above
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
        return split_rows(store, split, reference_ids, embed)

    return Rebuilt(
        generator.stage(),
        rows,
        tolerance("diffusion sampling with learned concept weights: the bytes depend on the device"),
    )
