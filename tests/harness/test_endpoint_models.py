"""Served models (``--model endpoint:NAME@URL``) against real server processes on 127.0.0.1.

The probability server is ours (conceptforge/testing/logprob_server.py: no third-party server
returns token log-probabilities for a tiny VLM on this CPU, see its docstring); it loads the same
tiny LLaVA folder the local adapter loads, so the served numbers must equal the local ones.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conceptforge.commands import main
from conceptforge.errors import ConceptforgeError
from conceptforge.loaders.harness.model_ref import resolve_model
from conceptforge.testing.logprob_server import LogprobServer
from tests.harness.test_adapters import _hand_next_token, _image, _rescore_equals


@pytest.fixture(scope="module")
def server(tiny_llava_dir):
    """The tiny LLaVA served with exact token-id log-probabilities (vLLM's logprob_token_ids)."""
    with LogprobServer(tiny_llava_dir, name="tiny-llava") as running:
        yield running


def _spec(running: LogprobServer) -> str:
    return f"endpoint:{running.name}@{running.base_url}"


def _local(tiny_llava_dir: Path, tmp_path: Path):
    from conceptforge.filters.vqa.scorer import VQAScorer
    from conceptforge.loaders.harness.adapters.generative_vlm import GenerativeVLMAdapter

    scorer = VQAScorer.from_pretrained(str(tiny_llava_dir), device="cpu")
    return GenerativeVLMAdapter(scorer, revision="r", cache_dir=tmp_path / "local", vqascore="next-token")


@pytest.mark.heavy
def test_served_match_and_choose_equal_the_local_adapter_on_the_same_weights(server, tiny_llava_dir, tmp_path):
    from conceptforge.filters.vqa.questions import build_question
    from conceptforge.loaders.harness.adapters.base import load_adapter

    model = resolve_model(_spec(server))
    assert (model.kind, model.source, model.endpoint["probabilities"]) == ("endpoint", "endpoint", "token-ids")
    assert model.endpoint["identity"]["id"] == "tiny-llava" and model.endpoint["identity"]["root"] == str(
        tiny_llava_dir
    )
    assert model.sha.startswith("endpoint-sha256:")
    served = load_adapter(model, device=None, dtype=None, cache_dir=str(tmp_path / "cache"))
    local = _local(tiny_llava_dir, tmp_path)
    images = [_image(i) for i in range(3)]
    texts = [["red cube", "blue sphere", "green cone"]] * 3
    questions = [build_question("colour", ["red", "blue", "green"]), build_question("shape", ["cube", "cone"])] * 2
    try:
        assert served.match(images, texts) == [pytest.approx(r, rel=1e-4) for r in local.match(images, texts)]
        assert served.match_allowed_mass(images, texts) == [
            pytest.approx(r, rel=1e-4) for r in local.match_allowed_mass(images, texts)
        ]
        chosen, expected = served.choose(images + [images[0]], questions), local.choose(images + [images[0]], questions)
        for got, want in zip(chosen, expected):
            assert got.options == want.options
            assert got.probs == pytest.approx(want.probs, rel=1e-4)
            assert got.raw_mass == pytest.approx(want.raw_mass, rel=1e-4)
        assert served.answer(images, ["Is it red?"] * 3) == pytest.approx(
            local.answer(images, ["Is it red?"] * 3), rel=1e-4
        )
        # and by hand, the one-at-a-time path a user would write: P("Yes") after the chat prompt
        probs, tokenizer = _hand_next_token(tiny_llava_dir, images[0], served.vqascore.question.format(text="red cube"))
        yes, no = tokenizer.convert_tokens_to_ids("Yes"), tokenizer.convert_tokens_to_ids("No")
        assert served.match(images[:1], [["red cube"]])[0][0] == pytest.approx(math.log(float(probs[yes])), rel=1e-4)
        assert served.match_allowed_mass(images[:1], [["red cube"]])[0][0] == pytest.approx(
            float(probs[yes] + probs[no]), rel=1e-4
        )
        sent = served.client.usage.requests
        served.match(images, texts)  # every answer is in the response cache now
        assert served.client.usage.requests == sent
    finally:
        served.close()
        local.close()


def _letters_on_the_edge(tiny_llava_dir: Path, folder: Path) -> Path:
    """The tiny LLaVA with every output row but the letters A-D zeroed: every other token's logit is
    0, so a letter whose logit is positive is in the top 20 and one whose logit is negative is not
    (a random model's letters are far down otherwise, and the fallback would read only zeros)."""
    import shutil

    import torch
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    shutil.copytree(tiny_llava_dir, folder)
    model = AutoModelForImageTextToText.from_pretrained(folder)
    letters = AutoTokenizer.from_pretrained(folder).convert_tokens_to_ids(list("ABCD"))
    with torch.no_grad():
        head = model.get_output_embeddings().weight
        keep = head[letters].clone() * 4.0
        head.zero_()
        head[letters] = keep
    model.save_pretrained(folder)
    return folder


@pytest.mark.heavy
def test_top_logprobs_fallback_counts_only_what_the_server_returned(tiny_llava_dir, tmp_path):
    """A server that ignores logprob_token_ids (OpenAI's API): the allowed answers' probabilities
    come from the top 20 returned; an answer outside them carries no mass (a lower bound)."""
    import torch

    from conceptforge.filters.vqa.questions import build_question
    from conceptforge.loaders.harness.adapters.base import load_adapter

    tiny_llava_dir = _letters_on_the_edge(tiny_llava_dir, tmp_path / "edge")
    with LogprobServer(tiny_llava_dir, name="tiny-llava", extra=("--ignore-token-ids",)) as running:
        model = resolve_model(_spec(running))
        assert model.endpoint["probabilities"] == "top-logprobs" and model.kind == "endpoint"
        served = load_adapter(model, device=None, dtype=None, cache_dir=str(tmp_path / "cache"))
        try:
            images = [_image(i) for i in range(6)]
            question = build_question("colour", ["red", "blue", "green"])
            got = served.choose(images, [question] * 6)
        finally:
            served.close()
    seen, missed = 0, 0
    for image, scores in zip(images, got):
        probs, tokenizer = _hand_next_token(tiny_llava_dir, image, question.text)
        top = set(torch.topk(probs, 20).indices.tolist())
        letters = [tokenizer.convert_tokens_to_ids(letter) for letter in "ABCD"]
        kept = [float(probs[t]) if t in top else 0.0 for t in letters]
        seen += sum(1 for k in kept if k > 0)
        missed += sum(1 for k in kept if k == 0)
        assert scores.raw_mass == pytest.approx(sum(kept), rel=1e-4, abs=1e-12)
        if sum(kept) > 0:
            assert scores.probs == pytest.approx([k / sum(kept) for k in kept], rel=1e-4)
        else:
            assert scores.probs == (0.25,) * 4
    assert seen and missed  # letters in and out of the top 20: both sides of the fallback exercised


def test_evaluate_through_the_endpoint_equals_the_local_run(
    server, tiny_llava_dir, single_object_dir, sub_dir, fake_cub, tmp_path, caplog
):
    """sub-vlm (choose) and binding-clip (match) end to end through the served model: per-sample
    rows, the same numbers as the local model's run, --from-predictions byte-identical."""
    import pyarrow.parquet as pq

    tasks = f"binding-clip:{single_object_dir},sub-vlm:{sub_dir}"
    common = ["--tasks", tasks, "--cub-dir", str(fake_cub), "--task-option", "sub-vlm.cbm_min_classes=1"]
    common += ["--cache-dir", str(tmp_path / "cache"), "--batch-size", "8"]
    out = tmp_path / "served.json"
    with caplog.at_level("INFO", logger="conceptforge"):
        assert (
            main(["evaluate", "--model", _spec(server), *common, "--output", str(out), "--endpoint-concurrency", "4"])
            == 0
        )
    # a fresh cache: every answer was sent, none came from the cache (match and its allowed mass
    # read the same answers twice; that used to log "240 from the cache")
    (sent,) = [r.getMessage() for r in caplog.records if "requests sent" in r.getMessage()]
    assert "(0 retries), 0 from the cache" in sent, sent
    payload = json.loads(out.read_text())
    assert payload["model"]["kind"] == "endpoint" and payload["model"]["endpoint"]["identity"]["id"] == "tiny-llava"
    assert payload["model"]["endpoint"]["client"]["max_concurrency"] == 4
    binding, sub = payload["tasks"]
    assert (binding["adapter"], sub["adapter"]) == ("endpoint", "endpoint")
    assert (binding["protocol"], sub["protocol"]) == ("binding/zero-shot-match", "sub/vlm-choose")
    assert "next-token" in binding["variant"] and "logprob_token_ids" in binding["variant"]
    _rescore_equals(out, tmp_path)
    # the local model on the same weights: sub-vlm's option letters are one rule everywhere; the
    # local LLaVA's default VQAScore is t2v_metrics' teacher-forced LLaVA-1.5 variant, which a
    # served model cannot compute: the local run asks for the served one's, next-token
    local = tmp_path / "local.json"
    argv = ["evaluate", "--model", str(tiny_llava_dir), *common, "--output", str(local), "--device", "cpu"]
    assert main([*argv, "--task-option", "binding-clip.vqascore=next-token"]) == 0
    for task in ("sub-vlm", "binding-clip"):
        served_rows = pq.read_table(tmp_path / "served.samples" / f"{task}.parquet").to_pylist()
        local_rows = pq.read_table(tmp_path / "local.samples" / f"{task}.parquet").to_pylist()
        assert [r["item_id"] for r in served_rows] == [r["item_id"] for r in local_rows] and served_rows
        for a, b in zip(served_rows, local_rows):
            assert a["scores"] == pytest.approx(b["scores"], rel=1e-4)  # binding: ln P(Yes) both ways
            assert a["allowed_mass"] == pytest.approx(b["allowed_mass"], rel=1e-4)
            assert a.get("score_scale") == b.get("score_scale")  # binding: log-probability
    local_tasks = {t["task"]: t for t in json.loads(local.read_text())["tasks"]}
    assert sub["metrics"]["s_plus"]["value"] == pytest.approx(local_tasks["sub-vlm"]["metrics"]["s_plus"]["value"])


@pytest.mark.heavy
def test_compmap_through_the_endpoint(server, tmp_path):
    import pyarrow.parquet as pq

    from tests.compmap.synthetic import write_fake_cub

    cub = write_fake_cub(tmp_path / "compmap-cub" / "CUB_200_2011", num_classes=4, per_class=4)
    out = tmp_path / "compmap.json"
    argv = ["evaluate", "--model", _spec(server), "--tasks", "compmap-cub", "--cub-dir", str(cub)]
    for option in ("ways=2", "shots=1", "episodes=3", "queries=1", "full_shot=false"):
        argv += ["--task-option", f"compmap-cub.{option}"]
    assert main([*argv, "--cache-dir", str(tmp_path / "cache"), "--output", str(out)]) == 0
    (compmap,) = json.loads(out.read_text())["tasks"]
    assert compmap["adapter"] == "endpoint" and compmap["variant"].startswith("activations by match")
    assert pq.read_table(tmp_path / "compmap.samples" / "compmap-cub.parquet").num_rows
    _rescore_equals(out, tmp_path)


class TransformersServe:
    """``transformers serve FOLDER`` (transformers' own OpenAI-compatible server, a real third-party
    server) on a free port of 127.0.0.1, ready once ``/health`` answers. It refuses ``logprobs``:
    what it serves is an ``endpoint-text`` model, scored by answer only."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.name = str(folder)  # it lists the model under the path it loaded
        self.base_url = ""

    def __enter__(self) -> TransformersServe:
        import os
        import socket
        import subprocess
        import sys
        import time
        import urllib.request

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        # the `transformers` command of this interpreter (its script calls this main)
        command = [sys.executable, "-c", "import sys; from transformers.cli.transformers import main; sys.exit(main())"]
        command += ["serve", str(self.folder)]
        command += ["--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--log-level", "warning"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ)
        self.base_url = f"http://127.0.0.1:{port}/v1"
        while True:  # wait for the condition (it answers), or for the process to end
            assert self.process.poll() is None, "transformers serve exited before it listened"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


@pytest.mark.heavy
def test_a_server_without_log_probabilities_runs_the_by_answer_protocols_only(
    tiny_llava_dir, single_object_dir, sub_dir, fake_cub, tmp_path, capsys
):
    """A server refusing ``logprobs`` (our test server in that mode, as transformers serve does;
    transformers serve itself: the heavy test below): the model is ``endpoint-text``, sub-vlm and
    binding-clip run by answer, a probability-only task is skipped in one line, ``by_answer=false``
    is refused (EP58), and the adapter refuses a probability protocol in one line."""
    from conceptforge.loaders.harness.adapters.base import load_adapter

    with LogprobServer(tiny_llava_dir, name="tiny-llava", extra=("--no-logprobs",)) as running:
        model = resolve_model(_spec(running))
        assert (model.kind, model.endpoint["probabilities"]) == ("endpoint-text", "none")
        tasks = f"binding-clip:{single_object_dir},sub-vlm:{sub_dir},compmap-cub"
        argv = ["evaluate", "--model", _spec(running), "--tasks", tasks, "--cub-dir", str(fake_cub)]
        argv += ["--task-option", "sub-vlm.cbm_min_classes=1", "--cache-dir", str(tmp_path / "cache")]
        # EP58: by_answer=false cannot hold for a model that only answers in words: refused, not overridden
        off = ["--task-option", "sub-vlm.by_answer=false", "--output", str(tmp_path / "off.json")]
        assert main([*argv, *off]) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"error: sub-vlm.by_answer=false: {_spec(running)} answers only in words (endpoint-text: no token "
            "log-probabilities), so sub-vlm can only run by answer; drop the option, or serve the model with "
            "log-probabilities (vLLM, SGLang)"
        )
        assert not (tmp_path / "off.json").exists()
        assert main([*argv, "--output", str(tmp_path / "r.json")]) == 0
        adapter = load_adapter(model, device=None, dtype=None, cache_dir=str(tmp_path / "cache"))
        try:
            with pytest.raises(ConceptforgeError, match="returns no token log-probabilities, so it cannot choose"):
                adapter.choose([_image(0)], [])
        finally:
            adapter.close()
    err = capsys.readouterr().err
    payload = json.loads((tmp_path / "r.json").read_text())
    assert [t["protocol"] for t in payload["tasks"]] == ["binding/choose-by-answer", "sub/choose-by-answer"]
    (skipped,) = payload["skipped"]
    assert skipped["task"] == "compmap-cub" and "endpoint-text" in skipped["reason"]
    assert len([line for line in err.splitlines() if "compmap-cub" in line and "skip" in line]) == 1
    _rescore_equals(tmp_path / "r.json", tmp_path)


def _assert_served_rows_are_local_rows(tmp_path, name: str) -> None:
    """The by-answer rows of task ``name`` of the served run (served.samples/) and of the same weights
    loaded here (local.samples/): the same items, words, parsed letters, predictions and scores."""
    import pyarrow.parquet as pq

    served_rows = pq.read_table(tmp_path / "served.samples" / f"{name}.parquet").to_pylist()
    local_rows = pq.read_table(tmp_path / "local.samples" / f"{name}.parquet").to_pylist()
    columns = ("item_id", "answer", "parsed_answer", "prediction", "scores", "value")
    assert [[r.get(c) for c in columns] for r in served_rows] == [[r.get(c) for c in columns] for r in local_rows]
    assert served_rows


@pytest.mark.heavy
def test_transformers_serve_gives_the_local_by_answer_numbers(
    tiny_llava_dir, single_object_dir, sub_dir, fake_cub, tmp_path
):
    """``transformers serve`` itself (transformers' own server; it refuses ``logprobs``): an
    ``endpoint-text`` model whose by-answer runs of sub-vlm and binding-clip give the numbers and
    rows of the same weights loaded here (greedy words are the same words). Heavy: the default
    suite proves the same path against our server in its no-logprobs mode (the test above);
    this one starts a third-party server (about two and a half minutes on the 2-core machine)."""

    tasks = f"binding-clip:{single_object_dir},sub-vlm:{sub_dir}"
    common = ["--tasks", tasks, "--cub-dir", str(fake_cub), "--task-option", "sub-vlm.cbm_min_classes=1"]
    with TransformersServe(tiny_llava_dir) as running:
        model = resolve_model(_spec(running))
        assert (model.kind, model.endpoint["probabilities"]) == ("endpoint-text", "none")
        argv = ["evaluate", "--model", _spec(running), *common, "--cache-dir", str(tmp_path / "cache")]
        assert main([*argv, "--output", str(tmp_path / "served.json")]) == 0
    local = ["evaluate", "--model", str(tiny_llava_dir), *common, "--device", "cpu"]
    local += ["--task-option", "sub-vlm.by_answer=true", "--task-option", "binding-clip.by_answer=true"]
    assert main([*local, "--cache-dir", str(tmp_path / "cache"), "--output", str(tmp_path / "local.json")]) == 0
    served_tasks = json.loads((tmp_path / "served.json").read_text())["tasks"]
    local_tasks = json.loads((tmp_path / "local.json").read_text())["tasks"]
    assert [t["protocol"] for t in served_tasks] == ["binding/choose-by-answer", "sub/choose-by-answer"]
    assert [t["metrics"] for t in served_tasks] == [t["metrics"] for t in local_tasks]
    for name in ("binding-clip", "sub-vlm"):
        _assert_served_rows_are_local_rows(tmp_path, name)


@pytest.mark.heavy
def test_by_answer_local_and_served_copies_agree(
    server, tiny_llava_dir, single_object_dir, sub_dir, fake_cub, tmp_path
):
    """The by-answer protocols on the tiny LLaVA, loaded here and served: the same words, the same scores."""

    tasks = f"binding-clip:{single_object_dir},sub-vlm:{sub_dir}"
    common = ["--tasks", tasks, "--cub-dir", str(fake_cub), "--task-option", "sub-vlm.cbm_min_classes=1"]
    common += ["--task-option", "sub-vlm.by_answer=true", "--task-option", "binding-clip.by_answer=true"]
    common += ["--cache-dir", str(tmp_path / "cache"), "--batch-size", "4"]
    assert main(["evaluate", "--model", _spec(server), *common, "--output", str(tmp_path / "served.json")]) == 0
    local = ["evaluate", "--model", str(tiny_llava_dir), *common, "--device", "cpu"]
    assert main([*local, "--output", str(tmp_path / "local.json")]) == 0
    served_tasks = json.loads((tmp_path / "served.json").read_text())["tasks"]
    local_tasks = json.loads((tmp_path / "local.json").read_text())["tasks"]
    assert [t["protocol"] for t in served_tasks] == [t["protocol"] for t in local_tasks]
    assert [t["protocol"] for t in served_tasks] == ["binding/choose-by-answer", "sub/choose-by-answer"]
    for served_task, local_task in zip(served_tasks, local_tasks):
        assert served_task["metrics"] == local_task["metrics"]
        _assert_served_rows_are_local_rows(tmp_path, served_task["task"])


def test_the_key_is_never_written_and_the_budget_is_checked_first(
    server, single_object_dir, tmp_path, monkeypatch, capsys, caplog
):
    key = "sk-test-do-not-write-7f3a9c"
    monkeypatch.setenv("CONCEPTFORGE_ENDPOINT_KEY", key)
    out = tmp_path / "run.json"
    argv = ["evaluate", "--model", _spec(server), "--tasks", f"binding-clip:{single_object_dir}"]
    argv += ["--cache-dir", str(tmp_path / "cache"), "--output", str(out)]
    assert main([*argv, "--max-requests", "1"]) == 2  # the plan needs more: refused before anything is sent
    err = capsys.readouterr().err
    assert "--max-requests 1" in err and not out.exists()
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert json.loads(out.read_text())["model"]["endpoint"]["key_env"] == "CONCEPTFORGE_ENDPOINT_KEY"
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    assert key not in captured.out + captured.err
    # a rerun that scores every item again asks the server nothing: every answer is in the response cache
    again = [*argv[:-1], str(tmp_path / "again.json"), "--no-sample-cache"]
    with caplog.at_level("INFO", logger="conceptforge"):
        assert main(again) == 0
    (usage,) = [r.getMessage() for r in caplog.records if "endpoint usage" in r.getMessage()]
    assert "'requests': 0," in usage and "'cache_hits': 0," not in usage
    first, second = (json.loads((tmp_path / name).read_text())["tasks"] for name in ("run.json", "again.json"))
    assert [t["metrics"] for t in first] == [t["metrics"] for t in second]


@pytest.mark.parametrize(
    ("model", "flags", "message"),
    [
        ("endpoint:no-url", [], "endpoint:SERVED_NAME@BASE_URL"),
        ("endpoint:m@127.0.0.1:9/v1", [], "has no scheme; write endpoint:m@http://127.0.0.1:9/v1"),
        (  # EP25: said at once (it was six retries, 26 s of this suite)
            "endpoint:m@http://127.0.0.1:9/v1",
            [],
            "error: nothing listens at http://127.0.0.1:9/v1 (connection refused); start the server there or fix the URL",
        ),
        (  # EP35: not "a cbm model" skipped by every task
            "mistral:large",
            [],
            "error: --model mistral:large: 'mistral' is an unknown provider (known: openai, gemini, anthropic, "
            "openrouter, together; any OpenAI-compatible server is endpoint:SERVED_NAME@BASE_URL), and no module "
            "mistral holds a CBM factory",
        ),
        (  # EP43: the flag does not apply (the old line blamed the missing local GPU)
            "endpoint:m@http://127.0.0.1:9/v1",
            ["--device", "cuda"],
            "error: --device cuda does not apply to a served model (endpoint:m@http://127.0.0.1:9/v1): the server "
            "runs it on its own device; drop it",
        ),
        (  # nor does a device map: said before the server is asked anything
            "endpoint:m@http://127.0.0.1:9/v1",
            ["--device-map", "auto"],
            "error: --device-map auto does not apply to a served model (endpoint:m@http://127.0.0.1:9/v1): the "
            "server runs it on its own device; drop it",
        ),
        (  # EP47: a budget that would not hold is refused, not ignored
            "openai/clip-vit-base-patch32",
            ["--max-requests", "10"],
            "error: --max-requests applies to a served model (--model endpoint:NAME@URL or PROVIDER:NAME), not to "
            "openai/clip-vit-base-patch32, which runs here: drop it",
        ),
        ("endpoint:m@http://127.0.0.1:9/v1", ["--endpoint-concurrency", "0"], "--endpoint-concurrency"),
        ("endpoint:m@http://127.0.0.1:9/v1", ["--endpoint-timeout", "-1"], "--endpoint-timeout"),
    ],
)
def test_endpoint_spelling_and_flags_fail_in_one_line(model, flags, message, tmp_path, capsys):
    argv = ["evaluate", "--model", model, "--tasks", "binding-clip", *flags, "--output", str(tmp_path / "r.json")]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own check of a flag's value
        code = exit_.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) <= 2, err
    assert not (tmp_path / "r.json").exists()


def test_a_model_the_server_does_not_serve_is_one_line(server, tmp_path, capsys):
    argv = ["evaluate", "--model", f"endpoint:other@{server.base_url}", "--tasks", "binding-clip"]
    assert main([*argv, "--output", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "does not serve the model 'other'" in err and "tiny-llava" in err and len(err.splitlines()) == 1


def test_provider_shortcuts_and_the_one_spelling():
    from conceptforge.loaders.harness.endpoint_model import is_endpoint_spec, parse_endpoint_spec

    spec = parse_endpoint_spec("endpoint:Qwen/Qwen2-VL-7B-Instruct@http://gpu1:8000/v1/")
    assert (spec.model, spec.base_url, spec.key_env) == (
        "Qwen/Qwen2-VL-7B-Instruct",
        "http://gpu1:8000/v1",
        "CONCEPTFORGE_ENDPOINT_KEY",
    )
    assert spec.id == "endpoint:Qwen/Qwen2-VL-7B-Instruct@http://gpu1:8000/v1"
    assert parse_endpoint_spec("openai:gpt-4o").base_url == "https://api.openai.com/v1"
    gemini = parse_endpoint_spec("gemini:gemini-2.5-flash")
    assert (gemini.base_url, gemini.key_env) == (
        "https://generativelanguage.googleapis.com/v1beta/openai/",
        "GEMINI_API_KEY",
    )
    assert parse_endpoint_spec("anthropic:claude-sonnet-4-5").key_env == "ANTHROPIC_API_KEY"
    assert parse_endpoint_spec("openrouter:qwen/qwen2.5-vl-72b-instruct").model == "qwen/qwen2.5-vl-72b-instruct"
    assert not is_endpoint_spec("mypkg.cbms:independent")  # a CBM factory stays a CBM factory
    assert not is_endpoint_spec("openai/clip-vit-base-patch32")  # a Hub id stays a Hub id


def test_a_provider_key_that_is_not_set_is_one_line_naming_the_variable(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    argv = ["evaluate", "--model", "openai:gpt-4o", "--tasks", "binding-clip", "--output", str(tmp_path / "r.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "OPENAI_API_KEY" in err and len(err.splitlines()) == 1 and not (tmp_path / "r.json").exists()


def _letters_out_of_the_top_20(tiny_llava_dir: Path, folder: Path) -> Path:
    """The tiny LLaVA with output rows zeroed but 40 tokens: 20 along a random direction v, 20
    along -v. Whatever the hidden state h, one of the two sets has logits |h.v| > 0 while every
    other token, the letters A-D among them, has logit 0: no letter is ever in the top 20."""
    import shutil

    import torch
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    shutil.copytree(tiny_llava_dir, folder)
    model = AutoModelForImageTextToText.from_pretrained(folder)
    letters = set(AutoTokenizer.from_pretrained(folder).convert_tokens_to_ids(list("ABCD")))
    with torch.no_grad():
        head = model.get_output_embeddings().weight
        v = torch.randn(head.shape[1], generator=torch.Generator().manual_seed(0))
        rows = [t for t in reversed(range(head.shape[0])) if t not in letters][:40]  # the last 40
        head.zero_()
        head[rows[:20]] = 8.0 * v
        head[rows[20:]] = -8.0 * v
    model.save_pretrained(folder)
    return folder


def test_no_option_letter_in_the_top_20_is_unanswerable_not_option_a(
    tiny_llava_dir, sub_dir, single_object_dir, fake_cub, tmp_path, caplog
):
    """EP05: no option letter (nor Yes/No) among the server's top-20: the scores are the uniform
    split of nothing. By hand: each image's allowed mass is 0, so no image chooses anything; every
    S+ and S- row is wrong (S+ 0, S- 0; before, option A was predicted and S- read 75% from no
    information), every binding row scores 0 (before: a five-way tie, 0.2 each) with no error
    breakdown (no distractor was chosen), and no_allowed_mass counts every sample; the warning
    says mass 0."""
    import pyarrow.parquet as pq

    folder = _letters_out_of_the_top_20(tiny_llava_dir, tmp_path / "no-letters")
    with LogprobServer(folder, name="tiny-llava", extra=("--ignore-token-ids",)) as running:
        tasks = f"sub-vlm:{sub_dir},binding-clip:{single_object_dir}"
        argv = ["evaluate", "--model", _spec(running), "--tasks", tasks, "--cub-dir", str(fake_cub)]
        argv += ["--task-option", "sub-vlm.cbm_min_classes=1", "--cache-dir", str(tmp_path / "cache")]
        with caplog.at_level("WARNING", logger="conceptforge"):
            assert main([*argv, "--output", str(tmp_path / "r.json")]) == 0
    task, binding = json.loads((tmp_path / "r.json").read_text())["tasks"]
    binding_rows = pq.read_table(tmp_path / "r.samples" / "binding-clip.parquet").to_pylist()
    assert binding_rows and all(r["allowed_mass"] == 0.0 and r["value"] == 0.0 for r in binding_rows)
    assert all(r["prediction"] == "(no allowed answer)" for r in binding_rows)
    accuracies = {k: v["value"] for k, v in binding["metrics"].items() if k.endswith("_accuracy")}
    assert accuracies and set(accuracies.values()) == {0.0}
    assert binding["metrics"]["no_allowed_mass"]["value"] == len(binding_rows)
    rows = pq.read_table(tmp_path / "r.samples" / "sub-vlm.parquet").to_pylist()
    images = len({r["item_id"].split("/")[0] for r in rows})
    assert images and all(r["allowed_mass"] == 0.0 for r in rows)
    assert all(r["prediction"] == "(no allowed answer)" and r["correct"] is False for r in rows)
    metrics = task["metrics"]
    assert metrics["s_plus"]["value"] == 0.0 and metrics["s_minus"]["value"] == 0.0
    assert (metrics["no_allowed_mass"]["value"], metrics["no_allowed_mass"]["n"]) == (images, images)
    warnings = [r.getMessage() for r in caplog.records if "no probability at all" in r.getMessage()]
    assert warnings[0] == (
        f"sub-vlm: {images} of {images} samples gave the allowed answers no probability at all (mass 0: none "
        "of them among the log-probabilities returned); scored wrong, counted in no_allowed_mass"
    )
    assert warnings[1].startswith(f"binding-clip: {len(binding_rows)} of {len(binding_rows)} samples gave")
    assert not [r for r in caplog.records if "less than 0.5" in r.getMessage()]
    _rescore_equals(tmp_path / "r.json", tmp_path)


def test_device_cuda_without_a_gpu_is_still_one_line_for_a_local_model(tmp_path, capsys, monkeypatch):
    """evaluate --model checks --device in its run (so that a served model can refuse the flag
    first, EP43): for a model that runs here, a missing GPU is still the one shared line."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    argv = ["evaluate", "--model", "openai/clip-vit-base-patch32", "--tasks", "binding-clip", "--device", "cuda"]
    assert main([*argv, "--output", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [
        "error: --device cuda: no CUDA GPU is visible on this machine (check nvidia-smi and CUDA_VISIBLE_DEVICES, "
        "or pass --device cpu)"
    ]
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate", "sub", "--cub-dir", "CUB", "--dataset", "org/sub", "--model", "endpoint:m@http://127.0.0.1:9/v1"],
        ["evaluate", "binding", "--dataset", "org/binding", "--clip-model", "endpoint:m@http://127.0.0.1:9/v1"],
    ],
    ids=["sub", "binding"],
)
def test_an_alias_says_device_does_not_apply_to_a_served_model(argv, tmp_path, capsys):
    """The per-benchmark aliases check --device like `evaluate --tasks`: the flag that does not apply is
    said, not the missing GPU (the alias's --device used to be checked while parsing)."""
    (tmp_path / "CUB").mkdir()
    argv = [str(tmp_path / part) if part == "CUB" else part for part in argv]
    code = main([*argv, "--device", "cuda", "--output", str(tmp_path / "r.json")])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.endswith(
        "error: --device cuda does not apply to a served model (endpoint:m@http://127.0.0.1:9/v1): the server "
        "runs it on its own device; drop it"
    ), err
    assert not (tmp_path / "r.json").exists()


def test_an_alias_with_a_local_model_still_says_the_gpu_is_missing(tmp_path, capsys, monkeypatch):
    """…and with a model that runs here, the missing GPU is said before anything loads."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    (tmp_path / "CUB").mkdir()
    argv = ["evaluate", "sub", "--cub-dir", str(tmp_path / "CUB"), "--dataset", "org/sub", "--model", "org/clip"]
    code = main([*argv, "--device", "cuda", "--output", str(tmp_path / "r.json")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--device cuda: no CUDA GPU is visible on this machine" in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "r.json").exists()
