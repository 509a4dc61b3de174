"""conceptbed-ccd with a served VLM as the composition oracle (``--model endpoint:NAME@URL``):
P("Yes") to each question through a real server on 127.0.0.1 (ours: it returns token
log-probabilities), the same number the local model gives."""

from __future__ import annotations

import json

import pytest

from conceptforge.testing.logprob_server import LogprobServer
from tests.conceptbed.ccd_helpers import generate_textual_inversion, yes_probability_by_hand


def test_a_served_vlm_answers_the_composition_questions(
    tmp_path, tiny_sd, datasets_root, captions_file, write_spec, oracles, run_script
):
    import pyarrow.parquet as pq

    from conceptforge.testing.tiny_vlms import build_tiny_llava

    spec_path, out = generate_textual_inversion(tmp_path, tiny_sd, datasets_root, captions_file, write_spec)
    llava = build_tiny_llava(tmp_path / "llava", words=("Yes", "No"))
    results = tmp_path / "served.json"
    with LogprobServer(llava, name="tiny-llava") as running:
        args = ["--model", f"endpoint:tiny-llava@{running.base_url}", "--tasks", "conceptbed-ccd"]
        args += ["--dataset", f"conceptbed-ccd={out}", "--concepts", str(spec_path), "--output", str(results)]
        args += ["--task-option", f"conceptbed-ccd.object_oracle={oracles['object']}"]
        args += ["--cache-dir", str(tmp_path / "cache")]
        code, _, err = run_script("evaluate.py", *args)
    assert code == 0, err[-3000:]
    (task,) = json.loads(results.read_text())["tasks"]
    assert (task["protocol"], task["adapter"]) == ("conceptbed/ccd-vqascore", "endpoint")
    assert {"vqa.ccd", "object.ccd"} <= set(task["metrics"])
    rows = pq.read_table(tmp_path / "served.samples" / "conceptbed-ccd.parquet").to_pylist()
    vqa = [r for r in rows if r["oracle_task"] == "vqa"]
    assert {r["source"] for r in vqa} == {"textual-inversion", "original"}
    # one generated image's answer by hand: P("Yes") after the chat prompt, from the local logits
    row = next(r for r in vqa if r["source"] == "textual-inversion")
    yes, top = yes_probability_by_hand(llava, out, row)
    assert row["scores"][0] == pytest.approx(yes, rel=1e-4)
    assert row["max_prob"] == pytest.approx(top, rel=1e-4)
    code, _, err = run_script(
        "evaluate.py", "--from-predictions", str(tmp_path / "served.samples"), "--output", str(tmp_path / "again.json")
    )
    assert code == 0, err[-3000:]
    assert (tmp_path / "again.json").read_text() == results.read_text()
