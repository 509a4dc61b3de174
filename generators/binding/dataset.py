"""The binding datasets as work items: plan, sample, render, and assemble (paper 004 §3).

Everything an item shows is decided by its seed: the target composition comes from its index
(classes are cycled, so splits are balanced), the second object, materials, sizes, camera and
light jitter, placement and candidate order come from ``random.Random(item.seed)``. A layout
that fails the visibility check is re-sampled from the same stream, so retries are
deterministic too.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from typing import Any

from datasets import ClassLabel, Features, List, Value
from datasets import Image as ImageFeature

from conceptforge.engine.store import ItemResult
from conceptforge.engine.workitems import WorkItem, derive_seed
from conceptforge.errors import InvalidArgumentError
from conceptforge.generators.binding.benchmark import paper_vocabulary
from conceptforge.generators.binding.compositions import (
    DATASETS,
    SPLITS,
    Candidate,
    adj_noun_split,
    allowed_in_picture,
    fact_split,
    relational_candidates,
    shuffled,
    single_object_candidates,
    split_classes,
    two_object_candidates,
)
from conceptforge.generators.binding.scene import (
    ObjectRequest,
    PlacementError,
    PlacementRules,
    SceneDescription,
    SceneObject,
    default_lights,
    jittered_camera,
    place_objects,
    relation_holds,
    relations_between,
)
from conceptforge.generators.binding.vocab import Vocabulary, vocabulary_from_dict


def _preset_sizes(name: str) -> dict[str, dict[str, int]]:
    from conceptforge.generators.binding.benchmark import load_binding_spec

    spec = load_binding_spec(preset=name).spec
    return {dataset: {"train": s.train, "val": s.val, "gen": s.gen} for dataset, s in spec.splits.items()}


# The split sizes of the built-in presets (binding-demo.yaml; binding-clevr-paper.yaml: paper 004 Table 1).
PRESETS: dict[str, dict[str, dict[str, int]]] = {name: _preset_sizes(name) for name in ("demo", "paper")}

REFERENCE_PIXELS = 320 * 240
REFERENCE_MIN_PIXELS = 200  # CLEVR's visibility threshold at 320x240
MAX_VISIBILITY_ATTEMPTS = 25


@dataclass(frozen=True)
class BindingConfig:
    """Everything that determines a binding dataset's bytes (recorded in the store and card)."""

    dataset: str
    preset: str = "demo"
    seed: int = 0
    width: int = 320
    height: int = 240
    samples: int = 16
    denoise: bool = True  # Open Image Denoise over the float render: ~48 dB vs 512 samples instead of ~38
    min_pixels: int | None = None  # default: CLEVR's 200 px scaled to the resolution
    split_sizes: dict[str, int] = field(default_factory=dict)
    #: A spec's own vocabulary (``Vocabulary.to_dict()``); None: the paper's. ``preset`` is then the spec's name.
    vocabulary: dict[str, Any] | None = None
    #: The spec as validated and normalised, as YAML text (written as benchmark_spec.yaml beside the
    #: card; text keeps its order through the run's canonical-JSON settings); None for presets.
    spec: str | None = None

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise InvalidArgumentError(f"unknown dataset {self.dataset!r}; choose from {', '.join(DATASETS)} or all")
        if self.vocabulary is None and self.preset not in PRESETS:
            raise InvalidArgumentError(f"unknown preset {self.preset!r}; choose from {', '.join(PRESETS)}")
        if self.width < 16 or self.height < 16:
            raise InvalidArgumentError(f"resolution {self.width}x{self.height} is too small; use at least 16x16")
        if self.samples < 1:
            raise InvalidArgumentError(f"--samples must be >= 1, got {self.samples}")
        if self.min_pixels is not None and not 1 <= self.min_pixels <= self.width * self.height // 4:
            raise InvalidArgumentError(
                f"--min-pixels {self.min_pixels} cannot be met by two objects in a {self.width}x{self.height} image; "
                f"use a value between 1 and {self.width * self.height // 4}"
            )
        if not self.split_sizes:
            if self.vocabulary is not None:
                raise InvalidArgumentError(f"{self.dataset}: a spec's config needs its split sizes")
            object.__setattr__(self, "split_sizes", dict(PRESETS[self.preset][self.dataset]))

    @property
    def own_vocabulary(self) -> Vocabulary | None:
        """The spec's vocabulary, or None for the paper's (which keeps preset runs' bytes as they were)."""
        return None if self.vocabulary is None else vocabulary_from_dict(self.vocabulary)

    @property
    def vocab(self) -> Vocabulary:
        return self.own_vocabulary or paper_vocabulary()

    @property
    def visible_pixels(self) -> int:
        if self.min_pixels is not None:
            return self.min_pixels
        return max(4, round(REFERENCE_MIN_PIXELS * self.width * self.height / REFERENCE_PIXELS))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self) | {"min_pixels": self.visible_pixels}
        for own in ("vocabulary", "spec"):
            if data[own] is None:
                del data[own]  # a preset run's settings stay what they always were
        return data


