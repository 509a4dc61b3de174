"""End to end with real Blender: the script, the dataset format, determinism, resume, shards."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from datasets import ClassLabel, Image as ImageFeature, load_dataset
from PIL import Image

REPO_ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--resolution", "64x48", "--samples", "2"]


@pytest.fixture(autouse=True)
def _bind_runner(run_binding):
    global run_script
    run_script = run_binding

pytest.importorskip("bpy", reason="Blender (bpy) is part of the test install: pip install '.[blender]'")


def _data_bytes(directory: Path) -> dict[str, bytes]:
    files = sorted((directory / "data").glob("*.parquet")) + [directory / "README.md", directory / "grid.png"]
    return {f.name: f.read_bytes() for f in files}


def test_demo_datasets_load_with_typed_columns(demo_dir):
    for name in ("single-object", "two-object", "relational"):
        directory = demo_dir / name
        assert (directory / "README.md").exists() and (directory / "grid.png").exists()
        with Image.open(directory / "grid.png") as grid:
            assert grid.width > 100
        ds = load_dataset(str(directory))
        assert {split: ds[split].num_rows for split in ds} == {"train": 4, "val": 2, "gen": 2}
        assert isinstance(ds["train"].features["image"], ImageFeature)
        for split in ds:
            for row in ds[split]:
                assert row["image"].size == (64, 48)
                assert row["candidates"][row["label_index"]] == row["label"]
                assert row["candidate_kinds"][row["label_index"]] == "true"
                assert len(set(row["candidates"])) == 5
                for obj in row["objects"]:
                    x0, y0, x1, y1 = obj["bbox"]
                    assert 0 <= x0 <= x1 < 64 and 0 <= y0 <= y1 < 48
                    assert obj["pixels"] >= 8  # 200 px at 320x240, scaled to 64x48
                if name == "relational":
                    subject, other = row["objects"]
                    relation = row["relation"]["relation"]
                    assert row["label"] == f"{subject['shape']} {relation} {other['shape']}"
                    (xa, ya), (xb, yb) = subject["center"], other["center"]
                    assert {"left": xa < xb, "right": xa > xb, "front": ya > yb, "behind": ya < yb}[relation]


def test_held_out_labels_stay_in_their_split(demo_dir):
    ds = load_dataset(str(demo_dir / "single-object"))
    assert set(ds["val"]["label"]) == {"brown cube", "green cylinder"}
    assert not set(ds["train"]["label"]) & {"brown cube", "green cylinder", "green cube", "purple cube"}


def test_same_seed_gives_identical_bytes(demo_dir, tmp_path):
    run_script("--dataset", "relational", "--out", str(tmp_path), *SMALL)
    assert _data_bytes(tmp_path / "relational") == _data_bytes(demo_dir / "relational")
    run_script("--dataset", "relational", "--out", str(tmp_path / "other"), "--seed", "1", *SMALL)
    assert _data_bytes(tmp_path / "other" / "relational") != _data_bytes(demo_dir / "relational")


def test_killed_run_resumes_to_identical_dataset(demo_dir, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "scripts" / "generate_binding.py"), "--dataset", "two-object", "--out", str(tmp_path), *SMALL],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    chunks = tmp_path / "two-object" / ".work" / "chunks"
    deadline = time.time() + 300
    while time.time() < deadline and len(list(chunks.glob("*.done"))) < 1:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)  # inside the second chunk of 4 scenes
    process.wait()
    assert len(list(chunks.glob("*.done"))) == 1
    assert not (tmp_path / "two-object" / "README.md").exists()  # nothing looks complete
    run_script("--dataset", "two-object", "--out", str(tmp_path), *SMALL)
    assert _data_bytes(tmp_path / "two-object") == _data_bytes(demo_dir / "two-object")


def test_shards_assemble_the_same_dataset(demo_dir, tmp_path):
    first = run_script("--dataset", "single-object", "--out", str(tmp_path), "--num-shards", "2", "--shard-index", "0", *SMALL)
    assert "still missing, in shard(s) 1 of 2" in first.stderr and "conceptforge assemble" in first.stderr
    assert not (tmp_path / "single-object" / "README.md").exists()
    run_script("--dataset", "single-object", "--out", str(tmp_path), "--num-shards", "2", "--shard-index", "1", *SMALL)
    assert _data_bytes(tmp_path / "single-object") == _data_bytes(demo_dir / "single-object")


def test_torchrun_ranks_split_the_work(demo_dir, tmp_path, repo_root):
    """`accelerate launch`/torchrun: each rank renders its slice; the last one assembles."""
    env = {**os.environ, "PYTHONPATH": str(repo_root), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "0",
         str(repo_root / "scripts" / "generate_binding.py"), "--dataset", "single-object", "--out", str(tmp_path), *SMALL],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("made 4 single-object scenes") == 2  # 8 items, 4 per rank, none twice
    assert _data_bytes(tmp_path / "single-object") == _data_bytes(demo_dir / "single-object")


def test_worker_processes_give_the_same_dataset(demo_dir, tmp_path):
    run_script("--dataset", "single-object", "--out", str(tmp_path), "--num-workers", "2", *SMALL)
    assert _data_bytes(tmp_path / "single-object") == _data_bytes(demo_dir / "single-object")


def test_resume_with_other_settings_is_refused(demo_dir, tmp_path):
    # settings are fixed once the first chunk (4 scenes) is written
    run_script("--dataset", "single-object", "--out", str(tmp_path), "--max-items", "4", *SMALL)
    result = run_script("--dataset", "single-object", "--out", str(tmp_path), "--resolution", "80x60", "--samples", "2", check=False)
    assert result.returncode == 2
    assert "other settings" in result.stderr and "height" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "three-object"], "unknown dataset"),
        (["--preset", "huge"], "unknown preset"),
        (["--resolution", "big"], "--resolution must look like"),
        (["--min-pixels", "100000"], "--min-pixels"),
        (["--num-shards", "2", "--shard-index", "5"], "--shard-index"),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path, args, message):
    out = tmp_path / "out"
    result = run_script("--out", str(out), *SMALL, *args, check=False)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert not out.exists() or not any(out.rglob("README.md"))


def test_unwritable_output(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run_script("--dataset", "single-object", "--out", str(blocker / "out"), *SMALL, check=False)
    assert result.returncode == 2 and "cannot write" in result.stderr


def test_missing_blender_is_one_clear_line(tmp_path):
    code = (
        "import sys, runpy; sys.modules['bpy'] = None; "
        f"sys.argv = ['generate_binding.py', '--dataset', 'single-object', '--out', {str(tmp_path / 'o')!r}]; "
        f"runpy.run_path({str(REPO_ROOT / 'scripts' / 'generate_binding.py')!r}, run_name='__main__')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, timeout=120)
    assert result.returncode == 2
    assert "error: Blender's Python module 'bpy' is not installed" in result.stderr
    assert not (tmp_path / "o").exists()


def test_pinhole_projection_matches_blender(tmp_path):
    """Our Camera.project (used for relations and centres) equals bpy's world_to_camera_view."""
    code = r"""
import random, json
import bpy
from conceptforge.generators.binding.scene import *
from conceptforge.generators.binding.render_blender import BlenderRenderer
from bpy_extras.object_utils import world_to_camera_view
rng = random.Random(4)
errors = []
renderer = BlenderRenderer()
for _ in range(3):
    cam = jittered_camera(rng)
    objs = place_objects([ObjectRequest("cube", "red", "metal", "large"), ObjectRequest("sphere", "blue", "rubber", "small")], cam, rng)
    scene = SceneDescription(objs, cam, default_lights(rng), 320, 240, 1, 0)
    renderer._build(scene)
    bpy.context.view_layer.update()
    for o in objs:
        v = world_to_camera_view(bpy.context.scene, bpy.context.scene.camera, __import__('mathutils').Vector(o.location))
        x, y = cam.project(o.location, 320, 240)
        errors.append(max(abs(v.x * 320 - x), abs((1 - v.y) * 240 - y)))
print(json.dumps(max(errors)))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert float(result.stdout.strip().splitlines()[-1]) < 0.01


def test_s3_output_is_byte_identical_to_local(demo_dir, s3_server):
    """`--out s3://bucket/x` on a real S3-compatible server (moto, 127.0.0.1): same parquet bytes."""
    s3_server.make_bucket("binding")
    result = run_script("--dataset", "single-object", "--out", "s3://binding/demo", *SMALL)
    assert "s3://binding/demo/single-object: card" in result.stdout
    fs = s3_server.filesystem()
    local = sorted((demo_dir / "single-object" / "data").glob("*.parquet"))
    remote = sorted(f for f in fs.find("binding/demo/single-object/data") if f.endswith(".parquet"))
    assert [f.rsplit("/", 1)[-1] for f in remote] == [p.name for p in local]
    assert [fs.cat_file(f) for f in remote] == [p.read_bytes() for p in local]
    assert fs.cat_file("binding/demo/single-object/README.md") == (demo_dir / "single-object" / "README.md").read_bytes()


def test_foreign_out_folder_is_refused_untouched(tmp_path):
    from tests.foreign_out import assert_refused_untouched, make_foreign_folder

    before = make_foreign_folder(tmp_path)
    result = run_script("--dataset", "single-object", "--out", str(tmp_path), *SMALL, check=False)
    assert_refused_untouched(tmp_path, before, result.returncode, result.stderr)


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_worker_processes_die_with_their_parent(tmp_path):
    """Issue 20.4: kill -9 of the parent leaves no Blender worker running."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    parent = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "scripts" / "generate_binding.py"), "--dataset", "two-object", "--out", str(tmp_path),
         "--num-workers", "2", "--resolution", "64x48", "--samples", "64"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    workers: set[int] = set()
    while time.time() < deadline and len(workers) < 2:
        workers = _children(parent.pid)
        time.sleep(0.2)
    assert len(workers) >= 2, "the pool did not start"
    time.sleep(2)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 15
    while time.time() < deadline and any(_alive(pid) for pid in workers):
        time.sleep(0.2)
    assert not [pid for pid in workers if _alive(pid)]
