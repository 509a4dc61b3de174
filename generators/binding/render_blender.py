"""Render a :class:`SceneDescription` with Blender (bpy): Cycles image + flat object-ID image.

Only this module imports ``bpy``. Each scene starts from Blender's empty factory settings, so
nothing leaks between scenes and memory stays flat. Determinism: a fixed ``cycles.seed``, no
denoiser, and the PNG re-encoded by Pillow (Blender's PNG carries metadata), so the same
description always gives the same bytes, whatever the process or thread count.
"""

from __future__ import annotations

import importlib.util
import io
import logging
import math
import os
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from conceptforge.generators.binding.scene import SceneDescription
from conceptforge.generators.binding.vocab import COLOR_RGB
from conceptforge.errors import ConceptforgeError
from conceptforge.interrupts import deferred_interrupts

logger = logging.getLogger(__name__)

# Flat colours for the ID render: exact 0/1 channels survive the Standard view transform.
_ID_COLORS = [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (1, 0, 1), (0, 1, 1), (1, 1, 1)]


def require_bpy() -> None:
    """Fail early when Blender is missing, without importing it.

    Importing bpy puts Blender's own ``scripts/modules`` on ``sys.path``; spawned worker processes
    inherit that path and then find the wrong ``bpy`` package. So the parent only looks it up.
    """
    try:
        found = importlib.util.find_spec("bpy") is not None
    except (ValueError, ImportError):  # sys.modules["bpy"] is None, or a broken install
        found = False
    if not found:
        import_bpy()  # raises the one-line error


def import_bpy():
    try:
        import bpy  # noqa: F401
    except ImportError:
        raise ConceptforgeError(
            "Blender's Python module 'bpy' is not installed; install it with "
            "pip install 'conceptforge[blender]' (bpy 5.0.1 needs Python 3.11)"
        ) from None
    return bpy


