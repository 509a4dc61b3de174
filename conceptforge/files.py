"""Writing results whole: one JSON writer for every report, and one atomic folder writer.

Why one: reports (evaluation tables, annotation exports, CompMap results) are read by people and
by later runs, so they must all be whole files (written atomically, never half-written by a
killed run), valid JSON (NaN, which ``json`` would write as a bare ``NaN``, becomes ``null``) and
laid out the same way. Bytes go through :func:`conceptforge.serialization.atomic_write_bytes`. Folders
are replaced only when the output guard (:mod:`conceptforge.output`) says they are ours.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conceptforge.engine.store import DISK_ERRNOS, io_error
from conceptforge.external_errors import safetensors_os_error
from conceptforge.output import FOLDER_MARKER, claim_folder, marker_bytes, normal_mode
from conceptforge.serialization import atomic_write_bytes
from conceptforge.staging import RECORD as STAGING_RECORD
from conceptforge.staging import make_staging, remove_stale


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def write_json(path: str | Path, payload: Any, *, sort_keys: bool = False) -> Path:
    """Atomically write ``payload`` as JSON indented by 2 (parents created, NaN as null).

    ``sort_keys=False`` keeps the order a report was built in (its tables' order); exports whose
    keys have no meaningful order pass ``sort_keys=True`` so reruns give identical files.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_json_safe(payload), indent=2, sort_keys=sort_keys) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))
    return path


def write_directory_atomically(
    directory: str | Path, write: Callable[[Path], None], *, made_by: str, flag: str = "--out"
) -> Path:
    """Call ``write(tmpdir)`` on a fresh folder beside ``directory``, then swap it into place.

    For saved models and artifacts (``save_pretrained`` writes many files): a killed run leaves
    either the previous folder or the complete new one, never a mix. Only a folder that is
    absent, empty or marked as written by ``made_by`` (:func:`conceptforge.output.claim_folder`)
    is replaced; anything else is refused before ``write`` runs, so no training is wasted and no
    file of the user's is lost. The folder and its files get the modes a plain ``mkdir``/``open``
    would give (``mkdtemp`` makes 0700).
    """
    # the caller claimed a folder the user named at its boundary; here the folder may be one of ours inside a run
    directory = claim_folder(directory, made_by=made_by, flag=flag, nested_ok=True)
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(directory.parent, f".{directory.name}.")  # left by a killed run of this write
        tmp = make_staging(directory.parent, f".{directory.name}.", ".tmp")
    except OSError as error:
        raise io_error(error, "write to", str(directory), flag=flag) from None
    old = None
    try:
        write(tmp)
        (tmp / STAGING_RECORD).unlink(missing_ok=True)  # the folder becomes the output: no longer staging
        files = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
        (tmp / FOLDER_MARKER).write_bytes(marker_bytes(made_by, files))
        for path in [tmp, *tmp.rglob("*")]:
            normal_mode(path, directory=path.is_dir())
        claim_folder(directory, made_by=made_by, flag=flag, nested_ok=True)  # still ours after the work
        if directory.exists():
            old = make_staging(directory.parent, f".{directory.name}.", ".old")
            os.replace(directory, old / "previous")
        os.replace(tmp, directory)
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and (old / "previous").exists() and not directory.exists():
            os.replace(old / "previous", directory)  # put the previous folder back
        # a full disk (safetensors words it in its own error): one line naming the folder
        disk = error if isinstance(error, OSError) else safetensors_os_error(error)
        if disk is not None and disk.errno in DISK_ERRNOS:
            raise io_error(disk, "write", str(directory), flag=flag) from None
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return directory
