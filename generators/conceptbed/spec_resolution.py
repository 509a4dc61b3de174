"""From a ConceptBed benchmark spec to the concepts a run learns: each concept's reference images found.

Why apart from the spec's dataclasses: validating a spec reads no files, resolving it does (folders,
a `datasets` dataset, the PACS/ImageNet/CUB copies named under ``roots``). Every problem found
here is still one line naming the spec field (``concepts[2].images.folder: ... has no images``),
and nothing is written before the whole spec resolved, except the reference images of a
`datasets` source, which are written once to a cache folder the run reads them from.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from conceptforge.cub import class_image_dir
from conceptforge.errors import ConceptforgeError
from conceptforge.generators.conceptbed.benchmark import ConceptBedBenchmarkSpec, ConceptEntry, PaperRoots
from conceptforge.generators.conceptbed.spec import (
    Concept,
    ConceptPrompts,
    ConceptSpec,
    imagenet_folder,
    pacs_images,
)
from conceptforge.specs import BenchmarkSpecFile, load_benchmark_spec, open_source, spec_error
from conceptforge.specs.sources import imagefolder_suffixes, resolve_path

logger = logging.getLogger(__name__)

CONCEPTBED_PAPER_PRESET = "conceptbed-paper"
_ROOT_NAMES = {"pacs": "PACS", "imagenet": "ImageNet", "cub": "CUB-200-2011"}


def load_conceptbed_spec(spec_file: str | Path | None = None, *, preset: str | None = None) -> BenchmarkSpecFile:
    """A ConceptBed spec file or built-in preset, validated (nothing read beyond the file)."""
    return load_benchmark_spec(spec_file, preset=preset, method="conceptbed", spec_cls=ConceptBedBenchmarkSpec)


def folder_images(folder: Path) -> list[Path]:
    """A concept folder's images, nested folders included, in a stable (sorted) order."""
    suffixes = imagefolder_suffixes()
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in suffixes)


def references_cache() -> Path:
    """Where a `datasets` source's reference images are written once (the learners read files)."""
    base = os.environ.get("CONCEPTFORGE_REFERENCES_DIR") or Path(
        os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"), "conceptforge", "conceptbed-references"
    )
    return Path(base)


def _dataset_images(entry: ConceptEntry, where: str, spec_file: BenchmarkSpecFile, limit: int) -> list[Path]:
    """The rows whose class column is the concept's label, saved as PNGs in the references cache."""
    from datasets import ClassLabel

    images = entry.images
    source = images.dataset
    assert source is not None
    source_name = str(spec_file.path)
    dataset = open_source(source, base_dir=spec_file.base_dir, spec_source=source_name)
    feature = dataset.features[source.class_column]
    values = dataset[source.class_column]
    label: Any = images.label
    if isinstance(feature, ClassLabel):
        names = feature.names
        values = [names[v] for v in values]
        label = names[label] if isinstance(label, int) and 0 <= label < len(names) else str(label)
    rows = [index for index, value in enumerate(values) if str(value) == str(label)]
    if not rows:
        present = sorted({str(v) for v in values})
        raise spec_error(
            f"{where}.images.label",
            f"no rows of {source.description} have {source.class_column} = {label!r}; "
            f"labels there: {', '.join(present[:12])}{' ...' if len(present) > 12 else ''}",
            source=source_name,
        )
    key = hashlib.sha256(f"{source.description}\0{source.split}\0{source.config}\0{label}".encode()).hexdigest()[:16]
    folder = references_cache() / key / entry.name
    paths = []
    for position, row in enumerate(rows[:limit]):
        path = folder / f"{position:04d}.png"
        if not path.exists():
            image = dataset[row][source.image_column]
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial")
            image.convert("RGB").save(partial, format="PNG")
            partial.replace(path)
        paths.append(path)
    return paths


def _paper_images(entry: ConceptEntry, where: str, spec_file: BenchmarkSpecFile, limit: int) -> list[Path]:
    kind = entry.images.kind
    value = str(getattr(entry.images, kind))
    source_name = str(spec_file.path)
    given = getattr(spec_file.spec.roots, kind)
    if not given:
        raise spec_error(
            f"{where}.images.{kind}",
            f"needs roots.{kind}: the folder of your {_ROOT_NAMES[kind]} copy (add 'roots: {{{kind}: /data/...}}')",
            source=source_name,
        )
    root = resolve_path(given, spec_file.base_dir)
    if not root.is_dir():
        raise spec_error(f"roots.{kind}", f"no such folder {str(root)!r}", source=source_name)
    try:
        if kind == "pacs":
            return pacs_images(root, value, limit)
        if kind == "imagenet":
            return folder_images(imagenet_folder(root, value))[:limit]
        return folder_images(class_image_dir(root, value))[:limit]
    except ConceptforgeError as error:
        raise spec_error(f"{where}.images.{kind}", str(error), source=source_name) from None


def concept_images(entry: ConceptEntry, where: str, spec_file: BenchmarkSpecFile) -> list[Path]:
    """One concept's reference images (at most ``max_reference_images``); none is an error."""
    limit = spec_file.spec.max_reference_images
    kind = entry.images.kind
    if kind == "dataset":
        images = _dataset_images(entry, where, spec_file, limit)
    elif kind == "folder":
        folder = resolve_path(str(entry.images.folder), spec_file.base_dir)
        if not folder.is_dir():
            raise spec_error(
                f"{where}.images.folder",
                f"no such folder {str(folder)!r}; give the folder of this concept's images "
                "(relative paths are read from the spec file's folder)",
                source=str(spec_file.path),
            )
        images = folder_images(folder)[:limit]
    else:
        images = _paper_images(entry, where, spec_file, limit)
    if not images:
        raise spec_error(
            f"{where}.images.{kind}",
            f"concept {entry.name!r} has no image files (.jpg, .png, ... as datasets' imagefolder reads); "
            "add images or remove the concept",
            source=str(spec_file.path),
        )
    return images


