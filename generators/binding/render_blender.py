"""Render a :class:`SceneDescription` with Blender (bpy): Cycles image + flat object-ID image.

Only this module imports ``bpy``. Each scene starts from Blender's empty factory settings, so
nothing leaks between scenes and memory stays flat.

Image quality at speed: 16 samples alone leave visible grain (~38 dB PSNR against 512 samples).
Cycles' own OIDN denoiser fixes that but its output changes with the thread count and between
runs. So Cycles renders the noisy image plus diffuse/glossy colour passes (the
denoiser's albedo guide) and the object-index pass into a float EXR, and we run Intel Open Image
Denoise ourselves (``pyoidn``, CPU device, fast quality): for identical inputs its float output
is bit-identical whatever its thread count. The linear result becomes 8-bit sRGB through a fixed
lookup table (Blender's "Standard" view transform, no dither), and Pillow writes the PNG without
metadata. Every float Cycles writes is the same bits in any process at any thread count once
spheres get exact normals (:func:`_set_exact_sphere_normals`), so the PNG bytes are too, with
or without the denoiser.

Overlap: Cycles at 320x240 and 16 samples keeps about one of two cores busy on average (scene
sync and setup are single-threaded) and releases the GIL while it renders. So
:meth:`BlenderRenderer.render_async` hands the finishing of image i (OIDN, the sRGB table, PNG
encoding: ~5% of an image's time) to one worker thread and returns at once; the caller builds
and renders image i+1 meanwhile. That thread runs at a lower priority (:data:`FINISHER_NICE`), so
it takes the cores Cycles leaves idle instead of delaying Cycles' render threads. A batch's last
image has no next render to hide behind: it is finished at once on the caller's thread with
OIDN at the render's thread count (``last=True``). The finishing function is the same in every
path and its inputs are the same floats, and OIDN's output does not depend on its thread count,
so the bytes do not depend on which path made them.
"""

from __future__ import annotations

import importlib.util
import io
import logging
import math
import os
import sys
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from conceptforge.errors import DependencyMissingError, DeviceUnavailableError
from conceptforge.generators.binding.benchmark import paper_vocabulary
from conceptforge.generators.binding.pixels import (
    DENOISE_QUALITY,
    OidnDenoiser,
    _srgb_to_linear,
    linear_to_srgb8,
    read_exr_passes,
)
from conceptforge.generators.binding.scene import SceneDescription
from conceptforge.interrupts import deferred_interrupts

logger = logging.getLogger(__name__)

