"""The annotation web server: standard library ``http.server`` + SQLite, no external assets.

Routes (all JSON except the page, its two assets and images):

- ``GET /`` the page; ``GET /static/app.js`` / ``/static/app.css`` its script and style
- ``GET /api/study`` the study's title, instructions and questions
- ``GET /api/next?annotator=ID`` the annotator's next unanswered item (or ``{"done": true}``)
- ``POST /api/answer`` ``{"annotator", "item_id", "answers", "elapsed_ms"}`` stores one answer and
  returns the next item
- ``GET /api/image/<position>/<slot>`` an image of a sampled item (``image``, ``ref0`` …)

Why these guards: images are addressed by sample position and slot, never by path, so nothing
but the dataset's own embedded images can be read; bodies must declare their length (<= 64 KiB)
and arrive complete before anything is stored, so a browser that disconnects mid-request leaves
no half answer; every answer is validated against the study and the item's own options.
"""

from __future__ import annotations

import errno
import io
import json
import logging
import re
import socket
import struct
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from conceptforge.errors import ConceptforgeError, InvalidArgumentError
from conceptforge.filters.annotation.dataset import AnnotationDataset
from conceptforge.filters.annotation.db import AlreadyAnswered, AnnotationDB
from conceptforge.filters.annotation.sampling import annotator_order
from conceptforge.filters.annotation.studies import Study, display_fields, question_options, validate_answers

logger = logging.getLogger(__name__)

