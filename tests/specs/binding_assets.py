"""Blender files for the own-vocabulary binding tests, made with bpy in a subprocess (importing bpy
into the test process would put Blender's modules on sys.path for every later test).

``make_clevr_folder(root)`` lays out a CLEVR-style vocabulary: ``properties.json`` with a new
colour (orange), a new material (Glow, a node group in ``materials/Glow.blend``) and a new shape
(cone, the object ``Cone`` in ``shapes/Cone.blend``) beside CLEVR's built-in ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

MAKE_BLEND_FILES = r"""
import sys
import bpy

shapes, materials = sys.argv[1], sys.argv[2]
bpy.ops.wm.read_factory_settings(use_empty=True)
bpy.ops.mesh.primitive_cone_add(radius1=1.0, depth=2.0, vertices=32, location=(0.0, 0.0, 0.0))
cone = bpy.context.active_object
cone.name = "Cone"
cone.data.name = "Cone"
bpy.data.libraries.write(shapes + "/Cone.blend", {cone}, fake_user=True)
group = bpy.data.node_groups.new("Glow", "ShaderNodeTree")
group.interface.new_socket(name="Color", in_out="INPUT", socket_type="NodeSocketColor")
group.interface.new_socket(name="Shader", in_out="OUTPUT", socket_type="NodeSocketShader")
group_in = group.nodes.new("NodeGroupInput")
group_out = group.nodes.new("NodeGroupOutput")
bsdf = group.nodes.new("ShaderNodeBsdfPrincipled")
bsdf.inputs["Metallic"].default_value = 0.5
bsdf.inputs["Roughness"].default_value = 0.1
group.links.new(group_in.outputs["Color"], bsdf.inputs["Base Color"])
group.links.new(bsdf.outputs["BSDF"], group_out.inputs["Shader"])
bpy.data.libraries.write(materials + "/Glow.blend", {group}, fake_user=True)
"""

PROPERTIES = {
    "shapes": {"cube": "SmoothCube_v2", "sphere": "Sphere", "cylinder": "SmoothCylinder", "cone": "Cone"},
    "colors": {"red": [173, 35, 35], "blue": [42, 75, 215], "orange": [255, 140, 0]},
    "materials": {"rubber": "Rubber", "glow": "Glow"},
    "sizes": {"large": 0.7, "small": 0.35},
}


def make_blend_files(shapes: Path, materials: Path) -> None:
    shapes.mkdir(parents=True, exist_ok=True)
    materials.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [sys.executable, "-c", MAKE_BLEND_FILES, str(shapes), str(materials)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert result.returncode == 0, result.stderr[-3000:]


def make_clevr_folder(root: Path) -> Path:
    """``root/properties.json``, ``root/shapes/Cone.blend``, ``root/materials/Glow.blend``; returns root."""
    make_blend_files(root / "shapes", root / "materials")
    (root / "properties.json").write_text(json.dumps(PROPERTIES, indent=2), encoding="utf-8")
    return root
