"""Files conceptforge generates into a dataset folder or a release, and the user's files in their way.

Why one check: ``export`` writes ``exports/`` into a dataset folder and ``publish`` puts its own
``croissant.json``, ``eval.yaml`` and ``exports/`` into the release beside the folder's card and
data. Either would silently replace a file of the user's at one of those paths (their own
``exports/vlmevalkit/README.md``, a hand-written ``croissant.json``), or fail half-way with a
traceback where a file stands in for a folder (``exports`` a file). So every path we generate is
checked against the folder first, with one rule: a file in the way is replaced only when it is
ours — identical bytes, or listed unchanged in ``exports/MANIFEST.json`` (the files conceptforge
wrote there, with their sha256) — and anything else (a user's file, a file we wrote and the
user then edited, a link, a file where a folder goes, a folder where a file goes) is refused in
one line before anything is written.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from conceptforge.errors import StoreError

EXPORTS_MANIFEST = "exports/MANIFEST.json"


def read_manifest(directory: str | Path) -> dict[str, str]:
    """The files conceptforge wrote under ``exports/`` (path -> sha256); {} without a manifest."""
    path = Path(directory) / EXPORTS_MANIFEST
    if not path.is_file():
        return {}
    try:
        return {str(k): str(v) for k, v in dict(json.loads(path.read_text(encoding="utf-8"))["files"]).items()}
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise StoreError(f"{path} is not a manifest conceptforge wrote: move it away or fix it") from None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def path_problem(directory: Path, path: str, data: bytes, ours: Mapping[str, str]) -> str | None:
    """Why ``data`` cannot be written at ``directory/path`` without losing something of the user's
    (None: the path is free, holds these bytes, or holds a file we wrote and nobody changed)."""
    parts = path.split("/")
    for depth in range(1, len(parts)):  # every folder on the way must be a folder (or not exist yet)
        folder = directory.joinpath(*parts[:depth])
        if os.path.lexists(folder) and not (folder.is_dir() and not folder.is_symlink()):
            what = "a link" if folder.is_symlink() else "a file"
            return f"{folder} is {what}, not a folder, and conceptforge writes {path} under it"
    target = directory / path
    if not os.path.lexists(target):
        return None
    if target.is_symlink():
        return f"{target} is a link where conceptforge writes a file"
    if target.is_dir():
        return f"{target} is a folder where conceptforge writes a file"
    if target.read_bytes() == data:
        return None
    if path not in ours:
        return f"{target} exists and was not written by conceptforge"
    if _sha256(target) != ours[path]:
        return f"{target} was changed since conceptforge wrote it"
    return None


def check_generated(
    directory: str | Path, files: Mapping[str, bytes], *, ours: Mapping[str, str], consequence: str = ""
) -> None:
    """Refuse (one line, :class:`StoreError`) when any of ``files`` would replace something of the
    user's in ``directory`` (see :func:`path_problem`); ``consequence`` says what would happen to it."""
    directory = Path(directory)
    for path in sorted(files):
        problem = path_problem(directory, path, files[path], ours)
        if problem is not None:
            raise StoreError(f"{problem}{consequence}: move it away first")


def check_release_paths(directory: str | Path, files: Mapping[str, bytes]) -> None:
    """Refuse (one line, :class:`StoreError`) a release that would carry conceptforge's own file at
    a path where ``directory`` holds a file of the user's: ``publish`` uploads the folder's card
    and data, and generates ``croissant.json``, ``eval.yaml`` and ``exports/`` itself, so a user's
    ``exports/vlmevalkit/README.md`` or ``croissant.json`` would be left out of the release in
    favour of ours without a word. Our own files (identical, or listed unchanged in the folder's
    ``exports/MANIFEST.json``, which ``conceptforge export`` wrote) are fine."""
    directory = Path(directory)
    ours = read_manifest(directory) if any(p.startswith("exports/") for p in files) else {}
    for path in sorted(files):
        target = directory / path
        if not target.is_file():
            continue
        data = target.read_bytes()
        if data == files[path] or path == EXPORTS_MANIFEST:  # a manifest that reads is ours (read_manifest)
            continue
        if path in ours and hashlib.sha256(data).hexdigest() == ours[path]:
            continue
        what = "was changed since conceptforge wrote it" if path in ours else "was not written by conceptforge"
        raise StoreError(
            f"{target} {what}, and the release would carry conceptforge's own {path} in its place: "
            "move it away (or rename it) first"
        )


def read_made_folders(directory: str | Path) -> set[str]:
    """The folders under ``exports/`` that conceptforge created (``folders`` of the manifest)."""
    path = Path(directory) / EXPORTS_MANIFEST
    try:
        return {str(f) for f in json.loads(path.read_text(encoding="utf-8")).get("folders", [])}
    except (OSError, ValueError, AttributeError, TypeError):
        return set()


def missing_folders(directory: str | Path, paths: Iterable[str]) -> set[str]:
    """The folders that writing ``paths`` under ``directory`` creates (those that do not exist yet)."""
    directory = Path(directory)
    made = set()
    for path in paths:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/".join(parts[:depth])
            if not os.path.lexists(directory / folder):
                made.add(folder)
    return made


def remove_empty_folders(directory: str | Path, made: Iterable[str]) -> list[str]:
    """Remove the folders of ``made`` (ones conceptforge created under ``directory``) that are
    empty now, deepest first; a folder with anything left in it, or one we did not create (a
    user's), stays. Returns the folders removed."""
    directory = Path(directory)
    gone = []
    for folder in sorted(set(made), key=lambda f: f.count("/"), reverse=True):
        path = directory / folder
        if path.is_symlink() or not path.is_dir():
            continue
        try:
            path.rmdir()  # only succeeds when empty
        except OSError:
            continue
        gone.append(folder)
    return gone
