"""The binding method's spec: a vocabulary (CLEVR's ``properties.json`` and shape files, or inline),
the relations, the held-out compositions and the split sizes of each dataset (paper 004 §3).

A spec is validated in two steps, both before anything is written: the fields (pydantic, one
line naming the path) and :meth:`BindingBenchmarkSpec.check` (cross-field rules); then
:func:`resolve_vocabulary` reads the files it names (``properties.json``, ``<Name>.blend`` shape
files, material node-group files) and computes the held-out splits by the paper's rules
(:mod:`conceptforge.generators.binding.heldout`). The paper itself is the preset
``binding-clevr-paper`` (``binding-demo``: the same vocabulary at demo sizes).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from conceptforge.generators.binding.heldout import check_held_out, compute_held_out
from conceptforge.generators.binding.vocab import (
    MATERIAL_ASSETS,
    OPPOSITE_RELATION,
    SHAPE_ASSETS,
    AssetKind,
    Vocabulary,
)
from conceptforge.specs import BenchmarkSpecFile, load_benchmark_spec, parse_fields, spec_error

DatasetName = Literal["single-object", "two-object", "relational"]
RelationName = Literal["left", "right", "front", "behind"]
Channel = Annotated[int, Field(ge=0, le=255)]
WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
#: ``--preset`` names the command has always taken, and the preset file each one is.
PRESET_ALIASES = {"demo": "binding-demo", "paper": "binding-clevr-paper"}


@dataclass(frozen=True)
class VocabularySpec:
    """Where the vocabulary comes from: a CLEVR ``properties.json`` (with its shape and material
    folders, laid out as CLEVR's ``data/shapes`` and ``data/materials``), inline mappings, or both
    (an inline mapping replaces the file's)."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    properties: Annotated[str | None, Field(description="CLEVR properties.json (shapes, colors, materials, sizes)")] = (
        None
    )
    shape_dir: Annotated[str | None, Field(description="folder of <ObjectName>.blend files, one object each")] = None
    material_dir: Annotated[str | None, Field(description="folder of <Name>.blend files, a node group each")] = None
    shapes: Annotated[dict[str, str] | None, Field(description="shape word -> Blender object name")] = None
    colors: Annotated[
        dict[str, tuple[Channel, Channel, Channel]] | None, Field(description="colour word -> sRGB 0-255")
    ] = None
    materials: Annotated[dict[str, str] | None, Field(description="material word -> Blender material name")] = None
    sizes: Annotated[
        dict[str, Annotated[float, Field(gt=0, le=2.0)]] | None,
        Field(description="size word -> object radius (Blender units)"),
    ] = None


@dataclass(frozen=True)
class SplitSizes:
    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    train: Annotated[int, Field(ge=0)] = 0
    val: Annotated[int, Field(ge=0)] = 0
    gen: Annotated[int, Field(ge=0)] = 0


@dataclass(frozen=True)
class HeldOutSpec:
    """Held-out compositions. Unnamed ones are computed by the paper's rules (see heldout.py)."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    adjective_noun: Annotated[
        dict[Literal["val", "gen"], tuple[tuple[str, str], ...]] | None,
        Field(description="[colour, shape] pairs per split (single- and two-object)"),
    ] = None
    relational: Annotated[
        dict[Literal["val", "gen"], tuple[tuple[str, RelationName, str], ...]] | None,
        Field(description="[subject, relation, object] per split; its converse is held out with it"),
    ] = None
    seed: Annotated[int, Field(description="seed of the computed choice")] = 0


@dataclass(frozen=True)
class BindingBenchmarkSpec:
    """A binding benchmark: vocabulary, relations, held-out compositions, split sizes per dataset."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    vocabulary: VocabularySpec
    splits: dict[DatasetName, SplitSizes]
    relations: tuple[RelationName, ...] = ("left", "right", "front", "behind")
    held_out: HeldOutSpec = field(default_factory=HeldOutSpec)

    def check(self, *, source: str = "") -> None:
        v = self.vocabulary
        for name in ("shapes", "colors", "materials", "sizes"):
            if getattr(v, name) is not None and not getattr(v, name):
                raise spec_error(f"vocabulary.{name}", "is empty; name at least one (or leave it out)", source=source)
        for name in ("shapes", "colors", "materials", "sizes"):
            for word in getattr(v, name) or ():
                _check_word(word, f"vocabulary.{name}.{word}", source=source)
        if not v.properties and not (v.shapes and v.colors and v.materials and v.sizes):
            missing = [name for name in ("shapes", "colors", "materials", "sizes") if not getattr(v, name)]
            raise spec_error(
                "vocabulary",
                f"no properties.json and no inline {', '.join(missing)}; give 'properties: properties.json' "
                "or every one of shapes, colors, materials, sizes",
                source=source,
            )
        if not self.splits:
            raise spec_error(
                "splits",
                "is empty; give sizes for at least one of single-object, two-object, relational",
                source=source,
            )
        if not self.relations:
            raise spec_error("relations", "is empty; name at least one of left, right, front, behind", source=source)
        for index, relation in enumerate(self.relations):
            if self.relations.index(relation) != index:
                raise spec_error(f"relations[{index}]", f"{relation!r} is named twice", source=source)
            if "relational" in self.splits and OPPOSITE_RELATION[relation] not in self.relations:
                raise spec_error(
                    f"relations[{index}]",
                    f"{relation!r} needs its opposite {OPPOSITE_RELATION[relation]!r} too (the aSb distractor)",
                    source=source,
                )
        for dataset, sizes in self.splits.items():
            if not (sizes.train or sizes.val or sizes.gen):
                raise spec_error(f"splits.{dataset}", "every split size is 0; give at least one image", source=source)


def _check_word(word: str, field_path: str, *, source: str) -> None:
    """A word is one token: labels are ``colour shape`` and ``subject relation object``, split on spaces."""
    if not WORD.fullmatch(word):
        raise spec_error(
            field_path,
            f"{word!r} is not one word; use letters, digits, '_' or '-' (labels join words with spaces)",
            source=source,
        )


def _read_properties(path: Path, *, source: str) -> dict[str, Any]:
    if not path.is_file():
        raise spec_error("vocabulary.properties", f"{path} does not exist; give CLEVR's properties.json", source=source)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise spec_error("vocabulary.properties", f"{path} is not JSON ({error})", source=source) from None
    if not isinstance(data, dict):
        raise spec_error("vocabulary.properties", f"{path} must hold a JSON object", source=source)
    keys = ("shapes", "colors", "materials", "sizes")
    parsed = parse_fields(VocabularySpec, {k: data[k] for k in keys if k in data}, source=f"{source}: {path}")
    for key in keys:
        for word in getattr(parsed, key) or ():
            _check_word(word, f"{key}.{word}", source=f"{source}: {path}")
    return {k: getattr(parsed, k) for k in keys}


def _blend_has(path: Path, prefix: bytes, name: str) -> bool:
    """Whether an uncompressed .blend file names an ID ``prefix + name`` (compressed: assumed)."""
    data = path.read_bytes()
    if not data.startswith(b"BLENDER"):
        return True  # compressed (zstd/gzip): Blender itself checks when it loads the file
    return prefix + name.encode("utf-8") + b"\0" in data


def _asset_files(kind: AssetKind, names: dict[str, str], folder: Path | None, *, source: str) -> dict[str, str]:
    """Each word's ``.blend`` file (absolute path) where the kind's folder has one; a word without a
    file must name a thing the renderer builds itself."""
    files = {}
    for word, blender_name in names.items():
        path = folder / f"{blender_name}.blend" if folder else None
        if path is not None and path.is_file():
            if not _blend_has(path, kind.id_prefix, blender_name):
                raise spec_error(
                    f"vocabulary.{kind.field}.{word}",
                    f"{path} has no {kind.id_noun} named {blender_name!r}; save the {kind.singular} as "
                    f"{kind.id_phrase} of that name",
                    source=source,
                )
            files[word] = str(path.resolve())
        elif blender_name not in kind.builtins:
            where = f"{path} is missing" if path else f"no vocabulary.{kind.singular}_dir is given"
            raise spec_error(
                f"vocabulary.{kind.field}.{word}",
                f"{kind.singular} file for {blender_name!r}: {where}; put {blender_name}.blend ("
                f"{kind.id_phrase} named {blender_name}{kind.needs}) in the {kind.singular} folder, or use "
                f"{kind.builtin_choice}",
                source=source,
            )
    return files


def _folder(base_dir: Path, value: str | None, field_path: str, *, source: str) -> Path | None:
    if value is None:
        return None
    path = Path(value) if Path(value).is_absolute() else base_dir / value
    if not path.is_dir():
        raise spec_error(field_path, f"{path} is not a folder", source=source)
    return path


def resolve_vocabulary(spec: BindingBenchmarkSpec, base_dir: Path, *, source: str = "") -> Vocabulary:
    """The spec's vocabulary with its files checked and its held-out compositions computed."""
    v = spec.vocabulary
    found: dict[str, Any] = {}
    if v.properties:
        path = Path(v.properties) if Path(v.properties).is_absolute() else base_dir / v.properties
        found = _read_properties(path, source=source)
    merged = {
        name: getattr(v, name) if getattr(v, name) is not None else found.get(name)
        for name in ("shapes", "colors", "materials", "sizes")
    }
    for name, value in merged.items():
        if not value:
            raise spec_error(f"vocabulary.{name}", "is empty: the vocabulary needs at least one", source=source)
    shape_dir = _folder(base_dir, v.shape_dir, "vocabulary.shape_dir", source=source)
    material_dir = _folder(base_dir, v.material_dir, "vocabulary.material_dir", source=source)
    shapes = tuple(merged["shapes"])
    colors = tuple(merged["colors"])
    relations = tuple(spec.relations)
    held = compute_held_out(shapes, colors, relations, spec.held_out, datasets=tuple(spec.splits), source=source)
    check_held_out(shapes, colors, held, datasets=tuple(spec.splits), source=source)
    _check_every_sized_split_has_classes(spec, shapes, colors, relations, held, source=source)
    return Vocabulary(
        shapes=shapes,
        colors=tuple((name, tuple(rgb)) for name, rgb in merged["colors"].items()),
        materials=tuple(merged["materials"]),
        sizes=tuple((name, float(r)) for name, r in merged["sizes"].items()),
        relations=relations,
        shape_objects=tuple(merged["shapes"].items()),
        material_objects=tuple(merged["materials"].items()),
        shape_files=tuple(_asset_files(SHAPE_ASSETS, merged["shapes"], shape_dir, source=source).items()),
        material_files=tuple(_asset_files(MATERIAL_ASSETS, merged["materials"], material_dir, source=source).items()),
        adj_noun_held_out=tuple((split, held["adjective_noun"][split]) for split in ("val", "gen")),
        relation_held_out=tuple((split, held["relational"][split]) for split in ("val", "gen")),
    )


def _check_every_sized_split_has_classes(
    spec: BindingBenchmarkSpec, shapes, colors, relations, held: dict, *, source: str
) -> None:
    """A split asked for images must have true classes to depict (items cycle through them)."""
    adj_noun_count = len(shapes) * len(colors)
    facts_count = len(shapes) * (len(shapes) - 1) * len(relations)
    for dataset, sizes in spec.splits.items():
        kind = "relational" if dataset == "relational" else "adjective_noun"
        total = facts_count if dataset == "relational" else adj_noun_count
        held_here = held[kind]
        classes = {"train": total - len(held_here["val"]) - len(held_here["gen"])}
        classes |= {split: len(held_here[split]) for split in ("val", "gen")}
        for split, count in classes.items():
            if getattr(sizes, split) and not count:
                raise spec_error(
                    f"splits.{dataset}.{split}",
                    f"{getattr(sizes, split)} images but no {split} class to show; "
                    + (
                        f"hold out compositions for {split} in held_out.{kind}, or set it to 0"
                        if split != "train"
                        else "hold out fewer compositions"
                    ),
                    source=source,
                )


def load_binding_spec(spec_file: str | Path | None = None, *, preset: str | None = None) -> BenchmarkSpecFile:
    """A binding spec file or preset (``demo``/``paper`` name ``binding-demo``/``binding-clevr-paper``)."""
    if preset is not None:
        preset = PRESET_ALIASES.get(preset, preset)
    return load_benchmark_spec(spec_file, preset=preset, method="binding", spec_cls=BindingBenchmarkSpec)


def spec_vocabulary(spec_file: BenchmarkSpecFile) -> Vocabulary:
    source = f"preset {spec_file.preset}" if spec_file.preset else str(spec_file.path)
    return resolve_vocabulary(spec_file.spec, spec_file.base_dir, source=source)


def preset_vocabulary(name: str) -> Vocabulary:
    return spec_vocabulary(load_binding_spec(preset=name))


@cache
def paper_vocabulary() -> Vocabulary:
    """The paper's vocabulary, read from the ``binding-clevr-paper`` preset (CLEVR's look)."""
    return preset_vocabulary("binding-clevr-paper")
