"""Harness exports of a release: lmms-eval task folders, VLMEvalKit TSVs, an inspect-ai task module.

Why: evaluators run benchmarks in the harnesses they already use; a release that carries its own
tasks for them is evaluated on new models without us. Every export is built from the same
:class:`~conceptforge.loaders.exports.choice_sets.ChoiceSet` items (the by-answer protocol's prompt,
letters and answer key, :mod:`conceptforge.loaders.harness.by_answer`) and carries our parser, so
its numbers are ``conceptforge evaluate``'s by-answer numbers. ``publish`` writes them into every
release it can (``exports/``), ``conceptforge export DIR`` into a dataset folder.

Layout (``exports/``): ``items/<set>.jsonl`` (shared by lmms-eval and inspect-ai),
``lmms-eval/<set>/{<set>.yaml,utils.py}``, ``vlmevalkit/Conceptforge_<set>.tsv`` + ``README.md``,
``inspect-ai/conceptforge_tasks.py``, and ``MANIFEST.json`` (the files we wrote and their
sha256: a rerun replaces only those, and refuses to overwrite a file we did not write).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from conceptforge.cards.generated import (
    EXPORTS_MANIFEST,
    check_generated,
    missing_folders,
    read_made_folders,
    read_manifest,
    remove_empty_folders,
)
from conceptforge.errors import InvalidArgumentError, StoreError
from conceptforge.loaders.exports.runtime import EXPORTS_DIR, ITEMS_DIR, ExportInfo, items_lines

logger = logging.getLogger(__name__)

FORMATS = ("lmms-eval", "vlmevalkit", "inspect-ai")
MANIFEST = EXPORTS_MANIFEST
#: Generation length the exports ask for: our by-answer default (a letter or a short phrase).
MAX_NEW_TOKENS = 16


def parse_formats(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """``lmms-eval,vlmevalkit,inspect-ai`` (any subset, any order) checked; None: all three."""
    if text is None:
        return FORMATS
    names = [n.strip().lower() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    unknown = [n for n in names if n not in FORMATS]
    if unknown or not names:
        raise InvalidArgumentError(
            f"unknown export format(s) {', '.join(unknown) or '(none)'}: choose from {', '.join(FORMATS)}"
        )
    return tuple(n for n in FORMATS if n in names)


def export_files(choice_sets, info: ExportInfo, formats: Sequence[str] = FORMATS) -> dict[str, bytes]:
    """Every file of the exports (path in the release -> bytes), MANIFEST.json included."""
    from conceptforge.loaders.exports.inspect_task import inspect_files
    from conceptforge.loaders.exports.lmms_eval import lmms_eval_files
    from conceptforge.loaders.exports.vlmevalkit import vlmevalkit_files

    files: dict[str, bytes] = {}
    if "lmms-eval" in formats or "inspect-ai" in formats:
        files.update({f"{ITEMS_DIR}/{s.name}.jsonl": items_lines(s) for s in choice_sets})
    if "lmms-eval" in formats:
        files.update(lmms_eval_files(choice_sets, info, max_new_tokens=MAX_NEW_TOKENS))
    if "vlmevalkit" in formats:
        files.update(vlmevalkit_files(choice_sets, info))
    if "inspect-ai" in formats:
        files.update(inspect_files(choice_sets, info, max_new_tokens=MAX_NEW_TOKENS))
    manifest = {
        "written_by": f"conceptforge {info.conceptforge_version}",
        "release": info.repo_id,
        "tag": info.tag,
        "formats": list(formats),
        "sets": [s.name for s in choice_sets],
        "files": {path: hashlib.sha256(data).hexdigest() for path, data in sorted(files.items())},
        # git's blob ids of the same bytes: the Hub's tree listing names them, so a later publish
        # tells our files from a user's without downloading them (cards/publish.py)
        "git_blob_ids": {path: _git_blob_id(data) for path, data in sorted(files.items())},
    }
    files[MANIFEST] = (json.dumps(manifest, indent=2) + "\n").encode("utf-8")
    return files


def _git_blob_id(data: bytes) -> str:
    """The id git (and the Hub's tree listing) gives a file of these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def release_exports(
    directory: str | Path,
    *,
    repo_id: str,
    tag: str,
    cub_dir: str | Path | None = None,
    formats: Sequence[str] = FORMATS,
    pretty_name: str = "",
) -> tuple[dict[str, bytes], str | None]:
    """The export files of a dataset folder as release ``repo_id`` at ``tag``, or ({}, why not)."""
    from conceptforge import __version__
    from conceptforge.loaders.exports.choice_sets import choice_sets

    sets, why_not = choice_sets(directory, cub_dir=cub_dir)
    if not sets:
        return {}, why_not
    info = ExportInfo(repo_id, tag, __version__, pretty_name)
    return export_files(sets, info, formats), None


def write_exports(directory: str | Path, files: dict[str, bytes]) -> list[str]:
    """Write ``files`` under ``directory``: only files we wrote before (listed, unchanged, in
    ``exports/MANIFEST.json``) are replaced; anything else in the way (a user's file, a file where
    a folder goes: :func:`conceptforge.cards.generated.check_generated`) is refused before anything
    is written. Files of an earlier export that this one no longer has are removed, and so are the
    folders we created that this leaves empty (never a folder we did not create). Returns the paths
    written."""
    directory = Path(directory)
    ours = read_manifest(directory)
    manifest = directory / MANIFEST
    if os.path.lexists(manifest) and (manifest.is_symlink() or not manifest.is_file()):
        raise StoreError(f"{manifest} is not a file conceptforge wrote: move it away first")
    check_generated(directory, {p: d for p, d in files.items() if p != MANIFEST}, ours=ours)
    made = missing_folders(directory, files) | {f for f in read_made_folders(directory) if (directory / f).is_dir()}
    for path, data in files.items():  # each file whole or not at all: a temporary name, then a rename
        if path != MANIFEST:
            _write_whole(directory / path, data)
    _write_whole(manifest, _with_folders(files[MANIFEST], made))
    removed = []
    for stale in sorted(set(ours) - set(files)):
        target = directory / stale
        if (
            target.is_file()
            and not target.is_symlink()
            and hashlib.sha256(target.read_bytes()).hexdigest() == ours[stale]
        ):
            target.unlink()
            removed.append(stale)
    gone = remove_empty_folders(directory, made) if removed else []
    if gone:
        logger.info("removed %d empty folder(s) of the earlier export: %s", len(gone), ", ".join(gone))
        _write_whole(manifest, _with_folders(files[MANIFEST], made - set(gone)))
    logger.info("wrote %d export file(s) under %s", len(files), directory / EXPORTS_DIR)
    return sorted(files)


def _with_folders(manifest: bytes, folders: set[str]) -> bytes:
    """The manifest with the folders conceptforge created in the dataset folder (``export`` only:
    what it may remove again once empty)."""
    document = json.loads(manifest)
    document["folders"] = sorted(folders)
    return (json.dumps(document, indent=2) + "\n").encode("utf-8")


def _write_whole(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.partial")
    temporary.write_bytes(data)
    os.replace(temporary, target)
