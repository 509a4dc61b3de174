"""Concept specs: which ConceptBed concepts to learn, and where their reference images live.

Two files say it: a benchmark spec (YAML, any concepts: :mod:`.benchmark`, resolved by
:mod:`.spec_resolution`) and, for the paper's concepts, the older small JSON file below, which
keeps working as it did (``--concepts FILE``; with ``--preset conceptbed-paper`` it is read as
that preset's roots and selection). Both become the :class:`ConceptSpec` the generator reads.
The JSON file::

    {
      "pacs_root": "/data/PACS/kfold",            # <domain>/<entity>/*.jpg
      "imagenet_root": "/data/imagenet/train",     # <wnid>/*.JPEG + LOC_synset_mapping.txt, or <name>/
      "cub_root": "/data/CUB_200_2011/images",     # NNN.Class_Name/*.jpg
      "concepts": ["art_painting", "beagle", "001.Black_footed_Albatross"],   # or "all", "style", ...
      "max_reference_images": 100,
      "captions": "captions.jsonl"                 # optional, for the composition split
    }

Relative paths are resolved against the spec file's folder. Only the roots of the kinds that are
asked for are needed. Reference images are chosen deterministically (sorted file names; styles
take entities round-robin so each of the seven is represented).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conceptforge.cub import class_image_dir
from conceptforge.errors import DataNotFoundError, SpecError
from conceptforge.generators.conceptbed.concepts import CONCEPT_KINDS, PACS_ENTITIES, library, readable

logger = logging.getLogger(__name__)

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp"}
SYNSET_FILES = ("LOC_synset_mapping.txt", "synset_words.txt", "words.txt")
DEFAULT_MAX_REFERENCE_IMAGES = 100


@dataclass(frozen=True)
class Concept:
    """One concept to learn: its name, kind, nouns for prompts and its reference images."""

    name: str
    kind: str  # style | object | cub
    parent: str  # caption subject word (Visual Genome), e.g. "dog" for beagle
    reference_images: tuple[Path, ...] = ()
    prompt_words: str | None = None  # a spec's prompt_name; None: the readable name

    @property
    def class_noun(self) -> str:
        """Words naming the concept in class prompts (DreamBooth prior: c_pr = C("<concept-name>"))."""
        return self.prompt_words or readable(self.name)


@dataclass(frozen=True)
class ConceptPrompts:
    """The concept split's prompts (ConceptBed Sec. 3.2.2 by default): ``{}`` is V*; a style's
    prompt also takes ``{subject}`` (one of ``style_subjects`` in turn) and its ``{article}``."""

    concept: str = "A photo of {}"
    style: str = "A photo of {article} {subject} in the style of {}"
    style_subjects: tuple[str, ...] = PACS_ENTITIES


@dataclass(frozen=True)
class ConceptSpec:
    """The concepts of one run, resolved: what the generator reads, whichever file it came from.

    ``label_names`` is the ``concept_label`` ClassLabel (None: the paper's 284 concepts);
    ``benchmark`` is the validated benchmark spec a user's release carries (None: the paper's run).
    """

    concepts: tuple[Concept, ...]
    captions: Path | None = None
    source: dict[str, Any] = field(default_factory=dict)
    prompts: ConceptPrompts = field(default_factory=ConceptPrompts)
    composition_templates: tuple[str, ...] = ()
    label_names: tuple[str, ...] | None = None
    benchmark: dict[str, Any] | None = None

    def by_name(self) -> dict[str, Concept]:
        return {c.name: c for c in self.concepts}


def _images_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def _root(raw: Mapping[str, Any], key: str, base: Path) -> Path:
    value = raw.get(key)
    if not value:
        raise SpecError(f"the concept spec needs {key!r} for the concepts it asks for")
    path = Path(value).expanduser()
    path = path if path.is_absolute() else base / path
    if not path.is_dir():
        raise DataNotFoundError(f"{key} {path} is not a directory")
    return path


def _pacs_domain_dir(root: Path, style: str) -> Path:
    for candidate in (root / style, root / "kfold" / style, root / "pacs_data" / style):
        if candidate.is_dir():
            return candidate
    raise DataNotFoundError(f"PACS style folder {style!r} not found under {root} (expected <root>/{style}/<entity>/)")


def pacs_images(root: Path, style: str, limit: int) -> list[Path]:
    """Round-robin over the seven entities so a small limit still shows every entity."""
    domain = _pacs_domain_dir(root, style)
    per_entity = [_images_in(domain / e) for e in PACS_ENTITIES if (domain / e).is_dir()]
    if not per_entity:
        raise DataNotFoundError(f"no PACS entity folders ({', '.join(PACS_ENTITIES)}) in {domain}")
    chosen: list[Path] = []
    depth = 0
    while len(chosen) < limit and any(depth < len(images) for images in per_entity):
        chosen.extend(images[depth] for images in per_entity if depth < len(images))
        depth += 1
    return chosen[:limit]


def _normalise(text: str) -> str:
    return " ".join(text.replace("_", " ").lower().split())


def read_synset_mapping(path: Path) -> dict[str, list[str]]:
    """``wnid lemma1, lemma2`` lines (ImageNet's LOC_synset_mapping.txt / synset_words.txt)."""
    mapping: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) == 2:
            mapping[parts[0]] = [_normalise(lemma) for lemma in parts[1].split(",")]
    return mapping


