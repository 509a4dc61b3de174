"""Issue 24: select-candidates' score cache (--work) is guarded and named by its own flag."""

from __future__ import annotations

from conceptforge.commands import main
from tests.foreign_out import make_foreign_folder, snapshot


def _args(mini_cub, tiny_vlm, tmp_path, *extra):
    return ["select-candidates", "attributes", "--cub-dir", str(mini_cub), "--vqa-model", str(tiny_vlm), "--groups",
            "has_bill_shape", "--min-support", "1", "--device", "cpu", "--spec", str(tmp_path / "spec.json"), *extra]


def test_a_foreign_work_folder_is_refused_naming_work(mini_cub, tiny_vlm, tmp_path, capsys):
    mine = tmp_path / "mine"
    before = make_foreign_folder(mine)
    assert main(_args(mini_cub, tiny_vlm, tmp_path, "--work", str(mine))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: --work {mine} already holds files that are not a conceptforge run"), err
    assert snapshot(mine) == before


def test_zero_images_per_class_is_refused_before_anything_is_written(mini_cub, tiny_vlm, tmp_path, capsys):
    work = tmp_path / "work"
    assert main(_args(mini_cub, tiny_vlm, tmp_path, "--images-per-class", "0", "--work", str(work))) == 2
    assert "no items" in capsys.readouterr().err
    assert not work.exists()


def test_other_settings_in_work_are_named_with_work(mini_cub, tiny_vlm, tmp_path, capsys):
    work = tmp_path / "work"
    assert main(_args(mini_cub, tiny_vlm, tmp_path, "--images-per-class", "1", "--work", str(work))) == 0
    capsys.readouterr()
    assert main(_args(mini_cub, tiny_vlm, tmp_path, "--images-per-class", "2", "--work", str(work))) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "other settings" in last and last.endswith("use a new --work"), last
