"""Issue 24: the SUB filter's --out and select-candidates' score cache (--work) are guarded and named by their flag."""

from __future__ import annotations

from conceptforge.commands import main
from tests.filters.filter_helpers import filter_sub_args, select_attributes_args
from tests.foreign_out import make_foreign_folder, snapshot


def _args(mini_cub, tiny_vlm, tmp_path, *extra):
    return select_attributes_args(mini_cub, tiny_vlm, "--spec", str(tmp_path / "spec.json"), *extra)


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
    assert "argument --images-per-class: must be >= 1, got 0" in capsys.readouterr().err  # the flag's checked type
    assert not work.exists()


def test_other_settings_in_work_are_named_with_work(mini_cub, tiny_vlm, tmp_path, capsys):
    work = tmp_path / "work"
    assert main(_args(mini_cub, tiny_vlm, tmp_path, "--images-per-class", "1", "--work", str(work))) == 0
    capsys.readouterr()
    assert main(_args(mini_cub, tiny_vlm, tmp_path, "--images-per-class", "2", "--work", str(work))) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "other settings" in last and last.endswith("use a new --work"), last


def test_a_finished_run_of_another_stage_is_refused_as_filter_out(
    tiny_vlm, mini_cub, candidates_factory, tmp_path, capsys
):
    """Issue 24: a binding repo given as the SUB filter's --out lost its parquet and card (exit 0)."""
    from conceptforge.engine.runner import run_stage
    from conceptforge.engine.store import ItemStore, canonical_json
    from tests.engine import engine_stage

    repo = tmp_path / "binding"  # laid out as generate binding lays out its repo (as 0.2.0 did too)
    ItemStore(repo / ".work").location.write(
        "assembly.json", canonical_json({"repo_assembler": "conceptforge.generators.binding.generate:assemble_repo"})
    )
    stage = engine_stage.stage(8)
    stage.name = "binding/single-object"
    run_stage(stage, str(repo), store=ItemStore(repo / ".work" / "single-object"))
    (repo / "README.md").write_text("# binding card\n")  # what the repo assembler would write last
    before = snapshot(repo)
    code = main(["filter", "sub", *filter_sub_args(candidates_factory(per_pair=1), repo, mini_cub, tiny_vlm)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith(
        f"error: --out {repo} holds a conceptforge run of another stage (binding)"
    ), err
    assert snapshot(repo) == before


def test_a_users_json_as_spec_is_refused_untouched_and_our_spec_is_updated(mini_cub, tiny_vlm, tmp_path, capsys):
    """Issue 32: --spec rewrote any JSON file given to it (sorted, re-indented, keys added)."""
    import json

    user = tmp_path / "settings.json"
    user.write_text('{"birds": ["Cardinal"],  "note": "hand-written"}\n')
    before = user.read_bytes(), user.stat().st_mtime_ns
    args = _args(mini_cub, tiny_vlm, tmp_path, "--images-per-class", "1", "--work", str(tmp_path / "work"))
    args[args.index("--spec") + 1] = str(user)
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: --spec: {user} already exists and was not written by conceptforge; move it away or choose another name"
    ]
    assert (user.read_bytes(), user.stat().st_mtime_ns) == before
    assert not (tmp_path / "work").exists()  # refused before the score cache was made

    spec = tmp_path / "spec.json"  # ours: written by the first run, updated by the second
    args = _args(mini_cub, tiny_vlm, tmp_path, "--images-per-class", "1", "--work", str(tmp_path / "work"))
    assert main(args) == 0
    assert main(args) == 0, capsys.readouterr().err
    assert "attribute_selection" in json.loads(spec.read_text())