# Niceness added to the finishing thread (Linux: per thread). Cycles' render threads then preempt
# it, and the finishing fills the time they leave idle (scene sync, the single-threaded set-up,
# the waits between sample rounds) rather than stretching a render. Only our own threads compete
# with it (the kernel shares CPU between processes' groups first), and the batch's wait for the
# last futures lets it finish.
FINISHER_NICE = 19
# Marks the scene that read_factory_settings gave us: a file without it is reloaded first.
_SCENE_MARK = "conceptforge_binding"
# Data kinds _build never makes: any of them in the file (another caller's) means reload.
_FOREIGN_DATA = ("collections", "textures", "curves", "grease_pencils", "particles")
# What _build makes, removed before the next scene: the node group and its library are the
# "Smooth by Angle" modifier that shade_auto_smooth appends from Blender's essentials.
_BUILT_DATA = ("objects", "meshes", "materials", "cameras", "lights", "worlds", "node_groups", "libraries")


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
        raise DependencyMissingError(
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
        self._denoisers: dict[int, OidnDenoiser] = {}  # by OIDN thread count
        self._denoiser_lock = threading.Lock()  # one OIDN filter runs one image at a time
        self._finisher: ThreadPoolExecutor | None = None

    def _denoise(self, color: np.ndarray, albedo: np.ndarray, *, threads: int = 1) -> np.ndarray:
        # One OIDN thread by default: denoising runs beside Cycles (render_async), in the share of
        # a core Cycles leaves idle; more threads would take cores from Cycles' own. ``threads``
        # more only where Cycles is idle (a batch's last image). OIDN's output is the same bits at
        # any thread count.
        with self._denoiser_lock:
            denoiser = self._denoisers.get(threads)
            if denoiser is None:  # created on first use: --no-denoise runs never need pyoidn
                denoiser = self._denoisers[threads] = OidnDenoiser(threads=threads)
            return denoiser(color, albedo)

    def _finish_png(self, combined: np.ndarray, albedo: np.ndarray | None, *, threads: int = 1) -> bytes:
        """Linear float render -> PNG bytes: OIDN when ``albedo`` is given, sRGB table, Pillow (no
        metadata). Runs on the finishing thread or inline; the bytes are the same either way."""
        linear = combined if albedo is None else self._denoise(combined, albedo, threads=threads)
        buffer = io.BytesIO()
        Image.fromarray(linear_to_srgb8(linear)).save(buffer, format="PNG")
        return buffer.getvalue()

    def _submit_finish(self, combined: np.ndarray, albedo: np.ndarray | None) -> Future:
        if self._finisher is None:
            linear_to_srgb8(np.zeros((1, 1, 3), np.float32))  # build the sRGB table here, not racing in a thread
            self._finisher = ThreadPoolExecutor(
                1, thread_name_prefix="conceptforge-finish", initializer=_lower_thread_priority
            )
        return self._finisher.submit(self._finish_png, combined, albedo)

    def _finish_now(self, combined: np.ndarray, albedo: np.ndarray | None) -> Future:
        """Finish on this thread with every render thread's core (Cycles is idle): a done future."""
        future: Future = Future()
        future.set_result(self._finish_png(combined, albedo, threads=self.threads or _usable_cpus()))
        return future

    # -- scene construction -----------------------------------------------------------------
    def _reset(self, scene: SceneDescription, *, reload: bool = False) -> None:
        """An empty scene with our settings. Reloading the factory settings costs ~0.035 s (it
        re-registers every add-on), ~6% of an image, so after the first scene only the previous
        scene's data is removed and the settings we change are set again (same bytes, tested
        against reloading); ``reload`` forces the reload, as a standalone script would do."""
        bpy = self.bpy
        if reload or not self._clear_scene():
            with _quiet_stdout():
                bpy.ops.wm.read_factory_settings(use_empty=True)
            bpy.context.scene[_SCENE_MARK] = True
        s = bpy.context.scene
        layer = s.view_layers[0]
        # the passes a previous render turned on (factory default: off)
        layer.use_pass_object_index = False
        layer.use_pass_diffuse_color = False
        layer.use_pass_glossy_color = False
        s.render.engine = "CYCLES"
        s.render.resolution_x = scene.width
        s.render.resolution_y = scene.height
        s.render.resolution_percentage = 100
        s.render.image_settings.file_format = "PNG"
        s.render.image_settings.color_mode = "RGB"
        s.render.use_stamp = False
        s.view_settings.view_transform = "Standard"
        s.view_settings.look = "None"
        s.render.filter_size = 1.5  # Blender's default, pinned: it shapes every pixel
        if self.threads:
            s.render.threads_mode = "FIXED"
            s.render.threads = self.threads
        cycles = s.cycles
        cycles.use_denoising = False
        cycles.seed = scene.seed
        cycles.use_adaptive_sampling = False
        # Two area lights and a constant world: the light tree only adds cost here (~25% of the
        # render's CPU time); sampling them without it is unbiased and, denoised, as close to
        # 512 samples (~48 dB).
        cycles.use_light_tree = False
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

    def _clear_scene(self) -> bool:
        """Remove what :meth:`_build` made, if the file holds only that (our one scene, marked
        when the factory settings were loaded); False when the factory settings must be loaded."""
        data = self.bpy.data
        if len(data.scenes) != 1 or not data.scenes[0].get(_SCENE_MARK):
            return False
        if any(len(getattr(data, kind)) for kind in _FOREIGN_DATA):
            return False
        data.batch_remove([item for kind in _BUILT_DATA for item in getattr(data, kind)])
        return True

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
        raise DeviceUnavailableError("--device gpu: Cycles found no GPU (CUDA/OptiX/HIP); use --device cpu")

    def _material(self, name: str, color: tuple[float, float, float], metal: bool):
        mat = self.bpy.data.materials.new(name)
        mat.use_nodes = True
        bsdf = mat.node_tree.nodes["Principled BSDF"]
        bsdf.inputs["Base Color"].default_value = (*color, 1.0)
        bsdf.inputs["Metallic"].default_value = 1.0 if metal else 0.0
        bsdf.inputs["Roughness"].default_value = 0.25 if metal else 0.8
        return mat

    def _append_shape(self, path: str, object_name: str, obj) -> None:
        """A spec's shape from its ``.blend`` file, placed as CLEVR places its shapes: the file's
        object (modelled within [-1, 1]) scaled by the size's radius, resting on the ground."""
        bpy = self.bpy
        with bpy.data.libraries.load(path, link=False) as (data_from, data_to):
            if object_name not in data_from.objects:
                raise ValueError(f"{path} has no object named {object_name!r}")
            data_to.objects = [object_name]
        shape = data_to.objects[0]
        bpy.context.scene.collection.objects.link(shape)
        shape.location = obj.location
        shape.scale = (obj.radius,) * 3
        bpy.context.view_layer.objects.active = shape

    def _node_group_material(self, name: str, color: tuple[float, float, float], path: str, group_name: str):
        """A CLEVR material: its node group (from ``<Name>.blend``) with the colour on its ``Color``
        input, feeding the material output (CLEVR's ``add_material``)."""
        bpy = self.bpy
        group = bpy.data.node_groups.get(group_name)
        if group is None:
            with bpy.data.libraries.load(path, link=False) as (data_from, data_to):
                if group_name not in data_from.node_groups:
                    raise ValueError(f"{path} has no node group named {group_name!r}")
                data_to.node_groups = [group_name]
            group = data_to.node_groups[0]
        mat = bpy.data.materials.new(name)
        mat.use_nodes = True
        nodes = mat.node_tree.nodes
        output = nodes["Material Output"]
        for node in [n for n in nodes if n.name != output.name]:
            nodes.remove(node)
        node = nodes.new("ShaderNodeGroup")
        node.node_tree = group
        if "Color" in node.inputs:
            node.inputs["Color"].default_value = (*color, 1.0)
        mat.node_tree.links.new(node.outputs[0], output.inputs["Surface"])
        return mat

    def _build(self, scene: SceneDescription, *, reload: bool = False) -> list:
        bpy = self.bpy
        self._reset(scene, reload=reload)
        bpy.ops.mesh.primitive_plane_add(size=400.0, location=(0.0, 0.0, 0.0))
        ground = bpy.context.active_object
        ground.name = "ground"
        ground.data.materials.append(self._material("ground", (0.25, 0.25, 0.25), metal=False))
        meshes = []
        own = scene.vocabulary  # a spec's own vocabulary; None: the paper's CLEVR look
        colors = paper_vocabulary().color_rgb if own is None else own.color_rgb
        for index, obj in enumerate(scene.objects):
            r = obj.radius
            kind = obj.shape if own is None else own.shape_kind(obj.shape)
            if kind == "cube":
                bpy.ops.mesh.primitive_cube_add(size=2.0, location=obj.location)
                bpy.context.active_object.scale = (r / math.sqrt(2),) * 3
            elif kind == "sphere":
                bpy.ops.mesh.primitive_uv_sphere_add(radius=1.0, segments=48, ring_count=24, location=obj.location)
                bpy.context.active_object.scale = (r,) * 3
                bpy.ops.object.shade_smooth()
                _set_exact_sphere_normals(bpy.context.active_object.data)
            elif kind == "cylinder":
                bpy.ops.mesh.primitive_cylinder_add(radius=1.0, depth=2.0, vertices=48, location=obj.location)
                bpy.context.active_object.scale = (r,) * 3
                bpy.ops.object.shade_auto_smooth() if hasattr(bpy.ops.object, "shade_auto_smooth") else None
            elif own is not None and obj.shape in dict(own.shape_files):
                self._append_shape(dict(own.shape_files)[obj.shape], dict(own.shape_objects)[obj.shape], obj)
            else:
                raise ValueError(f"unknown shape {obj.shape!r}")
            mesh = bpy.context.active_object
            mesh.name = f"object{index}"
            mesh.pass_index = index + 1  # the object-index pass names the object; ground/sky are 0
            mesh.rotation_euler = (0.0, 0.0, math.radians(obj.rotation))
            rgb = tuple(_srgb_to_linear(c / 255) for c in colors[obj.color])
            material_kind = obj.material if own is None else own.material_kind(obj.material)
            if material_kind is None:
                material = self._node_group_material(
                    f"mat{index}", rgb, dict(own.material_files)[obj.material], dict(own.material_objects)[obj.material]
                )
            else:
                material = self._material(f"mat{index}", rgb, metal=material_kind == "metal")
            if kind is None:
                mesh.data.materials.clear()  # the shape file's own material gives way to the vocabulary's
            mesh.data.materials.append(material)
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

    def _render_passes(self, samples: int, *, denoise: bool, guides: bool | None = None) -> dict[str, np.ndarray]:
        """The float passes of one Cycles render of the built scene (see :func:`read_exr_passes`),
        plus ``denoised`` (OIDN's output) when ``denoise``. ``guides`` (default: ``denoise``)
        renders the denoiser's albedo guide without denoising here."""
        bpy = self.bpy
        s = bpy.context.scene
        s.cycles.samples = samples
        guides = denoise if guides is None else guides
        # Guides for the denoiser from plain data passes: Cycles' "denoising data" passes made the
        # beauty pass itself vary between runs on some scenes (metal), these do not (tested).
        layer = s.view_layers[0]
        layer.use_pass_diffuse_color = guides
        layer.use_pass_glossy_color = guides
        settings = s.render.image_settings
        settings.media_type = "MULTI_LAYER_IMAGE"
        settings.file_format = "OPEN_EXR_MULTILAYER"
        settings.color_depth = "32"
        settings.exr_codec = "NONE"  # nothing to gain: the file is read back at once
        path = self._tmp / f"beauty-{os.getpid()}.exr"
        s.render.filepath = str(path)
        try:
            with _quiet_stdout():
                bpy.ops.render.render(write_still=True)
            passes = read_exr_passes(path)
        finally:
            settings.media_type = "IMAGE"
            settings.file_format = "PNG"
            settings.color_mode = "RGB"
            settings.color_depth = "8"
        passes.setdefault("index", np.zeros(passes["combined"].shape[:2], np.float32))
        if denoise:
            passes["denoised"] = self._denoise(passes["combined"], passes["albedo"])
        return passes

    def describe_device(self) -> str:
        """What renders, for run records and cards (e.g. ``Cycles CPU, OIDN CPU``)."""
        cycles = "Cycles GPU" if self.device == "gpu" else "Cycles CPU"
        return f"{cycles} (bpy {self.bpy.app.version_string}), denoiser OIDN {DENOISE_QUALITY} on CPU"

    # -- public API ---------------------------------------------------------------------------
    def float_passes(self, scene: SceneDescription) -> dict[str, np.ndarray]:
        """The linear float images behind :meth:`render` (``combined``, ``index``, and with the
        denoiser ``albedo``, ``denoised``): for determinism checks and benchmarks."""
        with deferred_interrupts():
            self._build(scene)
            self.bpy.context.scene.view_layers[0].use_pass_object_index = True
            return self._render_passes(scene.samples, denoise=scene.denoise)

    def render(self, scene: SceneDescription, *, min_pixels: int) -> tuple[bytes | None, Visibility]:
        """Return (PNG bytes, visibility); PNG is None when an object shows < ``min_pixels``.

        One Cycles render gives both: the beauty image and Cycles' object-index pass, which is
        written from each pixel's first sample (no blending), so every pixel names one object.
        A second flat-colour render for the visibility check would cost a whole scene sync.
        """
        passes, visibility = self._render_visible(scene, min_pixels=min_pixels)
        if passes is None:
            return None, visibility
        return self._finish_png(passes["combined"], passes.get("albedo")), visibility

    def render_async(
        self, scene: SceneDescription, *, min_pixels: int, last: bool = False
    ) -> tuple[Future | None, Visibility]:
        """Like :meth:`render`, but return as soon as Cycles is done: the PNG bytes come as a
        future, finished (denoised, encoded) on a worker thread while the caller renders on.
        The future is None when an object shows < ``min_pixels`` (nothing is finished then).
        ``last``: the caller renders nothing more before it waits (a batch's last image), so the
        image is finished now, on this thread, with OIDN at the render's thread count."""
        passes, visibility = self._render_visible(scene, min_pixels=min_pixels)
        if passes is None:
            return None, visibility
        finish = self._finish_now if last else self._submit_finish
        return finish(passes["combined"], passes.get("albedo")), visibility

    def close(self) -> None:
        """Stop the finishing thread (after its queued images) and release the denoisers."""
        if self._finisher is not None:
            self._finisher.shutdown(wait=True)
            self._finisher = None
        with self._denoiser_lock:
            for denoiser in self._denoisers.values():
                denoiser.close()
            self._denoisers.clear()

    def _render_visible(
        self, scene: SceneDescription, *, min_pixels: int
    ) -> tuple[dict[str, np.ndarray] | None, Visibility]:
        """Build and render ``scene`` (the denoiser's guides when ``scene.denoise``): its float
        passes and visibility, or None for the passes when an object shows < ``min_pixels``."""
        # Blender swallows a KeyboardInterrupt raised inside a render and goes on: hold Ctrl+C and
        # SIGTERM until this scene is done (about a second), then deliver them.
        with deferred_interrupts():
            meshes = self._build(scene)
            self.bpy.context.scene.view_layers[0].use_pass_object_index = True
            passes = self._render_passes(scene.samples, denoise=False, guides=scene.denoise)
        visibility = visibility_from_index(passes["index"], len(meshes))
        if min(visibility.pixels, default=min_pixels) < min_pixels:
            return None, visibility
        return passes, visibility


def visibility_from_index(index_map: np.ndarray, count: int) -> Visibility:
    """Visible pixels and boxes per object from an object-index image (object i has index i+1)."""
    ids = np.rint(index_map).astype(np.int32)
    pixels, boxes = [], []
    for index in range(count):
        mask = ids == index + 1
        pixels.append(int(mask.sum()))
        if pixels[-1]:
            ys, xs = np.nonzero(mask)
            boxes.append((int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())))
        else:
            boxes.append((-1, -1, -1, -1))
    return Visibility(pixels, boxes)


