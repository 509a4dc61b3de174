"""Binding scenes in CLEVR's scene-file format, so CLEVR's own tools read them unchanged.

CLEVR (Johnson et al. 2017) ships ``CLEVR_<split>_scenes.json``: ``{"info": {...}, "scenes":
[...]}``, each scene with ``image_index``, ``image_filename``, ``split``, ``objects`` (``shape``,
``color``, ``material``, ``size``, ``3d_coords`` floats, ``rotation`` degrees, ``pixel_coords``
``[x, y, depth]`` with integer x/y), ``relationships`` (for each relation a list, per object, of
the indices of the objects standing in that relation to it) and ``directions`` (unit vectors of
the camera's left/right/front/behind on the ground, plus above/below). Its question generator and
scene-graph readers index these fields directly, so the types matter as much as the names.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from conceptforge.generators.binding.scene import Camera, _dot, _sub

RELATION_EPS = 0.2  # CLEVR's compute_all_relationships(eps=0.2); our relation threshold too
CLEVR_RELATIONS = ("left", "right", "front", "behind")


def _camera(meta: Mapping[str, Any]) -> Camera:
    return Camera(location=tuple(float(v) for v in meta["location"]), lens=float(meta["lens"]))


def clevr_directions(camera: Camera) -> dict[str, list[float]]:
    ground = camera.ground_directions()
    directions = {name: [round(dx, 6), round(dy, 6), 0.0] for name, (dx, dy) in ground.items()}
    directions["above"] = [0.0, 0.0, 1.0]
    directions["below"] = [0.0, 0.0, -1.0]
    return directions


def clevr_scene(
    row: Mapping[str, Any], *, split: str, image_index: int, image_filename: str, width: int, height: int
) -> dict[str, Any]:
    """One CLEVR scene from a binding row's metadata (string-valued objects, camera dict)."""
    camera = _camera(row["camera"])
    _, _, forward = camera.basis()
    objects = []
    for obj in row["objects"]:
        coords = (float(obj["x"]), float(obj["y"]), float(obj["z"]))
        px, py = camera.project(coords, width, height)
        depth = _dot(_sub(coords, camera.location), forward)
        objects.append(
            {
                "shape": obj["shape"],
                "color": obj["color"],
                "material": obj["material"],
                "size": obj["size"],
                "3d_coords": [round(c, 6) for c in coords],
                "rotation": float(obj["rotation"]),
                "pixel_coords": [int(round(px)), int(round(py)), round(depth, 6)],
            }
        )
    directions = clevr_directions(camera)
    relationships: dict[str, list[list[int]]] = {}
    for name in CLEVR_RELATIONS:
        dx, dy, _ = directions[name]
        per_object = []
        for i, a in enumerate(objects):
            related = [
                j
                for j, b in enumerate(objects)
                if j != i
                and (b["3d_coords"][0] - a["3d_coords"][0]) * dx + (b["3d_coords"][1] - a["3d_coords"][1]) * dy
                > RELATION_EPS
            ]
            per_object.append(related)
        relationships[name] = per_object
    return {
        "split": split,
        "image_index": image_index,
        "image_filename": image_filename,
        "objects": objects,
        "relationships": relationships,
        "directions": directions,
    }


def clevr_scene_file(scenes: Iterable[dict[str, Any]], *, split: str, version: str, license: str) -> bytes:
    """The bytes of ``CLEVR_<split>_scenes.json`` (sorted keys: identical on every rerun)."""
    payload = {
        "info": {"split": split, "version": version, "license": license, "date": "", "generator": "conceptforge"},
        "scenes": list(scenes),
    }
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")
