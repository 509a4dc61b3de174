"""End to end with real Blender: the script, the dataset format, determinism, resume, shards."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from datasets import ClassLabel, load_dataset
from datasets import Image as ImageFeature
from PIL import Image

from tests.proc import alive, children

REPO_ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--resolution", "64x48", "--samples", "2"]  # see conftest


@pytest.fixture(autouse=True)
def _bind_runner(run_binding):
    global run_script
    run_script = run_binding


pytest.importorskip("bpy", reason="Blender (bpy) is part of the test install: pip install '.[blender]'")


def _data_bytes(repo: Path, config: str) -> dict[str, bytes]:
    """One config's files (parquet shards + CLEVR scene files); the card depends on which configs exist."""
    files = sorted((repo / "data" / config).glob("*.parquet")) + sorted((repo / "scenes" / config).glob("*.json"))
    assert files
    return {f.relative_to(repo).as_posix(): f.read_bytes() for f in files}


def test_demo_datasets_load_with_typed_columns(demo_dir):
    assert (demo_dir / "README.md").exists() and (demo_dir / "grid.png").exists()
    with Image.open(demo_dir / "grid.png") as grid:
        assert grid.width > 100
    card = (demo_dir / "README.md").read_text()
    for section in ("## Uses", "### Out-of-scope use", "## Bias, Risks and Limitations", "## Annotations"):
        assert section in card
    assert 'load_dataset("path/to/this/folder", "relational")' in card
    assert "Open Image Denoise quality fast on CPU (pyoidn)" in card  # the denoiser setting that made the pixels
    for name in ("single-object", "two-object", "relational"):
        ds = load_dataset(str(demo_dir), name)
        label = ds["train"].features["label"]
        assert (
            isinstance(label, ClassLabel) and len(label.names) == 24
        )  # 8 colours x 3 shapes; 6 ordered shape pairs x 4 relations
        shape = ds["train"].features["objects"].feature["shape"]
        assert isinstance(shape, ClassLabel) and shape.names == ["cube", "sphere", "cylinder"]
        assert {split: ds[split].num_rows for split in ds} == {"train": 4, "val": 2, "gen": 2}
        assert isinstance(ds["train"].features["image"], ImageFeature)
        for split in ds:
            for row in ds[split]:
                assert row["image"].size == (64, 48)
                row["label"] = label.int2str(row["label"])
                for obj in row["objects"]:
                    obj["shape"] = shape.int2str(obj["shape"])
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
    ds = load_dataset(str(demo_dir), "single-object")
    names = ds["train"].features["label"].int2str
    assert {names(v) for v in ds["val"]["label"]} == {"brown cube", "green cylinder"}
    assert not {names(v) for v in ds["train"]["label"]} & {"brown cube", "green cylinder", "green cube", "purple cube"}


def test_same_seed_gives_identical_bytes(demo_dir, tmp_path):
    same, other = tmp_path / "same", tmp_path / "other"  # side by side: an --out inside a run is refused
    run_script("--dataset", "relational", "--out", str(same), *SMALL)
    assert _data_bytes(same, "relational") == _data_bytes(demo_dir, "relational")
    run_script("--dataset", "relational", "--out", str(other), "--seed", "1", *SMALL)
    assert _data_bytes(other, "relational") != _data_bytes(demo_dir, "relational")


def _start_two_object_run(out: Path, *options: str) -> subprocess.Popen:
    """``generate_binding.py --dataset two-object`` in the background, output discarded."""
    return subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "scripts" / "generate_binding.py"), "--dataset", "two-object"]
        + ["--out", str(out), *options],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.heavy
def test_killed_run_resumes_to_identical_dataset(demo_dir, tmp_path):
    process = _start_two_object_run(tmp_path, *SMALL)
    chunks = tmp_path / ".work" / "two-object" / "chunks"
    deadline = time.time() + 300
    while time.time() < deadline and len(list(chunks.glob("*.done"))) < 1:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)  # inside the second chunk of 4 scenes
    process.wait()
    assert len(list(chunks.glob("*.done"))) == 1
    assert not (tmp_path / "README.md").exists()  # nothing looks complete
    run_script("--dataset", "two-object", "--out", str(tmp_path), *SMALL)
    assert _data_bytes(tmp_path, "two-object") == _data_bytes(demo_dir, "two-object")


