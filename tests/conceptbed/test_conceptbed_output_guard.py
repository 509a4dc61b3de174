"""Issue 24: train-oracle's --out is guarded like every other output."""

from __future__ import annotations

import json

from tests.foreign_out import assert_refused_untouched, make_foreign_folder, snapshot


def test_train_oracle_refuses_a_foreign_folder_and_a_file_before_training(
    tmp_path, datasets_root, write_spec, run_script
):
    spec = write_spec(tmp_path, datasets_root, ["art_painting", "sketch"])
    mine = tmp_path / "mine"
    mine.mkdir()
    before = make_foreign_folder(mine)
    # a model that does not exist: reaching it would be a different error, so the guard ran first
    args = ("--task", "style", "--concepts", str(spec), "--model-id", str(tmp_path / "no-model"))
    code, _, err = run_script("train_oracle.py", *args, "--out", str(mine))
    assert_refused_untouched(mine, before, code, err)
    (tmp_path / "file").write_text("keep")
    code, _, err = run_script("train_oracle.py", *args, "--out", str(tmp_path / "file"))
    assert (
        code == 2
        and err.strip().startswith("error: ")
        and f"argument --out: {tmp_path / 'file'} is a file, not a folder" in err
    )
    assert (tmp_path / "file").read_text() == "keep"


def test_train_oracle_replaces_its_own_folder(tmp_path, datasets_root, write_spec, run_script):
    from conceptforge.testing.tiny_conceptbed import build_tiny_classifier

    spec = write_spec(tmp_path, datasets_root, ["art_painting", "sketch"])
    model = build_tiny_classifier(tmp_path / "tiny", ["art_painting", "sketch", "unrelated"], arch="resnet")
    args = (
        "--task",
        "style",
        "--concepts",
        str(spec),
        "--model-id",
        str(model),
        "--epochs",
        "1",
        "--batch-size",
        "8",
        "--out",
        str(tmp_path / "pacs"),
    )
    assert run_script("train_oracle.py", *args)[0] == 0
    code, _, err = run_script("train_oracle.py", *args)  # a rerun into its own folder
    assert code == 0, err[-2000:]
    assert json.loads((tmp_path / "pacs" / ".conceptforge.json").read_text())["made_by"] == "train-oracle"


def test_the_card_summary_names_no_local_model_path_and_publish_refuses_one(
    tmp_path, tiny_sd, datasets_root, write_spec
):
    from conceptforge.cards.validate import card_problems
    from conceptforge.generators.conceptbed.spec import load_spec
    from conceptforge.generators.conceptbed.stage import ConceptBedGenerator
    from tests.conceptbed.test_conceptbed_generate import _options

    spec = load_spec(write_spec(tmp_path, datasets_root, ["beagle"]))
    summary = ConceptBedGenerator(spec, _options(tiny_sd, tmp_path / "out")).card_metadata().summary
    assert str(tiny_sd) not in summary and f".../{tiny_sd.name}" in summary
    problems = card_problems(f"---\nlicense: mit\n---\nImages made with {tiny_sd} by a user.\n")
    assert any(f"the card holds a local path ({tiny_sd})" in p for p in problems), problems


def test_a_plan_with_no_images_is_refused_before_anything_is_written(tmp_path, tiny_sd, datasets_root, write_spec):
    import pytest

    from conceptforge.errors import InvalidArgumentError
    from conceptforge.generators.conceptbed.spec import load_spec
    from conceptforge.generators.conceptbed.stage import ConceptBedGenerator
    from tests.conceptbed.test_conceptbed_generate import _options

    spec = load_spec(write_spec(tmp_path, datasets_root, ["beagle"]))
    out = tmp_path / "out"
    with pytest.raises(InvalidArgumentError, match="no items"):
        ConceptBedGenerator(spec, _options(tiny_sd, out, num_images=0)).run()
    assert not out.exists()


def test_save_scores_never_replaces_a_users_file(tmp_path, datasets_root, write_spec, run_script):
    """Issue 32: --save-scores replaced whatever file had that name (after the oracles ran)."""
    spec = write_spec(tmp_path, datasets_root, ["art_painting"])
    user = tmp_path / "scores.jsonl"
    user.write_text('{"my": "log line"}\n')
    before = user.read_bytes(), user.stat().st_mtime_ns
    # a generated folder that does not exist: reaching it would be a different error, so the guard ran first
    code, out, err = run_script(
        "evaluate.py", "conceptbed", "--generated", str(tmp_path / "none"), "--concepts", str(spec),
        "--save-scores", str(user),
    )  # fmt: skip
    assert code == 2 and not out
    assert err.strip().splitlines() == [
        f"error: --save-scores: {user} already exists and was not written by conceptforge; move it away or choose another name"
    ]
    assert (user.read_bytes(), user.stat().st_mtime_ns) == before


