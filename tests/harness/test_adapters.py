"""The model-adapter layer: families from the models' own files, capabilities per task, and each
adapter's numbers worked out by hand from the model's own outputs (a VQAScore from the logits,
option-letter probabilities, BLIP's ITM log-odds); tiny models of each family run the tasks end
to end from the command line and ``--from-predictions`` rebuilds their results byte for byte."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conceptforge.commands import main
from conceptforge.errors import ConceptforgeError
from conceptforge.loaders.harness.model_ref import ModelRef, resolve_model
from conceptforge.loaders.harness.registry import all_tasks


def _image(seed: int, size: int = 40):
    import numpy as np
    from PIL import Image

    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (size, size, 3), dtype=np.uint8))


def _hand_next_token(model_dir: Path, image, text: str):
    """The one-at-a-time path a user would write: processor, model, softmax of the last logits."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir, backend="pil")  # as the adapters load it
    model = AutoModelForImageTextToText.from_pretrained(model_dir).eval()
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = processor(images=image, text=prompt, return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits[0, -1].double()
    return torch.softmax(logits, dim=-1), processor.tokenizer


def _rescore_equals(out: Path, tmp_path: Path) -> None:
    again = tmp_path / f"{out.stem}-again.json"
    samples = out.with_name(out.stem + ".samples")
    assert main(["evaluate", "--from-predictions", str(samples), "--output", str(again)]) == 0
    assert again.read_text() == out.read_text()


# ----------------------------------------------------------------------------------- families
def test_families_come_from_the_models_own_files(tmp_path, tiny_clip_dir, tiny_blip_dir, tiny_llava_dir):
    assert resolve_model(str(tiny_clip_dir)).kind == "clip"
    assert (resolve_model(str(tiny_blip_dir)).kind, resolve_model(str(tiny_blip_dir)).model_type) == ("itm", "blip")
    assert (resolve_model(str(tiny_llava_dir)).kind, resolve_model(str(tiny_llava_dir)).model_type) == ("vlm", "llava")
    oc = tmp_path / "my-clip"  # named like a transformers CLIP: the files decide, not the name
    oc.mkdir()
    (oc / "open_clip_config.json").write_text(json.dumps({"model_cfg": {"embed_dim": 16}}))
    assert resolve_model(str(oc)).kind == "open_clip"
    text_only = tmp_path / "bert"
    text_only.mkdir()
    (text_only / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertModel"]}))
    with pytest.raises(ConceptforgeError, match="no adapter for a 'bert' model"):
        resolve_model(str(text_only))
    retrieval = tmp_path / "blip-itm"  # a BLIP model_type is a retrieval (ITM) model by its architecture
    retrieval.mkdir()
    (retrieval / "config.json").write_text(
        json.dumps({"model_type": "blip", "architectures": ["BlipForImageTextRetrieval"]})
    )
    assert resolve_model(str(retrieval)).kind == "itm"


def test_each_task_runs_with_the_families_providing_its_capabilities():
    tasks = all_tasks()
    blip = ModelRef("org/blip", "itm", "hub", None, "b" * 40, "blip")
    llava = ModelRef("org/llava", "vlm", "hub", None, "c" * 40, "llava")
    eva = ModelRef("org/eva", "open_clip", "hub", None, "d" * 40, None)
    assert tasks["binding-clip"].capability_for("itm") == "match"
    assert tasks["binding-clip"].capability_for("vlm") == "match"
    assert tasks["binding-clip"].capability_for("open_clip") == "embed"
    assert tasks["sub-vlm"].capability_for("vlm") == "choose"  # the paper's question, preferred to VQAScore
    assert tasks["sub-vlm"].capability_for("clip") == "embed"
    assert tasks["conceptbed-ccd"].capability_for("vlm") == "match"
    assert tasks["conceptbed-ccd"].capability_for("itm") is None  # ITM heads score captions, not questions
    assert tasks["binding-cdsm"].skip_reason(blip, {}) == (
        "binding-cdsm runs with clip, open_clip (embed); org/blip is a itm model (blip)"
    )
    assert tasks["binding-clip"].skip_reason(llava, {}) is None and tasks["sub-vlm"].skip_reason(eva, {}) == (
        "sub-vlm needs --cub-dir"
    )


def test_tasks_list_shows_every_task_with_its_capabilities_and_families(capsys):
    assert main(["evaluate", "--tasks", "list"]) == 0
    text = capsys.readouterr().out
    rows = {
        tuple(cell.strip() for cell in line.strip("|").split("|")[:3])
        for line in text.splitlines()
        if line.startswith("| ")
    }
    for row in (
        ("binding-clip", "embed", "clip, open_clip"),
        ("binding-clip", "match", "itm, vlm, endpoint"),
        # a served model without log-probabilities runs it; the others when asked by the option
        ("binding-clip", "answer-text", "endpoint-text, vlm (by_answer=true), endpoint (by_answer=true)"),
        ("sub-vlm", "choose", "vlm, endpoint"),
        ("sub-cbm", "concepts", "cbm"),
        ("compmap-cub", "match", "itm, vlm, endpoint"),
        ("conceptbed-ccd", "match", "vlm, endpoint"),
        ("conceptbed-ccd", "images", "generated-images"),
    ):
        assert row in rows, row
    assert {name for name, *_ in rows} >= set(all_tasks())


# ----------------------------------------------------------------------------------- numbers by hand
def test_vqascore_and_option_letters_by_hand(tiny_llava_dir, tmp_path):
    import torch

    from conceptforge.filters.vqa.questions import build_question
    from conceptforge.loaders.harness.adapters.base import load_adapter
    from conceptforge.loaders.harness.adapters.generative_vlm import VQASCORE_QUESTION, GenerativeVLMAdapter

    loaded = load_adapter(resolve_model(str(tiny_llava_dir)), device="cpu", dtype=None, cache_dir=str(tmp_path))
    # the next-token variant here (the LLaVA default, t2v_metrics' teacher-forced answer: test_vqascore_variants)
    adapter = GenerativeVLMAdapter(loaded.scorer, revision="r", cache_dir=tmp_path / "nt", vqascore="next-token")
    images = [_image(1), _image(2, size=48)]
    texts = [["a red cube", "a blue sphere"], ["a gray cylinder"]]
    scores = adapter.match(images, texts, batch_size=2)  # three pairs, two batches, right-padded
    for image, row, got in zip(images, texts, scores):
        for text, value in zip(row, got):
            probs, tokenizer = _hand_next_token(tiny_llava_dir, image, VQASCORE_QUESTION.format(text=text))
            yes = tokenizer.convert_tokens_to_ids("Yes")  # " Yes" is two tokens in this vocabulary
            assert value == pytest.approx(math.log(float(probs[yes])), rel=1e-5)  # ln P(Yes), float64
    question = build_question("has_bill_shape", ["curved", "dagger", "needle"])
    (answer,) = adapter.choose([images[0]], [question])
    probs, tokenizer = _hand_next_token(tiny_llava_dir, images[0], question.text)
    letters = torch.tensor([tokenizer.convert_tokens_to_ids(letter) for letter in "ABCD"])
    mass = probs[letters]
    assert answer.options == ("curved", "dagger", "needle", "Other")
    assert list(answer.probs) == pytest.approx((mass / mass.sum()).tolist(), rel=1e-5)
    assert answer.raw_mass == pytest.approx(float(mass.sum()), rel=1e-5)
    # cached per (model revision, image, prompt): asked again, nothing runs and the numbers are the same
    before = adapter.computed
    assert adapter.match(images, texts) == scores and adapter.computed == before
    adapter.close()


def test_blip_itm_log_odds_by_hand(tiny_blip_dir, tmp_path):
    import torch
    from transformers import AutoProcessor, BlipForImageTextRetrieval

    from conceptforge.loaders.harness.adapters.base import load_adapter

    adapter = load_adapter(resolve_model(str(tiny_blip_dir)), device="cpu", dtype=None, cache_dir=str(tmp_path))
    image, texts = _image(3), ["a photo of bird", "this is a bird"]
    (got,) = adapter.match([image], [texts])
    model = BlipForImageTextRetrieval.from_pretrained(tiny_blip_dir).eval()
    processor = AutoProcessor.from_pretrained(tiny_blip_dir, backend="pil")
    for text, value in zip(texts, got):
        inputs = processor(images=image, text=text, return_tensors="pt")
        with torch.no_grad():
            logits = model(**inputs, use_itm_head=True).itm_score[0].double()
        assert value == pytest.approx(float(logits[1] - logits[0]), rel=1e-4, abs=1e-5)


# ----------------------------------------------------------------------------------- end to end
@pytest.mark.parametrize("family", ["blip", "vilt"])
def test_tiny_itm_models_run_binding_clip_by_their_itm_head(family, tiny_blip_dir, single_object_dir, tmp_path):
    from conceptforge.testing.tiny_compmap import build_tiny_vilt

    model_dir = tiny_blip_dir if family == "blip" else build_tiny_vilt(tmp_path / "tiny-vilt")
    out = tmp_path / "blip.json"
    argv = ["evaluate", "--model", str(model_dir), "--tasks", f"binding-clip:{single_object_dir}"]
    argv += ["--device", "cpu", "--cache-dir", str(tmp_path / "cache"), "--output", str(out)]
    assert main(argv) == 0
    (task,) = json.loads(out.read_text())["tasks"]
    assert (task["protocol"], task["adapter"]) == ("binding/zero-shot-match", "itm")
    assert ("BLIP log-odds of 'match'" if family == "blip" else "ViLT image-text retrieval logit") in task["variant"]
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "blip.samples" / "binding-clip.parquet").to_pylist()
    gen = [r for r in rows if r["split"] == "gen"]
    assert task["metrics"]["gen_accuracy"]["value"] == pytest.approx(sum(r["value"] for r in gen) / len(gen))
    for r in rows:
        assert len(r["scores"]) == len(r["candidates"]) == 5
        assert r["prediction"] == r["candidates"][max(range(5), key=lambda i: (r["scores"][i], -i))]
    _rescore_equals(out, tmp_path)


def test_tiny_generative_vlm_runs_binding_sub_and_compmap(
    tiny_llava_dir, single_object_dir, sub_dir, fake_cub, tmp_path, capsys
):
    from tests.compmap.synthetic import write_fake_cub

    compmap_cub = write_fake_cub(tmp_path / "compmap-cub" / "CUB_200_2011", num_classes=4, per_class=4)
    out = tmp_path / "llava.json"
    argv = [
        "evaluate",
        "--model",
        str(tiny_llava_dir),
        "--tasks",
        f"binding-clip:{single_object_dir},sub-vlm:{sub_dir}",
    ]
    argv += ["--cub-dir", str(fake_cub), "--task-option", "sub-vlm.cbm_min_classes=1", "--batch-size", "8"]
    argv += ["--device", "cpu", "--cache-dir", str(tmp_path / "cache"), "--output", str(out)]
    assert main(argv) == 0
    binding, sub = json.loads(out.read_text())["tasks"]
    assert (binding["protocol"], binding["adapter"]) == ("binding/zero-shot-match", "vlm")
    assert "VQAScore" in binding["variant"]
    assert (sub["protocol"], sub["adapter"]) == ("sub/vlm-choose", "vlm")
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "llava.samples" / "sub-vlm.parquet").to_pylist()
    plus = [r for r in rows if r["side"] == "S+"]
    assert sub["metrics"]["s_plus"]["value"] == sum(r["value"] for r in plus) / len(plus)
    for r in plus:
        assert r["candidates"][-1] == "none" and sum(r["scores"]) == pytest.approx(1.0, abs=1e-5)
        best = r["candidates"][max(range(len(r["scores"])), key=lambda i: (r["scores"][i], -i))]
        assert r["prediction"] == best and r["chance"] == 1 / len(r["candidates"])
    # the S+ row of the first image, by hand: the paper's question, option letters A, B, …
    import torch

    from conceptforge.cub import attribute_value
    from conceptforge.filters.vqa.questions import build_question
    from conceptforge.loaders.harness.embeddings import load_pil
    from conceptforge.loaders.sub.protocol import load_sub

    first = next(r for r in plus if r["item_id"] == "0/S+")
    item = load_sub(str(sub_dir), split="test")[0]
    question = build_question(item.group, [attribute_value(a) for a in first["candidates"][:-1]])
    probs, tokenizer = _hand_next_token(tiny_llava_dir, load_pil(item.image), question.text)
    mass = probs[torch.tensor([tokenizer.convert_tokens_to_ids(chr(65 + i)) for i in range(len(first["scores"]))])]
    assert first["scores"] == pytest.approx((mass / mass.sum()).tolist(), rel=1e-5)
    assert first["allowed_mass"] == pytest.approx(float(mass.sum()), rel=1e-5)  # the letters' share, by hand
    per_image = {r["item_id"].split("/")[0]: r["allowed_mass"] for r in rows}
    assert sub["metrics"]["low_allowed_mass"]["value"] == sum(m < 0.5 for m in per_image.values())
    assert sub["metrics"]["low_allowed_mass"]["n"] == len(per_image)
    matched = pq.read_table(tmp_path / "llava.samples" / "binding-clip.parquet").to_pylist()
    assert all(r["score_scale"] == "log-probability" and 0 < r["allowed_mass"] <= 1 for r in matched)
    assert binding["metrics"]["low_allowed_mass"]["value"] == sum(r["allowed_mass"] < 0.5 for r in matched)
    _rescore_equals(out, tmp_path)

    # compmap-cub: activations are the log-odds of each (image, attribute prompt) VQAScore
    out2 = tmp_path / "llava-compmap.json"
    argv = ["evaluate", "--model", str(tiny_llava_dir), "--tasks", "compmap-cub", "--cub-dir", str(compmap_cub)]
    for option in ("ways=2", "shots=1", "episodes=3", "queries=1", "full_shot=false"):
        argv += ["--task-option", f"compmap-cub.{option}"]
    argv += ["--device", "cpu", "--cache-dir", str(tmp_path / "cache"), "--output", str(out2)]
    assert main(argv) == 0
    (compmap,) = json.loads(out2.read_text())["tasks"]
    assert compmap["adapter"] == "vlm" and compmap["variant"].startswith("activations by match")
    assert len([r for r in pq.read_table(tmp_path / "llava-compmap.samples" / "compmap-cub.parquet").to_pylist()])
    _rescore_equals(out2, tmp_path)