@pytest.mark.heavy
def test_shards_assemble_the_same_dataset(demo_dir, tmp_path):
    first = run_script(
        "--dataset", "single-object", "--out", str(tmp_path), "--num-shards", "2", "--shard-index", "0", *SMALL
    )
    assert "still missing, in shard(s) 1 of 2" in first.stderr and "conceptforge assemble" in first.stderr
    assert not (tmp_path / "README.md").exists()
    run_script("--dataset", "single-object", "--out", str(tmp_path), "--num-shards", "2", "--shard-index", "1", *SMALL)
    assert _data_bytes(tmp_path, "single-object") == _data_bytes(demo_dir, "single-object")


def test_torchrun_ranks_split_the_work(demo_dir, tmp_path, repo_root):
    """`accelerate launch`/torchrun: each rank renders its slice; the last one assembles."""
    env = {**os.environ, "PYTHONPATH": str(repo_root), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            "0",
            str(repo_root / "scripts" / "generate_binding.py"),
            "--dataset",
            "single-object",
            "--out",
            str(tmp_path),
            *SMALL,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("made 4 single-object scenes") == 2  # 8 items, 4 per rank, none twice
    assert _data_bytes(tmp_path, "single-object") == _data_bytes(demo_dir, "single-object")


@pytest.mark.heavy
def test_worker_processes_give_the_same_dataset(demo_dir, tmp_path):
    run_script("--dataset", "single-object", "--out", str(tmp_path), "--num-workers", "2", *SMALL)
    assert _data_bytes(tmp_path, "single-object") == _data_bytes(demo_dir, "single-object")


@pytest.mark.heavy
def test_workers_restarted_every_item_give_the_same_dataset(demo_dir, tmp_path):
    """--restart-workers-every: fresh Blender processes part-way through change no byte.

    8 images, a fresh process after every 3 (``max_tasks_per_child``): two restarts part-way,
    three Blender starts instead of the eight of ``1`` (each start is seconds; the proof, a
    replaced process renders the same bytes, is the same)."""
    run_script(
        "--dataset",
        "single-object",
        "--out",
        str(tmp_path),
        "--num-workers",
        "1",
        "--restart-workers-every",
        "3",
        *SMALL,
    )
    assert _data_bytes(tmp_path, "single-object") == _data_bytes(demo_dir, "single-object")


def _fresh_python(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a new interpreter (its own Blender, the repo importable), output captured."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=600,
    )


def _json_from_a_fresh_process(code: str):
    """Run ``code`` in a new interpreter and parse the JSON it prints last."""
    result = _fresh_python(code)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _scenes_code(dataset: str, width: int, height: int, samples: int) -> str:
    """Python source that plans 3 scenes of ``dataset`` (``scenes``, ``config``) and starts ``out``
    with the shapes in them, for the fresh-process tests below."""
    return f"""
import hashlib, json, random
from dataclasses import replace
from conceptforge.generators.binding.dataset import BindingConfig, plan_items, sample_scene
from conceptforge.generators.binding.render_blender import BlenderRenderer
config = BindingConfig(dataset={dataset!r}, width={width}, height={height}, samples={samples}, split_sizes={{"train": 3}})
scenes = [sample_scene(item, config, random.Random(item.seed)).scene for item in plan_items(config)]
out = {{"shapes": sorted({{o.shape for s in scenes for o in s.objects}})}}
"""


@pytest.mark.heavy
def test_thread_counts_and_reruns_give_identical_png_bytes(tmp_path):
    """Renders are byte-identical across fresh processes and 1 vs 2 render threads, with the
    denoiser on and off. Spheres are in the scenes on purpose: Blender's own smooth vertex
    normals vary in the last bit between runs (summed in a run-dependent order), which the
    denoiser used to carry across an 8-bit rounding step; the renderer sets exact ones."""
    code = (
        _scenes_code("relational", 96, 72, 4)
        + r"""
for threads in (1, 2):
    renderer = BlenderRenderer(threads=threads)
    for denoise in (True, False):
        out[f"{threads}-{denoise}"] = [renderer.render(replace(s, denoise=denoise), min_pixels=1)[0].hex() for s in scenes]
print(json.dumps(out))
"""
    )
    runs = [_json_from_a_fresh_process(code) for _ in range(2)]
    first = runs[0]
    assert "sphere" in first["shapes"]
    for denoise in (True, False):
        key = f"1-{denoise}"
        assert runs[0][key] == runs[1][key] == first[f"2-{denoise}"] == runs[1][f"2-{denoise}"]
    assert first["1-True"] != first["1-False"]  # the denoiser did something


@pytest.mark.heavy
def test_overlapped_finishing_and_oidn_thread_counts_give_the_same_bytes():
    """The batch path (image i denoised and encoded on a lowered-priority thread while image i+1
    renders; the last image finished at once with OIDN at the render's 2 threads) gives the bytes
    of one image at a time with OIDN's default 1 thread."""
    code = (
        _scenes_code("two-object", 96, 72, 4)
        + r"""
import os
renderer = BlenderRenderer(threads=2)
futures = [renderer.render_async(s, min_pixels=1, last=n == 2)[0] for n, s in enumerate(scenes)]
out["async"] = [f.result().hex() for f in futures]
out["finisher_nice"] = [os.getpriority(os.PRIO_PROCESS, t.native_id) for t in renderer._finisher._threads]
out["oidn_threads"] = sorted(renderer._denoisers)
out["last"] = [renderer.render_async(s, min_pixels=1, last=True)[0].result().hex() for s in scenes]
out["inline"] = [renderer.render(s, min_pixels=1)[0].hex() for s in scenes]
renderer.close()
out["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
print(json.dumps(out))
"""
    )
    out = _json_from_a_fresh_process(code)
    assert out["async"] == out["last"] == out["inline"] and len(set(out["inline"])) == 3
    assert out["oidn_threads"] == [1, 2]  # the overlapped images at 1 thread, the last at 2
    if sys.platform == "linux":
        assert out["finisher_nice"] == [min(19, out["nice"] + 19)]


@pytest.mark.heavy
def test_float_passes_are_bit_identical_across_processes():
    """Every float Cycles writes (beauty, guides, object index) and OIDN's output are the same
    bits in fresh processes and at 1 or 2 render threads. Sensitive where the PNG test is not: a
    last-bit change shows here even when no pixel crosses an 8-bit rounding step. Before the
    renderer set exact sphere normals, a few hundred values per 160x120 sphere scene differed."""
    code = (
        _scenes_code("relational", 160, 120, 8)
        + r"""
for threads in (1, 2):
    renderer = BlenderRenderer(threads=threads)
    for n, scene in enumerate(scenes):
        passes = renderer.float_passes(scene)
        out.update({f"{threads}-{n}-{k}": hashlib.sha256(v.tobytes()).hexdigest() for k, v in passes.items()})
print(json.dumps(out))
"""
    )
    runs = [_json_from_a_fresh_process(code) for _ in range(2)]
    assert "sphere" in runs[0]["shapes"]
    keys = sorted(k for k in runs[0] if k.startswith("1-"))
    assert any(k.endswith("-denoised") for k in keys) and any(k.endswith("-albedo") for k in keys)
    differing = [k for k in keys for run in runs for other in ("1", "2") if run[other + k[1:]] != runs[0][k]]
    assert not differing


@pytest.mark.heavy
def test_clearing_the_previous_scene_renders_the_same_bits_as_reloading_factory_settings():
    """After its first scene the renderer removes the previous scene's data instead of reloading
    Blender's factory settings (~6% of an image): every float pass must be the same bits as after a
    reload, and a file it did not set up (no mark) must be reloaded."""
    code = (
        _scenes_code("relational", 160, 120, 8)
        + r"""
import bpy
cleared = []
clear = BlenderRenderer._clear_scene
BlenderRenderer._clear_scene = lambda self: cleared.append(clear(self)) or cleared[-1]
renderer = BlenderRenderer(threads=2)
for mode in ("cleared", "reloaded"):
    for n, scene in enumerate(scenes):
        if mode == "reloaded":
            bpy.ops.wm.read_factory_settings(use_empty=True)  # drops the mark: the next build reloads
        passes = renderer.float_passes(scene)
        out.update({f"{mode}-{n}-{k}": hashlib.sha256(v.tobytes()).hexdigest() for k, v in passes.items()})
out["took"] = cleared
print(json.dumps(out))
"""
    )
    out = _json_from_a_fresh_process(code)
    assert "cylinder" in out["shapes"]  # its auto-smooth appends a node group and a library
    assert out["took"] == [False, True, True, False, False, False]
    keys = sorted(k for k in out if k.startswith("cleared-"))
    assert any(k.endswith("-albedo") for k in keys) and any(k.endswith("-index") for k in keys)
    assert [out[k] for k in keys] == [out["reloaded" + k[len("cleared") :]] for k in keys]


def test_clevr_scene_files_have_clevr_types(demo_dir):
    """Read back as CLEVR's tools do: ints for pixel x/y, floats for 3d_coords, relationships
    as lists (per object) of lists of object indices, directions as 3-vectors."""
    for name in ("single-object", "two-object", "relational"):
        ds = load_dataset(str(demo_dir), name)
        for split in ("train", "val", "gen"):
            payload = json.loads((demo_dir / "scenes" / name / f"{split}.json").read_text())
            assert payload["info"]["split"] == split
            scenes = payload["scenes"]
            assert [s["image_filename"] for s in scenes] == [f"{i}.png" for i in ds[split]["item_id"]]
            for index, scene in enumerate(scenes):
                assert scene["image_index"] == index and scene["split"] == split
                assert len(scene["objects"]) == (1 if name == "single-object" else 2)
                for obj in scene["objects"]:
                    assert obj["shape"] in ("cube", "sphere", "cylinder") and obj["size"] in ("large", "small")
                    assert obj["material"] in ("rubber", "metal") and isinstance(obj["color"], str)
                    assert len(obj["3d_coords"]) == 3 and all(isinstance(c, float) for c in obj["3d_coords"])
                    x, y, depth = obj["pixel_coords"]
                    assert isinstance(x, int) and isinstance(y, int) and isinstance(depth, float) and depth > 0
                    assert 0 <= x < 64 and 0 <= y < 48
                    assert isinstance(obj["rotation"], float)
                assert set(scene["relationships"]) == {"left", "right", "front", "behind"}
                for related in scene["relationships"].values():
                    assert len(related) == len(scene["objects"])
                    assert all(isinstance(j, int) and 0 <= j < len(scene["objects"]) for r in related for j in r)
                assert {"left", "right", "front", "behind", "above", "below"} <= set(scene["directions"])
                assert all(len(v) == 3 for v in scene["directions"].values())
            if name == "relational":  # the label's relation is in the CLEVR relationships
                for scene, row in zip(scenes, ds[split]):
                    relation = row["relation"]["relation"]
                    assert 0 in scene["relationships"][relation][1]  # object 0 is <relation> of object 1


def test_resume_with_other_settings_is_refused(demo_dir, tmp_path):
    # settings are fixed once the first chunk (4 scenes) is written
    run_script("--dataset", "single-object", "--out", str(tmp_path), "--max-items", "4", *SMALL)
    result = run_script(
        "--dataset", "single-object", "--out", str(tmp_path), "--resolution", "80x60", "--samples", "2", check=False
    )
    assert result.returncode == 2
    assert "other settings" in result.stderr and "height" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "three-object"], "unknown dataset"),
        (["--preset", "huge"], "unknown preset"),
        (["--resolution", "big"], "argument --resolution: expected WIDTHxHEIGHT"),
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
    assert (
        result.returncode == 2
        and f"argument --out: {blocker / 'out'}: {blocker} is a file, not a folder" in result.stderr
    )


