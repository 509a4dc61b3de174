"""A tiny OpenAI-compatible chat server that injects faults, for the endpoint client's tests.

It is NOT a model: ``/v1/chat/completions`` answers a canned, deterministic completion whose text
is ``echo: <last user text>`` (so a test can tell which request an answer belongs to), with
usage counted in words and, when asked, ``logprobs``. What it is for is misbehaving the way real
servers do, on the real network stack, so the real ``openai`` client meets it unpatched:

* ``POST /_faults`` with ``{"mode": M, "count": N, "retry_after": S, "skip": K}`` makes the N chat
  requests after the next K fail with M: ``429`` (with ``Retry-After: S``), ``500`` (with ``Retry-After`` when S
  is given), ``drop`` (headers and half the body, then the connection is closed), ``hang``
  (never answers until the server stops), ``malformed`` (a 200 whose body is not JSON),
  ``bad-json`` (a 200 labelled JSON that does not parse), ``no-choices`` (a 200 with JSON that
  is no chat completion), ``object-choices`` (a 200 whose ``choices`` is one object, not a list).
* ``--api-key-env NAME``: requests without ``Authorization: Bearer $NAME`` get 401.
* A model name other than ``--model`` gets 404, as vLLM answers it.
* ``--latency-ms``: every answer waits that long (the server answers concurrently); ``/_stats``
  reports the most chat requests it held at once (``max_in_flight``).
* ``--no-models-route``: ``/v1/models`` is 404, as on providers that do not list their models.
* ``GET /_stats``: every chat request seen, with its arrival time (server clock, monotonic), the
  status answered and the echoed prompt — what the tests assert on (retries, Retry-After gaps,
  no repeated request).

Run standalone: ``python -m conceptforge.testing.fault_server [--port N] [--model M] ...``; it
prints its base URL (``http://127.0.0.1:PORT/v1``) on the first line of stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

logger = logging.getLogger(__name__)

MODES = ("429", "500", "drop", "hang", "malformed", "bad-json", "no-choices", "object-choices")
CREATED = 1767225600  # fixed: the answers are byte-identical between runs


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return " ".join(part.get("text", "") for part in content if part.get("type") == "text")
    return ""


def completion(model: str, body: dict[str, Any]) -> dict[str, Any]:
    """The canned answer to ``body``: deterministic in the request, whatever the time or order."""
    prompt = _last_user_text(body.get("messages") or [])
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    text = f"echo: {prompt}"
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": text},
    }
    if body.get("logprobs"):
        top = int(body.get("top_logprobs") or 0)
        choice["logprobs"] = {
            "content": [
                {
                    "token": "echo",
                    "logprob": -0.25,
                    "bytes": None,
                    "top_logprobs": [{"token": f"t{i}", "logprob": -0.25 - i, "bytes": None} for i in range(top)],
                }
            ]
        }
    words = len(json.dumps(body.get("messages")).split())
    return {
        "id": f"chatcmpl-{digest}",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "system_fingerprint": "fp_fault_server",
        "choices": [choice],
        "usage": {
            "prompt_tokens": words,
            "completion_tokens": len(text.split()),
            "total_tokens": words + len(text.split()),
        },
    }


class FaultServer:
    """The server in a background thread; :attr:`url` is its ``/v1`` base URL."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "tiny-vlm",
        api_key: str | None = None,
        latency_ms: float = 0.0,
        models_route: bool = True,
    ) -> None:
        self.models_route = models_route
        self.model = model
        self.api_key = api_key
        self.latency_s = latency_ms / 1000.0
        self.lock = threading.Lock()
        self.faults: deque[tuple[str, float | None] | None] = deque()  # None: answer this one normally
        self.in_flight = 0
        self.max_in_flight = 0
        self.events: list[dict[str, Any]] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                logger.debug("fault server: " + format, *args)

            def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _authorised(self) -> bool:
                if server.api_key is None or self.headers.get("Authorization") == f"Bearer {server.api_key}":
                    return True
                self._json(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
                return False

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path == "/_stats":
                    with server.lock:
                        self._json(200, {"events": list(server.events), "max_in_flight": server.max_in_flight})
                    return
                if self.path.rstrip("/") == "/v1/models" and server.models_route:
                    if not self._authorised():
                        return
                    entry = {
                        "id": server.model,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "fault-server",
                        "root": f"/models/{server.model}",
                        "parent": None,
                        "permission": [{"id": f"modelperm-{time.monotonic_ns()}", "created": int(time.time())}],
                    }
                    self._json(200, {"object": "list", "data": [entry]})
                    return
                self._json(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.path == "/_faults":
                    spec = json.loads(raw or b"{}")
                    with server.lock:
                        if spec.get("mode") == "clear":
                            server.faults.clear()
                        for _ in range(int(spec.get("skip", 0))):
                            server.faults.append(None)
                        if spec.get("mode") in MODES:
                            for _ in range(int(spec.get("count", 1))):
                                server.faults.append((spec["mode"], spec.get("retry_after")))
                    self._json(200, {"queued": len(server.faults)})
                    return
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                arrived = time.monotonic()
                body = json.loads(raw or b"{}")
                prompt = _last_user_text(body.get("messages") or [])
                with server.lock:
                    fault = server.faults.popleft() if server.faults else None
                event = {"t": arrived, "prompt": prompt, "status": None, "fault": fault[0] if fault else None}
                with server.lock:
                    server.events.append(event)
                if not self._authorised():
                    event["status"] = 401
                    return
                if body.get("model") != server.model:
                    event["status"] = 404
                    message = f"The model `{body.get('model')}` does not exist."
                    self._json(404, {"error": {"message": message, "type": "NotFoundError", "code": 404}})
                    return
                if fault is not None:
                    self._fault(event, *fault)
                    return
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if server.latency_s:
                        time.sleep(server.latency_s)
                    event["status"] = 200
                    self._json(200, completion(server.model, body))
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _fault(self, event: dict[str, Any], mode: str, retry_after: float | None) -> None:
                headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
                if mode in ("429", "500"):
                    event["status"] = int(mode)
                    kind = "rate limited" if mode == "429" else "internal error"
                    self._json(int(mode), {"error": {"message": kind}}, headers)
                elif mode == "drop":
                    event["status"] = "drop"
                    data = json.dumps(completion(server.model, {"messages": []})).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                elif mode == "hang":
                    event["status"] = "hang"
                    server.stopping.wait(600)
                    self.close_connection = True
                elif mode == "object-choices":  # one choice where a list of them belongs
                    event["status"] = mode
                    answer = completion(server.model, {"messages": []})
                    self._json(200, {**answer, "choices": answer["choices"][0]})
                elif mode == "no-choices":
                    event["status"] = "no-choices"
                    self._json(200, {"object": "chat.completion", "id": "x", "model": server.model})
                elif mode in ("malformed", "bad-json"):
                    event["status"] = mode
                    data = b"<html>502 Bad Gateway, from a proxy</html>" if mode == "malformed" else b'{"choices": [{'
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html" if mode == "malformed" else "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                # A client killed mid-request (the tests do it) is expected, not worth a traceback.
                logger.debug("fault server: connection from %s ended abruptly", client_address)

        self.httpd = Server((host, port), Handler)
        self.url = f"http://{host}:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="fault-server", daemon=True)

    def start(self) -> FaultServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model", default="tiny-vlm")
    # The key comes from a variable, as the client's does: never on a command line (ps shows it).
    parser.add_argument("--api-key-env", default=None, help="name of the variable holding the key to require")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--no-models-route", action="store_true")
    args = parser.parse_args(argv)
    server = FaultServer(
        host=args.host,
        port=args.port,
        model=args.model,
        api_key=os.environ[args.api_key_env] if args.api_key_env else None,
        latency_ms=args.latency_ms,
        models_route=not args.no_models_route,
    ).start()
    print(server.url, flush=True)
    try:
        server.stopping.wait()
    except KeyboardInterrupt:
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