ANNOTATOR_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
MAX_BODY = 64 * 1024
STATIC = {
    "/": ("app.html", "text/html; charset=utf-8"),
    "/index.html": ("app.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class BadRequest(InvalidArgumentError):
    """A request the app refuses; ``status`` is the HTTP answer (a ``ValueError`` by kind)."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class StudyApp:
    """Everything a request needs: the study, its dataset, its sample and its database."""

    study: Study
    dataset: AnnotationDataset
    db: AnnotationDB
    seed: int
    group_values: Mapping[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sample = [item_id for item_id, _ in self.db.sample()]
        self.position = {item_id: i for i, item_id in enumerate(self.sample)}
        self._orders: dict[str, list[str]] = {}
        self._cursors: dict[str, int] = {}  # per annotator: no item before this position is unanswered
        self._payloads: dict[str, dict[str, Any]] = {}  # an item's payload never changes during a study
        self._lock = threading.Lock()
        self._assets = {
            name: resources.files("conceptforge.filters.annotation").joinpath(name).read_bytes()
            for name, _ in STATIC.values()
        }

    # -- payloads -------------------------------------------------------------------------------
    def study_payload(self) -> dict[str, Any]:
        return {
            "name": self.study.name,
            "title": self.study.title,
            "instructions": self.study.instructions,
            "total": len(self.sample),
        }

    def _order(self, annotator: str) -> list[str]:
        with self._lock:
            if annotator not in self._orders:
                self._orders[annotator] = annotator_order(self.sample, seed=self.seed, annotator=annotator)
            return self._orders[annotator]

    def item_payload(self, item_id: str) -> dict[str, Any]:
        payload = self._payloads.get(item_id)
        if payload is None:
            payload = self._payloads[item_id] = self._item_payload(item_id)
        return payload

    def _item_payload(self, item_id: str) -> dict[str, Any]:
        row = self.dataset.rows[item_id]
        position = self.position[item_id]
        fields = display_fields(self.study, row)
        slots = self.study.image_slots(row)
        questions = []
        for question in self.study.questions:
            options = question_options(self.study, question, row, self.group_values)
            questions.append(
                {
                    "id": question.id,
                    "text": question.text.format(**fields),
                    "options": [{"value": o.value, "label": o.label, "key": o.key} for o in options],
                }
            )
        return {
            "item_id": item_id,
            "image": f"/api/image/{position}/image",
            "references": [f"/api/image/{position}/{slot}" for slot in slots if slot != "image"],
            "display": fields,
            "questions": questions,
        }

    def next_payload(self, annotator: str) -> dict[str, Any]:
        # Answers are only ever added (and only for sampled items: a foreign key), so the first
        # unanswered position in the annotator's order never moves back: each request resumes the
        # scan where the last one stopped instead of walking the whole sample.
        answered = self.db.answered_live(annotator)
        order = self._order(annotator)
        first = self._cursors.get(annotator, 0)
        while first < len(order) and order[first] in answered:
            first += 1
        self._cursors[annotator] = first
        following = first + 1
        while following < len(order) and order[following] in answered:
            following += 1
        remaining = order[first : first + 1] + order[following : following + 1]  # the next two
        done = len(answered)
        progress = {"done": done, "total": len(self.sample), "remaining": len(self.sample) - done}
        if not remaining:
            return {"done": True, "progress": progress}
        payload = {"done": False, "progress": progress, "item": self.item_payload(remaining[0])}
        if len(remaining) > 1:  # let the page preload the following images
            upcoming = self.item_payload(remaining[1])
            payload["preload"] = [upcoming["image"], *upcoming["references"]]
        return payload

    def submit(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise BadRequest(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
        annotator = check_annotator(body.get("annotator"))
        item_id = body.get("item_id")
        if not isinstance(item_id, str) or item_id not in self.position:
            raise BadRequest(HTTPStatus.NOT_FOUND, f"item {item_id!r} is not part of this study")
        elapsed = body.get("elapsed_ms")
        if elapsed is not None and (not isinstance(elapsed, int) or isinstance(elapsed, bool) or elapsed < 0):
            raise BadRequest(HTTPStatus.BAD_REQUEST, "elapsed_ms must be a non-negative integer")
        try:
            answers = validate_answers(self.study, body.get("answers"), self.dataset.rows[item_id], self.group_values)
        except ValueError as error:
            raise BadRequest(HTTPStatus.BAD_REQUEST, str(error)) from None
        try:
            self.db.add(annotator, item_id, answers, elapsed_ms=elapsed)
        except AlreadyAnswered:
            raise BadRequest(HTTPStatus.CONFLICT, f"{annotator} already answered {item_id} differently") from None
        return self.next_payload(annotator)

    def image(self, position: str, slot: str) -> tuple[bytes, str]:
        if not position.isdigit() or int(position) >= len(self.sample):
            raise KeyError(position)
        return self.dataset.image_bytes(self.sample[int(position)], slot)


def check_annotator(value: Any) -> str:
    if not isinstance(value, str) or not ANNOTATOR_PATTERN.match(value):
        raise BadRequest(
            HTTPStatus.BAD_REQUEST, "annotator must be 1-64 letters, digits or _.@- (starting with a letter or digit)"
        )
    return value


class _KernelTimeoutReader(io.RawIOBase):
    """Reads of a blocking socket whose idle timeout the kernel enforces (``SO_RCVTIMEO``).

    Why not ``socket.settimeout``: Python then polls before every read and write, two more
    system calls and GIL hand-offs per request, which is what 8 busy handler threads pay for.
    The kernel's timeout surfaces as EAGAIN; it is raised as ``TimeoutError``, exactly what
    ``settimeout`` raised, so ``http.server`` drops the connection the same way.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            return self._sock.recv_into(buffer)
        except BlockingIOError:
            raise TimeoutError("the client sent nothing within the idle timeout") from None


class Handler(BaseHTTPRequestHandler):
    server_version = "conceptforge-annotate"
    protocol_version = "HTTP/1.1"  # keep-alive: one connection per annotator, not per request
    idle_timeout = 60  # a silent client frees its thread after a minute (see setup)
    timeout = None  # not socket.settimeout: see _KernelTimeoutReader
    # Headers and body go out in separate writes; with Nagle on, keep-alive clients wait for the
    # peer's delayed ACK (~40 ms per request on Linux). The benchmark showed it: 44 ms p50 before.
    disable_nagle_algorithm = True
    app: StudyApp  # set on the subclass made by make_server

    # -- plumbing -------------------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        if logger.isEnabledFor(logging.DEBUG):  # called for every request: format only when shown
            logger.debug("%s %s", self.address_string(), format % args)

    def setup(self) -> None:
        super().setup()
        if sys.platform.startswith("linux"):
            timeval = struct.pack("ll", int(self.idle_timeout), 0)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
            self.rfile.close()  # the socket file stdlib made; ours reads the same socket
            self.rfile = io.BufferedReader(_KernelTimeoutReader(self.connection))
        else:  # struct timeval differs elsewhere: Python's own timeout
            self.connection.settimeout(self.idle_timeout)

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionError, TimeoutError, BlockingIOError) as error:  # the browser went away (or stalled)
            logger.debug("client %s disconnected: %s", self.client_address, error)

    def _send(self, status: HTTPStatus, body: bytes, content_type: str, *, cache: str = "no-store") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", cache)
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        if self.request_version == "HTTP/0.9":  # no headers at all (stdlib behaviour)
            self.end_headers()
            self.wfile.write(body if self.command != "HEAD" else b"")
            return
        # Headers and body in one write, not two: each socket write releases and retakes the
        # GIL, and with 8 busy handler threads retaking it is what a request waits for.
        self._headers_buffer.append(b"\r\n")
        if self.command != "HEAD":
            self._headers_buffer.append(body)
        self.flush_headers()

    def _json(self, status: HTTPStatus, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode("utf-8"), "application/json")

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._json(status, {"error": message})

    def _read_body(self) -> Any:
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise BadRequest(HTTPStatus.LENGTH_REQUIRED, "send a Content-Length, not a chunked body")
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            raise BadRequest(HTTPStatus.LENGTH_REQUIRED, "Content-Length is required")
        size = int(length)
        if size > MAX_BODY:
            self.close_connection = True
            raise BadRequest(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"bodies are limited to {MAX_BODY} bytes")
        data = self.rfile.read(size)
        if len(data) < size:  # the client disconnected mid-body: store nothing
            self.close_connection = True
            raise ConnectionResetError("incomplete request body")
        if "application/json" not in (self.headers.get("Content-Type") or ""):
            raise BadRequest(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send application/json")
        try:
            return json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise BadRequest(HTTPStatus.BAD_REQUEST, "the body is not valid JSON") from None

    # -- routes ---------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        url = urlsplit(self.path)
        try:
            if url.path in STATIC:
                name, content_type = STATIC[url.path]
                self._send(HTTPStatus.OK, self.app._assets[name], content_type)
            elif url.path == "/api/study":
                self._json(HTTPStatus.OK, self.app.study_payload())
            elif url.path == "/api/next":
                annotator = check_annotator((parse_qs(url.query).get("annotator") or [None])[0])
                self._json(HTTPStatus.OK, self.app.next_payload(annotator))
            elif url.path.startswith("/api/image/"):
                parts = url.path.split("/")
                if len(parts) != 5:
                    raise BadRequest(HTTPStatus.NOT_FOUND, "no such image")
                try:
                    data, mime = self.app.image(parts[3], parts[4])
                except KeyError:
                    raise BadRequest(HTTPStatus.NOT_FOUND, "no such image") from None
                self._send(HTTPStatus.OK, data, mime, cache="private, max-age=86400")
            elif url.path == "/favicon.ico":
                self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
            else:
                raise BadRequest(HTTPStatus.NOT_FOUND, f"no such page: {url.path}")
        except BadRequest as error:
            self._error(error.status, str(error))

    do_HEAD = do_GET

    def do_POST(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        try:
            if url.path != "/api/answer":
                self.close_connection = True
                raise BadRequest(HTTPStatus.NOT_FOUND, f"no such endpoint: {url.path}")
            body = self._read_body()
            self._json(HTTPStatus.OK, self.app.submit(body))
        except BadRequest as error:
            self._error(error.status, str(error))

    def _not_allowed(self) -> None:
        self.close_connection = True
        self._error(HTTPStatus.METHOD_NOT_ALLOWED, f"{self.command} is not allowed")

    do_PUT = do_DELETE = do_PATCH = _not_allowed


class AnnotationServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.exception("error while serving %s", client_address)


def make_server(app: StudyApp, *, host: str = "127.0.0.1", port: int = 8080) -> AnnotationServer:
    """Bind the server (not yet serving); a port in use is a one-line error."""
    handler = type("BoundHandler", (Handler,), {"app": app})
    try:
        return AnnotationServer((host, port), handler)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise InvalidArgumentError(f"port {port} on {host} is already in use; pick another with --port") from None
        if error.errno == errno.EACCES:
            raise InvalidArgumentError(f"no permission to listen on {host}:{port}; use a port above 1023") from None
        raise ConceptforgeError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None


def server_url(server: AnnotationServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host}:{port}/"


def wait_until_serving(server: AnnotationServer, timeout: float = 5.0) -> None:
    """Block until ``server`` answers (used by tests and the benchmark)."""
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(server_url(server) + "api/study", timeout=1).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
