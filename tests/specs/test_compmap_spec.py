"""CompMap on data that is neither CUB nor MIT-States, from a spec (issue 46).

CZSL on a shapes x textures pair dataset saved with ``datasets`` (``evaluate compmap --spec``),
n-way k-shot on a gadgets class x attribute table (``evaluate --tasks compmap-cub
--compmap-spec``), the split rule and the majority vote worked out by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conceptforge.commands import main
from conceptforge.testing.tiny_models import build_tiny_clip
from tests.specs.compmap_data import (
    CZSL_SPEC,
    FEW_SHOT_SPEC,
    PAIR_SPLITS,
    write_gadgets,
    write_shape_pairs,
)


@pytest.fixture(autouse=True)
def _offline(hub_offline):
    """Tiny models and datasets are local; offline mode makes a wrong path fail without a request."""


@pytest.fixture(scope="module")
def own_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("compmap-own")
    write_shape_pairs(root / "shapes")
    write_gadgets(root)
    (root / "czsl.yaml").write_text(CZSL_SPEC)
    (root / "few.yaml").write_text(FEW_SHOT_SPEC)
    return {"root": root, "clip": build_tiny_clip(root / "tiny-clip")}


def test_czsl_spec_reads_the_pairs_and_splits(own_data):
    from conceptforge.loaders.compmap.benchmark import load_compmap_spec
    from conceptforge.loaders.compmap.spec_data import czsl_data

    data = czsl_data(load_compmap_spec(own_data["root"] / "czsl.yaml"))
    assert data.attrs == ["dotted", "plain", "striped"] and data.objs == ["circle", "square", "triangle"]
    for split, pairs in PAIR_SPLITS.items():
        assert data.pairs[split] == sorted(set(pairs))
        assert len(data.samples[split]) == 3 * len(pairs)
    # closed world: the 7 distinct pairs of the three splits; seen: the 4 training pairs
    assert len(data.candidate_pairs("closed")) == 7 and len(data.seen_pairs) == 4


def test_split_rule_by_hand(tmp_path):
    """No split column: unseen pairs (sorted) alternately test, val; each seen pair's 10 images
    give round(0.2 * 10) = 2 to test, round(0.1 * 10) = 1 to val, 7 to train."""
    from conceptforge.loaders.compmap.benchmark import load_compmap_spec
    from conceptforge.loaders.compmap.spec_data import czsl_data

    write_shape_pairs(tmp_path / "shapes", per_pair=10, split_column=False)
    spec = CZSL_SPEC.replace("  split_column: split\n", "  split_column: null\n")
    spec += "  unseen_pairs: ['striped circle', 'plain triangle', 'plain circle']\n"
    (tmp_path / "rule.yaml").write_text(spec)
    data = czsl_data(load_compmap_spec(tmp_path / "rule.yaml"))
    # sorted unseen: plain circle -> test, plain triangle -> val, striped circle -> test
    unseen = {("plain", "circle"): "test", ("plain", "triangle"): "val", ("striped", "circle"): "test"}
    seen = {("dotted", "circle"), ("dotted", "square"), ("plain", "square"), ("striped", "triangle")}
    for pair, split in unseen.items():
        assert pair in data.pairs[split] and all(
            pair not in data.pairs[s] for s in ("train", "val", "test") if s != split
        )
    assert set(data.seen_pairs) == seen
    for pair in seen:
        counts = {s: sum((x.attr, x.obj) == pair for x in data.samples[s]) for s in ("train", "val", "test")}
        assert counts == {"train": 7, "val": 1, "test": 2}
    assert len(data.samples["test"]) == 4 * 2 + 2 * 10 and len(data.samples["val"]) == 4 * 1 + 10


def test_class_table_majority_vote_by_hand(own_data):
    """Shares >= 0.5 are present: kettle red+matte, toaster blue+matte, blender red+glossy,
    grinder and mixer blue+glossy (the same vector: the oracle cannot tell them apart)."""
    from conceptforge.loaders.compmap.benchmark import load_compmap_spec
    from conceptforge.loaders.compmap.spec_data import few_shot_table_data

    data = few_shot_table_data(load_compmap_spec(own_data["root"] / "few.yaml"))
    assert data.class_names == ["kettle", "toaster", "blender", "grinder", "mixer"]
    assert data.attributes == ["colour::red", "colour::blue", "finish::matte", "finish::glossy"]
    expected = [[1, 0, 1, 0], [0, 1, 1, 0], [1, 0, 0, 1], [0, 1, 0, 1], [0, 1, 0, 1]]
    assert data.class_attributes().tolist() == expected
    assert {g: c.tolist() for g, c in data.groups.items()} == {"colour": [0, 1], "finish": [2, 3]}
    assert data.is_train.sum() == 10 and len(data.labels) == 20
    assert np.array_equal(data.gt_primitives()[data.labels == 3], np.tile(expected[3], (4, 1)))


def test_czsl_spec_end_to_end(own_data, monkeypatch, capsys):
    root = own_data["root"]
    monkeypatch.chdir(root)
    argv = ["evaluate", "compmap", "--spec", "czsl.yaml", "--model", str(own_data["clip"])]
    argv += ["--cache-dir", "cache", "--world", "both"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Table 1" in out
    (task,) = json.loads((root / "compmap-shapes-textures.json").read_text())["tasks"]
    assert task["task"] == "compmap-mit-states" and task["dataset"]["repo"] == "czsl.yaml"
    assert "benchmark spec shapes-textures" in task["variant"] and "own 'a drawing of {}'" in task["variant"]
    assert task["options"]["epochs"] == 5 and task["options"]["world"] == "both"  # the spec's, and the flag's
    carried = task["details"]["benchmark_spec"]  # the results say what was evaluated
    assert carried["name"] == "shapes-textures" and carried["spec"]["czsl"]["attribute_column"] == "texture"
    # one sample row per test image (9), world (2) and row (oracle, prim, interv_full, interv_partial)
    import pyarrow.parquet as pq

    rows = pq.read_table(root / "compmap-shapes-textures.samples" / "compmap-mit-states.parquet").to_pylist()
    assert len(rows) == 9 * 2 * 4
    closed = [r for r in rows if r["world"] == "closed" and r["row"] == "oracle"]
    assert {r["pair"] for r in closed} == {"plain square", "striped circle", "plain triangle"}
    # unseen test pairs: striped circle and plain triangle (not among the training pairs)
    assert sum(not r["seen"] for r in closed) == 6
    open_world = [r for r in rows if r["world"] == "open" and r["row"] == "oracle"]
    assert all(len(r["seen_top"]) + len(r["unseen_top"]) <= 9 for r in open_world)


def test_few_shot_spec_through_the_task_runner(own_data, monkeypatch, capsys):
    """``--tasks compmap-cub --compmap-spec FILE``: no CUB folder; the full-shot oracle is right on
    every test image but those of the class it cannot tell from its twin: grinder and mixer share a
    vector, so one of the two is always predicted for both: (2 + 2 + 2 + 2 + 0) / 10 = 80 %."""
    root = own_data["root"]
    monkeypatch.chdir(root)
    argv = ["evaluate", "--model", str(own_data["clip"]), "--tasks", "compmap-cub", "--compmap-spec", "few.yaml"]
    argv += ["--cache-dir", "cache", "--output", "few.json", "--task-option", "compmap-cub.episodes=3"]
    assert main(argv) == 0
    capsys.readouterr()
    (task,) = json.loads((root / "few.json").read_text())["tasks"]
    assert task["options"]["ways"] == [2, 3] and task["options"]["episodes"] == 3  # spec, then --task-option
    results = task["details"]["results"]
    assert set(results["settings"]) == {"2-way-1-shot", "3-way-1-shot", "full-shot"}
    assert results["settings"]["full-shot"]["n_way"] == 5
    assert results["settings"]["full-shot"]["oracle"]["accuracy"] == pytest.approx(80.0)
    assert results["settings"]["3-way-1-shot"]["prim"]["episodes"] == 3


def test_spec_of_the_other_protocol_is_refused(own_data, monkeypatch, capsys):
    monkeypatch.chdir(own_data["root"])
    argv = ["evaluate", "--model", str(own_data["clip"]), "--tasks", "compmap-mit-states"]
    assert main([*argv, "--compmap-spec", "few.yaml", "--output", "x.json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("its protocol runs as task compmap-cub; add it to --tasks")
    assert not (own_data["root"] / "x.json").exists()


def test_dry_run_prints_the_plan_and_writes_nothing(own_data, monkeypatch, capsys):
    """Counts by hand: 27 images (12/6/9), 3 + 3 concepts, so 27 x 6 = 162 image-concept pairs;
    gadgets: 20 images x 4 attributes = 80 pairs."""
    root = own_data["root"]
    monkeypatch.chdir(root)
    before = sorted(p.name for p in root.iterdir())
    assert main(["evaluate", "compmap", "--spec", "czsl.yaml", "--dry-run", "--world", "both"]) == 0
    out = capsys.readouterr().out
    assert "pairs train/val/test 4/2/3 (seen 4, unseen 3)" in out and "images train/val/test 12/6/9" in out
    assert "closed world 7 pairs, open world 9 pairs" in out
    assert "27 images + 6 concept prompts (dual encoder), 162 image-concept pairs" in out
    assert main(["evaluate", "compmap", "--spec", "few.yaml", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "classes 5, attributes 4 in 2 groups; images 20 (train 10, test 10)" in out
    assert "settings: 2-way 1-shot, 3-way 1-shot, 4 episodes each (authors protocol); full shot 5-way" in out
    assert "20 images + 4 concept prompts (dual encoder), 80 image-concept pairs" in out
    assert sorted(p.name for p in root.iterdir()) == before