def test_missing_blender_is_one_clear_line(tmp_path):
    code = (
        "import sys, runpy; sys.modules['bpy'] = None; "
        f"sys.argv = ['generate_binding.py', '--dataset', 'single-object', '--out', {str(tmp_path / 'o')!r}]; "
        f"runpy.run_path({str(REPO_ROOT / 'scripts' / 'generate_binding.py')!r}, run_name='__main__')"
    )
    result = _fresh_python(code)
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
    assert _json_from_a_fresh_process(code) < 0.01


@pytest.mark.heavy
def test_s3_output_is_byte_identical_to_local(demo_dir, s3_server):
    """`--out s3://bucket/x` on a real S3-compatible server (moto, 127.0.0.1): same parquet and
    scene bytes as the local repo; the card there describes the one config assembled."""
    s3_server.make_bucket("binding")
    result = run_script("--dataset", "single-object", "--out", "s3://binding/demo", *SMALL)
    assert (
        's3://binding/demo: config single-object: load_dataset("s3://binding/demo", "single-object")' in result.stdout
    )
    assert "card s3://binding/demo/README.md" in result.stdout
    fs = s3_server.filesystem()
    local = _data_bytes(demo_dir, "single-object")
    remote = {
        f.removeprefix("binding/demo/"): fs.cat_file(f)
        for f in fs.find("binding/demo")
        if f.startswith(("binding/demo/data/", "binding/demo/scenes/"))
    }
    assert remote == local
    card = fs.cat_file("binding/demo/README.md").decode()
    assert "config_name: single-object" in card and "config_name: relational" not in card
    assert fs.exists("binding/demo/grid.png")


