"""Oracles (tiny classifiers and ViLT), oracle fine-tuning and `evaluate.py conceptbed` end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from conceptforge.errors import ConceptforgeError
from conceptforge.filters.conceptbed.oracle_training import (
    OracleTrainingConfig,
    finetune_oracle,
    oracle_loss,
    outlier_exposure_loss,
)
from conceptforge.filters.conceptbed.oracles import VQAOracle, load_concept_oracle, score_concepts
from conceptforge.filters.conceptbed.scoring import oracle_concepts
from conceptforge.testing.tiny_conceptbed import build_tiny_classifier
from tests.cli_errors import last_error_line
from tests.conceptbed.ccd_helpers import check_vqa_answers, generate_textual_inversion

REPO = Path(__file__).resolve().parents[2]


def test_oracle_classes_are_the_named_concepts(oracles, tmp_path):
    assert oracle_concepts(str(oracles["style"]), "style") == ["art_painting", "sketch"]
    assert oracle_concepts(str(oracles["object"]), "object") == ["beagle", "tabby"]  # library (Table 9) order
    with pytest.raises(ConceptforgeError, match="fine-tune"):
        oracle_concepts(str(oracles["cub"]), "object")
    one = build_tiny_classifier(tmp_path / "one", ["beagle", "tabby cat"])
    with pytest.raises(ConceptforgeError, match="names 1 ConceptBed object concept"):
        oracle_concepts(str(one), "object")


def test_score_concepts_probabilities(oracles):
    oracle = load_concept_oracle(str(oracles["style"]), ["art_painting", "sketch"], device="cpu")
    images = [Image.new("RGB", (40, 30), c) for c in ("red", "blue", "white")]
    scores = score_concepts(oracle, images, ["art_painting", "sketch", "sketch"])
    assert scores.target_prob.shape == (3,) and np.all((scores.target_prob > 0) & (scores.target_prob < 1))
    assert np.all(scores.max_prob >= scores.target_prob - 1e-12) and np.all(scores.max_prob >= 0.5)
    probs = oracle.score(images).probs
    assert np.allclose(probs.sum(axis=1), 1.0)
    assert np.array_equal(scores.correct, probs.argmax(axis=1) == np.array([0, 1, 1]))


def test_vqa_oracle_yes_probability(oracles):
    vqa = VQAOracle.from_pretrained(str(oracles["vqa"]), device="cpu")
    images = [Image.new("RGB", (48, 32), "green"), Image.new("RGB", (32, 32), "black")]
    questions = ["is there the dog?", "are there two birds?"]
    scores = vqa.score(images, questions, batch_size=1)
    logits = vqa.model(**vqa.processor(images=images[:1], text=questions[:1], return_tensors="pt")).logits
    expected = torch.softmax(logits, -1)[0, vqa.yes_index].item()
    assert scores.target_prob[0] == pytest.approx(expected, rel=1e-5)
    sig = VQAOracle.from_pretrained(str(oracles["vqa"]), device="cpu", probability="sigmoid").score(images, questions)
    assert sig.target_prob[0] == pytest.approx(torch.sigmoid(logits)[0, vqa.yes_index].item(), rel=1e-5)


def test_outlier_exposure_loss():
    uniform = torch.zeros(2, 4)
    assert outlier_exposure_loss(uniform).item() == pytest.approx(np.log(4))
    peaked = torch.tensor([[10.0, 0, 0, 0]])
    assert outlier_exposure_loss(peaked).item() > np.log(4)
    labels = torch.tensor([0])
    assert oracle_loss(peaked, labels, None, 0.5).item() < oracle_loss(peaked, labels, uniform, 0.5).item()


def test_finetune_oracle_learns_and_reloads(tmp_path, datasets_root):
    red = [tmp_path / f"r{i}.png" for i in range(6)]
    blue = [tmp_path / f"b{i}.png" for i in range(6)]
    rng = np.random.default_rng(0)
    for p in red:
        Image.fromarray((rng.random((32, 32, 3)) * [255, 40, 40]).astype(np.uint8)).save(p)
    for p in blue:
        Image.fromarray((rng.random((32, 32, 3)) * [40, 40, 255]).astype(np.uint8)).save(p)
    base = build_tiny_classifier(tmp_path / "base", ["x", "y", "z"], arch="resnet")
    samples = [(p, "beagle") for p in red] + [(p, "tabby") for p in blue]
    outliers = sorted((datasets_root / "CUB" / "images").rglob("*.jpg"))
    config = OracleTrainingConfig(
        model_id=str(base), epochs=15, learning_rate=1e-2, batch_size=4, validation_fraction=0.0
    )
    result = finetune_oracle(samples, tmp_path / "oracle", config, outliers=outliers)
    assert result.labels == ["beagle", "tabby"]
    assert np.mean(result.losses[-3:]) < np.mean(result.losses[:3])
    oracle = load_concept_oracle(str(tmp_path / "oracle"), ["beagle", "tabby"], device="cpu")
    with Image.open(red[0]) as a, Image.open(blue[0]) as b:
        scores = score_concepts(oracle, [a.copy(), b.copy()], ["beagle", "tabby"])
    assert scores.correct.all()


def _run(script, *args, cwd):
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / script), *args], capture_output=True, text=True, env=env, cwd=cwd
    )


def test_evaluate_cli_end_to_end(
    tmp_path, tiny_sd, datasets_root, captions_file, write_spec, oracles, oracle_flags, run_script
):
    from conceptforge.generators.conceptbed.learners import LearnerConfig
    from conceptforge.generators.conceptbed.spec import load_spec
    from conceptforge.generators.conceptbed.stage import ConceptBedGenerator, GenerateOptions

    spec_path = write_spec(
        tmp_path,
        datasets_root,
        ["art_painting", "sketch", "beagle", "001.Black_footed_Albatross", "002.Laysan_Albatross"],
        captions_file,
    )
    object_oracle = oracles["object"]
    out = tmp_path / "ti"
    config = LearnerConfig(
        learner="textual-inversion", model_id=str(tiny_sd), steps=1, num_inference_steps=2, resolution=32
    )
    ConceptBedGenerator(load_spec(spec_path), GenerateOptions(config=config, out=out, num_images=2)).run()
    scores = tmp_path / "scores.jsonl"
    code, text, err = run_script(
        "evaluate.py",
        "conceptbed",
        "--generated",
        str(out),
        "--concepts",
        str(spec_path),
        *oracle_flags,
        "--save-scores",
        str(scores),
        "--per-concept",
    )
    assert code == 0, err[-3000:]
    for title in (
        "Table 1",
        "Table 2",
        "Domain (PACS)",
        "Objects (ImageNet)",
        "Fine-grained (CUB, object-level)",
        "Composition (VQA)",
    ):
        assert title in text, text
    assert "| textual-inversion |" in text and "| original |" in text
    records = [json.loads(line) for line in scores.read_text().splitlines()]
    tasks = {(r["source"], r["task"]) for r in records}
    assert {
        ("textual-inversion", "style"),
        ("textual-inversion", "object"),
        ("textual-inversion", "cub"),
        ("textual-inversion", "composition"),
        ("textual-inversion", "vqa"),
        ("original", "vqa"),
        ("original", "style"),
    } <= tasks
    n_vqa_real = sum(1 for r in records if r["source"] == "original" and r["task"] == "vqa")
    assert n_vqa_real == 2  # one caption with a real image, two questions
    again = run_script("evaluate.py", "conceptbed", "--from-scores", str(scores), "--per-concept")
    assert again[0] == 0 and again[1] == text
    assert "CCD aggregations" in text
    from conceptforge.loaders.conceptbed.metrics import evaluate, load_records

    saved = evaluate(load_records(scores))  # the metric code on the saved oracle scores, no model
    # The same through the one evaluate command: task conceptbed-ccd, the generated dataset as the model.
    results = tmp_path / "task.json"
    code, text, err = run_script(
        "evaluate.py",
        "--model",
        str(out),
        "--tasks",
        "conceptbed-ccd",
        "--concepts",
        str(spec_path),
        "--device",
        "cpu",
        "--task-option",
        f"conceptbed-ccd.style_oracle={oracles['style']}",
        "--task-option",
        f"conceptbed-ccd.object_oracle={object_oracle}",
        "--task-option",
        f"conceptbed-ccd.cub_oracle={oracles['cub']}",
        "--task-option",
        f"conceptbed-ccd.vqa_model={oracles['vqa']}",
        "--output",
        str(results),
    )
    assert code == 0, err[-3000:]
    (task,) = json.loads(results.read_text())["tasks"]
    assert task["task"] == "conceptbed-ccd" and task["main_metric"].endswith(".ccd")
    assert {"vqa.ccd", "vqa.ccd_pooled", "vqa.ccd_category_mean"} <= set(task["metrics"])  # each CCD aggregation named
    expected = {
        f"{t}.ccd": m.ccd
        for (source, t, category), m in saved.items()
        if source == "textual-inversion" and not category
    }
    assert expected and {name: task["metrics"][name]["value"] for name in expected} == pytest.approx(
        expected, abs=1e-6
    )  # float32 batches differ
    # every metric again from the run's per-sample predictions, no model: the same results file
    rescored = run_script(
        "evaluate.py", "--from-predictions", str(tmp_path / "task.samples"), "--output", str(tmp_path / "again.json")
    )
    assert rescored[0] == 0, rescored[2][-3000:]
    assert (tmp_path / "again.json").read_text() == results.read_text()
    # a rerun scores no generated image again: each row's oracle records come from the per-sample cache
    from conceptforge.loaders.harness.model_ref import resolve_model
    from conceptforge.loaders.harness.registry import select_tasks
    from conceptforge.loaders.harness.runner import RunSettings, run_tasks

    options = [
        f"conceptbed-ccd.{name}={oracles[key]}"
        for name, key in (
            ("style_oracle", "style"),
            ("object_oracle", "object"),
            ("cub_oracle", "cub"),
            ("vqa_model", "vqa"),
        )
    ]
    rerun = run_tasks(
        resolve_model(str(out)),
        select_tasks("conceptbed-ccd", options=options),
        RunSettings(device="cpu", concepts=str(spec_path)),
    )
    assert rerun.scored["conceptbed-ccd"] == 0
    assert {name: m["value"] for name, m in rerun.tasks[0]["metrics"].items()} == pytest.approx(
        {name: m["value"] for name, m in task["metrics"].items()}, abs=1e-6
    )  # the real images are scored again


def test_evaluate_cli_bad_input_subprocess(tmp_path):
    bad = _run("evaluate.py", "conceptbed", "--from-scores", str(tmp_path / "missing.jsonl"), cwd=tmp_path)
    assert last_error_line(bad).startswith(
        f"error: conceptforge evaluate conceptbed: argument --from-scores: {tmp_path / 'missing.jsonl'} does not exist"
    )


def test_train_oracle_script(tmp_path, datasets_root, write_spec, oracles, run_script):
    spec = write_spec(tmp_path, datasets_root, ["art_painting", "sketch"])
    code, out, err = run_script(
        "train_oracle.py",
        "--task",
        "style",
        "--concepts",
        str(spec),
        "--out",
        str(tmp_path / "pacs"),
        "--model-id",
        str(oracles["style"]),
        "--epochs",
        "1",
        "--batch-size",
        "8",
    )
    assert code == 0, err[-2000:]
    assert "2 concepts" in out
    assert json.loads((tmp_path / "pacs" / "config.json").read_text())["id2label"] == {
        "0": "art_painting",
        "1": "sketch",
    }
    code, _, err = run_script("train_oracle.py", "--task", "cub", "--concepts", str(spec), "--out", str(tmp_path / "x"))
    assert code == 2 and err.strip() == "error: the spec selects no cub concepts"


def test_a_generative_vlm_answers_the_composition_questions(
    tmp_path, tiny_sd, datasets_root, captions_file, write_spec, oracles, run_script
):
    """conceptbed-ccd with a generative VLM as --model: the VLM is the composition oracle (VQAScore:
    P("Yes") to each question), the learner's images come from --dataset."""
    import torch
    from datasets import load_dataset
    from transformers import AutoProcessor

    from conceptforge.generators.conceptbed.spec import load_spec
    from conceptforge.testing.tiny_vlms import build_tiny_llava

    spec_path, out = generate_textual_inversion(tmp_path, tiny_sd, datasets_root, captions_file, write_spec)
    from conceptforge.testing.tiny_conceptbed import build_tiny_dino
    from conceptforge.testing.tiny_models import build_tiny_clip

    llava = build_tiny_llava(tmp_path / "llava", words=("Yes", "No"))
    clip, dino = build_tiny_clip(tmp_path / "clip"), build_tiny_dino(tmp_path / "dino")
    results = tmp_path / "vlm.json"
    args = ["--model", str(llava), "--tasks", "conceptbed-ccd", "--dataset", f"conceptbed-ccd={out}"]
    args += ["--concepts", str(spec_path), "--device", "cpu", "--output", str(results)]
    args += ["--task-option", f"conceptbed-ccd.object_oracle={oracles['object']}"]
    args += ["--task-option", f"conceptbed-ccd.clip_model={clip}", "--task-option", f"conceptbed-ccd.dino_model={dino}"]
    code, _, err = run_script("evaluate.py", *args)
    assert code == 0, err[-3000:]
    task, rows = check_vqa_answers(results, tmp_path / "vlm.samples", adapter="vlm", llava=llava, dataset=out, rel=1e-5)
    assert task["dataset"]["repo"] == str(out)
    composition = load_dataset(str(out))["composition"]
    # CLIPScore (Table 2) of a composition image and its caption: 2.5 * max(cos, 0), by hand
    from transformers import CLIPModel, CLIPProcessor, ViTModel

    scored = [r for r in rows if r["oracle_task"] == "clipscore"]
    assert len(scored) == len(composition) and task["metrics"]["composition.clipscore"]["value"] == pytest.approx(
        sum(r["value"] for r in scored) / len(scored)
    )
    first = scored[0]
    index = [str(i) for i in composition["item_id"]].index(first["record_id"])
    caption = "A photo depicts " + (composition[index]["caption"] or composition[index]["prompt"])  # clipscore.py
    clip_model, clip_processor = (
        CLIPModel.from_pretrained(clip).eval(),
        CLIPProcessor.from_pretrained(clip, backend="pil"),
    )
    with torch.no_grad():
        i = clip_model.get_image_features(
            **clip_processor(images=composition[index]["image"].convert("RGB"), return_tensors="pt")
        )
        t = clip_model.get_text_features(**clip_processor.tokenizer([caption], return_tensors="pt", padding=True))
    i, t = (getattr(x, "pooler_output", x) for x in (i, t))
    cos = float(torch.nn.functional.cosine_similarity(i, t)[0])
    assert first["value"] == pytest.approx(2.5 * max(cos, 0.0), rel=1e-5, abs=1e-6) and first["candidates"] == [caption]
    # DINO (Table 3): a generated concept image's mean CLS cosine with its concept's real images
    dinos = [r for r in rows if r["oracle_task"] == "dino"]
    concepts = load_dataset(str(out))["concept"]
    d = dinos[0]
    generated_image = concepts[[str(i) for i in concepts["item_id"]].index(d["record_id"])]["image"]
    real = [p for c in load_spec(spec_path).concepts if c.name == d["concept"] for p in c.reference_images]
    vit, vit_processor = ViTModel.from_pretrained(dino).eval(), AutoProcessor.from_pretrained(dino, backend="pil")
    from PIL import Image as PILImage

    with torch.no_grad():
        pixels = vit_processor(
            images=[generated_image.convert("RGB")] + [PILImage.open(p).convert("RGB") for p in real],
            return_tensors="pt",
        )
        cls = torch.nn.functional.normalize(vit(**pixels).last_hidden_state[:, 0], dim=-1)
    assert d["value"] == pytest.approx(float((cls[1:] @ cls[0]).mean()), rel=1e-5)
    assert task["metrics"][f"{d['concept_category']}.dino"]["n"] == len(
        [r for r in dinos if r["concept_category"] == d["concept_category"]]
    )
    code, _, err = run_script(
        "evaluate.py", "--from-predictions", str(tmp_path / "vlm.samples"), "--output", str(tmp_path / "again.json")
    )
    assert code == 0, err[-3000:]
    assert (tmp_path / "again.json").read_text() == results.read_text()


