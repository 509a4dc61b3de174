import json

import pytest
import torch

from conceptforge.cub import load_cub
from conceptforge.errors import ConceptforgeError
from conceptforge.loaders.harness.runner import run_task
from conceptforge.loaders.sub.protocol import load_sub
from tests.evaluation_fixtures import evaluate_script

pytestmark = pytest.mark.usefixtures("offline_single_thread")


def test_reads_our_schema_and_the_published_schema_identically(sub_dir, published_sub_dir, fake_cub):
    cub = load_cub(fake_cub, need="votes")
    ours = load_sub(str(sub_dir), cub=cub)
    published = load_sub(str(published_sub_dir), cub=cub)
    assert len(ours) == len(published) == 8
    assert [(i.bird, i.attribute) for i in ours] == [(i.bird, i.attribute) for i in published]
    # S- of the published schema comes from CUB's class-level labels and matches ours
    assert [i.removed for i in ours] == [i.removed for i in published]
    assert published[0].attribute == "has_crown_color::red"


def test_wrong_columns_and_vocabulary_are_clear_errors(tmp_path, fake_cub):
    from datasets import Features, Value

    from conceptforge.testing.synthetic import sub_features, sub_rows, write_dataset

    bad = write_dataset(tmp_path / "bad", {"test": [{"x": "1"}]}, Features({"x": Value("string")}))
    with pytest.raises(ConceptforgeError, match="lacks the columns"):
        load_sub(str(bad))
    rows = sub_rows(1)
    rows[0]["attribute"] = "has_wing_color::pink"
    mismatched = write_dataset(tmp_path / "mm", {"test": rows}, sub_features())
    with pytest.raises(ConceptforgeError, match="not in the CUB attribute vocabulary"):
        load_sub(str(mismatched), cub=load_cub(fake_cub, need="votes"))
    with pytest.raises(ConceptforgeError, match="no split"):
        load_sub(str(mismatched), split="train")


def test_evaluate_vlm_with_tiny_clip(embedder, tiny_clip_dir, sub_dir, fake_cub, tmp_path):
    cub = load_cub(fake_cub, need="votes")
    outcome = run_task(
        "sub-vlm",
        model=tiny_clip_dir,
        dataset=sub_dir,
        cub_dir=fake_cub,
        options={"cbm_min_classes": 1},
        cache_dir=tmp_path / "cache",
    )
    assert outcome.metrics["s_plus"].n == 8 and outcome.metrics["s_minus"].n == 8
    assert outcome.details["settings"]["s_minus"] == "paper" and "class-wise CBM" in outcome.table
    assert 0 <= outcome.metrics["s_plus"].value <= 1 and 0 <= outcome.metrics["s_minus"].value <= 1
    # the sample row agrees with a direct argmax over the same prompts
    items = load_sub(str(sub_dir), cub=cub)
    from conceptforge.loaders.sub.protocol import attribute_prompt

    options = cub.groups[items[0].group] + [None]
    text = embedder.embed_texts([attribute_prompt(a) if a else "a photo of a bird" for a in options])
    image = embedder.embed_images([items[0].image])[0]
    (row,) = [r for r in outcome.samples if r["item_id"] == "0/S+"]
    assert row["prediction"] == (options[int(torch.argmax(text @ image))] or "none")


def test_evaluate_cbm_callable(sub_dir, fake_cub, tmp_path, monkeypatch):
    cub = load_cub(fake_cub, need="votes")
    target = cub.index["has_crown_color::red"]
    (tmp_path / "always_red_crown_cbm.py").write_text(
        "import torch\n"
        "def make():\n"
        "    def always_red_crown(images):\n"
        f"        logits = -torch.ones(len(images), {len(cub.attributes)})\n"
        f"        logits[:, {target}] = 3.0\n"
        "        return logits\n"
        "    return always_red_crown\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    outcome = run_task(
        "sub-cbm",
        model="always_red_crown_cbm:make",
        dataset=sub_dir,
        cub_dir=fake_cub,
        options={"cbm_min_classes": 1},
        cache_dir=tmp_path / "cache",
    )
    assert outcome.details["per_attribute"]["has_crown_color::red"]["s_plus"] == 1.0
    assert outcome.details["per_attribute"]["has_bill_shape::needle"]["s_plus"] == 0.0
    assert outcome.metrics["s_minus"].value == 1.0  # it never predicts a removed attribute


@pytest.mark.heavy
def test_cli_vlm_and_cbm_writes_json(tiny_clip_dir, sub_dir, fake_cub, tmp_path):
    factory = tmp_path / "my_cbm.py"
    factory.write_text(
        "import torch\n"
        "def make():\n"
        "    return lambda images: torch.zeros(len(images), 10)\n"  # sigmoid(0) = 0.5 -> everything present
    )
    out = tmp_path / "sub.json"
    cmd = ["sub", "--dataset", sub_dir, "--cub-dir", fake_cub, "--model", tiny_clip_dir, "--cbm", "my_cbm:make"]
    cmd += ["--cache-dir", tmp_path / "cache", "--output", out, "--cbm-min-classes", "1"]
    result = evaluate_script(*cmd, importable=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Random chance" in result.stdout and "Per attribute" in result.stdout
    # two models: one results file each (the one results format), named after the model
    vlm = json.loads((tmp_path / f"sub.{tiny_clip_dir.name}.json").read_text())
    cbm = json.loads((tmp_path / "sub.my_cbm_make.json").read_text())
    (vlm_task,), (cbm_task,) = vlm["tasks"], cbm["tasks"]
    assert (vlm_task["task"], cbm_task["task"]) == ("sub-vlm", "sub-cbm")
    assert cbm_task["metrics"]["s_plus"]["value"] == 1.0 and cbm_task["metrics"]["s_minus"]["value"] == 0.0
    assert all(
        t["options"]["s_minus"] == "paper" and t["details"]["settings"]["s_minus"] == "paper"
        for t in (vlm_task, cbm_task)
    )
    assert cbm_task["metrics"]["s_minus"]["n"] == 8
    assert (tmp_path / "sub.my_cbm_make.samples" / "sub-cbm.parquet").is_file()


def test_cli_sub_bad_input_is_one_line(sub_dir, fake_cub, tmp_path, capsys):
    from conceptforge.commands import main

    cases = [
        (["--dataset", str(tmp_path / "missing"), "--cub-dir", str(fake_cub), "--cbm", "x:y"], "error: no dataset at"),
        (["--dataset", str(sub_dir), "--cub-dir", str(tmp_path)], "error: nothing to evaluate"),
        (["--dataset", str(sub_dir), "--cub-dir", str(tmp_path), "--cbm", "x:y"], "error: no attributes.txt under"),
        (
            ["--dataset", str(sub_dir), "--cub-dir", str(fake_cub), "--cbm", "no_such_module:make"],
            "error: cannot import CBM factory",
        ),
    ]
    for extra, expected in cases:
        assert main(["evaluate", "sub", *extra]) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].startswith(expected)
