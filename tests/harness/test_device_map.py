"""``--device-map`` / ``--max-memory``: a model split by accelerate scores as the whole model.

CPU memory plus disk offload stand in for several GPUs: ``--max-memory cpu=<half the weights>``
makes accelerate put part of each tiny model on ``disk`` (``--offload-folder``), and its hooks
bring those weights back for each forward. The split is checked from the map accelerate chose
(logged from ``hf_device_map``), the numbers against the unsplit model's, row by row.
"""

from __future__ import annotations

import json
import logging
import warnings

import pyarrow.parquet as pq
import pytest

from conceptforge.commands import main


def _run(tmp_path, name, model, data, *extra):
    out = tmp_path / name / "run.json"
    argv = ["evaluate", "--model", str(model), "--tasks", f"binding-clip:{data}", "--batch-size", "8"]
    argv += ["--no-sample-cache", "--cache-dir", str(tmp_path / name / "cache"), "--output", str(out), *extra]
    assert main(argv) == 0
    rows = pq.read_table(out.with_name("run.samples") / "binding-clip.parquet").to_pylist()
    return json.loads(out.read_text()), rows


@pytest.mark.parametrize("family", ["clip", "vlm", "itm"])
def test_a_model_split_over_memory_and_disk_scores_as_the_whole_model(
    family, tmp_path, caplog, single_object_dir, request
):
    model = request.getfixturevalue({"clip": "tiny_clip_dir", "vlm": "tiny_llava_dir", "itm": "tiny_blip_dir"}[family])
    weights = sum(p.stat().st_size for p in model.glob("*.safetensors"))
    whole, whole_rows = _run(tmp_path, "whole", model, single_object_dir, "--device", "cpu")
    caplog.set_level(logging.INFO, logger="conceptforge.placement")
    kib = weights // 2 // 1024
    limit = f"cpu={kib}KiB"  # half the weights in memory: the rest must go to disk
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")  # every warning recorded, as a user's interpreter would show it
        split, split_rows = _run(
            tmp_path, "split", model, single_object_dir, "--device-map", "auto", "--max-memory", limit,
            "--offload-folder", str(tmp_path / "offload"),
        )  # fmt: skip
    # a clean offload run prints none of accelerate's notes (issue 45.8: "device_map keys do not
    # match any submodules", "Some parameters are on the meta device"): they are debug lines now
    assert not [str(w.message) for w in seen if "device_map keys" in str(w.message)]
    assert not [
        r.getMessage() for r in caplog.records if r.name.startswith("accelerate") and r.levelno >= logging.WARNING
    ]
    maps = [r.getMessage() for r in caplog.records if r.getMessage().startswith("device map: ")]
    assert maps == ["device map: cpu, disk"]  # the model really was split (hf_device_map has 2 devices)
    # (no copy in --offload-folder: accelerate reads disk-offloaded weights from the safetensors file itself)
    assert split["settings"]["device_map"] == "auto"
    assert split["settings"]["max_memory"] == {"cpu": f"{kib}KiB"}
    assert "device_map" not in whole["settings"]  # an unsplit run's results keep their old shape
    assert [r["item_id"] for r in split_rows] == [r["item_id"] for r in whole_rows]
    assert [r["scores"] for r in split_rows] == [r["scores"] for r in whole_rows]  # exactly: same weights, same ops
    assert [t["metrics"] for t in split["tasks"]] == [t["metrics"] for t in whole["tasks"]]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--max-memory", "cpu=1GiB"], "--max-memory goes with --device-map"),
        (["--offload-folder", "off"], "--offload-folder goes with --device-map"),
        (["--device-map", "auto", "--device", "cpu"], "--device cpu and --device-map auto: the map places the model"),
        (["--device-map", "auto", "--device", "cuda"], "--device cuda and --device-map auto: the map places the model"),
        (["--device-map", "auto", "--max-memory", "cpu=lots"], "'lots' is not a size"),
        (["--device-map", "auto", "--max-memory", "20GiB"], "is not DEVICE=SIZE"),
        (["--device-map", "auto", "--max-memory", "tpu=1GiB"], "device 'tpu': use a GPU index"),
        (["--device-map", "auto", "--max-memory", "7=1GiB"], "GPU 7 is not visible here"),
        (
            ["--device-map", "everywhere"],
            "expected one of auto, balanced, balanced_low_0, sequential, got 'everywhere'",
        ),
    ],
)
def test_placement_flags_are_checked_up_front(extra, message, tmp_path, capsys, tiny_clip_dir, single_object_dir):
    argv = ["evaluate", "--model", str(tiny_clip_dir), "--tasks", f"binding-clip:{single_object_dir}"]
    code = main([*argv, "--output", str(tmp_path / "run.json"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert len([line for line in err.splitlines() if "error:" in line]) == 1
    assert not (tmp_path / "run.json").exists()


def test_a_map_for_a_family_that_does_not_load_through_transformers_is_one_line(
    tmp_path, capsys, tiny_open_clip_dir, single_object_dir
):
    argv = ["evaluate", "--model", str(tiny_open_clip_dir), "--tasks", f"binding-clip:{single_object_dir}"]
    code = main([*argv, "--device-map", "auto", "--output", str(tmp_path / "run.json")])
    err = capsys.readouterr().err
    assert code == 2 and "(an open_clip model) does not load through transformers" in err, err
    assert not (tmp_path / "run.json").exists()
