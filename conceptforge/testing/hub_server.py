"""A small Hugging Face Hub-compatible HTTP server for tests: reads AND writes, on 127.0.0.1.

The real ``huggingface_hub`` client and plain ``datasets.load_dataset`` are pointed at it with
``HF_ENDPOINT``; nothing in the client is patched. It implements the subset of the Hub API that
versioned dataset publishing and loading use:

writes  ``POST /api/repos/create`` · ``POST /api/validate-yaml`` ·
        ``POST /api/{type}s/{repo}/preupload/{rev}`` · ``POST /{prefix}{repo}.git/info/lfs/objects/batch``
        (basic transfer: the client then ``PUT``\\s each object to ``/_lfs/{oid}`` and ``POST``\\s
        ``/_lfs/verify``) · ``POST /api/{type}s/{repo}/commit/{rev}`` (NDJSON, atomic, ``parentCommit``
        checked; ``create_pr=1`` commits to a new ``refs/pr/N``; a dataset's ``eval.yaml`` and a
        model's ``.eval_results/*.yaml`` are validated as the Hub does and refused with 400 where
        it would flag them) · ``POST /api/{type}s/{repo}/tag/{rev}`` (409 when the tag exists) ·
        ``DELETE /api/{type}s/{repo}/tag/{tag}``
reads   ``GET /api/{type}s/{repo}[/revision/{rev}]`` · ``GET .../refs`` · ``GET .../tree/{rev}[/{path}]``
        · ``GET /api/datasets/{repo}/leaderboard`` (hub_leaderboard.py)
        · ``POST .../paths-info/{rev}`` · ``GET .../commits/{rev}`` ·
        ``HEAD|GET /{prefix}{repo}/resolve/{rev}/{path}`` (with ``Range``)

Storage (content-addressed objects, immutable commits, branches and tags) is :mod:`hub_store`;
the checks of evaluation files are :mod:`hub_validation`.

Failure injection for tests: :meth:`HubServer.fail_next` makes the next N calls of one route
answer an HTTP error or drop the connection mid-request (a "network error").

Run standalone: ``python -m conceptforge.testing.hub_server --root DIR [--port N] [--token T]``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import logging
import os
import re
import secrets
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from conceptforge.testing.hub_store import HubError, HubStore, _entry, _folder
from conceptforge.testing.hub_validation import _metadata_errors, _split_card_yaml

logger = logging.getLogger(__name__)

REPO_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}
LFS_SUFFIXES = (
    ".parquet",
    ".arrow",
    ".png",
    ".jpg",
    ".jpeg",
    ".webp",
    ".bin",
    ".safetensors",
    ".pt",
    ".zip",
    ".gz",
    ".tar",
)
LFS_SIZE_THRESHOLD = 10 * 1024 * 1024
COPY_CHUNK = 1024 * 1024
ROUTES = (
    "create",
    "preupload",
    "lfs-batch",
    "lfs-upload",
    "lfs-verify",
    "commit",
    "tag",
    "resolve",
    "tree",
    "info",
    "leaderboard",
)


@dataclass
class Failure:
    """``mode``: ``status`` (answer ``status``), ``disconnect`` (drop the connection before doing
    anything) or ``lose-response`` (do the work, then drop the connection before answering)."""

    remaining: int
    status: int = 500
    mode: str = "status"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, fmt: str, *args: Any) -> None:  # route through logging, quietly
        logger.debug("%s " + fmt, self.address_string(), *args)

    # -- plumbing -----------------------------------------------------------------------------
    def _read_body_chunks(self):
        """Yield the request body in chunks (Content-Length or chunked transfer encoding)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return
                yield from self._read_exactly(size)
                self.rfile.readline()
        else:
            yield from self._read_exactly(int(self.headers.get("Content-Length") or 0))

    def _read_exactly(self, remaining: int):
        """Yield ``remaining`` bytes of the request body in chunks of at most ``COPY_CHUNK``."""
        while remaining:
            chunk = self.rfile.read(min(remaining, COPY_CHUNK))
            if not chunk:
                raise ConnectionError("client went away")
            remaining -= len(chunk)
            yield chunk

    def _body(self) -> bytes:
        if getattr(self, "_body_cache", None) is None:
            self._body_cache = b"".join(self._read_body_chunks())
        return self._body_cache

    def _json_body(self) -> Any:
        body = self._body()
        if "application/x-www-form-urlencoded" in self.headers.get("Content-Type", ""):
            return {key: (value if key == "paths" else value[-1]) for key, value in parse_qs(body.decode()).items()}
        return json.loads(body or b"{}")

    def _send(
        self, status: int, payload: Any = None, *, headers: dict[str, str] | None = None, body: bytes | None = None
    ) -> None:
        if body is None:
            body = b"" if payload is None else json.dumps(payload).encode()
        if getattr(self, "_lose_response", False):
            self._lose_response = False
            self._drop_connection()
            return
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if payload is not None else "application/octet-stream")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.server.record(self.command, self.path, status)

    def _error(self, error: HubError) -> None:
        # a header is latin-1 and one line: a message quoting a user's text (an eval.yaml value) may be neither
        header = " ".join(error.message.split()).encode("latin-1", "replace").decode("latin-1")
        headers = {"X-Error-Message": header}
        if error.code:
            headers["X-Error-Code"] = error.code
        self._send(error.status, {"error": error.message}, headers=headers)

    def _authorized(self) -> bool:
        expected = self.server.token
        if expected is None:
            return True
        return self.headers.get("Authorization", "") == f"Bearer {expected}"

    def _require_auth(self) -> None:
        if not self._authorized():
            raise HubError(401, "Invalid credentials in Authorization header")

    def _check_read(self, repo_type: str, repo_id: str) -> dict[str, Any]:
        state = self.server.store.load_state(repo_type, repo_id)
        if state["private"] and not self._authorized():
            raise HubError(401, "Repository not found", "RepoNotFound")
        return state

    def _write_refused(self, route: str, repo_type: str, repo_id: str) -> bool:
        """The checks before a write to an existing repository: an injected failure for ``route``
        (True: the request is finished), then the token and read access (raised as the Hub answers)."""
        if self._maybe_fail(route):
            return True
        self._require_auth()
        self._check_read(repo_type, repo_id)
        return False

    def _maybe_fail(self, route: str) -> bool:
        """Apply an injected failure for ``route``; True when the request is finished."""
        failure = self.server.take_failure(route)
        if failure is None:
            return False
        if failure.mode == "lose-response":
            self._lose_response = True
            return False
        if failure.mode == "disconnect":
            # A network error mid-request: take the first part of the body, then drop the line.
            try:
                next(iter(self._read_body_chunks()), None)
            except ConnectionError:
                pass
            self._drop_connection()
            return True
        try:
            self._body()
        except ConnectionError:
            pass
        self._send(failure.status, {"error": f"injected failure ({route})"})
        return True

    def _drop_connection(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(2)
        except OSError:
            pass
        self.server.record(self.command, self.path, 0)

    # -- dispatch -----------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        self._body_cache = None
        self._lose_response = False
        split = urlsplit(self.path)
        self.query = parse_qs(split.query)
        segments = split.path.strip("/").split("/")
        try:
            handled = self._route(segments)
            if not handled:
                raise HubError(404, f"no route for {self.command} {split.path}")
        except HubError as error:
            try:
                if self.command in ("POST", "PUT") and self._body_cache is None:
                    self._body()
            except ConnectionError:
                pass
            self._error(error)
        except (ConnectionError, BrokenPipeError):
            self.close_connection = True

    def _route(self, s: list[str]) -> bool:
        method = self.command
        base = self.server.base_url
        if s[:2] == ["_lfs", "verify"] and method == "POST":
            if self._maybe_fail("lfs-verify"):
                return True
            body = self._json_body()
            if not self.server.store.has_object(body["oid"], body.get("size")):
                raise HubError(404, f"object {body['oid']} not found")
            self._send(200, {"success": True})
            return True
        if s[0] == "_lfs" and len(s) == 2 and method == "PUT":
            if self.query.get("sig", [""])[0] != self.server.upload_secret:
                raise HubError(403, "bad upload signature")
            if self._maybe_fail("lfs-upload"):
                return True
            self._receive_object(s[1])
            return True
        if s[:2] == ["api", "validate-yaml"] and method == "POST":
            body = self._json_body()
            repo_type = body.get("repoType") or "model"
            if repo_type not in ("model", "dataset", "space"):
                raise HubError(400, f"Invalid repoType {repo_type!r}")
            data, error = _split_card_yaml(body.get("content", ""))
            errors = [error] if error else _metadata_errors(data or {}, repo_type)
            if errors:  # the client raises ValueError(response.text) on 400
                self._send(400, {"error": "Invalid metadata in README.md.\n" + "\n".join(f"- {e}" for e in errors)})
            else:
                warnings = [] if data else [{"message": "Empty or missing yaml metadata in repo card"}]
                self._send(200, {"errors": [], "warnings": warnings})
            return True
        if s[:3] == ["api", "repos", "create"] and method == "POST":
            if self._maybe_fail("create"):
                return True
            self._require_auth()
            body = self._json_body()
            repo_type = body.get("type") or "model"
            repo_id = f"{body['organization']}/{body['name']}" if body.get("organization") else f"user/{body['name']}"
            private = bool(body.get("private")) or body.get("visibility") == "private"
            url = f"{base}/{URL_PREFIX[repo_type]}{repo_id}"
            if not self.server.store.create_repo(repo_type, repo_id, private):
                self._send(409, {"error": f"You already created this {repo_type} repo", "url": url})
            else:
                self._send(200, {"url": url, "name": repo_id, "id": repo_id})
            return True
        if s[0] == "api" and len(s) >= 4 and s[1] in REPO_TYPES:
            return self._api_repo(REPO_TYPES[s[1]], f"{s[2]}/{s[3]}", s[4:])
        # /{prefix}{repo}.git/info/lfs/objects/batch and /{prefix}{repo}/resolve/{rev}/{path}
        repo_type = "model"
        rest = s
        if s[0] in ("datasets", "spaces"):
            repo_type, rest = REPO_TYPES[s[0]], s[1:]
        if len(rest) >= 6 and rest[1].endswith(".git") and rest[2:] == ["info", "lfs", "objects", "batch"]:
            if self._maybe_fail("lfs-batch"):
                return True
            self._require_auth()
            self._lfs_batch(repo_type, f"{rest[0]}/{rest[1][:-4]}")
            return True
        if len(rest) >= 5 and rest[2] == "resolve" and method in ("GET", "HEAD"):
            if self._maybe_fail("resolve"):
                return True
            self._resolve(repo_type, f"{rest[0]}/{rest[1]}", unquote(rest[3]), unquote("/".join(rest[4:])))
            return True
        return False

    def _api_repo(self, repo_type: str, repo_id: str, rest: list[str]) -> bool:
        store, method = self.server.store, self.command
        if repo_type == "dataset" and rest == ["leaderboard"] and method == "GET":
            from conceptforge.testing.hub_leaderboard import leaderboard

            if not self._maybe_fail("leaderboard"):
                self._check_read(repo_type, repo_id)
                entries = leaderboard(store, self.server.book, repo_id)
                if entries is None:
                    raise HubError(404, f"{repo_id} has no leaderboard: it declares no eval.yaml", "EntryNotFound")
                self._send(200, entries)
            return True
        if not rest or (rest[0] == "revision" and len(rest) >= 2):
            if method != "GET":
                return False
            if self._maybe_fail("info"):
                return True
            state = self._check_read(repo_type, repo_id)
            revision = unquote("/".join(rest[1:])) if rest else "main"
            oid = store.resolve(repo_type, repo_id, revision)
            commit = store.load_commit(repo_type, repo_id, oid)
            card_data = None
            if "README.md" in commit["files"]:
                card_data, _ = _split_card_yaml(store.object_path(commit["files"]["README.md"]["sha256"]).read_text())
            self._send(
                200,
                {
                    "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
                    "id": repo_id,
                    "author": repo_id.split("/")[0],
                    "sha": oid,
                    "lastModified": commit["date"],
                    "createdAt": state["created"],
                    "private": state["private"],
                    "gated": False,
                    "disabled": False,
                    "tags": [],
                    "cardData": card_data or None,
                    "siblings": [{"rfilename": path} for path in sorted(commit["files"])],
                },
            )
            return True
        action = rest[0]
        if action == "refs" and method == "GET":
            state = self._check_read(repo_type, repo_id)
            self._send(
                200,
                {
                    "branches": [
                        {"name": n, "ref": f"refs/heads/{n}", "targetCommit": o}
                        for n, o in sorted(state["branches"].items())
                        if not n.startswith("refs/pr/")
                    ],
                    "tags": [
                        {"name": n, "ref": f"refs/tags/{n}", "targetCommit": t["oid"]}
                        for n, t in sorted(state["tags"].items())
                    ],
                    "converts": [],
                    "pullRequests": [
                        {"name": p["branch"], "ref": p["branch"], "targetCommit": state["branches"][p["branch"]]}
                        for _, p in sorted(state.get("pulls", {}).items(), key=lambda item: int(item[0]))
                    ],
                },
            )
            return True
        if action == "tree" and method == "GET" and len(rest) >= 2:
            if self._maybe_fail("tree"):
                return True
            self._check_read(repo_type, repo_id)
            oid = store.resolve(repo_type, repo_id, unquote(rest[1]))
            commit = store.load_commit(repo_type, repo_id, oid)
            path = unquote("/".join(rest[2:])).strip("/")
            recursive = self.query.get("recursive", ["false"])[0].lower() in ("1", "true")
            expand = self.query.get("expand", ["false"])[0].lower() in ("1", "true")
            self._send(200, self._tree(commit, path, recursive=recursive, expand=expand))
            return True
        if action == "paths-info" and method == "POST" and len(rest) >= 2:
            self._check_read(repo_type, repo_id)
            oid = store.resolve(repo_type, repo_id, unquote(rest[1]))
            commit = store.load_commit(repo_type, repo_id, oid)
            body = self._json_body()
            paths = body.get("paths", [])
            paths = [paths] if isinstance(paths, str) else paths
            expand = str(body.get("expand", "false")).lower() in ("1", "true")
            found = []
            for path in paths:
                path = path.strip("/")
                if path in commit["files"]:
                    found.append(_entry(path, commit["files"][path], commit if expand else None))
                elif any(name.startswith(path + "/") for name in commit["files"]) or path == "":
                    found.append(_folder(path, commit if expand else None))
            self._send(200, found)
            return True
        if action == "commits" and method == "GET" and len(rest) >= 2:
            self._check_read(repo_type, repo_id)
            oid = store.resolve(repo_type, repo_id, unquote(rest[1]))
            history = []
            while oid:
                commit = store.load_commit(repo_type, repo_id, oid)
                history.append(
                    {
                        "id": commit["id"],
                        "title": commit["title"],
                        "message": commit["message"],
                        "date": commit["date"],
                        "authors": [{"user": "conceptforge-test"}],
                    }
                )
                oid = commit["parents"][0] if commit["parents"] else None
            self._send(200, history)
            return True
        if action == "preupload" and method == "POST" and len(rest) >= 2:
            if self._write_refused("preupload", repo_type, repo_id):
                return True
            oid = store.resolve(repo_type, repo_id, unquote(rest[1]))
            files = store.load_commit(repo_type, repo_id, oid)["files"]
            answer = []
            for item in self._json_body().get("files", []):
                sample = base64.b64decode(item.get("sample", ""))
                lfs = (
                    item["path"].lower().endswith(LFS_SUFFIXES)
                    or item.get("size", 0) > LFS_SIZE_THRESHOLD
                    or b"\0" in sample
                )
                existing = files.get(item["path"])
                remote = None
                if existing is not None:
                    remote = existing["sha256"] if existing["lfs"] else existing["oid"]
                answer.append(
                    {
                        "path": item["path"],
                        "uploadMode": "lfs" if lfs else "regular",
                        "shouldIgnore": False,
                        "oid": remote,
                    }
                )
            self._send(200, {"files": answer, "commitOid": oid})
            return True
        if action == "commit" and method == "POST" and len(rest) >= 2:
            if self._write_refused("commit", repo_type, repo_id):
                return True
            lines = [json.loads(line) for line in self._body().splitlines() if line.strip()]
            header = next((line["value"] for line in lines if line["key"] == "header"), {})
            operations = [(line["key"], line["value"]) for line in lines if line["key"] != "header"]
            pull_request = self.query.get("create_pr", ["0"])[0].lower() in ("1", "true")
            oid = store.commit(
                repo_type, repo_id, unquote(rest[1]), header=header, operations=operations, pull_request=pull_request
            )
            self.server.commits_made += 1
            url = f"{self.server.base_url}/{URL_PREFIX[repo_type]}{repo_id}/commit/{oid}"
            pr_url = None
            if pull_request:
                number = len(store.load_state(repo_type, repo_id)["pulls"])
                pr_url = f"{self.server.base_url}/{URL_PREFIX[repo_type]}{repo_id}/discussions/{number}"
            self._send(
                200, {"success": True, "commitOid": oid, "commitUrl": url, "hookOutput": "", "pullRequestUrl": pr_url}
            )
            return True
        if action == "tag" and len(rest) >= 2:
            if method == "POST":
                if self._write_refused("tag", repo_type, repo_id):
                    return True
                body = self._json_body()
                store.create_tag(repo_type, repo_id, unquote(rest[1]), body["tag"], body.get("message") or "")
                self._send(200, {})
                return True
            if method == "DELETE":
                self._require_auth()
                store.delete_tag(repo_type, repo_id, unquote(rest[1]))
                self._send(200, {})
                return True
        return False

    def _tree(self, commit: dict[str, Any], path: str, *, recursive: bool, expand: bool) -> list[dict[str, Any]]:
        files = commit["files"]
        prefix = f"{path}/" if path else ""
        if path and path in files:
            raise HubError(404, f"{path} is a file, not a directory", "EntryNotFound")
        names = [name for name in sorted(files) if name.startswith(prefix)]
        if path and not names:
            raise HubError(404, f"{path} does not exist", "EntryNotFound")
        out: list[dict[str, Any]] = []
        folders: set[str] = set()
        last = commit if expand else None
        for name in names:
            parts = name[len(prefix) :].split("/")
            for depth in range(1, len(parts)):
                folder = prefix + "/".join(parts[:depth])
                if folder not in folders and (recursive or depth == 1):
                    folders.add(folder)
                    out.append(_folder(folder, last))
            if recursive or len(parts) == 1:
                out.append(_entry(name, files[name], last))
        return out

    def _lfs_batch(self, repo_type: str, repo_id: str) -> None:
        self._check_read(repo_type, repo_id)
        body = self._json_body()
        objects = []
        for obj in body.get("objects", []):
            entry = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
            if not self.server.store.has_object(obj["oid"], obj["size"]):
                entry["actions"] = {
                    "upload": {
                        "href": f"{self.server.base_url}/_lfs/{obj['oid']}?sig={self.server.upload_secret}",
                        "header": {},
                    },
                    "verify": {"href": f"{self.server.base_url}/_lfs/verify", "header": {}},
                }
            objects.append(entry)
        self._send(200, {"transfer": "basic", "objects": objects})

    def _receive_object(self, oid: str) -> None:
        """Stream an uploaded object to disk while hashing it (memory stays flat)."""
        store = self.server.store
        digest = hashlib.sha256()
        fd, tmp = tempfile.mkstemp(dir=store.root / "tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                for chunk in self._read_body_chunks():
                    digest.update(chunk)
                    handle.write(chunk)
            if digest.hexdigest() != oid:
                raise HubError(400, f"uploaded content does not match oid {oid}")
            os.replace(tmp, store.object_path(oid))
        finally:
            Path(tmp).unlink(missing_ok=True)
        self._send(200, {})

    def _resolve(self, repo_type: str, repo_id: str, revision: str, path: str) -> None:
        store = self.server.store
        self._check_read(repo_type, repo_id)
        oid = store.resolve(repo_type, repo_id, revision)
        commit = store.load_commit(repo_type, repo_id, oid)
        record = commit["files"].get(path)
        if record is None:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound")
        size = record["size"]
        etag = record["sha256"] if record["lfs"] else record["oid"]
        headers = {"X-Repo-Commit": oid, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        if record["lfs"]:
            headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(size)})
        start, end, status = 0, size - 1, 200
        match = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", "") or "")
        if match and size:
            if match.group(1):
                start = int(match.group(1))
                end = min(int(match.group(2)), size - 1) if match.group(2) else size - 1
            else:
                start = max(0, size - int(match.group(2)))
            if start > end:
                self._send(416, {"error": "range not satisfiable"}, headers={"Content-Range": f"bytes */{size}"})
                return
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        length = max(0, end - start + 1)
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if self.command == "GET" and length:
            with open(store.object_path(record["sha256"]), "rb") as handle:
                handle.seek(start)
                remaining = length
                while remaining:
                    chunk = handle.read(min(remaining, COPY_CHUNK))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    remaining -= len(chunk)
        self.server.record(self.command, self.path, status)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], store: HubStore, token: str | None) -> None:
        super().__init__(address, _Handler)
        self.store = store
        self.token = token
        self.upload_secret = secrets.token_hex(8)
        self.failures: dict[str, Failure] = {}
        self.failure_lock = threading.Lock()
        self.requests: list[tuple[str, str, int]] = []
        self.commits_made = 0
        from conceptforge.testing.hub_leaderboard import LeaderboardBook

        self.book = LeaderboardBook()  # verify tokens taken as signed (GET .../leaderboard)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def take_failure(self, route: str) -> Failure | None:
        with self.failure_lock:
            failure = self.failures.get(route)
            if failure is None or failure.remaining <= 0:
                return None
            failure.remaining -= 1
            return failure

    def record(self, method: str, path: str, status: int) -> None:
        with self.failure_lock:
            self.requests.append((method, urlsplit(path).path, status))


