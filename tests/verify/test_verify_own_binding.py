"""``conceptforge verify`` of a release made from a researcher's binding spec, on a machine where
the spec's shape and material ``.blend`` files are gone (issue 46: a release says what it is and
rebuilds on its own).

The record keeps the absolute paths the files had where the release was made; the release carries
copies under ``vocabulary/``. Verify must rebuild from those copies: with the original folder
moved away the release still verifies byte for byte, and one tampered image still fails, named.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conceptforge.cards.release_source import open_release
from conceptforge.errors import DataNotFoundError
from conceptforge.generators.verify import verify_release
from tests.specs.binding_assets import make_clevr_folder
from tests.verify.verify_helpers import change_pixel, copy_release, differing_lines, edit_rows

pytest.importorskip("bpy", reason="Blender (bpy) is part of the test install: pip install '.[blender]'")

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY = ["--resolution", "32x24", "--samples", "1", "--no-denoise", "--device", "cpu"]
#: single-object only: 4 shapes x 3 colours = 12 compositions, 4 gen and 1 val held out (the rules)
SPEC = """\
method: binding
spec_version: 1
name: cones-verify
vocabulary:
  properties: properties.json
  shape_dir: shapes
  material_dir: materials
splits:
  single-object: {train: 7, val: 1, gen: 4}
"""
TRAIN = "data/single-object/train-00000-of-00001.parquet"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**(os.environ if env is None else env), "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "conceptforge", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def moved_release(tmp_path_factory) -> tuple[Path, Path]:
    """A release made from the spec, then the vocabulary folder moved away (another machine)."""
    root = tmp_path_factory.mktemp("own-binding-verify")
    vocabulary = make_clevr_folder(root / "my-vocab")
    (vocabulary / "spec.yaml").write_text(SPEC, encoding="utf-8")
    out = root / "release"
    made = _cli("generate", "binding", "--spec", str(vocabulary / "spec.yaml"), "--out", str(out), *TINY)
    assert made.returncode == 0, made.stderr[-3000:]
    record = json.loads((out / "provenance.json").read_text(encoding="utf-8"))
    recorded = record["configs"]["single-object"]["rebuild"]["config"]["vocabulary"]
    assert recorded["shape_files"] == [["cone", ".../Cone.blend"]]  # not a path this machine can open
    assert (out / "vocabulary" / "shapes" / "Cone.blend").is_file()
    shutil.move(vocabulary, root / "elsewhere")
    return out, root


@pytest.mark.heavy
def test_release_verifies_from_its_own_vocabulary_files(moved_release):
    release, _ = moved_release
    done = _cli("verify", str(release), "--all")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert differing_lines(done.stdout) == []
    assert f"verified: 12 of 12 item(s) of {release} match" in done.stdout


@pytest.mark.heavy
def test_a_tampered_image_fails_naming_it(moved_release, tmp_path):
    release, _ = moved_release
    changed = copy_release(release, tmp_path / "changed")
    edit_rows(changed / TRAIN, lambda rows: rows[3].update(image=change_pixel(rows[3]["image"], xy=(3, 3))))
    done = _cli("verify", str(changed), "--items", "train-000002,train-000003,gen-000001")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "FAILED: 2 of 3 item(s)" in done.stdout, done.stdout[-2000:]
    lines = differing_lines(done.stdout)
    assert len(lines) == 1 and lines[0].startswith(
        "differs: train-000003 split=train config=single-object: image: image bytes differ ("
    ), lines


def test_a_release_without_its_vocabulary_copy_is_one_line(moved_release, tmp_path):
    release, _ = moved_release
    stripped = copy_release(release, tmp_path / "stripped")
    (stripped / "vocabulary" / "shapes" / "Cone.blend").unlink()
    # in process (a conceptforge error is one line, exit 2, in every command: tests/core covers that)
    with pytest.raises(
        DataNotFoundError, match=r"has no vocabulary/shapes/Cone\.blend: its spec's vocabulary"
    ) as raised:
        verify_release(open_release(str(stripped)), items=["train-000000"])
    assert "\n" not in str(raised.value)


@pytest.mark.heavy  # a publish to the local Hub server and a verify that reads it back: ~20 s of CPU
def test_published_release_verifies_from_the_hub_at_its_tag(moved_release, tmp_path):
    import secrets

    from conceptforge.testing.hub_server import HubServer

    release, _ = moved_release
    token = "hf_" + secrets.token_hex(16)
    server = HubServer(tmp_path / "hub-storage", token=token).start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
        env |= {"HF_ENDPOINT": server.url, "HF_TOKEN": token, "HF_HUB_DISABLE_XET": "1"}
        env |= {"HF_HOME": str(tmp_path / "hf-home"), "TQDM_DISABLE": "1"}
        published = _cli("publish", str(release), "--repo-id", "me/cones", "--version", "v1.0.0", env=env)
        assert published.returncode == 0, published.stderr[-3000:]
        done = _cli("verify", "me/cones@v1.0.0", "--sample", "3", env=env)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "verified: 3 of 3 item(s)" in done.stdout
        assert json.loads((release / "provenance.json").read_text())["generator"] == "binding"
    finally:
        server.stop()