def plan_items(config: BindingConfig) -> list[WorkItem]:
    """All work items of one dataset, in a fixed order (split, index)."""
    items = []
    for split in SPLITS:
        classes = split_classes(config.dataset, split, config.own_vocabulary)
        for index in range(config.split_sizes.get(split, 0)):
            target = classes[index % len(classes)]
            items.append(
                WorkItem(
                    item_id=f"{split}-{index:06d}",
                    seed=derive_seed(config.seed, config.dataset, split, index),
                    split=split,
                    payload={"target": list(target)},
                )
            )
    return items


@dataclass(frozen=True)
class ScenePlan:
    scene: SceneDescription
    label: str
    candidates: list[Candidate]
    label_index: int
    relation: dict[str, str]


def _random_look(rng: random.Random, vocab: Vocabulary) -> tuple[str, str]:
    return rng.choice(vocab.materials), rng.choice(tuple(vocab.size_radius))


def sample_scene(item: WorkItem, config: BindingConfig, rng: random.Random) -> ScenePlan:
    """One layout for ``item`` (pure Python; no rendering)."""
    camera = jittered_camera(rng)
    lights = default_lights(rng)
    rules = PlacementRules()
    target = tuple(item.payload["target"])
    own = config.own_vocabulary
    vocab = config.vocab

    def look(rng: random.Random) -> tuple[str, str]:
        return _random_look(rng, vocab)

    relation = {"subject": "", "relation": "", "object": ""}
    if config.dataset == "single-object":
        color, shape = target
        requests = [ObjectRequest(shape, color, *look(rng))]
        objects = place_objects(requests, camera, rng, rules, vocabulary=own)
        candidates = single_object_candidates((color, shape), rng, own)
    elif config.dataset == "two-object":
        color, shape = target
        others = [
            (c, s)
            for s in vocab.shapes
            for c in vocab.color_names
            if s != shape and c != color and allowed_in_picture(adj_noun_split((c, s), own), item.split)
        ]
        other = rng.choice(others)
        requests = [
            ObjectRequest(shape, color, *look(rng)),
            ObjectRequest(other[1], other[0], *look(rng)),
        ]
        objects = place_objects(requests, camera, rng, rules, vocabulary=own)
        candidates = two_object_candidates((color, shape), other, rng, own)
    else:
        subject, rel, obj = target
        color_a, color_b = rng.sample(vocab.color_names, 2)
        requests = [
            ObjectRequest(subject, color_a, *look(rng)),
            ObjectRequest(obj, color_b, *look(rng)),
        ]

        def accept(placed: tuple[SceneObject, ...]) -> bool:
            a, b = placed
            if not relation_holds(a, b, rel, camera, rules.relation_threshold):
                return False
            return all(
                allowed_in_picture(fact_split((x.shape, r, y.shape), own), item.split)
                for x, y in ((a, b), (b, a))
                for r in relations_between(x, y, camera, rules.relation_threshold)
            )

        objects = place_objects(requests, camera, rng, rules, accept=accept, vocabulary=own)
        candidates = relational_candidates((subject, rel, obj), own, rng)
        relation = {"subject": subject, "relation": rel, "object": obj}
    ordered, label_index = shuffled(candidates, rng)
    scene = SceneDescription(
        objects=objects,
        camera=camera,
        lights=lights,
        width=config.width,
        height=config.height,
        samples=config.samples,
        seed=item.seed,
        denoise=config.denoise,
        vocabulary=own,
    )
    return ScenePlan(scene, ordered[label_index].label, ordered, label_index, relation)


def make_item_factory(config: BindingConfig, get_renderer: Callable[[], Any]) -> Callable[[WorkItem], ItemResult]:
    """Return ``make_item(item) -> ItemResult`` rendering with the renderer from ``get_renderer``."""
    make_batch = make_batch_factory(config, get_renderer)

    def make_item(item: WorkItem) -> ItemResult:
        return make_batch([item])[0]

    return make_item


def make_batch_factory(
    config: BindingConfig, get_renderer: Callable[[], Any]
) -> Callable[[Sequence[WorkItem]], list[ItemResult]]:
    """Return ``make_batch(items) -> [ItemResult]`` (same order), rendering the items one after
    another while the previous image is denoised and encoded beside it
    (:meth:`~conceptforge.generators.binding.render_blender.BlenderRenderer.render_async`).
    Each item's bytes are those :func:`make_item_factory` gives it alone."""

    def make_batch(items: Sequence[WorkItem]) -> list[ItemResult]:
        renderer = get_renderer()
        # The last image is finished at once with every core (no render left to overlap it).
        pending = [_render_item(item, config, renderer, last=n == len(items) - 1) for n, item in enumerate(items)]
        return [ItemResult(files={"png": png.result()}, metadata=metadata) for png, metadata in pending]

    return make_batch


