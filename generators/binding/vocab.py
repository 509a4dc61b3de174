"""The binding benchmark's vocabulary: shapes, colours, materials, sizes and relations, and how each looks.

The vocabulary is data, not code: the paper's (paper 004 §3, CLEVR's look) is the preset
``binding-clevr-paper.yaml`` (``benchmark.paper_vocabulary()``), and a researcher's own comes from
their spec (a CLEVR ``properties.json`` with a folder of shape ``.blend`` files, or inline).
:class:`Vocabulary` is the resolved form every part of the generator reads (splits, sampling,
features, the renderer); it is plain, hashable data so it travels to Blender worker processes and
into the run's stored settings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

#: CLEVR's relations on the ground plane (camera-relative), and each one's opposite (the paper's S).
OPPOSITE_RELATION: dict[str, str] = {"left": "right", "right": "left", "front": "behind", "behind": "front"}
SUPPORTED_RELATIONS: tuple[str, ...] = tuple(OPPOSITE_RELATION)

#: Blender object names the renderer builds itself (no shape file needed): CLEVR's names and ours.
BUILTIN_SHAPES: dict[str, str] = {
    "SmoothCube_v2": "cube",
    "Cube": "cube",
    "cube": "cube",
    "Sphere": "sphere",
    "sphere": "sphere",
    "SmoothCylinder": "cylinder",
    "Cylinder": "cylinder",
    "cylinder": "cylinder",
}
#: Material names the renderer builds itself (no node-group file needed): CLEVR's names and ours.
BUILTIN_MATERIALS: dict[str, str] = {"Rubber": "rubber", "rubber": "rubber", "MyMetal": "metal", "metal": "metal"}


@dataclass(frozen=True)
class AssetKind:
    """What a vocabulary word names in Blender, shape or material, and where its file comes from.

    Why: the spec check and the starter treat shape objects and material node groups alike (a
    ``NAME.blend`` in the kind's folder, or one the renderer builds itself); only these words differ.
    """

    singular: str  # vocabulary.<singular>s.<word>; vocabulary.<singular>_dir is its folder
    id_prefix: bytes  # the Blender ID code naming the thing inside a .blend (OB object, NT node tree)
    id_phrase: str  # "an object": what the .blend must hold, under the word's Blender name
    builtins: dict[str, str]
    builtin_choice: str  # the error's alternative to a file
    file_label: str  # the starter's words for a file found
    needs: str = ""  # what the Blender thing must have beyond its name

    @property
    def field(self) -> str:
        return f"{self.singular}s"

    @property
    def id_noun(self) -> str:
        return self.id_phrase.split(" ", 1)[1]


_BUILTIN_SHAPE_CHOICE = f"a built-in shape ({', '.join(sorted(set(BUILTIN_SHAPES.values())))})"
SHAPE_ASSETS = AssetKind("shape", b"OB", "an object", BUILTIN_SHAPES, _BUILTIN_SHAPE_CHOICE, "shape file")
MATERIAL_ASSETS = AssetKind(
    "material", b"NT", "a node group", BUILTIN_MATERIALS, "Rubber or MyMetal", "node group file", " with a Color input"
)

AdjNoun = tuple[str, str]  # (color, shape)
Fact = tuple[str, str, str]  # (subject shape, relation, object shape)


@dataclass(frozen=True)
class Vocabulary:
    """A resolved vocabulary (every file path absolute, every held-out split computed).

    ``shape_objects``: shape -> Blender object name; ``shape_files``: shape -> the ``.blend`` file
    holding that object (absent for a built-in primitive). ``material_objects`` / ``material_files``
    likewise for materials (a CLEVR node group with a ``Color`` input). Mappings are tuples of
    pairs, in the vocabulary's order (the order fixes class ids and sampling).
    """

    shapes: tuple[str, ...]
    colors: tuple[tuple[str, tuple[int, int, int]], ...]
    materials: tuple[str, ...]
    sizes: tuple[tuple[str, float], ...]
    relations: tuple[str, ...]
    shape_objects: tuple[tuple[str, str], ...]
    material_objects: tuple[tuple[str, str], ...]
    adj_noun_held_out: tuple[tuple[str, tuple[AdjNoun, ...]], ...]
    relation_held_out: tuple[tuple[str, tuple[Fact, ...]], ...]
    shape_files: tuple[tuple[str, str], ...] = ()
    material_files: tuple[tuple[str, str], ...] = ()

    @property
    def color_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.colors)

    @property
    def color_rgb(self) -> dict[str, tuple[int, int, int]]:
        return dict(self.colors)

    @property
    def size_radius(self) -> dict[str, float]:
        return dict(self.sizes)

    def shape_kind(self, shape: str) -> str | None:
        """The built-in primitive that draws ``shape`` (cube/sphere/cylinder), or None for a shape file."""
        if shape in dict(self.shape_files):
            return None
        return BUILTIN_SHAPES.get(dict(self.shape_objects)[shape])

    def material_kind(self, material: str) -> str | None:
        """The built-in material (rubber/metal), or None for a node group from a file."""
        if material in dict(self.material_files):
            return None
        return BUILTIN_MATERIALS.get(dict(self.material_objects)[material])

    def center_height(self, shape: str, radius: float) -> float:
        """An object rests on the ground: its centre's height. CLEVR shrinks cubes by sqrt(2) so
        that a cube's footprint circumradius is the radius used for spacing."""
        return radius / math.sqrt(2) if self.shape_kind(shape) == "cube" else radius

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the run's stored settings); :func:`vocabulary_from_dict` reads it back.
        Mappings are lists of pairs: stored settings are canonical JSON (sorted keys), and the
        vocabulary's order fixes class ids."""
        return {
            "shapes": list(self.shapes),
            "colors": [[name, list(rgb)] for name, rgb in self.colors],
            "materials": list(self.materials),
            "sizes": [list(pair) for pair in self.sizes],
            "relations": list(self.relations),
            "shape_objects": [list(pair) for pair in self.shape_objects],
            "material_objects": [list(pair) for pair in self.material_objects],
            "shape_files": [list(pair) for pair in self.shape_files],
            "material_files": [list(pair) for pair in self.material_files],
            "adj_noun_held_out": [[split, [list(c) for c in held]] for split, held in self.adj_noun_held_out],
            "relation_held_out": [[split, [list(f) for f in held]] for split, held in self.relation_held_out],
        }


def vocabulary_from_dict(data: dict[str, Any]) -> Vocabulary:
    return _vocabulary_from_items(tuple((key, _freeze(value)) for key, value in sorted(data.items())))


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


@cache
def _vocabulary_from_items(items: tuple) -> Vocabulary:
    data = dict(items)

    def pairs(key: str) -> tuple:
        return tuple(data.get(key, ()))

    return Vocabulary(
        shapes=tuple(data["shapes"]),
        colors=tuple((name, tuple(int(c) for c in rgb)) for name, rgb in data["colors"]),
        materials=tuple(data["materials"]),
        sizes=tuple((name, float(r)) for name, r in data["sizes"]),
        relations=tuple(data["relations"]),
        shape_objects=pairs("shape_objects"),
        material_objects=pairs("material_objects"),
        shape_files=pairs("shape_files"),
        material_files=pairs("material_files"),
        adj_noun_held_out=tuple((split, tuple(tuple(c) for c in held)) for split, held in data["adj_noun_held_out"]),
        relation_held_out=tuple((split, tuple(tuple(f) for f in held)) for split, held in data["relation_held_out"]),
    )


def adjective_noun(color: str, shape: str) -> str:
    return f"{color} {shape}"


def relation_label(subject: str, relation: str, obj: str) -> str:
    return f"{subject} {relation} {obj}"
