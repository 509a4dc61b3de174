"""Parity of the lmms-eval and VLMEvalKit exports with ``conceptforge evaluate``'s by-answer protocol
(heavy: each harness lives in its own virtual environment, named by an environment variable).

* ``CONCEPTFORGE_LMMS_EVAL_VENV``: a venv with ``lmms-eval`` (0.7.3: beside torch 2.14.1 it
  resolves only with ``pyarrow<26``); the exported task folders run with ``lmms-eval --model
  llava_hf --include_path`` and read the release from the local Hub at its tag.
* ``CONCEPTFORGE_VLMEVALKIT_VENV``: a venv with VLMEvalKit (``pip install -e VLMEvalKit``); the
  exported TSVs go to ``$LMUData`` and run through its ``CustomMCQDataset``, its inference loop
  and its heuristic evaluation (``exact_matching``, no LLM judge), with VLMEvalKit's own LLaVA
  ``build_prompt`` and a model class generating as a user would with transformers.

The model is the tiny random LLaVA made to answer one letter (``make_letter_answerer``: so the
accuracies are not all 0) with a chat template that renders lmms-eval's string turn
(``"<image>\\n" + prompt``) and our image+text turn alike, as real LLaVA templates do. Figures
(items, agreement, accuracy on both sides) are printed and recorded in docs/evaluation-exports.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from publish_helpers import REPO_ROOT, binding_release, run_publish, sub_release

pytestmark = pytest.mark.heavy

LMMS_ENV, VLMEVAL_ENV = "CONCEPTFORGE_LMMS_EVAL_VENV", "CONCEPTFORGE_VLMEVALKIT_VENV"
#: A LLaVA-style template: a string turn as it is, a list turn as its image marker and text.
DUAL_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _venv_python(variable: str) -> Path:
    root = os.environ.get(variable)
    python = Path(root) / "bin" / "python" if root else None
    if python is None or not python.exists():
        pytest.skip(f"set {variable} to a virtual environment with the harness installed")
    return python


@pytest.fixture(scope="module")
def tiny_dual_llava(tmp_path_factory):
    from transformers import AutoProcessor, AutoTokenizer

    from conceptforge.testing.tiny_vlms import build_tiny_llava, make_letter_answerer

    path = make_letter_answerer(build_tiny_llava(tmp_path_factory.mktemp("models") / "tiny-llava-dual"))
    (path / "chat_template.jinja").write_text(DUAL_TEMPLATE)
    for name in ("tokenizer_config.json", "processor_config.json"):
        config = path / name
        if config.exists():
            data = json.loads(config.read_text())
            if "chat_template" in data:
                data["chat_template"] = DUAL_TEMPLATE
                config.write_text(json.dumps(data))
    assert AutoProcessor.from_pretrained(path).chat_template == DUAL_TEMPLATE
    assert AutoTokenizer.from_pretrained(path).chat_template == DUAL_TEMPLATE  # lmms-eval's llava_hf reads this one
    return path


@pytest.fixture(scope="module")
def released(tmp_path_factory, tiny_dual_llava, fake_cub):
    """Local Hub with tiny binding and SUB releases (exports included) and our by-answer run."""
    import secrets

    from conceptforge.testing.hub_server import HubServer
    from tests.user_shell import hub_client_env

    work = tmp_path_factory.mktemp("exports-heavy")
    token = "hf_" + secrets.token_hex(16)
    server = HubServer(work / "hub", token=token).start()
    env = {**hub_client_env(server.url, token, work / "hf-home"), "PYTHONPATH": str(REPO_ROOT)}
    for directory, repo in (
        (binding_release(work / "binding")[0], "org/binding"),
        (sub_release(work / "sub"), "org/sub"),
    ):
        done = run_publish(env, directory, repo, "v1.0.0", "--cub-dir", str(fake_cub))
        assert done.returncode == 0, done.stderr[-3000:]
    output = work / "ours.json"
    argv = [sys.executable, "-m", "conceptforge", "evaluate", "--model", str(tiny_dual_llava)]
    argv += ["--tasks", "binding-clip:org/binding@v1.0.0,sub-vlm:org/sub@v1.0.0", "--cub-dir", str(fake_cub)]
    argv += ["--task-option", "binding-clip.by_answer=true", "--task-option", "sub-vlm.by_answer=true"]
    argv += ["--device", "cpu", "--dtype", "float32", "--cache-dir", str(work / "cache"), "--output", str(output)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {t["task"]: t for t in json.loads(output.read_text())["tasks"]}
    rows = {task: pq.read_table(work / "ours.samples" / f"{task}.parquet").to_pylist() for task in results}
    yield {"server": server, "env": env, "work": work, "results": results, "rows": rows}
    server.stop()


def _ours(released, name: str) -> tuple[dict[str, dict], float]:
    """Our rows of a set by item id (the exported items' ``item_id``) and its accuracy (S+ for SUB)."""
    results, rows = released["results"], released["rows"]
    if name.startswith("sub_vlm"):
        return {r["item_id"].split("/")[0]: r for r in rows["sub-vlm"] if r["side"] == "S+"}, results["sub-vlm"][
            "metrics"
        ]["s_plus"]["value"]
    split = name.rsplit("_", 1)[1]
    mine = {r["item_id"]: r for r in rows["binding-clip"] if r["split"] == split}
    return mine, results["binding-clip"]["metrics"][f"{split}_accuracy"]["value"]


def _download(released, repo: str, prefix: str, to: Path) -> None:
    for path, data in released["server"].files(repo, "v1.0.0").items():
        if path.startswith(prefix):
            (to / path).parent.mkdir(parents=True, exist_ok=True)
            (to / path).write_bytes(data)


def _report(harness: str, name: str, agree: int, items: int, theirs: float, ours: float) -> None:
    print(
        f"PARITY {harness} {name}: items {items}, agreement {agree}/{items}, accuracy {harness} {theirs:.4f} ours {ours:.4f}"
    )


def test_lmms_eval_export_gives_our_answers_and_accuracy(released, tiny_dual_llava):
    python = _venv_python(LMMS_ENV)
    work = released["work"]
    for repo in ("org/binding", "org/sub"):
        _download(released, repo, "exports/", work / "lmms" / repo.split("/")[1])
    sets = {"binding_clip_gen": "binding", "binding_clip_val": "binding", "sub_vlm_test": "sub"}
    for name, folder in sets.items():
        out = work / "lmms-out" / name
        argv = [python, "-m", "lmms_eval", "--model", "llava_hf"]
        argv += ["--model_args", f"pretrained={tiny_dual_llava},device=cpu,device_map=cpu,dtype=float32"]
        argv += ["--tasks", name, "--include_path", work / "lmms" / folder / "exports" / "lmms-eval"]
        argv += ["--batch_size", "1", "--log_samples", "--output_path", out]
        env = {**released["env"], "HF_DATASETS_TRUST_REMOTE_CODE": "1", "TOKENIZERS_PARALLELISM": "false"}
        done = subprocess.run(list(map(str, argv)), env=env, capture_output=True, text=True, timeout=900, cwd=work)
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
        found = list(out.rglob(f"*samples_{name}.jsonl"))
        assert len(found) == 1, (sorted(out.rglob("*")), done.stdout[-3000:], done.stderr[-5000:])
        (samples_file,) = found
        samples = [json.loads(line) for line in samples_file.read_text().splitlines() if line.strip()]
        (results_file,) = [p for p in out.rglob("*results.json")]
        metric = "s_plus" if name.startswith("sub") else "accuracy"
        theirs = next(
            v for k, v in json.loads(results_file.read_text())["results"][name].items() if k.startswith(metric)
        )
        mine, accuracy = _ours(released, name)
        items = [
            json.loads(line)
            for line in (work / "lmms" / folder / "exports" / "items" / f"{name}.jsonl").read_text().splitlines()
        ]
        agree = 0
        for sample in samples:
            item = items[sample["doc_id"]]
            answer = (
                sample["filtered_resps"][0] if isinstance(sample["filtered_resps"], list) else sample["filtered_resps"]
            )
            agree += answer.strip() == mine[item["item_id"]]["answer"]
        _report("lmms-eval", name, agree, len(samples), theirs, accuracy)
        assert len(samples) == len(mine) == len(items)
        assert agree == len(samples)
        assert any(row["parsed"] for row in mine.values())  # letters read: the accuracies mean something
        assert theirs == pytest.approx(accuracy, abs=1e-12)


VLMEVAL_RUN = r"""
import json, os, sys
os.environ["LMUData"] = sys.argv[2]
import pandas as pd
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor
from vlmeval.dataset import build_dataset
from vlmeval.inference import infer_data
from vlmeval.vlm.base import BaseModel
from vlmeval.vlm.llava.llava import LLaVA


class TinyLLaVA(BaseModel):
    # VLMEvalKit's model interface; the prompt is VLMEvalKit's own LLaVA build_prompt
    INTERLEAVE = False

    def __init__(self, path):
        self.processor = AutoProcessor.from_pretrained(path, backend="pil")
        self.model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()

    def use_custom_prompt(self, dataset):
        return True

    build_prompt = LLaVA.build_prompt

    prompts = []

    def generate_inner(self, message, dataset=None):
        image = Image.open(next(m["value"] for m in message if m["type"] == "image")).convert("RGB")
        text = "".join(m["value"] for m in message if m["type"] == "text")
        self.prompts.append(text)
        turn = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
        prompt = self.processor.apply_chat_template(turn, add_generation_prompt=True, tokenize=False)
        inputs = self.processor(images=image, text=prompt, return_tensors="pt")
        with torch.no_grad():
            out = self.model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=16,
                                      pad_token_id=self.processor.tokenizer.pad_token_id)
        return self.processor.tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True).strip()


model_path, lmu, work, name = sys.argv[1:5]
dataset = build_dataset(name)
assert type(dataset).__name__ == "CustomMCQDataset", type(dataset)
model = TinyLLaVA(model_path)
pred = os.path.join(work, f"TinyLLaVA_{name}.xlsx")
infer_data(model=model, model_name="TinyLLaVA", work_dir=work, dataset=dataset, out_file=os.path.join(work, "part.pkl"), verbose=False)
import glob, pickle
predictions = pickle.load(open(os.path.join(work, "part.pkl"), "rb"))
data = dataset.data.copy()
data["prediction"] = [str(predictions[i]) for i in data["index"]]
data.drop(columns=["image"]).to_excel(pred, index=False)
scores = dataset.evaluate(pred, model="exact_matching", nproc=1)
overall = float(scores[scores["split"] == "none"]["Overall"].iloc[0]) if "split" in scores else float(scores["Overall"].iloc[0])
judged = pd.read_excel(glob.glob(os.path.join(work, f"TinyLLaVA_{name}_exact_matching_result.xlsx"))[0])
print(json.dumps({
    "overall": overall,
    "predictions": {str(r["item_id"]): str(r["prediction"]) for _, r in data.iterrows()},
    "hits": {str(r["item_id"]): int(r["hit"]) for _, r in judged.iterrows()},
    "prompts": sorted(TinyLLaVA.prompts),
}))
"""


def test_vlmevalkit_export_gives_our_answers_and_accuracy(released, tiny_dual_llava):
    python = _venv_python(VLMEVAL_ENV)
    work = released["work"]
    lmu = work / "LMUData"
    lmu.mkdir(exist_ok=True)
    for repo in ("org/binding", "org/sub"):
        _download(released, repo, "exports/", work / "vlm" / repo.split("/")[1])
    for name, folder in (("binding_clip_gen", "binding"), ("binding_clip_val", "binding"), ("sub_vlm_test", "sub")):
        tsv = work / "vlm" / folder / "exports" / "vlmevalkit" / f"Conceptforge_{name}.tsv"
        (lmu / tsv.name).write_bytes(tsv.read_bytes())
        run_dir = work / "vlmeval-work" / name
        run_dir.mkdir(parents=True, exist_ok=True)
        argv = [python, "-c", VLMEVAL_RUN, tiny_dual_llava, lmu, run_dir, f"Conceptforge_{name}"]
        env = {**released["env"], "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        done = subprocess.run(list(map(str, argv)), env=env, capture_output=True, text=True, timeout=900, cwd=run_dir)
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
        found = json.loads(done.stdout.strip().splitlines()[-1])
        mine, accuracy = _ours(released, name)
        agree = sum(found["predictions"][item_id] == row["answer"] for item_id, row in mine.items())
        hits = sum(found["hits"].values()) / len(found["hits"])
        _report("VLMEvalKit", name, agree, len(mine), found["overall"], accuracy)
        items = (work / "vlm" / folder / "exports" / "items" / f"{name}.jsonl").read_text().splitlines()
        assert found["prompts"] == sorted(json.loads(line)["prompt"] for line in items)  # VLMEvalKit asked our bytes
        assert sorted(found["predictions"]) == sorted(mine)
        assert agree == len(mine)
        assert any(row["parsed"] for row in mine.values())
        assert hits == pytest.approx(accuracy, abs=1e-12) and found["overall"] == pytest.approx(accuracy, abs=1e-9)
