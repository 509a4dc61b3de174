"""`generate sub` minors of the walk (issue 45 item 10): the model named as the user named it.

Expected lines are written by hand from the arguments; each is one line, exit 2, nothing written.
"""

from __future__ import annotations

import pytest

from conceptforge.commands import main
from tests.sub.test_sub_script import _args
from tests.sub.test_sub_script import candidate_spec as candidate_spec  # the fixture


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(["generate", "sub", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    return err[0]


def test_a_mistyped_local_flux_folder_is_no_such_local_folder(tmp_path, mini_cub, candidate_spec, capsys):
    out = tmp_path / "out"
    line = _one_line(capsys, _args(out, mini_cub, "./flx-typo", candidate_spec))
    assert line == "error: --model: no such local folder ./flx-typo"  # by hand: the path the user typed
    assert not out.exists()


def test_an_uncached_default_offline_says_not_in_the_cache(tmp_path, mini_cub, candidate_spec, capsys, hub_offline):
    out = tmp_path / "out"
    argv = [a for a in _args(out, mini_cub, "UNUSED", candidate_spec) if a != "UNUSED"]
    argv.remove("--model")  # the default, black-forest-labs/FLUX.1-dev, which is not cached
    line = _one_line(capsys, [*argv, "--device", "cpu"])
    assert line == (
        "error: --model: black-forest-labs/FLUX.1-dev is not in the cache and HF_HUB_OFFLINE=1: "
        "download it where there is network (or unset HF_HUB_OFFLINE), or pass a local folder"
    )
    assert not out.exists()


def test_a_tiny_local_flux_on_a_missing_gpu_is_not_described_as_flux_1_dev(
    tmp_path, mini_cub, tiny_flux_dir, candidate_spec, capsys
):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: --device cuda is valid")
    out = tmp_path / "out"
    line = _one_line(capsys, _args(out, mini_cub, tiny_flux_dir, candidate_spec, "--device", "cuda"))
    assert line.startswith(f"error: --device cuda but no CUDA GPU is visible; {tiny_flux_dir} is small (~")
    assert line.endswith("M transformer parameters) and runs on the CPU: pass --device cpu or auto")
    assert "FLUX.1-dev" not in line and "12B" not in line
    assert not out.exists()