def normalised_spec(spec_file: BenchmarkSpecFile) -> dict[str, Any]:
    """The validated spec with every default filled in: what a release carries as benchmark_spec.yaml."""
    fields = asdict(spec_file.spec)

    def without_none(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: without_none(v) for k, v in value.items() if v is not None}
        if isinstance(value, (list, tuple)):
            return [without_none(v) for v in value]
        return value

    body = {
        "method": "conceptbed",
        "spec_version": spec_file.spec_version,
        "name": spec_file.name,
        **({"description": spec_file.description} if spec_file.description else {}),
        **without_none(fields),
    }
    return body


def concept_spec(spec_file: BenchmarkSpecFile, *, resolve_images: bool = True) -> ConceptSpec:
    """The run's concepts from a validated spec. A preset is the paper's run (its ClassLabel is
    Table 9's 284 concepts, its release carries no spec file); a user's spec labels its own concepts
    and travels with the release."""
    spec: ConceptBedBenchmarkSpec = spec_file.spec
    concepts = []
    for index, entry in enumerate(spec.concepts):
        images = concept_images(entry, f"concepts[{index}]", spec_file) if resolve_images else []
        concepts.append(
            Concept(
                name=entry.name,
                kind=entry.kind,
                parent=entry.class_noun,
                reference_images=tuple(images),
                prompt_words=entry.prompt_name,
            )
        )
    captions = None
    if spec.captions:
        captions = resolve_path(spec.captions, spec_file.base_dir)
        if not captions.exists():
            raise spec_error("captions", f"no such file or folder {str(captions)!r}", source=str(spec_file.path))
    user_spec = spec_file.preset is None
    logger.info("%s: %d concept(s)", spec_file.name, len(concepts))
    return ConceptSpec(
        concepts=tuple(concepts),
        captions=captions,
        prompts=ConceptPrompts(spec.prompts.concept, spec.prompts.style, tuple(spec.prompts.style_subjects)),
        composition_templates=tuple(spec.composition_templates),
        label_names=tuple(c.name for c in concepts) if user_spec else None,
        benchmark=normalised_spec(spec_file) if user_spec else None,
    )


def load_concepts_file(path: str | Path, *, resolve_images: bool = True) -> ConceptSpec:
    """A concepts file of either kind: a benchmark spec (YAML, or JSON with ``method``) or the
    paper's JSON concept spec. Why one reader: train-oracle and evaluate take either, as generate does."""
    from conceptforge.generators.conceptbed.spec import load_spec

    path = Path(path)
    if path.suffix.lower() in (".yaml", ".yml") or _names_a_method(path):
        return concept_spec(load_conceptbed_spec(path), resolve_images=resolve_images)
    return load_spec(path, resolve_images=resolve_images)


def _names_a_method(path: Path) -> bool:
    import json

    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False  # the JSON reader says what is wrong with it
    return isinstance(raw, dict) and "method" in raw


def select_concepts(spec: ConceptBedBenchmarkSpec, selection: str | Iterable[str]) -> tuple[ConceptEntry, ...]:
    """Names, kinds or ``all`` (the old JSON spec's ``concepts``) -> the spec's concepts, in the order asked."""
    from conceptforge.errors import SpecError

    items = [selection] if isinstance(selection, str) else list(selection)
    by_name = {c.name: c for c in spec.concepts}
    kinds = {c.kind for c in spec.concepts}
    chosen: dict[str, ConceptEntry] = {}
    for item in items:
        if item == "all":
            found = list(spec.concepts)
        elif item in kinds:
            found = [c for c in spec.concepts if c.kind == item]
        elif item in by_name:
            found = [by_name[item]]
        else:
            raise SpecError(
                f"unknown ConceptBed concept {item!r}: use a Table 9 name (e.g. art_painting, beagle, "
                "001.Black_footed_Albatross), a kind (style, object, cub) or all"
            )
        for concept in found:
            chosen.setdefault(concept.name, concept)
    if not chosen:
        raise SpecError("the concept spec selects no concepts")
    return tuple(chosen.values())


def with_concept_json(spec_file: BenchmarkSpecFile, concepts_json: Path) -> BenchmarkSpecFile:
    """A preset applied to the old JSON concept spec (``--concepts FILE``): its PACS/ImageNet/CUB
    roots, its selection of concepts, reference-image limit and captions, read as spec fields."""
    from conceptforge.generators.conceptbed.spec import DEFAULT_MAX_REFERENCE_IMAGES, read_concept_json

    raw = read_concept_json(concepts_json)
    base = concepts_json.parent

    def absolute(key: str) -> str | None:
        value = raw.get(key)
        return str(resolve_path(str(value), base)) if value else None

    spec: ConceptBedBenchmarkSpec = spec_file.spec
    roots = PaperRoots(
        pacs=absolute("pacs_root") or spec.roots.pacs,
        imagenet=absolute("imagenet_root") or spec.roots.imagenet,
        cub=absolute("cub_root") or spec.roots.cub,
    )
    limit = int(raw.get("max_reference_images", DEFAULT_MAX_REFERENCE_IMAGES))
    if limit < 1:
        from conceptforge.errors import SpecError

        raise SpecError("max_reference_images must be >= 1")
    merged = replace(
        spec,
        concepts=select_concepts(spec, raw.get("concepts", "all")),
        roots=roots,
        max_reference_images=limit,
        captions=absolute("captions") or spec.captions,
    )
    return replace(spec_file, spec=merged)