def _render_item(
    item: WorkItem, config: BindingConfig, renderer: Any, *, last: bool = False
) -> tuple[Future, dict[str, Any]]:
    """The first layout of ``item`` whose objects are all visible, rendered: (PNG future, row metadata)."""
    rng = random.Random(item.seed)
    for _attempt in range(MAX_VISIBILITY_ATTEMPTS):
        try:
            plan = sample_scene(item, config, rng)
        except PlacementError as error:
            raise PlacementError(f"item {item.item_id}: {error}") from None
        png, visibility = renderer.render_async(plan.scene, min_pixels=config.visible_pixels, last=last)
        if png is not None:
            return png, _row_metadata(plan, visibility)
    raise PlacementError(
        f"item {item.item_id}: no layout with every object visible (>= {config.visible_pixels} px) "
        f"in {MAX_VISIBILITY_ATTEMPTS} attempts; lower --min-pixels or raise the resolution"
    )


def _row_metadata(plan: ScenePlan, visibility) -> dict[str, Any]:
    scene = plan.scene
    objects = []
    for obj, pixels, bbox in zip(scene.objects, visibility.pixels, visibility.bboxes):
        cx, cy = scene.camera.project(obj.location, scene.width, scene.height)
        objects.append(
            {
                "shape": obj.shape,
                "color": obj.color,
                "material": obj.material,
                "size": obj.size,
                "x": obj.x,
                "y": obj.y,
                "z": round(obj.z, 4),
                "rotation": obj.rotation,
                "bbox": list(bbox),
                "center": [round(cx, 2), round(cy, 2)],
                "pixels": pixels,
            }
        )
    return {
        "label": plan.label,
        "candidates": [c.label for c in plan.candidates],
        "label_index": plan.label_index,
        "candidate_kinds": [c.kind for c in plan.candidates],
        "objects": objects,
        "relation": plan.relation,
        "camera": {
            "location": list(scene.camera.location),
            "rotation": [round(a, 4) for a in scene.camera.rotation_euler_degrees()],
            "lens": scene.camera.lens,
        },
    }


def label_names(dataset: str, vocab: Vocabulary | None = None) -> list[str]:
    """Every label the dataset can have (closed set), in a fixed order: the ClassLabel names."""
    from conceptforge.generators.binding.compositions import all_adj_noun, all_facts
    from conceptforge.generators.binding.vocab import adjective_noun, relation_label

    if dataset == "relational":
        return [relation_label(*fact) for fact in all_facts(vocab)]
    return [adjective_noun(*composition) for composition in all_adj_noun(vocab)]


def binding_features(dataset: str, vocab: Vocabulary | None = None) -> Features:
    """The schema of one binding config; closed-set columns are ClassLabels (names in the features).

    ``candidates`` stays text: the five prompts are what a model scores.
    """
    v = paper_vocabulary() if vocab is None else vocab
    return Features(
        {
            "image": ImageFeature(),
            "item_id": Value("string"),
            "label": ClassLabel(names=label_names(dataset, vocab)),
            "candidates": List(Value("string")),
            "label_index": Value("int32"),
            "candidate_kinds": List(Value("string")),
            "objects": List(
                {
                    "shape": ClassLabel(names=list(v.shapes)),
                    "color": ClassLabel(names=list(v.color_names)),
                    "material": ClassLabel(names=list(v.materials)),
                    "size": ClassLabel(names=list(v.size_radius)),
                    "x": Value("float32"),
                    "y": Value("float32"),
                    "z": Value("float32"),
                    "rotation": Value("float32"),
                    "bbox": List(Value("int32")),
                    "center": List(Value("float32")),
                    "pixels": Value("int32"),
                }
            ),
            "relation": {"subject": Value("string"), "relation": Value("string"), "object": Value("string")},
            "camera": {
                "location": List(Value("float32")),
                "rotation": List(Value("float32")),
                "lens": Value("float32"),
            },
            "seed": Value("int64"),
        }
    )


FEATURES = binding_features("single-object")  # kept for callers that want one example schema

COLUMN_DOCS = {
    "image": "rendered scene (Blender Cycles)",
    "item_id": "stable work-item id `<split>-<index>`",
    "label": "the true label as a ClassLabel (`red cube` or `cube left sphere`; names in `features['label'].names`)",
    "candidates": "true label + 4 distractors, shuffled per example",
    "label_index": "index of `label` in `candidates`",
    "candidate_kinds": "per candidate: true, random, hard-swap, bRa, aSb, aRc, cRb",
    "objects": "per object: shape, colour, material, size (ClassLabels), 3D position, rotation, visible bbox, projected centre, visible pixels",
    "relation": "relational dataset: subject, relation, object of the true label",
    "camera": "camera location, rotation (degrees, XYZ) and lens (mm)",
    "seed": "the work item's seed",
}


def binding_command(config: BindingConfig) -> list[str]:
    """The command that reproduces the data (shard/worker options do not change the bytes)."""
    command = [
        "conceptforge",
        "generate",
        "binding",
        "--dataset",
        config.dataset,
        *(["--spec", "benchmark_spec.yaml"] if config.spec is not None else ["--preset", config.preset]),
        "--seed",
        str(config.seed),
        "--resolution",
        f"{config.width}x{config.height}",
        "--samples",
        str(config.samples),
    ]
    if not config.denoise:
        command.append("--no-denoise")
    if config.min_pixels is not None:
        command += ["--min-pixels", str(config.min_pixels)]
    return command
