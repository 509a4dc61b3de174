"""How verify rebuilds a binding release's stage: the generator's own ``build_stage(config)``; bytes
are compared exactly on the CPU, with the PSNR rule where Cycles rendered on a GPU.

A release made from a researcher's spec renders shapes and materials from ``.blend`` files. Its
record names them as they were on the machine that made it (elided to ``.../Cone.blend`` in the
published record), so they cannot be read from there; the release carries copies under
``vocabulary/`` (:func:`conceptforge.generators.binding.release.release_files`). The rebuild
copies those into its work folder and renders from them: a release verifies on its own, on any
machine, and from exactly the files it publishes.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conceptforge.cards.release_source import ReleaseFiles
from conceptforge.errors import DataNotFoundError
from conceptforge.generators.rebuild import EXACT, Rebuilt, tolerance

GENERATOR = "binding"


def _file_from_release(release: ReleaseFiles, name: str, target: Path) -> Path:
    """Copy the release file ``name`` to ``target``; one line when the release lacks it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with release.open(name) as source, open(target, "wb") as copy:
            shutil.copyfileobj(source, copy)
    except FileNotFoundError:
        target.unlink(missing_ok=True)
        raise DataNotFoundError(
            f"{release.label} has no {name}: its spec's vocabulary names that file and verify renders from the "
            "release's own copy (re-publish the release with its vocabulary/ folder)"
        ) from None
    return target


def vocabulary_from_release(vocabulary: Mapping[str, Any], release: ReleaseFiles, work: Path) -> dict[str, Any]:
    """``vocabulary`` (a recorded ``Vocabulary.to_dict()``) with each shape and material file
    replaced by the release's copy, fetched into ``work``."""
    from conceptforge.generators.binding.release import RELEASE_MATERIAL_DIR, RELEASE_SHAPE_DIR

    resolved = dict(vocabulary)
    for key, folder in (("shape_files", RELEASE_SHAPE_DIR), ("material_files", RELEASE_MATERIAL_DIR)):
        pairs = []
        for word, recorded in vocabulary.get(key) or []:
            name = f"{folder}/{Path(recorded).name}"
            pairs.append([word, str(_file_from_release(release, name, work / name))])
        resolved[key] = pairs
    return resolved


def rebuild(
    entry: Mapping[str, Any],
    weights: Mapping[str, str],
    device: str | None,
    out: Path,
    *,
    release: ReleaseFiles | None = None,
) -> Rebuilt:
    from conceptforge.generators.binding import stage as binding
    from conceptforge.generators.binding.dataset import BindingConfig

    settings = dict(entry["rebuild"]["config"])
    if release is not None and settings.get("vocabulary"):
        settings["vocabulary"] = vocabulary_from_release(settings["vocabulary"], release, out / "release-files")
    config = BindingConfig(**settings)
    recorded = entry.get("device", "cpu")
    device = device or recorded
    stage = binding.build_stage(config, device=device)  # one worker, in this process
    rule = (
        EXACT
        if device == recorded == "cpu"
        else tolerance(f"Cycles renders on {device}, recorded on {recorded}: the bytes depend on the GPU")
    )
    return Rebuilt(stage, binding.split_rows, rule)