class HubServer:
    """Start/stop the server in a background thread; see :meth:`fail_next` for failure injection."""

    def __init__(
        self, root: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 0, token: str | None = None
    ) -> None:
        self.store = HubStore(Path(root))
        self._server = _Server((host, port), self.store, token)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self._server.base_url

    @property
    def requests(self) -> list[tuple[str, str, int]]:
        return list(self._server.requests)

    @property
    def commits_made(self) -> int:
        return self._server.commits_made

    def start(self) -> HubServer:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def fail_next(self, route: str, *, times: int = 1, status: int = 500, mode: str = "status") -> None:
        """Make the next ``times`` calls of ``route`` fail; ``mode`` as in :class:`Failure`."""
        if route not in ROUTES:
            raise ValueError(f"unknown route {route!r}; one of {ROUTES}")
        if mode not in ("status", "disconnect", "lose-response"):
            raise ValueError(f"unknown failure mode {mode!r}")
        with self._server.failure_lock:
            self._server.failures[route] = Failure(times, status, mode)

    def verify_results_token(self, token: str) -> None:
        """Count ``.eval_results`` entries carrying ``verifyToken: token`` as verified on leaderboards
        (the Hub checks the token's signature; offline, a test says which tokens are signed)."""
        self._server.book.verify(token)

    # -- direct (server-side) views used by tests ---------------------------------------------
    def refs(self, repo_id: str, repo_type: str = "dataset") -> dict[str, Any]:
        state = self.store.load_state(repo_type, repo_id)
        return {
            "branches": {k: v for k, v in state["branches"].items() if not k.startswith("refs/pr/")},
            "tags": {k: v["oid"] for k, v in state["tags"].items()},
            "pullRequests": {p["branch"]: state["branches"][p["branch"]] for p in state.get("pulls", {}).values()},
        }

    def files(self, repo_id: str, revision: str = "main", repo_type: str = "dataset") -> dict[str, bytes]:
        oid = self.store.resolve(repo_type, repo_id, revision)
        commit = self.store.load_commit(repo_type, repo_id, oid)
        return {path: self.store.object_path(rec["sha256"]).read_bytes() for path, rec in commit["files"].items()}

    def history(self, repo_id: str, revision: str = "main", repo_type: str = "dataset") -> list[dict[str, Any]]:
        oid: str | None = self.store.resolve(repo_type, repo_id, revision)
        out = []
        while oid:
            commit = self.store.load_commit(repo_type, repo_id, oid)
            out.append(commit)
            oid = commit["parents"][0] if commit["parents"] else None
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default=None)
    args = parser.parse_args(argv)
    server = HubServer(args.root, host=args.host, port=args.port, token=args.token).start()
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