def test_saved_scores_of_ours_are_replaced(tmp_path):
    from conceptforge.loaders.conceptbed.metrics import ScoreRecord, load_records, save_records

    path = tmp_path / "scores.jsonl"
    save_records(path, [ScoreRecord("ti", "style", "sketch", 0.5, 0.7, False)])
    save_records(path, [ScoreRecord("ti", "style", "sketch", 0.9, 0.9, True)])
    assert [r.target_prob for r in load_records(path)] == [0.9]
    save_records(path, [])  # no records: an empty file, still ours
    save_records(path, [ScoreRecord("db", "style", "sketch", 0.1, 0.8, False)])
    assert [r.source for r in load_records(path)] == ["db"]


def test_a_work_dir_of_someone_elses_files_is_never_taken_as_learned(tmp_path, tiny_sd, datasets_root, write_spec):
    """Issue 32: a user's ``artifacts/<concept>/learner.json`` under --work-dir was applied as the learned concept."""
    import pytest

    from conceptforge.errors import StoreError
    from conceptforge.generators.conceptbed.artifacts import artifact_complete
    from conceptforge.generators.conceptbed.spec import load_spec
    from conceptforge.generators.conceptbed.stage import ConceptBedGenerator
    from tests.conceptbed.test_conceptbed_generate import _options

    spec = load_spec(write_spec(tmp_path, datasets_root, ["beagle"]))
    work = tmp_path / "work"
    fake = work / "artifacts" / "beagle"
    fake.mkdir(parents=True)
    (fake / "learner.json").write_text('{"phrase": "my own notes"}\n')
    before = snapshot(work)
    with pytest.raises(StoreError, match=r"^--work-dir .*work already holds files that are not a conceptforge run"):
        ConceptBedGenerator(spec, _options(tiny_sd, tmp_path / "out", work_dir=work))
    assert snapshot(work) == before and not (tmp_path / "out").exists()
    assert not artifact_complete(fake)  # a learner.json without our marker is no learned concept

    ours = tmp_path / "ours"  # a fresh --work-dir: marked on first use, learned concepts reused by the rerun
    summary = ConceptBedGenerator(spec, _options(tiny_sd, tmp_path / "out", work_dir=ours)).run()
    assert summary["assembled"] and artifact_complete(ours / "artifacts" / "beagle")
    assert json.loads((ours / ".conceptforge.json").read_text())["made_by"] == "generate conceptbed"
    rerun = ConceptBedGenerator(spec, _options(tiny_sd, tmp_path / "out2", work_dir=ours)).run()
    assert rerun["assembled"]


def test_train_oracle_on_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, datasets_root, write_spec, run_script):
    """Issue 32: ENOSPC while saving the oracle ended in a traceback."""
    from conceptforge.testing.tiny_conceptbed import build_tiny_classifier
    from tests.full_disk import full_disk

    spec = write_spec(tmp_path, datasets_root, ["art_painting", "sketch"])
    model = build_tiny_classifier(tmp_path / "tiny", ["art_painting", "sketch", "unrelated"], arch="resnet")
    args = ("--task", "style", "--concepts", str(spec), "--model-id", str(model), "--epochs", "1", "--batch-size", "8")
    with full_disk(tmp_path / "disk") as disk:
        code, _, err = run_script("train_oracle.py", *args, "--out", str(disk / "oracle"))
        assert code == 2 and err.strip().splitlines()[-1] == (
            f"error: cannot write to {disk / 'oracle'}: No space left on device; free some space or choose another "
            "--out, then rerun the same command to resume"
        ), err[-2000:]
        assert "Traceback" not in err and sorted(p.name for p in disk.iterdir()) == ["filler"]


def test_train_oracle_with_too_little_space_for_its_weights_is_one_line(
    tmp_path, datasets_root, write_spec, run_script
):
    """Issue 39.6: room for config.json but not for model.safetensors ended in safetensors' own
    error ("I/O error: No space left on device (os error 28)") and a 66-line traceback."""
    from conceptforge.testing.tiny_conceptbed import build_tiny_classifier
    from tests.full_disk import full_disk

    spec = write_spec(tmp_path, datasets_root, ["art_painting", "sketch"])
    model = build_tiny_classifier(tmp_path / "tiny", ["art_painting", "sketch", "unrelated"], arch="resnet")
    assert (model / "model.safetensors").stat().st_size > 24 * 1024  # more than the room left below
    args = ("--task", "style", "--concepts", str(spec), "--model-id", str(model), "--epochs", "1", "--batch-size", "8")
    with full_disk(tmp_path / "disk", free_kib=16) as disk:
        code, _, err = run_script("train_oracle.py", *args, "--out", str(disk / "oracle"))
        assert code == 2 and "Traceback" not in err, err[-3000:]
        assert err.strip().splitlines()[-1] == (
            f"error: cannot write {disk / 'oracle'}: No space left on device; free some space or choose another "
            "--out, then rerun the same command to resume"
        ), err[-2000:]
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]