def imagenet_folder(root: Path, name: str) -> Path:
    """Find a concept's folder: named after the concept, or its WordNet id via a synset file."""
    for candidate in (name, name.lower(), readable(name)):
        if (root / candidate).is_dir():
            return root / candidate
    wanted = _normalise(name)
    for directory in (root, root.parent):
        for file_name in SYNSET_FILES:
            if not (directory / file_name).is_file():
                continue
            mapping = read_synset_mapping(directory / file_name)
            first = [wnid for wnid, lemmas in mapping.items() if lemmas and lemmas[0] == wanted]
            anywhere = [wnid for wnid, lemmas in mapping.items() if wanted in lemmas]
            for matches in (first, anywhere):
                present = [w for w in matches if (root / w).is_dir()]
                if len(present) == 1:
                    return root / present[0]
                if len(present) > 1:
                    raise SpecError(f"ImageNet concept {name!r} matches several synsets: {', '.join(present)}")
    raise DataNotFoundError(
        f"ImageNet concept {name!r} not found under {root}: expected a folder named after it or a "
        f"WordNet-id folder listed in {' / '.join(SYNSET_FILES)}"
    )


def expand_concept_names(selection: str | Iterable[str]) -> list[str]:
    """Names, kinds (``style``/``object``/``cub``) or ``all`` -> concept names, library order."""
    lib = library()
    items = [selection] if isinstance(selection, str) else list(selection)
    names: list[str] = []
    for item in items:
        if item == "all":
            chosen = list(lib)
        elif item in CONCEPT_KINDS:
            chosen = [n for n, (kind, _) in lib.items() if kind == item]
        elif item in lib:
            chosen = [item]
        else:
            raise SpecError(
                f"unknown ConceptBed concept {item!r}: use a Table 9 name (e.g. art_painting, beagle, "
                "001.Black_footed_Albatross), a kind (style, object, cub) or all"
            )
        names.extend(n for n in chosen if n not in names)
    if not names:
        raise SpecError("the concept spec selects no concepts")
    return names


def load_spec(path: str | Path, *, resolve_images: bool = True) -> ConceptSpec:
    """Read a spec file and resolve every selected concept's reference images."""
    path = Path(path)
    return spec_from_dict(read_concept_json(path), base=path.parent, resolve_images=resolve_images)


def read_concept_json(path: Path) -> dict[str, Any]:
    """The JSON concept spec's object (roots, selection, captions), nothing resolved yet."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataNotFoundError(f"concept spec {path} does not exist") from None
    except ValueError as error:  # not JSON, or not text at all (UnicodeDecodeError)
        raise SpecError(f"concept spec {path} is not valid JSON: {error}") from None
    if not isinstance(raw, dict):
        raise SpecError(f"concept spec {path} must be a JSON object")
    return raw


def spec_from_dict(raw: Mapping[str, Any], *, base: Path, resolve_images: bool = True) -> ConceptSpec:
    lib = library()
    limit = int(raw.get("max_reference_images", DEFAULT_MAX_REFERENCE_IMAGES))
    if limit < 1:
        raise SpecError("max_reference_images must be >= 1")
    concepts = []
    for name in expand_concept_names(raw.get("concepts", "all")):
        kind, parent = lib[name]
        images: list[Path] = []
        if resolve_images:
            if kind == "style":
                images = pacs_images(_root(raw, "pacs_root", base), name, limit)
            elif kind == "object":
                images = _images_in(imagenet_folder(_root(raw, "imagenet_root", base), name))[:limit]
            else:
                images = _images_in(class_image_dir(_root(raw, "cub_root", base), name))[:limit]
            if not images:
                raise DataNotFoundError(f"concept {name!r} has no reference images")
        concepts.append(Concept(name=name, kind=kind, parent=parent, reference_images=tuple(images)))
    captions = raw.get("captions")
    captions_path = None
    if captions:
        captions_path = Path(captions).expanduser()
        captions_path = captions_path if captions_path.is_absolute() else base / captions_path
        if not captions_path.exists():
            raise DataNotFoundError(f"captions {captions_path} do not exist")
    logger.info("concept spec: %d concept(s)", len(concepts))
    return ConceptSpec(concepts=tuple(concepts), captions=captions_path, source=dict(raw))
