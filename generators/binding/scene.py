"""Scene descriptions and their sampler, independent of any renderer (kubric's separation).

A :class:`SceneDescription` says everything a renderer needs — objects, camera, lights, image
size, samples, seed — and nothing about how to render it. The sampler places objects the way
CLEVR does (uniform in (−3, 3), a minimum gap between surfaces, a margin along the camera's
left/right/front/behind directions, retries) from a ``random.Random`` seeded by the work item.
The pinhole projection here matches Blender's camera, so relations and expected pixel positions
are known before anything is rendered.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from conceptforge.errors import ItemError
from conceptforge.generators.binding.benchmark import paper_vocabulary
from conceptforge.generators.binding.vocab import Vocabulary

Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class SceneObject:
    shape: str
    color: str
    material: str
    size: str
    x: float
    y: float
    rotation: float  # degrees about the vertical axis
    # A spec's own vocabulary sets these; None: the paper's (CLEVR's radius per size, cubes shrunk).
    size_radius: float | None = None
    height: float | None = None  # the centre's height above the ground

    @property
    def radius(self) -> float:
        return paper_vocabulary().size_radius[self.size] if self.size_radius is None else self.size_radius

    @property
    def z(self) -> float:
        """Objects rest on the ground: the centre sits one radius up."""
        if self.height is not None:
            return self.height
        return self.radius if self.shape != "cube" else self.radius / math.sqrt(2)

    @property
    def location(self) -> Vec3:
        return (self.x, self.y, self.z)


@dataclass(frozen=True)
class Camera:
    location: Vec3 = (7.4, -6.9, 4.9)  # CLEVR's base scene camera
    look_at: Vec3 = (0.0, 0.0, 0.0)
    lens: float = 35.0  # mm
    sensor_width: float = 36.0  # mm, fitted horizontally

    def basis(self) -> tuple[Vec3, Vec3, Vec3]:
        """(right, up, forward) unit vectors in world space; forward points into the scene."""
        forward = _normalise(_sub(self.look_at, self.location))
        right = _normalise(_cross(forward, (0.0, 0.0, 1.0)))
        up = _cross(right, forward)
        return right, up, forward

    def ground_directions(self) -> dict[str, tuple[float, float]]:
        """CLEVR's relation directions: the camera's right/forward axes flattened onto the ground."""
        right, _, forward = self.basis()
        r = _normalise((right[0], right[1], 0.0))
        f = _normalise((forward[0], forward[1], 0.0))
        return {
            "right": (r[0], r[1]),
            "left": (-r[0], -r[1]),
            "behind": (f[0], f[1]),
            "front": (-f[0], -f[1]),
        }

    def project(self, point: Vec3, width: int, height: int) -> tuple[float, float]:
        """Pixel coordinates (x right, y down) of a world point, as Blender renders it."""
        right, up, forward = self.basis()
        rel = _sub(point, self.location)
        depth = _dot(rel, forward)
        focal = self.lens / self.sensor_width * width  # focal length in pixels (horizontal fit)
        return (
            width / 2 + _dot(rel, right) / depth * focal,
            height / 2 - _dot(rel, up) / depth * focal,
        )

    def rotation_euler_degrees(self) -> Vec3:
        """XYZ Euler angles (degrees) that point Blender's camera (−Z forward, +Y up) at look_at."""
        right, up, forward = self.basis()
        # Camera-to-world rotation matrix columns: X=right, Y=up, Z=-forward.
        m = [[right[i], up[i], -forward[i]] for i in range(3)]
        # Decompose R = Rz(c) * Ry(b) * Rx(a) (Blender's XYZ order).
        b = -math.asin(max(-1.0, min(1.0, m[2][0])))
        a = math.atan2(m[2][1], m[2][2])
        c = math.atan2(m[1][0], m[0][0])
        return (math.degrees(a), math.degrees(b), math.degrees(c))


@dataclass(frozen=True)
class Light:
    name: str
    location: Vec3
    energy: float  # watts
    size: float = 1.0


@dataclass(frozen=True)
class SceneDescription:
    objects: tuple[SceneObject, ...]
    camera: Camera
    lights: tuple[Light, ...]
    width: int = 320
    height: int = 240
    samples: int = 16
    seed: int = 0
    denoise: bool = True  # OIDN over the float render (see render_blender)
    vocabulary: Vocabulary | None = None  # a spec's own look (None: the paper's CLEVR look)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PlacementRules:
    """CLEVR's placement constraints (REFERENCE.md), in Blender units."""

    area: float = 3.0  # positions uniform in (-area, area)
    min_gap: float = 0.25  # minimum distance between object surfaces
    margin: float = 0.4  # minimum separation along each relation direction
    relation_threshold: float = 0.2  # a relation holds when the projection exceeds this
    min_pixel_gap: float = 4.0  # at 320 px wide: pixel centres must also agree with relations
    max_tries_per_object: int = 50
    max_restarts: int = 200


class PlacementError(ItemError):
    """The constraints cannot be met (e.g. too many/too large objects for the area).

    A user error (the preset or resolution asks for the impossible), so it prints one line. An
    :class:`~conceptforge.errors.ItemError`: one unlucky scene is retried and then recorded as
    failed by the run engine; a request that no scene can meet fails every item and stops the run.
    """