@contextmanager
def _quiet_stdout():
    """Silence Blender's C-level chatter ("Saved: ...", "Fra:1 ...") on file descriptor 1."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def _srgb_to_linear(channel: float) -> float:
    return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4


@dataclass
class Visibility:
    pixels: list[int]
    bboxes: list[tuple[int, int, int, int]]  # visible-pixel boxes (x0, y0, x1, y1), inclusive


class BlenderRenderer:
    """Renders scene descriptions; one instance per process."""

    def __init__(self, *, device: str = "cpu", threads: int | None = None) -> None:
        self.bpy = import_bpy()
        self.device = device
        self.threads = threads
        self._tmp = Path(tempfile.mkdtemp(prefix="conceptforge-blender-"))

    # -- scene construction -----------------------------------------------------------------
    def _reset(self, scene: SceneDescription) -> None:
        bpy = self.bpy
        with _quiet_stdout():
            bpy.ops.wm.read_factory_settings(use_empty=True)
        s = bpy.context.scene
        s.render.engine = "CYCLES"
        s.render.resolution_x = scene.width
        s.render.resolution_y = scene.height
        s.render.resolution_percentage = 100
        s.render.image_settings.file_format = "PNG"
        s.render.image_settings.color_mode = "RGB"
        s.render.use_stamp = False
        s.view_settings.view_transform = "Standard"
        s.view_settings.look = "None"
        if self.threads:
            s.render.threads_mode = "FIXED"
            s.render.threads = self.threads
        cycles = s.cycles
        cycles.use_denoising = False
        cycles.seed = scene.seed
        cycles.use_adaptive_sampling = False
        cycles.max_bounces = 4
        cycles.diffuse_bounces = 2
        cycles.glossy_bounces = 2
        cycles.transmission_bounces = 0
        cycles.transparent_max_bounces = 0
        cycles.caustics_reflective = False
        cycles.caustics_refractive = False
        if self.device == "gpu":
            self._enable_gpu()
        world = bpy.data.worlds.new("world")
        s.world = world
        world.use_nodes = True
        background = world.node_tree.nodes["Background"]
        background.inputs["Color"].default_value = (0.05, 0.05, 0.05, 1.0)
        background.inputs["Strength"].default_value = 1.0

    def _enable_gpu(self) -> None:
        bpy = self.bpy
        prefs = bpy.context.preferences.addons["cycles"].preferences
        for backend in ("OPTIX", "CUDA", "HIP", "METAL", "ONEAPI"):
            try:
                prefs.compute_device_type = backend
            except TypeError:
                continue
            prefs.get_devices()
            devices = [d for d in prefs.devices if d.type != "CPU"]
            if devices:
                for d in prefs.devices:
                    d.use = d.type != "CPU"
                bpy.context.scene.cycles.device = "GPU"
                return
        raise ConceptforgeError("--device gpu: Cycles found no GPU (CUDA/OptiX/HIP); use --device cpu")

    def _material(self, name: str, color: tuple[float, float, float], metal: bool):
        mat = self.bpy.data.materials.new(name)
        mat.use_nodes = True
        bsdf = mat.node_tree.nodes["Principled BSDF"]
        bsdf.inputs["Base Color"].default_value = (*color, 1.0)
        bsdf.inputs["Metallic"].default_value = 1.0 if metal else 0.0
        bsdf.inputs["Roughness"].default_value = 0.25 if metal else 0.8
        return mat

    def _emission(self, name: str, color: tuple[float, float, float]):
        mat = self.bpy.data.materials.new(name)
        mat.use_nodes = True
        nodes = mat.node_tree.nodes
        nodes.clear()
        emission = nodes.new("ShaderNodeEmission")
        emission.inputs["Color"].default_value = (*color, 1.0)
        emission.inputs["Strength"].default_value = 1.0
        output = nodes.new("ShaderNodeOutputMaterial")
        mat.node_tree.links.new(emission.outputs["Emission"], output.inputs["Surface"])
        return mat

    def _build(self, scene: SceneDescription) -> list:
        bpy = self.bpy
        self._reset(scene)
        bpy.ops.mesh.primitive_plane_add(size=400.0, location=(0.0, 0.0, 0.0))
        ground = bpy.context.active_object
        ground.name = "ground"
        ground.data.materials.append(self._material("ground", (0.25, 0.25, 0.25), metal=False))
        meshes = []
        for index, obj in enumerate(scene.objects):
            r = obj.radius
            if obj.shape == "cube":
                bpy.ops.mesh.primitive_cube_add(size=2.0, location=obj.location)
                bpy.context.active_object.scale = (r / math.sqrt(2),) * 3
            elif obj.shape == "sphere":
                bpy.ops.mesh.primitive_uv_sphere_add(radius=1.0, segments=48, ring_count=24, location=obj.location)
                bpy.context.active_object.scale = (r,) * 3
                bpy.ops.object.shade_smooth()
            elif obj.shape == "cylinder":
                bpy.ops.mesh.primitive_cylinder_add(radius=1.0, depth=2.0, vertices=48, location=obj.location)
                bpy.context.active_object.scale = (r,) * 3
                bpy.ops.object.shade_auto_smooth() if hasattr(bpy.ops.object, "shade_auto_smooth") else None
            else:
                raise ValueError(f"unknown shape {obj.shape!r}")
            mesh = bpy.context.active_object
            mesh.name = f"object{index}"
            mesh.rotation_euler = (0.0, 0.0, math.radians(obj.rotation))
            rgb = tuple(_srgb_to_linear(c / 255) for c in COLOR_RGB[obj.color])
            mesh.data.materials.append(self._material(f"mat{index}", rgb, metal=obj.material == "metal"))
            meshes.append(mesh)
        cam_data = bpy.data.cameras.new("camera")
        cam_data.lens = scene.camera.lens
        cam_data.sensor_width = scene.camera.sensor_width
        cam_data.sensor_fit = "HORIZONTAL"
        camera = bpy.data.objects.new("camera", cam_data)
        bpy.context.scene.collection.objects.link(camera)
        camera.location = scene.camera.location
        camera.rotation_euler = tuple(math.radians(a) for a in scene.camera.rotation_euler_degrees())
        bpy.context.scene.camera = camera
        for light in scene.lights:
            data = bpy.data.lights.new(light.name, type="AREA")
            data.energy = light.energy
            data.size = light.size
            lamp = bpy.data.objects.new(light.name, data)
            bpy.context.scene.collection.objects.link(lamp)
            lamp.location = light.location
            direction = [-c for c in light.location]
            lamp.rotation_euler = _track_euler(direction)
        return meshes

    def _render_to_array(self, samples: int) -> np.ndarray:
        bpy = self.bpy
        s = bpy.context.scene
        s.cycles.samples = samples
        path = self._tmp / f"render-{os.getpid()}.png"
        s.render.filepath = str(path)
        with _quiet_stdout():
            bpy.ops.render.render(write_still=True)
        with Image.open(path) as image:
            return np.asarray(image.convert("RGB")).copy()

    # -- public API ---------------------------------------------------------------------------
    def render(self, scene: SceneDescription, *, min_pixels: int) -> tuple[bytes | None, Visibility]:
        """Return (PNG bytes, visibility); PNG is None when an object shows < ``min_pixels``.

        The ID render comes first and is cheap, so an occluded layout costs no beauty render.
        """
        # Blender swallows a KeyboardInterrupt raised inside a render and goes on: hold Ctrl+C and
        # SIGTERM until this scene is done (about a second), then deliver them.
        with deferred_interrupts():
            return self._render(scene, min_pixels=min_pixels)

    def _render(self, scene: SceneDescription, *, min_pixels: int) -> tuple[bytes | None, Visibility]:
        meshes = self._build(scene)
        visibility = self._visibility(scene, meshes)
        if min(visibility.pixels, default=min_pixels) < min_pixels:
            return None, visibility
        for index, mesh in enumerate(meshes):
            mesh.data.materials[0] = self.bpy.data.materials[f"mat{index}"]
        self.bpy.data.objects["ground"].data.materials[0] = self.bpy.data.materials["ground"]
        self.bpy.context.scene.world.node_tree.nodes["Background"].inputs["Strength"].default_value = 1.0
        self.bpy.context.scene.render.filter_size = 1.5
        pixels = self._render_to_array(scene.samples)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="PNG")
        return buffer.getvalue(), visibility

    def _visibility(self, scene: SceneDescription, meshes: list) -> Visibility:
        bpy = self.bpy
        if len(meshes) > len(_ID_COLORS):
            raise ValueError(f"the ID render supports at most {len(_ID_COLORS)} objects")
        for index, mesh in enumerate(meshes):
            mesh.data.materials[0] = self._emission(f"id{index}", _ID_COLORS[index])
        bpy.data.objects["ground"].data.materials[0] = self._emission("id-ground", (0, 0, 0))
        bpy.context.scene.world.node_tree.nodes["Background"].inputs["Strength"].default_value = 0.0
        bpy.context.scene.render.filter_size = 0.0  # no anti-aliasing: one colour per pixel
        ids = self._render_to_array(1)
        pixels, boxes = [], []
        for index in range(len(meshes)):
            mask = np.all(ids == np.array(_ID_COLORS[index], dtype=np.uint8) * 255, axis=-1)
            count = int(mask.sum())
            pixels.append(count)
            if count:
                ys, xs = np.nonzero(mask)
                boxes.append((int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())))
            else:
                boxes.append((-1, -1, -1, -1))
        return Visibility(pixels, boxes)


def _track_euler(direction) -> tuple[float, float, float]:
    from mathutils import Vector

    return tuple(Vector(direction).to_track_quat("-Z", "Y").to_euler())
