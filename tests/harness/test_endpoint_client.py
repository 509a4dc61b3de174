"""The endpoint client against a real fault-injecting server process on 127.0.0.1 (issue 40, point 3).

The server (conceptforge/testing/fault_server.py) runs as its own process; the official ``openai``
client inside :class:`EndpointClient` talks to it over TCP, unpatched. Assertions about retries
and ``Retry-After`` read the server's own log of arrivals (its clock), not the client's word.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conceptforge.errors import (
    ConceptforgeError,
    EndpointAuthError,
    EndpointRateLimitedError,
    EndpointResponseError,
    EndpointServerError,
    EndpointUnreachableError,
    ModelNotServedError,
)
from conceptforge.loaders.harness.endpoint_cache import RESPONSES_FILE
from conceptforge.loaders.harness.endpoint_client import (
    ChatRequest,
    EndpointClient,
    EndpointSettings,
    RequestBudgetError,
    request_key,
)

MODEL = "tiny-vlm"
KEY_ENV = "CF_TEST_ENDPOINT_KEY"
SECRET = "sk-test-9f3c1e7a-DO-NOT-LEAK"


def _start_server(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "conceptforge.testing.fault_server", "--model", MODEL, *args],
        stdout=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        text=True,
    )
    url = process.stdout.readline().strip()  # the server prints its URL once it listens
    assert url.startswith("http://127.0.0.1:"), url
    return process, url


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture(scope="module")
def _server_process():
    process, url = _start_server()
    yield url
    _stop(process)


@pytest.fixture(scope="module")
def _keyed_server_process():
    process, url = _start_server("--api-key-env", KEY_ENV, env={KEY_ENV: SECRET})
    yield url
    _stop(process)


@pytest.fixture
def server(_server_process):
    """The shared server, with no fault left queued by an earlier test."""
    _control(_server_process, "/_faults", {"mode": "clear"})
    return _server_process


@pytest.fixture
def keyed_server(_keyed_server_process):
    _control(_keyed_server_process, "/_faults", {"mode": "clear"})
    return _keyed_server_process


def _control(url: str, path: str, payload: dict | None = None) -> dict:
    root = url.removesuffix("/v1")
    data = None if payload is None else json.dumps(payload).encode()
    with urllib.request.urlopen(urllib.request.Request(root + path, data=data), timeout=30) as response:
        return json.loads(response.read())


def _faults(url: str, mode: str, count: int = 1, retry_after: float | None = None, skip: int = 0) -> None:
    _control(url, "/_faults", {"mode": "clear"})
    _control(url, "/_faults", {"mode": mode, "count": count, "retry_after": retry_after, "skip": skip})


def _events(url: str, prompts: set[str] | None = None) -> list[dict]:
    events = _control(url, "/_stats")["events"]
    return [e for e in events if prompts is None or e["prompt"] in prompts]


def _requests(tag: str, n: int) -> list[ChatRequest]:
    return [ChatRequest(messages=({"role": "user", "content": f"{tag} question {i}"},)) for i in range(n)]


def _settings(url: str, **kwargs) -> EndpointSettings:
    return EndpointSettings(base_url=url, model=MODEL, **{"max_retries": 3, "timeout_s": 30.0, **kwargs})


def _committed(path: Path) -> int:
    """Answers committed to the cache in ``path`` so far (0 before the file exists)."""
    if not (path / RESPONSES_FILE).exists():
        return 0
    try:
        return _rows(path)
    except sqlite3.OperationalError:  # the file exists, its table not yet
        return 0


def _rows(path: Path) -> int:
    with sqlite3.connect(path / RESPONSES_FILE) as db:
        return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]


def test_answers_in_order_counted_and_cached(server, tmp_path):
    requests = _requests("order", 6)
    requests.append(requests[2])  # a duplicate is sent once
    with EndpointClient(_settings(server), cache_dir=tmp_path) as client:
        responses = client.complete(requests, tag="task-a")
        identity = client.identity()
    texts = [r["choices"][0]["message"]["content"] for r in responses]
    assert texts == [f"echo: order question {i}" for i in (0, 1, 2, 3, 4, 5, 2)]
    sent = _events(server, {f"order question {i}" for i in range(6)})
    assert len(sent) == 6 and all(e["status"] == 200 for e in sent)
    assert client.usage.requests == 6 and client.usage.retries == 0 and client.usage.cache_hits == 0
    # tokens: the server counts whitespace-separated words of the JSON messages, plus the answer's
    words = sum(len(json.dumps([{"role": "user", "content": f"order question {i}"}]).split()) for i in range(6))
    assert client.usage.prompt_tokens == words
    assert client.usage.completion_tokens == 6 * 4
    assert client.usage_by_tag["task-a"].requests == 6
    record = client.record()
    assert record["usage_by_tag"]["task-a"]["prompt_tokens"] == words and record["settings"]["model"] == MODEL
    assert identity["id"] == MODEL and identity["root"] == f"/models/{MODEL}" and identity["owned_by"] == "fault-server"
    assert identity["system_fingerprint"] == "fp_fault_server"
    assert _rows(tmp_path) == 6
    # A new client (the server's `created` and permission ids differ now): everything from the cache.
    with EndpointClient(_settings(server), cache_dir=tmp_path) as again:
        assert again.complete(requests) == responses
        # 7 requests, 6 distinct (the duplicate is one request): 6 read from the cache, each once
        assert again.usage.requests == 0 and again.usage.cache_hits == 6
    assert len(_events(server, {f"order question {i}" for i in range(6)})) == 6


@pytest.mark.parametrize("status", [429, 500])
def test_retries_wait_as_long_as_retry_after_says(server, tmp_path, status):
    _faults(server, str(status), count=2, retry_after=1)
    with EndpointClient(_settings(server), cache_dir=tmp_path) as client:
        [response] = client.complete(_requests(f"wait-{status}", 1))
    assert response["choices"][0]["message"]["content"] == f"echo: wait-{status} question 0"
    events = _events(server, {f"wait-{status} question 0"})
    assert [e["status"] for e in events] == [status, status, 200]
    gaps = [b["t"] - a["t"] for a, b in zip(events, events[1:])]
    assert all(gap >= 1.0 for gap in gaps), gaps
    assert client.usage.retries == 2 and client.usage.attempts == 3
    assert _rows(tmp_path) == 1


@pytest.mark.parametrize("mode", ["500", "drop"])
def test_server_errors_and_dropped_connections_are_retried(server, tmp_path, mode):
    _faults(server, mode, count=2)
    with EndpointClient(_settings(server), cache_dir=tmp_path) as client:
        [response] = client.complete(_requests(f"retry-{mode}", 1))
    assert response["choices"][0]["message"]["content"] == f"echo: retry-{mode} question 0"
    events = _events(server, {f"retry-{mode} question 0"})
    assert [e["status"] for e in events] == [int(mode) if mode == "500" else mode] * 2 + [200]
    # exponential backoff from 0.5 s, less at most 25 % jitter
    gaps = [b["t"] - a["t"] for a, b in zip(events, events[1:])]
    assert gaps[0] >= 0.375 and gaps[1] >= 0.75, gaps
    assert client.usage.retries == 2


@pytest.mark.parametrize(
    ("mode", "error", "words"),
    [
        ("500", EndpointServerError, ["HTTP 500", "2 tries"]),
        ("429", EndpointRateLimitedError, ["HTTP 429", "2 tries"]),
        ("malformed", EndpointResponseError, ["not a chat completion"]),
        ("no-choices", EndpointResponseError, ["without choices"]),
        ("bad-json", EndpointResponseError, ["malformed chat completion"]),
    ],
)
def test_failures_beyond_retries_are_one_line_and_not_cached(server, tmp_path, mode, error, words):
    _faults(server, mode, count=5, retry_after=0.1 if mode == "429" else None)
    requests = _requests(f"fail-{mode}", 1)
    with EndpointClient(_settings(server, max_retries=1), cache_dir=tmp_path) as client:
        with pytest.raises(error) as caught:
            client.complete(requests)
    message = str(caught.value)
    assert "\n" not in message and server in message and all(w in message for w in words), message
    assert isinstance(caught.value, ConceptforgeError) and caught.value.exit_code == 2
    assert _rows(tmp_path) == 0  # the error was not cached
    _faults(server, "clear")
    with EndpointClient(_settings(server), cache_dir=tmp_path) as client:
        [response] = client.complete(requests)
        assert client.usage.requests == 1  # asked again: nothing wrong had been kept
    assert response["choices"][0]["message"]["content"] == f"echo: fail-{mode} question 0"


def test_a_retry_after_beyond_patience_is_not_waited_for(server, tmp_path):
    _faults(server, "429", count=1, retry_after=3600)
    with EndpointClient(_settings(server), cache_dir=tmp_path) as client:
        with pytest.raises(EndpointRateLimitedError) as caught:
            client.complete(_requests("patience", 1))
    assert "1 try" in str(caught.value) and "3600 s" in str(caught.value), str(caught.value)
    assert [e["status"] for e in _events(server, {"patience question 0"})] == [429]


def test_retry_after_as_seconds_milliseconds_or_a_date():
    from email.utils import formatdate

    from conceptforge.loaders.harness.endpoint_client import _retry_after

    assert _retry_after({"retry-after": "2"}) == 2.0
    assert _retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    in_a_minute = _retry_after({"retry-after": formatdate(time.time() + 60, usegmt=True)})
    assert 55 <= in_a_minute <= 60
    assert _retry_after({"retry-after": "soon"}) is None and _retry_after({}) is None


def test_a_failed_run_keeps_what_was_answered_and_resumes(server, tmp_path):
    _faults(server, "500", count=50, skip=3)  # three answers, then the server breaks for good
    requests = _requests("partial", 6)
    settings = _settings(server, max_concurrency=1, max_retries=1)
    with EndpointClient(settings, cache_dir=tmp_path) as client:
        with pytest.raises(EndpointServerError):
            client.complete(requests)
        assert client.usage.requests == 3
    assert _rows(tmp_path) == 3
    _faults(server, "clear")
    with EndpointClient(settings, cache_dir=tmp_path) as client:
        responses = client.complete(requests)
        assert client.usage.requests == 3 and client.usage.cache_hits == 3
    assert [r["choices"][0]["message"]["content"] for r in responses] == [
        f"echo: partial question {i}" for i in range(6)
    ]
    answered = [e["prompt"] for e in _events(server, {f"partial question {i}" for i in range(6)}) if e["status"] == 200]
    assert sorted(answered) == sorted(f"partial question {i}" for i in range(6))  # none answered twice


def test_concurrency_is_bounded(tmp_path):
    process, url = _start_server("--latency-ms", "100")
    try:
        with EndpointClient(_settings(url, max_concurrency=3), cache_dir=tmp_path) as client:
            client.complete(_requests("bounded", 12))
        stats = _control(url, "/_stats")
        # 12 requests of 100 ms: the server held several at once, never more than 3
        assert 2 <= stats["max_in_flight"] <= 3, stats["max_in_flight"]
    finally:
        _stop(process)


def test_a_server_without_a_models_route(tmp_path, caplog):
    process, url = _start_server("--no-models-route")
    try:
        with EndpointClient(_settings(url, max_retries=1), cache_dir=tmp_path) as client:
            [response] = client.complete(_requests("no-models", 1))
            assert client.identity()["id"] == MODEL
        assert response["choices"][0]["message"]["content"] == "echo: no-models question 0"
        assert "no /models route" in caplog.text
        wrong = EndpointSettings(base_url=url, model="gpt-imaginary", max_retries=1)
        with EndpointClient(wrong, cache_dir=tmp_path) as client:
            with pytest.raises(ModelNotServedError) as caught:
                client.complete(_requests("no-models", 1))
        message = str(caught.value)
        assert "\n" not in message and "HTTP 404" in message and "'gpt-imaginary'" in message, message
    finally:
        _stop(process)


def test_a_server_that_never_answers_times_out(server, tmp_path):
    _faults(server, "hang", count=2)
    with EndpointClient(_settings(server, timeout_s=0.5, max_retries=1), cache_dir=tmp_path) as client:
        with pytest.raises(EndpointUnreachableError) as caught:
            client.complete(_requests("hang", 1))
    message = str(caught.value)
    assert "\n" not in message and server in message and "--endpoint-timeout" in message, message
    assert [e["status"] for e in _events(server, {"hang question 0"})] == ["hang", "hang"]
    assert _rows(tmp_path) == 0


def test_timeouts_are_retried_at_most_twice(server, tmp_path):
    _faults(server, "hang", count=10)
    with EndpointClient(_settings(server, timeout_s=0.3, max_retries=6), cache_dir=tmp_path) as client:
        with pytest.raises(EndpointUnreachableError, match="3 tries"):
            client.complete(_requests("hang-long", 1))
    assert [e["status"] for e in _events(server, {"hang-long question 0"})] == ["hang"] * 3


def test_nobody_listening_is_one_line(tmp_path):
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago and has no listener
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with EndpointClient(_settings(url, max_retries=1), cache_dir=tmp_path) as client:
        with pytest.raises(EndpointUnreachableError) as caught:
            client.complete(_requests("nobody", 1))
    assert "\n" not in str(caught.value) and url in str(caught.value)


def test_a_model_the_server_does_not_serve(server, tmp_path):
    settings = EndpointSettings(base_url=server, model="gpt-imaginary", max_retries=1)
    with EndpointClient(settings, cache_dir=tmp_path) as client:
        with pytest.raises(ModelNotServedError) as caught:
            client.complete(_requests("unknown-model", 1))
    message = str(caught.value)
    assert "\n" not in message and "'gpt-imaginary'" in message and f"it serves: {MODEL}" in message, message
    assert _events(server, {"unknown-model question 0"}) == []


def test_the_key_comes_from_the_environment_and_never_leaks(keyed_server, tmp_path, monkeypatch, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    wrong = "sk-wrong-0000-ALSO-SECRET"
    monkeypatch.setenv(KEY_ENV, wrong)
    with EndpointClient(_settings(keyed_server, api_key_env=KEY_ENV), cache_dir=tmp_path / "wrong") as client:
        with pytest.raises(EndpointAuthError) as caught:
            client.complete(_requests("key", 2))
    message = str(caught.value)
    assert "\n" not in message and KEY_ENV in message and "401" in message and wrong not in message, message

    monkeypatch.setenv(KEY_ENV, SECRET)
    settings = _settings(keyed_server, api_key_env=KEY_ENV)
    _faults(keyed_server, "500", count=1)  # a retry is logged too
    with EndpointClient(settings, cache_dir=tmp_path / "right") as client:
        responses = client.complete(_requests("key", 2))
        recorded = json.dumps({"record": client.record(), "responses": responses})
        assert client.record()["settings"]["api_key_env"] == KEY_ENV
    assert [r["choices"][0]["message"]["content"] for r in responses] == [
        "echo: key question 0",
        "echo: key question 1",
    ]
    captured = capfd.readouterr()
    for secret in (wrong, SECRET):
        assert secret not in recorded and secret not in caplog.text
        assert secret not in captured.out and secret not in captured.err
        for path in tmp_path.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path

    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(EndpointAuthError, match=f"{KEY_ENV} .* is not set"):
        EndpointClient(settings, cache_dir=tmp_path)


def test_the_budget_is_refused_before_anything_is_sent(server, tmp_path):
    requests = _requests("budget", 5)
    with EndpointClient(_settings(server, max_requests=3), cache_dir=tmp_path) as client:
        with pytest.raises(RequestBudgetError) as caught:
            client.complete(requests)
        assert _events(server, {f"budget question {i}" for i in range(5)}) == []
        assert str(caught.value).count("--max-requests 3") == 1 and "needs 5 requests" in str(caught.value)
        client.complete(requests[:3])  # within the budget
    # cached answers do not count: 3 cached + 2 new fits a budget of 2
    with EndpointClient(_settings(server, max_requests=2), cache_dir=tmp_path) as client:
        assert client.plan(requests) == 2
        client.complete(requests)
        with pytest.raises(RequestBudgetError, match="2 already sent"):
            client.complete(_requests("budget-more", 1))


def _png(colour: int) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (colour, 0, 0)).save(buffer, format="PNG")
    return buffer.getvalue()


def _image_request(data: bytes, *, wrap: bool = False, seed: int | None = 0) -> ChatRequest:
    text = base64.b64encode(data).decode()
    if wrap:  # the same bytes, base64 written with line breaks (what some encoders do)
        text = "\n".join(text[i : i + 16] for i in range(0, len(text), 16))
    content = [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{text}"}},
        {"type": "text", "text": "Is there a bird?"},
    ]
    return ChatRequest(messages=({"role": "user", "content": content},), seed=seed)


def test_the_key_hashes_image_bytes_and_every_setting():
    endpoint = {"base_url": "http://x/v1", "id": MODEL}
    red, blue = _png(255), _png(10)
    assert request_key(endpoint, _image_request(red)) == request_key(endpoint, _image_request(red, wrap=True))
    assert request_key(endpoint, _image_request(red)) != request_key(endpoint, _image_request(blue))
    assert request_key(endpoint, _image_request(red)) != request_key(endpoint, _image_request(red, seed=1))
    assert request_key(endpoint, _image_request(red)) != request_key({**endpoint, "root": "other"}, _image_request(red))
    base = _requests("k", 1)[0]
    variants = [
        ChatRequest(messages=base.messages, max_tokens=2),
        ChatRequest(messages=base.messages, temperature=0.5),
        ChatRequest(messages=base.messages, logprobs=True, top_logprobs=5),
        ChatRequest(messages=base.messages, extra_body=(("logprob_token_ids", (1, 2)),)),
    ]
    assert len({request_key(endpoint, r) for r in [base, *variants]}) == 5


def test_images_and_logprobs_reach_the_server(server, tmp_path):
    request = _image_request(_png(40))
    request = ChatRequest(messages=request.messages, logprobs=True, top_logprobs=3)
    with EndpointClient(_settings(server), cache_dir=tmp_path) as client:
        [response] = client.complete([request])
    assert response["choices"][0]["message"]["content"] == "echo: Is there a bird?"
    assert [t["token"] for t in response["choices"][0]["logprobs"]["content"][0]["top_logprobs"]] == ["t0", "t1", "t2"]
    # the cache holds the answer, not the image's base64
    with sqlite3.connect(tmp_path / RESPONSES_FILE) as db:
        [(text,)] = db.execute("SELECT response FROM responses").fetchall()
    assert base64.b64encode(_png(40)).decode()[:40] not in text


CLIENT_SCRIPT = """
import json, sys
from conceptforge.loaders.harness.endpoint_client import ChatRequest, EndpointClient, EndpointSettings
url, cache, n, out, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
requests = [ChatRequest(messages=({"role": "user", "content": f"bulk question {i}"},)) for i in range(n)]
with EndpointClient(EndpointSettings(url, "tiny-vlm", max_concurrency=concurrency), cache_dir=cache) as client:
    responses = client.complete(requests)
    usage = client.usage.to_dict()