def _set_exact_sphere_normals(mesh) -> None:
    """Give a unit UV sphere its exact vertex normals (the normalised positions).

    Blender derives smooth vertex normals by summing the normals of the faces around each
    vertex, in an order that varies from run to run (its vertex-to-face map is filled in
    parallel), and float addition of three or more terms depends on the order: the last bit of
    the sphere's normals, hence of Cycles' shading, changed between runs. Normals stored as a
    point-domain ``custom_normal`` attribute are used as they are, computed here from the
    (deterministic) vertex positions.
    """
    count = len(mesh.vertices)
    positions = np.empty(count * 3, dtype=np.float32)
    mesh.vertices.foreach_get("co", positions)
    positions = positions.reshape(count, 3).astype(np.float64)
    normals = positions / np.sqrt((positions * positions).sum(axis=1, keepdims=True))
    attribute = mesh.attributes.new("custom_normal", "FLOAT_VECTOR", "POINT")
    attribute.data.foreach_set("vector", normals.astype(np.float32).ravel())


def _track_euler(direction) -> tuple[float, float, float]:
    from mathutils import Vector

    return tuple(Vector(direction).to_track_quat("-Z", "Y").to_euler())


def _usable_cpus() -> int:
    """The cores this process may run on (Cycles' default thread count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _lower_thread_priority() -> None:
    """Raise the calling thread's niceness by :data:`FINISHER_NICE` (Linux threads have their
    own); where the platform has no per-thread niceness, leave it."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + FINISHER_NICE))
    except (AttributeError, OSError):  # no setpriority (Windows), or not allowed
        logger.debug("could not lower the finishing thread's priority", exc_info=True)