def test_a_second_train_oracle_on_the_same_out_is_refused_while_the_first_runs(
    tmp_path, datasets_root, write_spec, oracles, run_script
):
    """R_NC11: two train-oracles on one --out both said "saved"; the second must be refused.

    The first run is a real process holding the --out as train-oracle does (output.hold_output);
    the second is the command itself. Once the first is gone, the same command succeeds."""
    import socket
    import subprocess
    import sys

    out = tmp_path / "pacs"
    spec = write_spec(tmp_path, datasets_root, ["art_painting", "sketch"])
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from conceptforge.output import hold_output; "
            f"hold_output({str(out)!r}); print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"  # wait for the condition, not a clock
        argv = ["--task", "style", "--concepts", str(spec), "--out", str(out), "--model-id", str(oracles["style"])]
        argv += ["--epochs", "1", "--batch-size", "8"]
        code, stdout, err = run_script("train_oracle.py", *argv)
        lock = tmp_path / ".pacs.conceptforge-lock"
        # by hand: the holder's pid and host, the lock beside the folder
        assert code == 2 and err.strip() == (
            f"error: --out: {out} is being written by another conceptforge run (process {holder.pid} on "
            f"{socket.gethostname()}); wait for it to finish or choose another name (if that run is gone, delete {lock})"
        )
        assert "saved" not in stdout and not out.exists()
    finally:
        holder.stdin.close()
        holder.wait()
    code, stdout, err = run_script("train_oracle.py", *argv)
    assert code == 0 and f"saved to {out}" in stdout, err[-2000:]
