import json
import shutil
from pathlib import Path

import pytest
import torch

from conceptforge.errors import ConceptforgeError
from conceptforge.loaders.binding import load_binding
from conceptforge.loaders.binding.calibration import calibrate
from conceptforge.loaders.binding.data import BindingSplit
from conceptforge.loaders.harness.runner import ModelSession, run_task
from tests.evaluation_fixtures import evaluate_script

pytestmark = pytest.mark.usefixtures("offline_single_thread")


def test_load_binding_and_schema_errors(single_object_dir, tmp_path):
    splits = load_binding(str(single_object_dir))
    assert set(splits) == {"train", "val", "gen"} and splits["val"].setting == "adjective-noun"
    assert all(s.candidates[i][s.label_index[i]] == s.labels[i] for s in splits.values() for i in range(len(s)))
    from datasets import Features, Value

    from conceptforge.testing.synthetic import binding_features, single_object_rows, write_dataset

    bad = write_dataset(tmp_path / "bad", {"train": [{"label": "red cube"}]}, Features({"label": Value("string")}))
    with pytest.raises(ConceptforgeError, match="lacks column\\(s\\) image, candidates, label_index, candidate_kinds"):
        load_binding(str(bad), splits=["train"])
    rows = single_object_rows(["red cube"], 1, 0, ["red cube", "blue cube", "red sphere", "gray cube", "cyan cube"])
    rows[0]["label_index"] = (rows[0]["label_index"] + 1) % 5
    wrong = write_dataset(tmp_path / "wrong", {"train": rows}, binding_features())
    with pytest.raises(ConceptforgeError, match="does not point at label"):
        load_binding(str(wrong), splits=["train"])


def test_zero_shot_and_cdsms_end_to_end(tiny_clip_dir, single_object_dir, tmp_path):
    # the Python entry is the command line's own task runner: one loaded model, two tasks
    with_session = ModelSession.open(tiny_clip_dir, device="cpu", cache_dir=tmp_path / "cache")
    try:
        clip = run_task("binding-clip", model=with_session, dataset=single_object_dir)
        cdsm = run_task(
            "binding-cdsm",
            model=with_session,
            dataset=single_object_dir,
            options={"models": ["add", "tl"], "seeds": [0, 1], "epochs": 2},
        )
    finally:
        with_session.close()
    # frozen CLIP: one deterministic pass over train, val and gen (no standard error)
    assert set(clip.metrics) == {"train_accuracy", "val_accuracy", "gen_accuracy"}
    assert clip.seeds == [] and all(m.stderr is None for m in clip.metrics.values())
    assert all(0 <= m.value <= 1 for m in clip.metrics.values())
    # add: two seeds, mean ± s.e. over them, accuracies in [0, 1]
    assert len(cdsm.details["runs"]["add"]) == 2 and cdsm.seeds == [0, 1]
    for split in ("train", "val", "gen"):
        metric = cdsm.metrics[f"add.{split}_accuracy"]
        assert metric.n == 2 and 0 <= metric.value <= 1
    breakdown = cdsm.details["error_breakdown"]["add"]
    assert (
        sum(breakdown[k][0] for k in ("Adj", "Noun", "Both")) == pytest.approx(1.0, abs=1e-6)
        or cdsm.metrics["add.gen_accuracy"].value == 1.0
    )
    assert "| CLIP" in clip.table and "| ADD" in cdsm.table and "| TL" in cdsm.table and "Adj" in cdsm.table
    # the rows are the ones the metrics come from: one per image, model and seed
    assert {(r["binding_model"], r["seed"]) for r in cdsm.samples} == {(m, s) for m in ("add", "tl") for s in (0, 1)}


def test_zero_shot_uses_the_stored_order_and_the_spaced_prompt(embedder, single_object_dir, monkeypatch):
    seen = []
    original = embedder.embed_texts
    monkeypatch.setattr(embedder, "embed_texts", lambda texts, **kw: seen.extend(texts) or original(texts, **kw))
    from conceptforge.loaders.binding.evaluate import zero_shot_scores

    splits = load_binding(str(single_object_dir), splits=["val"])
    scores = zero_shot_scores(embedder, splits["val"])
    assert "a photo of red cube" in seen and not any("ofred" in t for t in seen)
    text = torch.nn.functional.normalize(
        embedder.encode_texts_uncached(["a photo of " + c for c in splits["val"].candidates[0]]), dim=-1
    )
    image = embedder.embed_images(splits["val"].images[:1])[0]
    assert torch.allclose(scores[0], text.detach() @ image, atol=1e-4)


