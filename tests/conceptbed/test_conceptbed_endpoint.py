"""conceptbed-ccd with a served VLM as the composition oracle (``--model endpoint:NAME@URL``):
P("Yes") to each question through a real server on 127.0.0.1 (ours: it returns token
log-probabilities), the same number the local model gives."""

from __future__ import annotations

import pytest

from conceptforge.testing.logprob_server import LogprobServer
from tests.conceptbed.ccd_helpers import check_vqa_answers, generate_textual_inversion


@pytest.mark.heavy
def test_a_served_vlm_answers_the_composition_questions(
    tmp_path, tiny_sd, datasets_root, captions_file, write_spec, oracles, run_script
):

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
    check_vqa_answers(results, tmp_path / "served.samples", adapter="endpoint", llava=llava, dataset=out, rel=1e-4)
    code, _, err = run_script(
        "evaluate.py", "--from-predictions", str(tmp_path / "served.samples"), "--output", str(tmp_path / "again.json")
    )
    assert code == 0, err[-3000:]
    assert (tmp_path / "again.json").read_text() == results.read_text()