with open(out, "w") as handle:
    json.dump({"responses": responses, "usage": usage}, handle)
"""


def _client_process(url: str, cache: Path, n: int, out: Path, concurrency: int = 4) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CLIENT_SCRIPT, url, str(cache), str(n), str(out), str(concurrency)],
        env={**os.environ, "CONCEPTFORGE_DISABLE_PROGRESS_BARS": "1"},
    )


def test_kill_9_then_rerun_equals_a_clean_run_and_reasks_nothing_answered(tmp_path):
    process, url = _start_server("--latency-ms", "30")
    try:
        n = 120
        killed = _client_process(url, tmp_path / "cache", n, tmp_path / "killed.json")
        deadline = time.monotonic() + 120
        while _committed(tmp_path / "cache") < 20:  # wait for answers on disk, not for a time
            assert killed.poll() is None and time.monotonic() < deadline, "the client ended before it could be killed"
            time.sleep(0.05)
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        with sqlite3.connect(tmp_path / "cache" / RESPONSES_FILE) as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            kept = [json.loads(text) for (text,) in db.execute("SELECT response FROM responses")]
        answered = {r["choices"][0]["message"]["content"].removeprefix("echo: ") for r in kept}
        assert 20 <= len(answered) < n
        before = len(_events(url))

        resumed = _client_process(url, tmp_path / "cache", n, tmp_path / "resumed.json")
        clean = _client_process(url, tmp_path / "clean-cache", n, tmp_path / "clean.json")
        assert resumed.wait(timeout=300) == 0 and clean.wait(timeout=300) == 0
        resumed_out = json.loads((tmp_path / "resumed.json").read_text())
        clean_out = json.loads((tmp_path / "clean.json").read_text())
        assert resumed_out["responses"] == clean_out["responses"]
        assert resumed_out["usage"]["cache_hits"] == len(answered)
        assert resumed_out["usage"]["requests"] == n - len(answered)
        # after the kill, an answered prompt reaches the server once: from the clean run, never the resumed one
        later = [e["prompt"] for e in _events(url)[before:]]
        assert all(later.count(p) == 1 for p in answered), "the resumed run re-asked an answered request"
    finally:
        _stop(process)


def test_two_processes_share_one_cache(tmp_path):
    """Two runs at once on one cache: each of the n distinct requests reaches the server once
    (EP42: 381 requests for 241 distinct bodies before claims), and what one process did not send
    it read back from the other's answers."""
    process, url = _start_server("--latency-ms", "30")
    try:
        n = 80
        first = _client_process(url, tmp_path / "cache", n, tmp_path / "a.json", concurrency=3)
        second = _client_process(url, tmp_path / "cache", n, tmp_path / "b.json", concurrency=3)
        assert first.wait(timeout=300) == 0 and second.wait(timeout=300) == 0
        a = json.loads((tmp_path / "a.json").read_text())
        b = json.loads((tmp_path / "b.json").read_text())
        assert a["responses"] == b["responses"]
        assert [r["choices"][0]["message"]["content"] for r in a["responses"]] == [
            f"echo: bulk question {i}" for i in range(n)
        ]
        with sqlite3.connect(tmp_path / "cache" / RESPONSES_FILE) as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == n
        with EndpointClient(EndpointSettings(url, MODEL), cache_dir=tmp_path / "cache") as client:
            assert client.plan(_requests("bulk", n)) == 0
        prompts = [e["prompt"] for e in _events(url)]
        assert sorted(prompts) == sorted(f"bulk question {i}" for i in range(n))  # n received for n bodies
        # every request was sent by one of the two and read back by the other
        assert a["usage"]["requests"] + b["usage"]["requests"] == n
        assert (
            a["usage"]["requests"] + a["usage"]["cache_hits"] == n == b["usage"]["requests"] + b["usage"]["cache_hits"]
        )
    finally:
        _stop(process)


