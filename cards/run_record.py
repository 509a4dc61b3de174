"""``provenance.json``: what a released dataset was made from, in a form a program can rerun.

Why a file beside the card: the card's provenance is written for people (tables, an elided
command line). ``conceptforge verify`` needs the exact inputs of every stage: the settings the
run engine bound to the store (``run.json``), the fingerprint of the work-item plan, what the
generator needs to rebuild its stage (the binding config, SUB's pair plan, ConceptBed's concept
spec), the device, and the package versions. The assembler writes it next to the card and the
publish step uploads it with the data, so ``org/name@v1.0.0`` carries its own recipe.

Layout::

    {"format": 1, "generator": "binding",
     "configs": {"<config>": {"stage": …, "settings": …, "plan": {"items": N, "fingerprint": …},
                               "rows": {"<split>": ["<item_id>", …]},
                               "rebuild": {…generator-specific…}, "device": "cpu"}},
     "packages": {"conceptforge": …, "torch": …}, "python": "3.12.3", "machine": "x86_64",
     "validity": {…cards.validity report…}}

``rows`` is the release's row set as assembled: per split, the item ids in shard order. ``verify``
checks the published rows against it (a dropped, duplicated or reordered row fails); records
written before it existed lack it and are checked against the plan's item count only.

A plain (one-config) dataset has the single config ``default``. Local paths are elided like the
card's (``.../tiny-flux``): the file is published.
"""

from __future__ import annotations

import json
import logging
import platform
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from conceptforge.cards.dataset_dir import ID_COLUMN
from conceptforge.cards.provenance import package_versions, strip_local_paths
from conceptforge.errors import DataFormatError
from conceptforge.serialization import atomic_write_bytes, canonical_json

logger = logging.getLogger(__name__)

RECORD_NAME = "provenance.json"
RECORD_FORMAT = 1
#: Packages whose version can change a stage's bytes; ``verify`` warns when the installed ones differ.
VERIFY_PACKAGES = ("conceptforge", "torch", "diffusers", "bpy", "pyoidn")
RECORD_PACKAGES = (*VERIFY_PACKAGES, "transformers", "peft", "numpy", "pillow", "pyarrow", "datasets")


def config_entry(
    run_config: Mapping[str, Any] | None,
    *,
    rebuild: Mapping[str, Any],
    device: str,
    rows: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """One config's entry from the store's ``run.json`` (``stage``, ``settings``, ``plan``) and the
    row ids the assembly wrote (``rows``: split -> ids in shard order, :func:`row_ids`)."""
    run_config = dict(run_config or {})
    plan = dict(run_config.get("plan") or {})
    entry = {
        "stage": run_config.get("stage"),
        "settings": run_config.get("settings", {}),
        "plan": {"items": plan.get("items"), "fingerprint": plan.get("fingerprint")},
        "rebuild": json.loads(canonical_json(dict(rebuild))),
        "device": device,
    }
    if rows is not None:
        entry["rows"] = {split: [str(i) for i in ids] for split, ids in rows.items()}
    return entry


def row_ids(directory: str | Path, splits: Iterable[Any], *, config: str | None = None) -> dict[str, list[str]]:
    """Split -> the ``item_id`` column of its shards in order, for the splits (``SplitStats``) of
    ``config`` (all of them when None), read from the written dataset directory ``directory``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from conceptforge.engine.store import is_url, join

    found: dict[str, list[str]] = {}
    for split in splits:
        if config is not None and split.config != config:
            continue
        ids = found.setdefault(split.name, [])
        for name in split.files:
            where = join(str(directory), name)
            if is_url(where):  # a bucket: the bytes, read by arrow from memory (not a Python file object)
                import fsspec

                with fsspec.open(where, "rb") as handle:
                    source: Any = pa.BufferReader(handle.read())
            else:
                source = where
            table = pq.ParquetFile(source).read(columns=[ID_COLUMN])
            ids += [str(v) for v in table.column(ID_COLUMN).to_pylist()]
    return found


def run_record(
    generator: str, configs: Mapping[str, Mapping[str, Any]], *, validity: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The whole record: the configs plus this machine's package versions and Python, and the
    dataset's validity report (:mod:`cards.validity`) when the generator computed one."""
    record = {
        "format": RECORD_FORMAT,
        "generator": generator,
        "configs": {name: dict(entry) for name, entry in configs.items()},
        "packages": package_versions(RECORD_PACKAGES),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    if validity:
        record["validity"] = dict(validity)
    return record


def write_run_record(directory: str | Path, record: Mapping[str, Any]) -> Path:
    """Write ``directory/provenance.json`` (local paths elided, canonical JSON: rerun-stable bytes)."""
    path = Path(directory) / RECORD_NAME
    atomic_write_bytes(path, canonical_json(strip_local_paths(dict(record))))
    return path


def read_run_record(directory: str | Path) -> dict[str, Any] | None:
    """The record of a dataset directory; None when it has none (made before records existed)."""
    path = Path(directory) / RECORD_NAME
    return parse_run_record(path.read_text(encoding="utf-8"), where=str(path)) if path.is_file() else None


def parse_run_record(text: str, *, where: str) -> dict[str, Any]:
    """The record in ``text`` (the contents of ``where``), checked for its format."""
    try:
        record = json.loads(text)
    except ValueError as error:
        raise DataFormatError(f"{where} is not valid JSON ({error})") from None
    if (
        not isinstance(record, dict)
        or record.get("format") != RECORD_FORMAT
        or not isinstance(record.get("configs"), dict)
    ):
        raise DataFormatError(f"{where} is not a conceptforge provenance record of format {RECORD_FORMAT}")
    return record


def version_differences(recorded: Mapping[str, str], names: tuple[str, ...] = VERIFY_PACKAGES) -> list[str]:
    """``name recorded -> installed`` for each package of ``names`` whose installed version differs.

    A package the card records but that is not installed here counts as differing ("not installed").
    """
    installed = package_versions(names)
    found = []
    for name in names:
        if name in recorded and recorded[name] != installed.get(name):
            found.append(f"{name} {recorded[name]} -> {installed.get(name, 'not installed')}")
    return found
