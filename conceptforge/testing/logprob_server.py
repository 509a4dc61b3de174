"""A small OpenAI-compatible chat server of OUR OWN for tests: one local VLM, token log-probabilities.

Why ours: the probability protocols (``match`` and ``choose`` through an endpoint) need a real
server on 127.0.0.1 that returns token log-probabilities for a tiny random VLM on a CPU, and no
third-party server does that reliably here: ``transformers serve`` refuses ``logprobs`` and
``top_logprobs`` (transformers 5.24), and vLLM's CPU build needs its own 3.4 GB venv and
workarounds to load a vision model at all (shared/REFERENCE.md). This server is test equipment,
not a product: it loads one folder with plain transformers (``AutoModelForImageTextToText`` +
``AutoProcessor``, one forward per request, no batching) and speaks exactly this subset:

* ``GET /v1/models``: one entry ``{id, object, created, owned_by, root}`` (``root`` is the
  folder, as vLLM reports the path a model was loaded from).
* ``POST /v1/chat/completions``: ``model`` (404 when it is not the served name), ``messages``
  whose user content is text and ``image_url`` parts with ``data:`` URLs (base64 PNG/JPEG),
  ``max_tokens`` (greedy decoding; ``temperature`` must be 0 or absent), ``seed`` (ignored:
  greedy), ``logprobs`` + ``top_logprobs`` (at most 20, as OpenAI caps it), and vLLM's
  ``logprob_token_ids`` (the exact log-probabilities of the named ids at each generated
  position, listed in ``top_logprobs`` after the chosen token, in vLLM's response shape) and
  ``return_tokens_as_token_ids`` (tokens written ``token_id:N``). The response is an OpenAI
  ``chat.completion`` with ``system_fingerprint`` (a digest of the served folder) and ``usage``.

Modes that imitate other servers (``--no-logprobs``: refuse ``logprobs`` with 400 like
``transformers serve``; ``--ignore-token-ids``: ignore ``logprob_token_ids`` like OpenAI's own
API) let the tests cover the clients' fallbacks. Log-probabilities are the full-vocabulary
``log_softmax`` of the next-token logits in float32, as vLLM's default ``raw_logprobs``.

Run: ``python -m conceptforge.testing.logprob_server --model DIR --name NAME --port-file F``
(port 0 picks a free port, written to ``--port-file`` once the server listens).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

MAX_TOP_LOGPROBS = 20  # OpenAI's cap on top_logprobs
CREATED = 1_700_000_000  # a fixed "created" date: the served folder does not change under a test


class ServedModel:
    """The one model the server answers with: weights, processor, and the forward it runs."""

    def __init__(self, folder: str, name: str) -> None:
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.folder, self.name = folder, name
        try:
            self.processor = AutoProcessor.from_pretrained(folder, backend="pil")
        except TypeError:  # older transformers: no backend argument
            self.processor = AutoProcessor.from_pretrained(folder)
        self.model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
        self.tokenizer = self.processor.tokenizer
        digest = hashlib.sha256()
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file():
                digest.update(path.name.encode() + path.read_bytes())
        self.fingerprint = "fp_" + digest.hexdigest()[:12]
        self.lock = threading.RLock()  # one request at a time: the model and the fast tokenizer are not thread-safe

    def _inputs(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        from PIL import Image

        chat, images = [], []
        for message in messages:
            content = message.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            parts = []
            for part in content or []:
                if part.get("type") == "text":
                    parts.append({"type": "text", "text": part["text"]})
                elif part.get("type") == "image_url":
                    url = part["image_url"]["url"] if isinstance(part["image_url"], dict) else part["image_url"]
                    if not url.startswith("data:") or ";base64," not in url:
                        raise BadRequest("image_url must be a data: URL with base64 content")
                    data = base64.b64decode(url.split(";base64,", 1)[1])
                    images.append(Image.open(io.BytesIO(data)).convert("RGB"))
                    parts.append({"type": "image"})
                else:
                    raise BadRequest(f"content part type {part.get('type')!r} is not supported")
            chat.append({"role": message.get("role", "user"), "content": parts})
        prompt = self.processor.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        return self.processor(images=images or None, text=prompt, return_tensors="pt")

    def complete(self, messages: list[dict[str, Any]], max_tokens: int) -> tuple[list[int], list[Any], int]:
        """Greedy ``max_tokens`` tokens through ``generate`` (stopping where the model's generation
        config stops): (ids, per-position log-softmax [vocab] of the raw logits, prompt length)."""
        import torch

        # the whole request under the lock: a fast tokenizer used from two threads raises "Already borrowed"
        with self.lock, torch.inference_mode():
            inputs = self._inputs(messages)
            output = self.model.generate(
                **inputs,
                do_sample=False,
                num_beams=1,
                max_new_tokens=max_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                return_dict_in_generate=True,
                output_logits=True,
            )
        prompt = int(inputs["input_ids"].shape[1])
        ids = [int(t) for t in output.sequences[0, prompt:]]
        steps = [torch.log_softmax(logits[0].float(), dim=-1) for logits in output.logits]
        return ids[: len(steps)], steps, prompt


class BadRequest(Exception):
    """A request outside the subset this server speaks: answered 400 with the reason."""


def _entry(tokenizer: Any, token: int, log_prob: float, as_ids: bool) -> dict[str, Any]:
    text = f"token_id:{token}" if as_ids else tokenizer.decode([token])
    return {"token": text, "logprob": log_prob, "bytes": list(text.encode("utf-8"))}


def chat_completion(served: ServedModel, body: dict[str, Any], options: dict[str, bool], number: int) -> dict[str, Any]:
    """The ``chat.completion`` answer to one request (raises :class:`BadRequest`)."""
    if float(body.get("temperature") or 0.0) != 0.0:
        raise BadRequest("this test server decodes greedily: temperature must be 0")
    max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
    want_logprobs = bool(body.get("logprobs"))
    if want_logprobs and options.get("no_logprobs"):
        raise BadRequest("logprobs is not supported by this server")
    top = int(body.get("top_logprobs") or 0)
    if top > MAX_TOP_LOGPROBS:
        raise BadRequest(f"top_logprobs must be at most {MAX_TOP_LOGPROBS}")
    named = None if options.get("ignore_token_ids") else body.get("logprob_token_ids")
    as_ids = bool(body.get("return_tokens_as_token_ids"))
    ids, steps, prompt_tokens = served.complete(body.get("messages") or [], max_tokens)
    tokenizer = served.tokenizer
    content = None
    if want_logprobs:
        content = []
        for token, log_probs in zip(ids, steps):
            if named:  # vLLM: the named ids replace the top-k list
                chosen = [int(t) for t in named]
            else:
                chosen = [int(t) for t in log_probs.topk(top).indices] if top else []
            entry = _entry(tokenizer, token, float(log_probs[token]), as_ids)
            entry["top_logprobs"] = [_entry(tokenizer, t, float(log_probs[t]), as_ids) for t in chosen]
            content.append(entry)
    finish = "length" if len(ids) >= max_tokens else "stop"
    text = tokenizer.decode(ids, skip_special_tokens=True)
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": CREATED,
        "model": served.name,
        "system_fingerprint": served.fingerprint,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish,
                "logprobs": {"content": content} if content is not None else None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(ids),
            "total_tokens": prompt_tokens + len(ids),
        },
    }


def make_handler(served: ServedModel, options: dict[str, bool]) -> type[BaseHTTPRequestHandler]:
    counter = {"requests": 0}
    counter_lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - BaseHTTPRequestHandler's name
            logger.debug(format, *args)

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str, code: str | None = None) -> None:
            self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": code}})

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.rstrip("/") == "/v1/models":
                model = {"id": served.name, "object": "model", "created": CREATED, "owned_by": "conceptforge-testing"}
                self._send(200, {"object": "list", "data": [{**model, "root": served.folder}]})
            else:
                self._error(404, f"no route {self.path}", "NotFoundError")

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._error(404, f"no route {self.path}", "NotFoundError")
                return
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._error(400, "the body is not JSON", "BadRequestError")
                return
            if body.get("model") != served.name:
                self._error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError", "model_not_found")
                return
            with counter_lock:
                counter["requests"] += 1
                number = counter["requests"]
            try:
                with served.lock:
                    payload = chat_completion(served, body, options, number)
                self._send(200, payload)
            except BadRequest as error:
                self._error(400, str(error), "BadRequestError")
            except Exception as error:  # a bug here must read as a server error, not a dropped connection
                logger.exception("request %d failed", number)
                self._error(500, f"{type(error).__name__}: {error}", "InternalServerError")

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="folder of an image-text-to-text model")
    parser.add_argument("--name", default=None, help="served model name (default: the folder)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", default=None, help="write the port here once listening")
    parser.add_argument("--no-logprobs", action="store_true", help="refuse logprobs (as transformers serve)")
    parser.add_argument("--ignore-token-ids", action="store_true", help="ignore logprob_token_ids (as OpenAI)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    served = ServedModel(args.model, args.name or args.model)
    options = {"no_logprobs": args.no_logprobs, "ignore_token_ids": args.ignore_token_ids}
    server = ThreadingHTTPServer((args.host, args.port), make_handler(served, options))
    server.daemon_threads = True
    if args.port_file:
        partial = Path(args.port_file + ".part")
        partial.write_text(str(server.server_address[1]))
        partial.replace(args.port_file)  # atomically: a reader never sees half a number
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


class LogprobServer:
    """The server as a real child process on 127.0.0.1 (tests): ``with LogprobServer(dir) as s: s.base_url``."""

    def __init__(
        self, model: str | Path, *, name: str = "tiny-vlm", extra: tuple[str, ...] = (), timeout: float = 120.0
    ):
        self.model, self.name, self.extra, self.timeout = str(model), name, extra, timeout
        self.process: Any = None
        self.base_url = ""
        self._dir: Any = None

    def __enter__(self) -> LogprobServer:
        import os
        import subprocess
        import sys
        import tempfile

        self._dir = tempfile.TemporaryDirectory()
        port_file = Path(self._dir.name) / "port"
        command = [sys.executable, "-m", "conceptforge.testing.logprob_server", "--model", self.model]
        command += ["--name", self.name, "--port-file", str(port_file), *self.extra]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        self.process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + self.timeout
        while not port_file.is_file():  # poll for the port the server writes once it listens
            if self.process.poll() is not None:
                raise RuntimeError(f"logprob server exited: {self.process.stderr.read()[-2000:]}")
            if time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise TimeoutError("logprob server did not start")
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except Exception:
                self.process.kill()
                self.process.wait()
        if self.process is not None and self.process.stderr is not None:
            self.process.stderr.close()
        if self._dir is not None:
            self._dir.cleanup()


class TransformersServe(LogprobServer):
    """``transformers serve MODEL`` (transformers' own OpenAI-compatible server) as a real child
    process on 127.0.0.1: a third-party server for the by-answer protocols (it refuses
    ``logprobs``). The served name is the folder, as ``transformers serve`` names it."""

    def __enter__(self) -> TransformersServe:
        import os
        import socket
        import subprocess
        import sys
        import urllib.request

        with socket.socket() as probe:  # a free port (transformers serve cannot report one it picked)
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.name = self.model
        command = [str(Path(sys.executable).with_name("transformers")), "serve", self.model, "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--device", "cpu", "--dtype", "float32", *self.extra]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        self._dir = None
        self.process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        deadline = time.monotonic() + self.timeout
        while True:  # poll until /v1/models answers
            if self.process.poll() is not None:
                raise RuntimeError(f"transformers serve exited: {self.process.stderr.read()[-2000:]}")
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise TimeoutError("transformers serve did not start")
            time.sleep(0.2)


if __name__ == "__main__":
    main()
