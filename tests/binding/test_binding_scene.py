"""Scene sampling: CLEVR placement constraints and unambiguous relations (no Blender needed)."""

import math
import random

import pytest

from conceptforge.errors import ConceptforgeError
from conceptforge.generators.binding.compositions import adj_noun_split, allowed_in_picture, fact_split
from conceptforge.generators.binding.dataset import BindingConfig, plan_items, sample_scene
from conceptforge.generators.binding.scene import (
    Camera,
    ObjectRequest,
    PlacementError,
    PlacementRules,
    jittered_camera,
    place_objects,
    relation_holds,
    relations_between,
)


def test_placement_respects_gaps_and_margins():
    rules = PlacementRules()
    rng = random.Random(3)
    for _ in range(20):
        camera = jittered_camera(rng)
        requests = [
            ObjectRequest(s, "red", "rubber", size)
            for s, size in (("cube", "large"), ("sphere", "small"), ("cylinder", "large"))
        ]
        objects = place_objects(requests, camera, rng, rules)
        directions = camera.ground_directions().values()
        for i, a in enumerate(objects):
            assert -rules.area <= a.x <= rules.area and -rules.area <= a.y <= rules.area
            for b in objects[i + 1 :]:
                assert math.hypot(a.x - b.x, a.y - b.y) - a.radius - b.radius >= rules.min_gap
                for dx, dy in directions:
                    projection = (a.x - b.x) * dx + (a.y - b.y) * dy
                    assert not 0 < projection < rules.margin


def test_impossible_constraints_are_refused():
    requests = [ObjectRequest("sphere", "red", "rubber", "large")] * 12
    with pytest.raises(PlacementError, match="use fewer or smaller objects"):
        place_objects(requests, Camera(), random.Random(0), PlacementRules(area=1.5))


def test_relation_directions_follow_the_camera():
    camera = Camera()
    directions = camera.ground_directions()
    # left/right and front/behind are opposite unit vectors, orthogonal to each other.
    for a, b in (("left", "right"), ("front", "behind")):
        assert directions[a][0] == pytest.approx(-directions[b][0])
    lx, ly = directions["left"]
    fx, fy = directions["front"]
    assert lx * fx + ly * fy == pytest.approx(0.0, abs=1e-9)
    # "front" points towards the camera.
    cx, cy, _ = camera.location
    assert fx * cx + fy * cy > 0


@pytest.mark.parametrize("dataset", ["single-object", "two-object", "relational"])
def test_sampled_scenes_keep_held_out_compositions_out_of_other_splits(dataset):
    config = BindingConfig(dataset=dataset, split_sizes={"train": 60, "val": 12, "gen": 12})
    rules = PlacementRules()
    for item in plan_items(config):
        plan = sample_scene(item, config, random.Random(item.seed))
        objects = plan.scene.objects
        assert plan.candidates[plan.label_index].kind == "true"
        if dataset == "relational":
            a, b = objects
            subject, relation, obj = item.payload["target"]
            assert (a.shape, b.shape) == (subject, obj)
            assert relation_holds(a, b, relation, plan.scene.camera, rules.relation_threshold)
            assert plan.label == f"{subject} {relation} {obj}"
            for x, y in ((a, b), (b, a)):
                for r in relations_between(x, y, plan.scene.camera, rules.relation_threshold):
                    assert allowed_in_picture(fact_split((x.shape, r, y.shape)), item.split)
            # Relations agree with the picture: pixel x for left/right, pixel y for front/behind.
            (xa, ya), (xb, yb) = (plan.scene.camera.project(o.location, 320, 240) for o in (a, b))
            assert {"left": xa < xb, "right": xa > xb, "front": ya > yb, "behind": ya < yb}[relation]
        else:
            for o in objects:
                assert allowed_in_picture(adj_noun_split((o.color, o.shape)), item.split)
            assert plan.label == " ".join(item.payload["target"])
        if dataset == "two-object":
            a, b = objects
            assert a.shape != b.shape and a.color != b.color


def test_items_have_stable_ids_and_seeds():
    config = BindingConfig(dataset="relational", preset="paper")
    items = plan_items(config)
    assert len(items) == 80000
    assert items[0].item_id == "train-000000" and items[-1].item_id == "gen-019999"
    again = plan_items(BindingConfig(dataset="relational", preset="paper"))
    assert [i.seed for i in items[:50]] == [i.seed for i in again[:50]]
    other_seed = plan_items(BindingConfig(dataset="relational", preset="paper", seed=1))
    assert items[0].seed != other_seed[0].seed


def test_bad_configs_are_refused():
    with pytest.raises(ConceptforgeError, match="unknown dataset"):
        BindingConfig(dataset="three-object")
    with pytest.raises(ConceptforgeError, match="unknown preset"):
        BindingConfig(dataset="relational", preset="huge")
    with pytest.raises(ConceptforgeError, match="min-pixels"):
        BindingConfig(dataset="relational", width=64, height=48, min_pixels=5000)
