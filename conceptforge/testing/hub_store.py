"""The local Hub's storage: content-addressed objects, immutable commit manifests, branches and tags.

Every file body lives once under ``objects/<sha256>``; a commit is a JSON manifest
``{path: sha256, size, lfs}`` with a git-style id; a branch or tag is a name for a commit id. A
commit becomes visible only when its manifest is complete and the branch pointer is swapped under a
lock, so readers never see half a commit -- the property the publishing code relies on. Why apart
from the HTTP handler (``hub_server.py``): the store knows nothing of HTTP, and the handler nothing
of how files are kept.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from conceptforge.testing.hub_validation import evaluation_file_problems

DEFAULT_GITATTRIBUTES = (
    "*.parquet filter=lfs diff=lfs merge=lfs -text\n"
    "*.arrow filter=lfs diff=lfs merge=lfs -text\n"
    "*.png filter=lfs diff=lfs merge=lfs -text\n"
    "*.jpg filter=lfs diff=lfs merge=lfs -text\n"
)


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class HubError(Exception):
    """An error answered as JSON with the Hub's ``X-Error-Code`` header."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


class HubStore:
    """Repositories on disk (see module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        (self.root / "objects").mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()

    # -- objects ------------------------------------------------------------------------------
    def object_path(self, sha256: str) -> Path:
        return self.root / "objects" / sha256

    def has_object(self, sha256: str, size: int | None = None) -> bool:
        path = self.object_path(sha256)
        return path.exists() and (size is None or path.stat().st_size == size)

    def put_bytes(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        if not self.has_object(digest):
            fd, tmp = tempfile.mkstemp(dir=self.root / "tmp")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, self.object_path(digest))
        return digest

    # -- repos --------------------------------------------------------------------------------
    def repo_dir(self, repo_type: str, repo_id: str) -> Path:
        return self.root / "repos" / repo_type / repo_id

    def load_state(self, repo_type: str, repo_id: str) -> dict[str, Any]:
        path = self.repo_dir(repo_type, repo_id) / "state.json"
        if not path.exists():
            raise HubError(404, f"Repository {repo_id} not found", "RepoNotFound")
        return json.loads(path.read_text())

    def save_state(self, repo_type: str, repo_id: str, state: dict[str, Any]) -> None:
        path = self.repo_dir(repo_type, repo_id) / "state.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        os.replace(tmp, path)

    def load_commit(self, repo_type: str, repo_id: str, oid: str) -> dict[str, Any]:
        return json.loads((self.repo_dir(repo_type, repo_id) / "commits" / f"{oid}.json").read_text())

    def write_commit(self, repo_type: str, repo_id: str, commit: dict[str, Any]) -> str:
        body = json.dumps(commit, sort_keys=True).encode()
        oid = hashlib.sha1(b"commit %d\0" % len(body) + body).hexdigest()
        commit = {**commit, "id": oid}
        commits = self.repo_dir(repo_type, repo_id) / "commits"
        commits.mkdir(parents=True, exist_ok=True)
        (commits / f"{oid}.json").write_text(json.dumps(commit, indent=1, sort_keys=True))
        return oid

    def create_repo(self, repo_type: str, repo_id: str, private: bool) -> bool:
        with self.lock:
            directory = self.repo_dir(repo_type, repo_id)
            if (directory / "state.json").exists():
                return False
            directory.mkdir(parents=True, exist_ok=True)
            data = DEFAULT_GITATTRIBUTES.encode()
            files = {".gitattributes": self._file_record(self.put_bytes(data), len(data), lfs=False)}
            oid = self.write_commit(
                repo_type,
                repo_id,
                {"parents": [], "title": "initial commit", "message": "", "date": _now(), "files": files},
            )
            self.save_state(
                repo_type, repo_id, {"private": private, "branches": {"main": oid}, "tags": {}, "created": _now()}
            )
            return True

    def _file_record(self, sha256: str, size: int, *, lfs: bool) -> dict[str, Any]:
        if lfs:
            blob = git_blob_id(lfs_pointer(sha256, size))
        else:
            blob = git_blob_id(self.object_path(sha256).read_bytes())
        return {"sha256": sha256, "size": size, "lfs": lfs, "oid": blob}

    def resolve(self, repo_type: str, repo_id: str, revision: str) -> str:
        state = self.load_state(repo_type, repo_id)
        revision = unquote(revision)
        for prefix, table in (("refs/heads/", "branches"), ("refs/tags/", "tags")):
            if revision.startswith(prefix) and revision[len(prefix) :] in state[table]:
                revision = revision[len(prefix) :]
        if revision in state["branches"]:
            return state["branches"][revision]
        if revision in state["tags"]:
            return state["tags"][revision]["oid"]
        commits = self.repo_dir(repo_type, repo_id) / "commits"
        if re.fullmatch(r"[0-9a-f]{7,40}", revision):
            matches = [p.stem for p in commits.glob(f"{revision}*.json")]
            if len(matches) == 1:
                return matches[0]
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")

    def commit(
        self,
        repo_type: str,
        repo_id: str,
        branch: str,
        *,
        header: dict[str, Any],
        operations: list[tuple[str, dict[str, Any]]],
        pull_request: bool = False,
    ) -> str:
        """Apply ``operations`` to ``branch`` atomically; returns the new commit id. With
        ``pull_request`` the commit goes to a new ``refs/pr/N`` branch instead (``create_pr=1``)."""
        with self.lock:
            state = self.load_state(repo_type, repo_id)
            if branch not in state["branches"]:
                raise HubError(404, f"Invalid rev id: {branch}", "RevisionNotFound")
            head = state["branches"][branch]
            parent = header.get("parentCommit")
            if parent and not head.startswith(parent):
                raise HubError(412, f"A commit has happened since. Please refresh and try again. ({parent} != {head})")
            files = dict(self.load_commit(repo_type, repo_id, head)["files"])
            for key, value in operations:
                path = value["path"]
                if key == "file":
                    data = (
                        base64.b64decode(value["content"])
                        if value.get("encoding") == "base64"
                        else value["content"].encode()
                    )
                    problems = evaluation_file_problems(repo_type, path, data)
                    if problems:  # the Hub flags these files ("YAML Metadata Error"); we refuse the commit
                        raise HubError(400, "YAML Metadata Error: " + "; ".join(problems))
                    files[path] = self._file_record(self.put_bytes(data), len(data), lfs=False)
                elif key == "lfsFile":
                    sha = value["oid"]
                    if not self.has_object(sha):
                        raise HubError(422, f"LFS object {sha} for {path} was never uploaded")
                    files[path] = self._file_record(sha, self.object_path(sha).stat().st_size, lfs=True)
                elif key == "deletedFile":
                    if path not in files:
                        raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
                    del files[path]
                elif key == "deletedFolder":
                    prefix = path.rstrip("/") + "/"
                    for name in [name for name in files if name.startswith(prefix)]:
                        del files[name]
                else:
                    raise HubError(400, f"unknown commit operation {key!r}")
            oid = self.write_commit(
                repo_type,
                repo_id,
                {
                    "parents": [head],
                    "title": header.get("summary", ""),
                    "message": header.get("description", ""),
                    "date": _now(),
                    "files": files,
                },
            )
            if pull_request:  # a pull request: a new refs/pr/N branch holds the commit, main is untouched
                number = len(state.setdefault("pulls", {})) + 1
                branch = f"refs/pr/{number}"
                state["pulls"][str(number)] = {"branch": branch, "title": header.get("summary", "")}
            state["branches"][branch] = oid  # the swap: readers see the old or the new commit, never half
            self.save_state(repo_type, repo_id, state)
            return oid

    def create_tag(self, repo_type: str, repo_id: str, revision: str, tag: str, message: str) -> None:
        with self.lock:
            oid = self.resolve(repo_type, repo_id, revision)
            state = self.load_state(repo_type, repo_id)
            if tag in state["tags"]:
                raise HubError(409, f"Tag {tag} already exists")
            if tag in state["branches"]:
                raise HubError(409, f"A branch named {tag} already exists")
            state["tags"][tag] = {"oid": oid, "message": message}
            self.save_state(repo_type, repo_id, state)

    def delete_tag(self, repo_type: str, repo_id: str, tag: str) -> None:
        with self.lock:
            state = self.load_state(repo_type, repo_id)
            if tag not in state["tags"]:
                raise HubError(404, f"Tag {tag} not found", "RevisionNotFound")
            del state["tags"][tag]
            self.save_state(repo_type, repo_id, state)


def _entry(path: str, record: dict[str, Any], commit: dict[str, Any] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "file", "oid": record["oid"], "size": record["size"], "path": path}
    if record["lfs"]:
        pointer = lfs_pointer(record["sha256"], record["size"])
        entry["lfs"] = {"oid": record["sha256"], "size": record["size"], "pointerSize": len(pointer)}
    if commit is not None:
        entry["lastCommit"] = {"id": commit["id"], "title": commit["title"], "date": commit["date"]}
    return entry


def _folder(path: str, commit: dict[str, Any] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "directory",
        "oid": hashlib.sha1(path.encode()).hexdigest(),
        "size": 0,
        "path": path,
    }
    if commit is not None:
        entry["lastCommit"] = {"id": commit["id"], "title": commit["title"], "date": commit["date"]}
    return entry
