"""The binding benchmark's vocabulary (paper 004 §3) and CLEVR's look (colours, sizes, materials)."""

from __future__ import annotations

SHAPES: tuple[str, ...] = ("cube", "sphere", "cylinder")
COLORS: tuple[str, ...] = ("blue", "gray", "yellow", "brown", "green", "purple", "red", "cyan")
RELATIONS: tuple[str, ...] = ("left", "right", "front", "behind")
OPPOSITE_RELATION: dict[str, str] = {"left": "right", "right": "left", "front": "behind", "behind": "front"}
MATERIALS: tuple[str, ...] = ("rubber", "metal")

# CLEVR's sRGB colours (0-255), from its properties.json.
COLOR_RGB: dict[str, tuple[int, int, int]] = {
    "gray": (87, 87, 87),
    "red": (173, 35, 35),
    "blue": (42, 75, 215),
    "green": (29, 105, 20),
    "brown": (129, 74, 25),
    "purple": (129, 38, 192),
    "cyan": (41, 208, 208),
    "yellow": (255, 238, 51),
}

# CLEVR's object "radius" per size; a cube is scaled by radius / sqrt(2) so that its footprint's
# circumradius equals the radius used for spacing.
SIZE_RADIUS: dict[str, float] = {"large": 0.7, "small": 0.35}


def adjective_noun(color: str, shape: str) -> str:
    return f"{color} {shape}"


def relation_label(subject: str, relation: str, obj: str) -> str:
    return f"{subject} {relation} {obj}"