def test_calibrated_stacking_recovers_unseen_accuracy():
    # seen-class candidates get a +0.3 bonus: unseen images are misclassified until calibrated
    seen_labels = {"red cube", "blue cube"}

    def split(labels, cands):
        return BindingSplit(
            "x", [], labels, cands, [c.index(label) for label, c in zip(labels, cands)], [["true"] * 2] * len(labels)
        )

    seen_split = split(["red cube", "blue cube"], [["red cube", "green cube"], ["blue cube", "green cube"]])
    unseen_split = split(["green cube", "green cube"], [["red cube", "green cube"], ["blue cube", "green cube"]])
    seen_scores = torch.tensor([[0.9, 0.5], [0.8, 0.5]])
    unseen_scores = torch.tensor([[0.8, 0.6], [0.75, 0.6]])
    coefficient, harmonic = calibrate(seen_scores, seen_split, unseen_scores, unseen_split, seen_labels)
    assert 0.2 < coefficient < 0.3 and harmonic == pytest.approx(1.0)


def test_calibrate_flag_reports_calibrated_gen(tiny_clip_dir, single_object_dir, tmp_path):
    outcome = run_task(
        "binding-cdsm",
        model=tiny_clip_dir,
        dataset=single_object_dir,
        options={"models": "add", "seeds": "0", "epochs": 1, "calibrate": True},
        cache_dir=tmp_path / "cache",
    )
    (run,) = outcome.details["runs"]["add"]
    assert run["calibration"] is not None and "add.gen-calibrated_accuracy" in outcome.metrics
    assert "Gen (calib.)" in outcome.table


def test_relational_rejects_calibration(tiny_clip_dir, relational_dir, tmp_path):
    with pytest.raises(ConceptforgeError, match="single-object"):
        run_task(
            "binding-cdsm",
            model=tiny_clip_dir,
            dataset=relational_dir,
            options={"models": "add", "calibrate": True},
            cache_dir=tmp_path / "cache",
        )


@pytest.mark.heavy
def test_cli_binding_writes_tables_and_json(tiny_clip_dir, relational_dir, tmp_path):
    out = tmp_path / "binding.json"
    base = ["binding", "--dataset", relational_dir, "--clip-model", tiny_clip_dir, "--cache-dir", tmp_path / "cache"]
    result = evaluate_script(*base, "--models", "clip,mult", "--seeds", "0,1", "--epochs", "1", "--output", out)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "bRa" in result.stdout and "| MULT" in result.stdout
    data = json.loads(out.read_text())  # the one results format: zero-shot CLIP and the CDSMs are two tasks
    clip, cdsm = data["tasks"]
    assert (clip["task"], cdsm["task"]) == ("binding-clip", "binding-cdsm") and cdsm["options"]["models"] == ["mult"]
    assert clip["details"]["setting"] == cdsm["details"]["setting"] == "relational"
    assert len(cdsm["details"]["runs"]["mult"]) == 2 and cdsm["metrics"]["mult.gen_accuracy"]["n"] == 2
    assert cdsm["details"]["settings"]["cdsm_score"] == "dot" and "paper Algorithm 1" in result.stdout
    assert (out.parent / "binding.samples" / "binding-cdsm.parquet").is_file()
    variant = evaluate_script(
        *base, "--models", "mult", "--seeds", "0", "--epochs", "1", "--cdsm-score", "scaled-cosine", "--output", out
    )
    assert variant.returncode == 0, variant.stderr[-2000:]
    (cdsm,) = json.loads(out.read_text())["tasks"]
    assert cdsm["details"]["settings"]["cdsm_score"] == "scaled-cosine" and "logit_scale × cosine" in variant.stdout


def _evaluate_main():
    from conceptforge.commands import main

    return lambda argv: main(["evaluate", *argv])


