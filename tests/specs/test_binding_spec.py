"""The binding spec itself (issue 46): the paper's preset holds the paper's vocabulary, the shipped
JSON Schema is what the dataclass derives, and the held-out rule on a vocabulary worked by hand.
No Blender needed."""

from __future__ import annotations

import json

from conceptforge.generators.binding.benchmark import BindingBenchmarkSpec, load_binding_spec, spec_vocabulary
from conceptforge.generators.binding.heldout import auto_adj_noun, auto_relational
from conceptforge.specs.schema import schema_text, shipped_schema_path


def test_paper_preset_is_the_papers_vocabulary():
    vocab = spec_vocabulary(load_binding_spec(preset="paper"))
    assert vocab.shapes == ("cube", "sphere", "cylinder")
    # paper 004 §3's colour order (it fixes class ids), CLEVR's sRGB values
    assert vocab.color_names == ("blue", "gray", "yellow", "brown", "green", "purple", "red", "cyan")
    assert vocab.color_rgb["gray"] == (87, 87, 87) and vocab.color_rgb["cyan"] == (41, 208, 208)
    assert vocab.materials == ("rubber", "metal") and vocab.size_radius == {"large": 0.7, "small": 0.35}
    held = dict(vocab.adj_noun_held_out)
    assert held["val"] == (("brown", "cube"), ("green", "cylinder")) and len(held["gen"]) == 8
    facts = dict(vocab.relation_held_out)
    assert facts["val"] == (("cube", "front", "sphere"), ("sphere", "behind", "cube"))
    assert facts["gen"] == (("cylinder", "front", "cube"), ("cube", "behind", "cylinder"))
    assert vocab.shape_kind("cube") == "cube" and vocab.material_kind("metal") == "metal"
    demo = load_binding_spec(preset="binding-demo").spec
    assert {name: (s.train, s.val, s.gen) for name, s in demo.splits.items()} == {
        "single-object": (4, 2, 2),
        "two-object": (4, 2, 2),
        "relational": (4, 2, 2),
    }


def test_shipped_schema_is_what_the_spec_derives():
    shipped = shipped_schema_path("binding").read_text(encoding="utf-8")
    assert shipped == schema_text("binding", BindingBenchmarkSpec)
    schema = json.loads(shipped)
    assert schema["properties"]["relations"]["items"]["enum"] == ["left", "right", "front", "behind"]


def test_computed_held_out_on_a_small_vocabulary():
    # 2 shapes x 3 colours = 6 compositions: gen round(6/3) = 2, val max(1, round(6/12)) = 1
    held = auto_adj_noun(["ball", "box"], ["red", "blue", "teal"], seed=3)
    assert len(held["gen"]) == 2 and len(held["val"]) == 1
    train = {(c, s) for s in ("ball", "box") for c in ("red", "blue", "teal")} - set(held["gen"]) - set(held["val"])
    assert {c for c, _ in train} == {"red", "blue", "teal"} and {s for _, s in train} == {"ball", "box"}
    # 2 shapes x 2 colours = 4: taking 1 + 1 leaves the 2 that cover both colours and both shapes
    small = auto_adj_noun(["ball", "box"], ["red", "blue"], seed=0)
    rest = {(c, s) for s in ("ball", "box") for c in ("red", "blue")} - set(small["gen"]) - set(small["val"])
    assert len(rest) == 2 and {c for c, _ in rest} == {"red", "blue"} and {s for _, s in rest} == {"ball", "box"}
    # relational: 3 shapes, left/right only: 3 unordered pairs -> 3 image types; val and gen one each
    facts = auto_relational(["a", "b", "c"], ["left", "right"], seed=0)
    for split in ("val", "gen"):
        (s, r, o), converse = facts[split]
        assert converse == (o, {"left": "right", "right": "left"}[r], s)
    assert set(facts["val"]).isdisjoint(facts["gen"])