def test_foreign_out_folder_is_refused_untouched(tmp_path):
    from tests.foreign_out import assert_refused_untouched, make_foreign_folder

    before = make_foreign_folder(tmp_path)
    result = run_script("--dataset", "single-object", "--out", str(tmp_path), *SMALL, check=False)
    assert_refused_untouched(tmp_path, before, result.returncode, result.stderr)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_worker_processes_die_with_their_parent(tmp_path):
    """Issue 20.4: kill -9 of the parent leaves no Blender worker running."""
    parent = _start_two_object_run(tmp_path, "--num-workers", "2", "--resolution", "64x48", "--samples", "64")
    deadline = time.time() + 120
    workers: list[int] = []
    while time.time() < deadline and len(workers) < 2:
        workers = children(parent.pid)
        time.sleep(0.2)
    assert len(workers) >= 2, "the pool did not start"
    time.sleep(2)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 15
    while time.time() < deadline and any(alive(pid) for pid in workers):
        time.sleep(0.2)
    assert not [pid for pid in workers if alive(pid)]


_FINISH_CONFIG = """
import sys
from conceptforge.generators.binding.repo import _config_store, assemble_card
from conceptforge.engine.runner import assemble_run
out, config = sys.argv[1], sys.argv[2]
print(assemble_run(out, store=_config_store(out, config)).status, assemble_card(out).status)
"""