def test_cli_bad_input_is_one_line(tiny_clip_dir, relational_dir, tmp_path, capsys, monkeypatch):
    from conceptforge.cli import run_cli

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    main = _evaluate_main()
    base = ["binding", "--dataset", str(relational_dir), "--cache-dir", str(tmp_path / "cache")]
    cases = [
        (
            ["--models", "clip,bert", "--clip-model", str(tiny_clip_dir)],
            "error: unknown binding model(s) bert (choose from clip, csp, add, mult, conv, tl, rf, clip-ft)",
        ),
        (
            ["--models", "clip", "--clip-model", str(tmp_path / "nope")],
            f"error: --clip-model: no such local folder {tmp_path / 'nope'}",
        ),
        (
            ["--models", "clip", "--clip-model", str(tiny_clip_dir), "--epochs", "0"],
            "error: conceptforge evaluate binding: argument --epochs: must be >= 1, got 0",
        ),
    ]
    for extra, expected in cases:
        assert run_cli(main, base + extra) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith(expected), err
    assert run_cli(main, ["binding", "--dataset", str(tmp_path / "missing"), "--clip-model", str(tiny_clip_dir)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: no dataset at")


def _multi_config_repo(tmp_path: Path, sources: dict[str, Path]) -> Path:
    """The layout `conceptforge generate binding --dataset all` publishes: data/<config>/ + configs YAML."""
    repo = tmp_path / "binding-repo"
    lines = ["---", "configs:"]
    for config, source in sources.items():
        target = repo / "data" / config
        target.mkdir(parents=True)
        splits = []
        for parquet in sorted((source / "data").glob("*.parquet")):
            shutil.copy(parquet, target / parquet.name)
            splits.append(parquet.name.split("-")[0])
        lines += [f"- config_name: {config}", "  data_files:"]
        lines += [f"  - split: {split}\n    path: data/{config}/{split}-*" for split in dict.fromkeys(splits)]
    (repo / "README.md").write_text("\n".join(lines + ["---", "# binding", ""]))
    return repo


def test_evaluate_binding_tasks_pick_a_config_of_a_multi_config_repo(
    tiny_clip_dir, single_object_dir, relational_dir, tmp_path, capsys, monkeypatch
):
    from conceptforge.cli import run_cli

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = _multi_config_repo(tmp_path, {"single-object": single_object_dir, "relational": relational_dir})
    main = _evaluate_main()
    base = ["--model", str(tiny_clip_dir), "--cache-dir", str(tmp_path / "cache")]
    settings = {}
    for option, expected in ((None, "adjective-noun"), ("relational", "relational")):
        out = tmp_path / f"{option}.json"
        extra = ["--task-option", f"binding-clip.config={option}"] if option else []
        assert run_cli(main, [*base, "--tasks", f"binding-clip:{repo}", *extra, "--output", str(out)]) == 0
        (task,) = json.loads(out.read_text())["tasks"]
        settings[option] = task["details"]["setting"]
        assert settings[option] == expected
        assert task["dataset"]["config"] == (option or "single-object")  # what was measured, not null
    capsys.readouterr()
    code = run_cli(
        main,
        [
            *base,
            "--tasks",
            f"binding-clip:{repo}",
            "--task-option",
            "binding-clip.config=two-object",
            "--output",
            str(tmp_path / "bad.json"),
        ],
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and not (tmp_path / "bad.json").exists()
    assert err[-1].startswith("error: ") and "no config 'two-object' (configs: single-object, relational)" in err[-1]
    assert "--task-option binding-clip.config=NAME" in err[-1]


def test_a_config_option_that_does_not_match_a_one_config_dataset_is_refused(
    tiny_clip_dir, single_object_dir, tmp_path, capsys, monkeypatch
):
    """Before: a one-config folder of single-object data was scored under config=relational and
    the results said "relational"."""
    from conceptforge.cli import run_cli

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    main = _evaluate_main()
    base = ["--model", str(tiny_clip_dir), "--cache-dir", str(tmp_path / "cache"), "--tasks"]
    out = tmp_path / "bad.json"
    code = run_cli(
        main,
        [
            *base,
            f"binding-clip:{single_object_dir}",
            "--task-option",
            "binding-clip.config=relational",
            "--output",
            str(out),
        ],
    )
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("error: ")]
    assert code == 2 and not out.exists()
    assert err == [
        f"error: --task-option binding-clip.config=relational: dataset {single_object_dir} has one config (default) "
        "and its rows are single-object data, not relational; drop the option or pass a relational dataset"
    ]
    good = tmp_path / "good.json"
    assert (
        run_cli(
            main,
            [
                *base,
                f"binding-clip:{single_object_dir}",
                "--task-option",
                "binding-clip.config=single-object",
                "--output",
                str(good),
            ],
        )
        == 0
    )
    (task,) = json.loads(good.read_text())["tasks"]
    assert task["dataset"]["config"] == "default" and task["options"]["config"] == "single-object"