def check_feasible(radii: Sequence[float], rules: PlacementRules) -> None:
    """Refuse requests that cannot fit, before burning retries: total footprint vs area."""
    footprint = sum(math.pi * (r + rules.min_gap / 2) ** 2 for r in radii)
    area = (2 * rules.area) ** 2
    if footprint > 0.5 * area:  # random sequential packing rarely exceeds ~50% coverage
        raise PlacementError(
            f"{len(radii)} objects cover {footprint:.1f} of {area:.1f} square units; "
            "use fewer or smaller objects, or a larger area"
        )


def relation_holds(subject: SceneObject, obj: SceneObject, relation: str, camera: Camera, threshold: float) -> bool:
    """CLEVR's rule: ``subject relation obj`` when (subject − obj)·direction > threshold."""
    dx, dy = camera.ground_directions()[relation]
    return (subject.x - obj.x) * dx + (subject.y - obj.y) * dy > threshold


def relations_between(a: SceneObject, b: SceneObject, camera: Camera, threshold: float) -> list[str]:
    """Every relation R such that ``a R b`` holds."""
    return [r for r in ("left", "right", "front", "behind") if relation_holds(a, b, r, camera, threshold)]


def _pixel_agrees(a: SceneObject, b: SceneObject, relation: str, camera: Camera, gap: float) -> bool:
    """The picture agrees with ``a relation b``: left/right by pixel x, front/behind by pixel y."""
    (xa, ya), (xb, yb) = camera.project(a.location, 320, 240), camera.project(b.location, 320, 240)
    return {
        "left": xa < xb - gap,
        "right": xa > xb + gap,
        "front": ya > yb + gap,
        "behind": ya < yb - gap,
    }[relation]


def pair_is_unambiguous(a: SceneObject, b: SceneObject, camera: Camera, rules: PlacementRules) -> bool:
    """Gap between surfaces, margins along all directions, and pixel agreement of relations."""
    if math.hypot(a.x - b.x, a.y - b.y) - a.radius - b.radius < rules.min_gap:
        return False
    for dx, dy in camera.ground_directions().values():
        projection = (a.x - b.x) * dx + (a.y - b.y) * dy
        if 0 < projection < rules.margin:
            return False
    for relation in relations_between(a, b, camera, rules.relation_threshold):
        if not _pixel_agrees(a, b, relation, camera, rules.min_pixel_gap):
            return False
    return True


@dataclass(frozen=True)
class ObjectRequest:
    """What an object must be; position and rotation are sampled."""

    shape: str
    color: str
    material: str
    size: str


def place_objects(
    requests: Sequence[ObjectRequest],
    camera: Camera,
    rng: random.Random,
    rules: PlacementRules = PlacementRules(),
    accept: callable | None = None,
    vocabulary: Vocabulary | None = None,
) -> tuple[SceneObject, ...]:
    """Place objects one by one with retries; restart all after too many failures.

    ``accept(objects) -> bool`` adds scene-level conditions (a required relation, no held-out
    composition shown); it is checked once all objects are placed.
    """
    radii = paper_vocabulary().size_radius if vocabulary is None else vocabulary.size_radius
    check_feasible([radii[r.size] for r in requests], rules)
    for _ in range(rules.max_restarts):
        placed: list[SceneObject] = []
        for request in requests:
            for _ in range(rules.max_tries_per_object):
                candidate = SceneObject(
                    shape=request.shape,
                    color=request.color,
                    material=request.material,
                    size=request.size,
                    x=round(rng.uniform(-rules.area, rules.area), 4),
                    y=round(rng.uniform(-rules.area, rules.area), 4),
                    rotation=round(rng.uniform(0.0, 360.0), 2),
                    **_own_look(request, vocabulary),
                )
                if all(pair_is_unambiguous(candidate, other, camera, rules) for other in placed):
                    placed.append(candidate)
                    break
            else:
                break  # this object found no place: restart the whole scene
        if len(placed) == len(requests) and (accept is None or accept(tuple(placed))):
            return tuple(placed)
    raise PlacementError(
        f"could not place {len(requests)} objects within {rules.max_restarts} restarts; "
        "loosen the constraints (margin, min gap) or use fewer objects"
    )


def _own_look(request: ObjectRequest, vocabulary: Vocabulary | None) -> dict[str, float]:
    if vocabulary is None:
        return {}
    radius = vocabulary.size_radius[request.size]
    return {"size_radius": radius, "height": vocabulary.center_height(request.shape, radius)}


def jittered_camera(rng: random.Random, jitter: float = 0.5, base: Camera = Camera()) -> Camera:
    """CLEVR jitters the camera position by up to ``jitter`` per axis."""
    loc = tuple(round(v + rng.uniform(-jitter, jitter), 4) for v in base.location)
    return Camera(location=loc, look_at=base.look_at, lens=base.lens, sensor_width=base.sensor_width)


def default_lights(rng: random.Random, jitter: float = 1.0) -> tuple[Light, ...]:
    """CLEVR's key / fill / back area lights, jittered."""

    def j(v: Vec3) -> Vec3:
        return tuple(round(c + rng.uniform(-jitter, jitter), 4) for c in v)

    return (
        Light("key", j((6.4, 2.9, 7.0)), 900.0, 2.0),
        Light("fill", j((-4.7, -4.2, 3.5)), 350.0, 2.0),
        Light("back", j((-1.2, 6.5, 5.5)), 500.0, 2.0),
    )


def _sub(a: Vec3, b: Vec3) -> Vec3:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


def _cross(a: Vec3, b: Vec3) -> Vec3:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _normalise(v: Vec3) -> Vec3:
    n = math.sqrt(_dot(v, v))
    return (v[0] / n, v[1] / n, v[2] / n)