def test_two_configs_assembling_together_leave_one_card_over_both(demo_dir, tmp_path):
    """Two processes finish different configs at once: each config is assembled once, and the
    card (serialized by the engine's lock in .work/) ends up describing both, byte-identical to
    the card of a repo assembled one config at a time."""
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(demo_dir, repo)
    for config in ("two-object", "relational"):
        (repo / ".work" / config / "assembled.json").unlink()
        shutil.rmtree(repo / "data" / config)
        shutil.rmtree(repo / "scenes" / config)
    (repo / ".work" / "assembled.json").unlink()
    (repo / "README.md").unlink()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _FINISH_CONFIG, str(repo), config],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for config in ("two-object", "relational")
    ]
    results = [worker.communicate(timeout=300) for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), [err[-2000:] for _, err in results]
    assert [out.split()[0] for out, _ in results] == ["assembled", "assembled"]
    assert {out.split()[1] for out, _ in results} <= {"assembled", "already"}
    card = (repo / "README.md").read_text()
    for config in ("single-object", "two-object", "relational"):
        assert f"config_name: {config}" in card
        assert _data_bytes(repo, config) == _data_bytes(demo_dir, config)
    assert card == (demo_dir / "README.md").read_text()
    assert (repo / "grid.png").read_bytes() == (demo_dir / "grid.png").read_bytes()


def test_assemble_command_finishes_the_repo_and_status_reports_each_config(demo_dir, tmp_path):
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(demo_dir, repo)
    (repo / ".work" / "relational" / "assembled.json").unlink()
    shutil.rmtree(repo / "data" / "relational")
    (repo / "README.md").unlink()
    for command in ("assemble", "status"):
        result = subprocess.run(
            [sys.executable, "-m", "conceptforge", command, str(repo)],
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        if command == "assemble":
            assert "relational: assembled" in result.stdout and "single-object:" in result.stdout
            assert "already" in result.stdout
            assert (repo / "README.md").read_text() == (demo_dir / "README.md").read_text()
            assert _data_bytes(repo, "relational") == _data_bytes(demo_dir, "relational")
    status = result
    for config in ("single-object", "two-object", "relational"):
        assert f"[{config}]: stage binding/{config}" in status.stdout
    assert "card written" in status.stdout
