"""Issue 24: train-oracle's --out is guarded like every other output."""

from __future__ import annotations

import json

from tests.foreign_out import assert_refused_untouched, make_foreign_folder


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