def test_the_command_line_prints_one_line_and_exits_2(server, tmp_path, capsys):
    from conceptforge.cli import run_cli

    def main(_argv):
        with EndpointClient(EndpointSettings(server, "gpt-imaginary", max_retries=0), cache_dir=tmp_path) as client:
            client.complete(_requests("cli", 1))

    assert run_cli(main, []) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the endpoint ") and err.count("\n") == 1, err


def test_a_plain_web_server_is_refused_at_once_not_retried(single_object_dir, tmp_path, capsys):
    """``python -m http.server`` (not OpenAI-compatible) answers POST with 501: that is no passing
    fault, so it is one try and one line saying what the URL should be, not seven tries over a minute."""
    from conceptforge.commands import main

    (tmp_path / "www").mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(tmp_path / "www")],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        line = process.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N (http://127.0.0.1:N/) ..."
        url = f"http://127.0.0.1:{line.split(' port ')[1].split()[0]}/v1"
        started = time.monotonic()
        with EndpointClient(_settings(url, max_retries=6), cache_dir=tmp_path / "cache") as client:
            with pytest.raises(EndpointResponseError) as caught:
                client.complete(_requests("plain", 1))
        assert time.monotonic() - started < 10  # no backoff: 6 retries would wait 0.5+1+2+4+8+16 s
        message = str(caught.value)
        assert "\n" not in message and "HTTP 501" in message and "not an OpenAI-compatible server" in message
        out = tmp_path / "r.json"
        argv = ["evaluate", "--model", f"endpoint:m@{url}", "--tasks", f"binding-clip:{single_object_dir}"]
        assert main([*argv, "--cache-dir", str(tmp_path / "cache"), "--output", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert "not an OpenAI-compatible server" in err[-1] and not any("retry" in e for e in err), err
        assert not out.exists()
        # the filter's own probe must not read the 501 as "no log-probabilities, use vLLM"
        from conceptforge.testing.sub_inputs import make_candidates_dir, make_mini_cub

        candidates, cub = make_candidates_dir(tmp_path / "cands", per_pair=1), make_mini_cub(tmp_path / "cub")
        where = ["--candidates", str(candidates), "--cub-dir", str(cub), "--out", str(tmp_path / "kept")]
        assert main(["filter", "sub", *where, "--vqa-model", f"endpoint:m@{url}"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert "not an OpenAI-compatible server" in err[-1], err
        assert not (tmp_path / "kept").exists()
    finally:
        _stop(process)


def test_choices_that_are_an_object_are_one_line_without_library_warnings(server, tmp_path, capsys):
    """EP06: the line came after three lines of pydantic's UserWarning (serializer: expected a list)."""
    import warnings

    from conceptforge.cli import run_cli

    _faults(server, "object-choices", count=1)

    def main(_argv):
        with EndpointClient(_settings(server, max_retries=0), cache_dir=tmp_path) as client:
            client.complete(_requests("object-choices", 1))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_cli(main, []) == 2
    assert [str(w.message) for w in caught] == []
    err = capsys.readouterr().err
    assert err == (
        f"error: the endpoint {server} answered a chat completion whose choices is an object, not a list; "
        "is it an OpenAI-compatible /v1 URL?\n"
    ), err


def _free_port_url() -> str:
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago and has no listener
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # EP25/EP30: a refused connection; written by hand from the URL
        (None, "nothing listens at {url} (connection refused); start the server there or fix the URL"),
        # EP32/EP34: .invalid never resolves (RFC 2606)
        (
            "http://no-such-host.invalid:8000/v1",
            "cannot resolve host no-such-host.invalid of the endpoint {url}; fix the host name in the URL",
        ),
    ],
)
def test_a_wrong_address_is_said_at_once_not_retried(tmp_path, caplog, url, expected):
    """Six retries (about 30 s) with advice to raise the timeout became one try and the cause."""
    url = url or _free_port_url()
    caplog.set_level(logging.WARNING, logger="conceptforge")
    with EndpointClient(_settings(url, max_retries=6), cache_dir=tmp_path) as client:
        with pytest.raises(EndpointUnreachableError) as caught:
            client.complete(_requests("wrong-address", 1))
    assert str(caught.value) == expected.format(url=url)
    assert not [r for r in caplog.records if "retry" in r.getMessage()]  # no backoff was started
    assert _committed(tmp_path) == 0


def test_a_401_without_a_key_names_the_variable_to_set(keyed_server, tmp_path):
    """EP16: the generic endpoint reads its key from CONCEPTFORGE_ENDPOINT_KEY; the line says so."""
    with EndpointClient(_settings(keyed_server, api_key_env=None), cache_dir=tmp_path) as client:
        with pytest.raises(EndpointAuthError) as caught:
            client.complete(_requests("no-key", 1))
    message = str(caught.value)
    assert message.startswith(f"the endpoint {keyed_server} answered HTTP 401: no key was sent; ")
    assert "export CONCEPTFORGE_ENDPOINT_KEY=" in message and "\n" not in message


CLAIM_SCRIPT = """
import sys, time
from conceptforge.loaders.harness.endpoint_cache import ResponseCache
from conceptforge.loaders.harness.endpoint_client import EndpointClient, EndpointSettings
from tests.harness.test_endpoint_client import _requests
url, cache, n, answer = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "answer"
with EndpointClient(EndpointSettings(url, "tiny-vlm"), cache_dir=cache) as client:
    keys = client.keys(_requests("claimed", n))
    held = ResponseCache(cache)
    held.claim(keys, lease_s=3600)  # an hour: only the owner's death or its answers free them
    print("claimed", flush=True)
    if answer:
        sys.stdin.readline()  # the test says when: the other process is waiting by then
        with EndpointClient(EndpointSettings(url, "tiny-vlm"), cache_dir=None) as asker:  # the held claims are ours
            for key, response in zip(keys, asker.complete(_requests("claimed", n))):
                held.put(key, response)
        print("answered", flush=True)
    else:
        time.sleep(3600)  # killed with -9 here, its claims left behind
"""


def _claimer(url: str, cache: Path, n: int, answer: bool) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-c", CLAIM_SCRIPT, url, str(cache), str(n), "answer" if answer else "hold"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "CONCEPTFORGE_DISABLE_PROGRESS_BARS": "1"},
    )
    assert process.stdout.readline().strip() == "claimed"
    return process


def test_a_claim_of_a_live_process_is_waited_for_and_a_dead_ones_taken_over(tmp_path):
    """EP42, the two halves of a claim: requests another live process claimed are not sent again
    (their answers are read when they land); claims left by a process killed with -9 are taken
    over at once (their lease of an hour would otherwise hold the run)."""
    process, url = _start_server()
    try:
        n = 5
        # a live owner: this client waits, the owner answers (5 requests), this client sends none
        owner = _claimer(url, tmp_path / "live", n, answer=True)
        script = "import logging; logging.basicConfig(level=logging.INFO)\n" + CLIENT_SCRIPT.replace(
            "bulk question", "claimed question"
        )
        waiting = subprocess.Popen(
            [sys.executable, "-c", script, url, str(tmp_path / "live"), str(n), str(tmp_path / "w.json"), "4"],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "CONCEPTFORGE_DISABLE_PROGRESS_BARS": "1"},
        )
        for line in waiting.stderr:  # it found the claims and waits: only now may the owner answer
            if "waiting for its answers instead of asking again" in line:
                break
        else:
            raise AssertionError("the second process never waited on the claims")
        owner.stdin.write("go\n")
        owner.stdin.flush()
        assert owner.stdout.readline().strip() == "answered" and owner.wait(timeout=120) == 0
        assert waiting.wait(timeout=120) == 0
        usage = json.loads((tmp_path / "w.json").read_text())["usage"]
        assert (usage["requests"], usage["cache_hits"]) == (0, n)
        prompts = [e["prompt"] for e in _events(url) if e["prompt"].startswith("claimed question")]
        assert sorted(prompts) == [f"claimed question {i}" for i in range(n)]  # each asked once, by the owner

        # a dead owner: its claims stand in the table, yet this client sends every request itself
        dead = _claimer(url, tmp_path / "dead", n, answer=False)
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait()
        with sqlite3.connect(tmp_path / "dead" / RESPONSES_FILE) as db:
            assert db.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == n
        with EndpointClient(_settings(url), cache_dir=tmp_path / "dead") as client:
            client.complete(_requests("claimed", n))
            assert (client.usage.requests, client.usage.cache_hits) == (n, 0)
        with sqlite3.connect(tmp_path / "dead" / RESPONSES_FILE) as db:
            assert db.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0  # answered: released
    finally:
        _stop(process)
