"""A half-downloaded ``model.safetensors`` is one line naming the file and how to fetch it again,
not safetensors' 66-line traceback (issue 39.6), for a CLIP and a LLaVA, in a local folder and in
the Hub cache."""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conceptforge.commands import main
from tests.user_shell import hub_client_env

INCOMPLETE = "(Error while deserializing header: incomplete metadata, file not fully covered)"


def _cut_short(folder) -> None:
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])  # a download stopped half-way


@pytest.mark.parametrize("family", ["clip", "llava"])
def test_a_cut_short_weights_file_in_a_folder_is_one_line(family, tiny_clip_dir, tiny_llava_dir, single_object_dir, tmp_path, capsys):  # fmt: skip
    model = shutil.copytree(tiny_clip_dir if family == "clip" else tiny_llava_dir, tmp_path / family)
    _cut_short(model)
    argv = [
        "evaluate",
        "--tasks",
        "binding-clip",
        "--model",
        str(model),
        "--dataset",
        f"binding-clip={single_object_dir}",
    ]
    assert main([*argv, "--device", "cpu", "--output", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and not (tmp_path / "r.json").exists()
    assert err.strip().splitlines()[-1] == (
        f"error: {model / 'model.safetensors'} is damaged or incomplete {INCOMPLETE}: delete it and copy or save "
        "the model folder again (a download cut short, or a full disk while saving?)"
    )


@pytest.mark.heavy
def test_a_cut_short_weights_file_in_the_hub_cache_says_how_to_download_it_again(tiny_clip_dir, single_object_dir, tmp_path):  # fmt: skip
    """The model comes from the (local) Hub; its cached weights are then cut short, as a download
    killed half-way leaves them: the line names the cached file and the ``hf download`` that
    replaces it."""
    from conceptforge.testing.hub_server import HubServer

    token = "hf_" + secrets.token_hex(16)
    server = HubServer(tmp_path / "hub", token=token).start()
    try:
        env = hub_client_env(server.url, token, tmp_path / "hf-home")
        fetch = (
            "import sys; from huggingface_hub import HfApi, snapshot_download; a = HfApi(); a.create_repo(sys.argv[1]); "
            "a.upload_folder(repo_id=sys.argv[1], folder_path=sys.argv[2]); print(snapshot_download(sys.argv[1]))"
        )
        done = subprocess.run(
            [sys.executable, "-c", fetch, "cf/tiny-clip", str(tiny_clip_dir)], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-2000:]
        snapshot = Path(done.stdout.strip().splitlines()[-1])
        _cut_short(snapshot)  # the cached blob behind the snapshot's link
        argv = [
            "evaluate",
            "--tasks",
            "binding-clip",
            "--model",
            "cf/tiny-clip",
            "--dataset",
            f"binding-clip={single_object_dir}",
        ]
        done = subprocess.run(
            [sys.executable, "-m", "conceptforge", *argv, "--device", "cpu", "--output", str(tmp_path / "r.json")],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        server.stop()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: {snapshot / 'model.safetensors'} is damaged or incomplete {INCOMPLETE}: fetch it again: "
        f"hf download cf/tiny-clip model.safetensors --revision {snapshot.name} --force-download"
    )