def test_a_rerun_without_the_sample_cache_reads_every_vlm_score_back(tiny_llava_dir, single_object_dir, tmp_path):
    from conceptforge.loaders.harness.registry import select_tasks
    from conceptforge.loaders.harness.runner import RunSettings, run_tasks

    model = resolve_model(str(tiny_llava_dir))
    settings = RunSettings(device="cpu", batch_size=8, cache_dir=str(tmp_path / "cache"), sample_cache=False)
    first = run_tasks(model, select_tasks(f"binding-clip:{single_object_dir}"), settings)
    from conceptforge.loaders.harness.adapters import generative_vlm

    computed = []
    original = generative_vlm.GenerativeVLMAdapter._yes_vectors
    generative_vlm.GenerativeVLMAdapter._yes_vectors = lambda self, pils, prompts, batch_size: (
        computed.append(len(pils)) or original(self, pils, prompts, batch_size)
    )
    try:
        second = run_tasks(model, select_tasks(f"binding-clip:{single_object_dir}"), settings)
    finally:
        generative_vlm.GenerativeVLMAdapter._yes_vectors = original
    assert computed == []  # every (image, prompt) pair came from the score cache
    assert second.samples["binding-clip"][0] == first.samples["binding-clip"][0]


def test_conceptbed_with_a_vlm_needs_the_generated_images(tiny_llava_dir, tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text("concepts: []\n")
    argv = ["evaluate", "--model", str(tiny_llava_dir), "--tasks", "conceptbed-ccd", "--concepts", str(spec)]
    assert main(argv + ["--output", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "judges generated images: pass them with --dataset conceptbed-ccd=FOLDER_OR_REPO" in err
    assert not (tmp_path / "r.json").exists()


def test_open_clip_vectors_by_hand(tiny_open_clip_dir, tmp_path):
    import open_clip
    import torch

    from conceptforge.loaders.harness.adapters.base import load_adapter

    adapter = load_adapter(resolve_model(str(tiny_open_clip_dir)), device="cpu", dtype=None, cache_dir=str(tmp_path))
    image, texts = _image(4), ["a photo of red cube", "a photo of blue sphere"]
    (got,) = adapter.match([image], [texts])
    model, preprocess = open_clip.create_model_from_pretrained(f"local-dir:{tiny_open_clip_dir}")
    tokenizer = open_clip.get_tokenizer(f"local-dir:{tiny_open_clip_dir}")
    with torch.no_grad():
        i = torch.nn.functional.normalize(model.encode_image(preprocess(image)[None]), dim=-1)
        t = torch.nn.functional.normalize(model.encode_text(tokenizer(texts)), dim=-1)
    expected = (model.logit_scale.exp() * i @ t.T)[0]
    assert got == pytest.approx(expected.tolist(), rel=1e-5)
    assert adapter.embedder.logit_scale == pytest.approx(float(model.logit_scale.detach().exp()))
    adapter.close()


def test_tiny_open_clip_runs_sub_and_binding(
    tiny_open_clip_dir, single_object_dir, sub_dir, fake_cub, tmp_path, capsys
):
    out = tmp_path / "oc.json"
    tasks = f"binding-clip:{single_object_dir},binding-cdsm:{single_object_dir},sub-vlm:{sub_dir}"
    argv = ["evaluate", "--model", str(tiny_open_clip_dir), "--tasks", tasks, "--cub-dir", str(fake_cub)]
    for option in (
        "binding-cdsm.models=add",
        "binding-cdsm.seeds=0",
        "binding-cdsm.epochs=1",
        "sub-vlm.cbm_min_classes=1",
    ):
        argv += ["--task-option", option]
    argv += ["--device", "cpu", "--cache-dir", str(tmp_path / "cache"), "--output", str(out)]
    assert main(argv) == 0
    results = json.loads(out.read_text())
    assert results["model"]["kind"] == "open_clip"
    assert [(t["task"], t["protocol"], t["adapter"]) for t in results["tasks"]] == [
        ("binding-clip", "binding/zero-shot", "open_clip"),
        ("binding-cdsm", "binding/cdsm-frozen", "open_clip"),
        ("sub-vlm", "sub/vlm-within-group", "open_clip"),
    ]
    _rescore_equals(out, tmp_path)
    capsys.readouterr()
    csp = ["evaluate", "--model", str(tiny_open_clip_dir), "--tasks", f"binding-cdsm:{single_object_dir}"]
    csp += ["--task-option", "binding-cdsm.models=csp", "--output", str(tmp_path / "csp.json")]
    assert main(csp) == 2  # CSP tunes a transformers CLIP's own text encoder: one line, not a traceback
    assert "csp and clip-ft fine-tune a transformers CLIP's own encoders" in capsys.readouterr().err


def test_tiny_siglip_match_by_hand_and_binding_end_to_end(single_object_dir, tmp_path):
    import torch
    from transformers import AutoProcessor, SiglipModel

    from conceptforge.loaders.harness.adapters.base import load_adapter
    from conceptforge.testing.tiny_models import build_tiny_siglip

    path = build_tiny_siglip(tmp_path / "tiny-siglip")
    model = resolve_model(str(path))
    assert (model.kind, model.model_type) == ("clip", "siglip")
    adapter = load_adapter(model, device="cpu", dtype=None, cache_dir=str(tmp_path / "cache"))
    image, texts = _image(5), ["a red cube", "a blue sphere"]
    (got,) = adapter.match([image], [texts])
    siglip, processor = SiglipModel.from_pretrained(path).eval(), AutoProcessor.from_pretrained(path, backend="pil")
    with torch.no_grad():  # SigLIP: texts padded to max_length, unmasked; logit_scale·cos + logit_bias
        i = siglip.get_image_features(**processor(images=image, return_tensors="pt"))
        ids = processor.tokenizer(texts, padding="max_length", return_tensors="pt")["input_ids"]
        t = siglip.get_text_features(input_ids=ids)  # no attention mask: SigLIP attends to its padding
    i, t = (torch.nn.functional.normalize(getattr(x, "pooler_output", x), dim=-1) for x in (i, t))
    expected = siglip.logit_scale.exp() * (i @ t.T)[0] + siglip.logit_bias
    assert got == pytest.approx(expected.tolist(), rel=1e-5)
    adapter.close()
    out = tmp_path / "siglip.json"
    argv = ["evaluate", "--model", str(path), "--tasks", f"binding-clip:{single_object_dir}", "--device", "cpu"]
    assert main(argv + ["--cache-dir", str(tmp_path / "cache"), "--output", str(out)]) == 0
    (task,) = json.loads(out.read_text())["tasks"]
    assert (task["protocol"], task["adapter"]) == ("binding/zero-shot", "clip")
    _rescore_equals(out, tmp_path)
