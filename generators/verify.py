"""``conceptforge verify``: regenerate a release's items from its provenance and compare them.

Why: generators are deterministic (binding is byte-identical across processes, shards and
resumes) and a release records its inputs (``provenance.json``, :mod:`cards.run_record`), so a
reader can check that the published rows are what the recorded code and settings make. The
chosen items are rebuilt through the same stage code (:mod:`loaders.regenerate`), written to a
temporary item store by the run engine, turned into rows by the generator's own row function,
encoded with the release's own features, and compared with the released rows column by column:
images byte for byte (or at a stated PSNR where the bytes depend on the hardware), everything
else exactly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from datasets import Features

from conceptforge.cards.dataset_dir import CARD_NAME, DATA_DIR, SplitStats, shard_split, write_parquet_split
from conceptforge.cards.local_dataset import dataset_layout
from conceptforge.cards.release_diff import ID_COLUMN
from conceptforge.cards.release_source import ReleaseFiles
from conceptforge.cards.run_record import RECORD_NAME, parse_run_record, version_differences
from conceptforge.engine.runner import run_stage
from conceptforge.engine.store import ItemStore, join
from conceptforge.errors import DataFormatError, InvalidArgumentError
from conceptforge.generators.rebuild import Rebuilt, Rule, elide, rebuild_config
from conceptforge.output import WORK_DIR

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Key:
    config: str
    split: str
    item_id: str

    def __str__(self) -> str:
        where = self.split if self.config == "default" else f"{self.config}/{self.split}"
        return f"{self.item_id} ({where})"


@dataclass
class Difference:
    key: Key
    column: str
    detail: str

    def line(self) -> str:
        return (
            f"differs: {self.key.item_id} split={self.key.split}"
            + (f" config={self.key.config}" if self.key.config != "default" else "")
            + f": {self.detail}"
        )


@dataclass
class VerifyReport:
    source: str
    checked: int = 0
    matched: int = 0
    tolerated: int = 0  # matched under a PSNR rule although the image bytes differ
    differences: list[Difference] = field(default_factory=list)
    rules: dict[str, str] = field(default_factory=dict)  # config -> rule applied
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences and self.checked == self.matched

    def lines(self) -> list[str]:
        out = [f"warning: {w}" for w in self.warnings]
        out += [d.line() for d in self.differences]
        for config, rule in self.rules.items():
            out.append(f"rule{'' if config == 'default' else f' ({config})'}: {rule}")
        differing = len({d.key for d in self.differences})
        tolerated = f" ({self.tolerated} within the PSNR tolerance, not byte-identical)" if self.tolerated else ""
        out.append(
            f"{'verified' if self.ok else 'FAILED'}: {self.matched} of {self.checked} item(s) of {self.source} "
            f"match{tolerated}{'' if self.ok else f'; {differing} differ'}"
        )
        return out


# -- choosing items ---------------------------------------------------------------------------------
def released_keys(files: ReleaseFiles, splits: Sequence[SplitStats]) -> dict[Key, tuple[str, int]]:
    """Every released row's key -> (shard, row index), reading only the ``item_id`` column."""
    found: dict[Key, tuple[str, int]] = {}
    for split in splits:
        for name in split.files:
            with files.open(name) as handle:
                # ParquetFile, not read_table: read_table on a Python file object can abort the
                # process at exit (pyarrow 25; see conceptforge.engine.store.decode_chunk)
                ids = pq.ParquetFile(handle).read(columns=[ID_COLUMN]).column(ID_COLUMN).to_pylist()
            for index, item_id in enumerate(ids):
                found[Key(split.config, split.name, str(item_id))] = (name, index)
    return found


def _sample_order(key: Key) -> str:
    return hashlib.sha256(f"{key.config}/{key.split}/{key.item_id}".encode()).hexdigest()


def choose(keys: Sequence[Key], *, sample: int | None, items: Sequence[str] | None, config: str | None) -> list[Key]:
    """``--all`` (neither given), ``--items`` or a deterministic ``--sample`` spread over every split and config."""
    if config is not None:
        configs = sorted({k.config for k in keys})
        if config not in configs:
            raise InvalidArgumentError(f"--config {config!r} is not in this release; it has {', '.join(configs)}")
        keys = [k for k in keys if k.config == config]
    if items:
        chosen = [k for k in keys if k.item_id in set(items)]
        missing = sorted(set(items) - {k.item_id for k in chosen})
        if missing:
            raise InvalidArgumentError(f"--items: no released row has item id {', '.join(missing[:5])}")
        return chosen
    if sample is not None:
        if sample < 1:
            raise InvalidArgumentError(f"--sample must be >= 1, got {sample}")
        return sorted(keys, key=_sample_order)[:sample]
    return list(keys)


# -- comparing --------------------------------------------------------------------------------------
def _is_image(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"bytes", "path"}


def image_distance(a: bytes, b: bytes) -> tuple[float, int, int]:
    """(PSNR in dB, differing pixel values, max absolute difference) between two encoded images."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(a)) as x, Image.open(io.BytesIO(b)) as y:
        left, right = np.asarray(x.convert("RGB"), dtype=np.float64), np.asarray(y.convert("RGB"), dtype=np.float64)
    if left.shape != right.shape:
        return -math.inf, int(max(left.size, right.size)), 255
    delta = np.abs(left - right)
    mse = float(np.mean(delta**2))
    psnr = math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)
    return psnr, int(np.count_nonzero(delta)), int(delta.max(initial=0))


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def compare_values(released: Any, regenerated: Any, path: str, rule: Rule) -> str | None:
    """How ``regenerated`` differs from ``released`` at ``path`` (None: equal under ``rule``)."""
    if _is_image(released) and _is_image(regenerated):
        a, b = released["bytes"], regenerated["bytes"]
        if a == b:
            return (
                None
                if released["path"] == regenerated["path"]
                else f"{path}.path {released['path']!r} != {regenerated['path']!r}"
            )
        if a is None or b is None:
            return f"{path}: image missing on one side"
        psnr, pixels, peak = image_distance(a, b)
        far = f"PSNR {psnr:.1f} dB, {pixels} pixel value(s) differ, max |diff| {peak}"
        if rule.min_psnr is not None and psnr >= rule.min_psnr:
            return None
        return f"{path}: image bytes differ ({far})"
    if isinstance(released, dict) and isinstance(regenerated, dict):
        for key in list(released) + [k for k in regenerated if k not in released]:
            found = compare_values(released.get(key), regenerated.get(key), f"{path}.{key}", rule)
            if found:
                return found
        return None
    if isinstance(released, list) and isinstance(regenerated, list):
        if len(released) != len(regenerated):
            return f"{path}: {len(released)} value(s) released, {len(regenerated)} regenerated"
        for index, (a, b) in enumerate(zip(released, regenerated)):
            found = compare_values(a, b, f"{path}[{index}]", rule)
            if found:
                return found
        return None
    if _equal(released, regenerated):
        return None
    far = ""
    if isinstance(released, (int, float)) and isinstance(regenerated, (int, float)) and not isinstance(released, bool):
        far = f" (|diff| {abs(released - regenerated):.6g})"
    return f"{path}: released {released!r}, regenerated {regenerated!r}{far}"


def compare_rows(
    key: Key, released: Mapping[str, Any], regenerated: Mapping[str, Any], rebuilt: Rebuilt
) -> list[Difference]:
    """One :class:`Difference` per differing column (the first difference inside it)."""
    found = []
    for column in list(released) + [c for c in regenerated if c not in released]:
        a, b = released.get(column), regenerated.get(column)
        if column in rebuilt.path_columns:
            a, b = elide(a), elide(b)
        detail = compare_values(a, b, column, rebuilt.rule)
        if detail:
            found.append(Difference(key, column, detail))
    return found


# -- regenerating -----------------------------------------------------------------------------------
def _read_rows(files: ReleaseFiles, locations: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    """The rows at (shard, index), reading only the row groups that hold them."""
    by_file: dict[str, list[int]] = {}
    for name, index in locations:
        by_file.setdefault(name, []).append(index)
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for name, indices in by_file.items():
        with files.open(name) as handle:
            parquet = pq.ParquetFile(handle)
            start = 0
            for group in range(parquet.num_row_groups):
                size = parquet.metadata.row_group(group).num_rows
                wanted = [i for i in indices if start <= i < start + size]
                if wanted:
                    table = parquet.read_row_group(group)
                    for i in wanted:
                        rows[(name, i)] = table.slice(i - start, 1).to_pylist()[0]
                start += size
    return [rows[location] for location in locations]


def regenerate(rebuilt: Rebuilt, keys: Sequence[Key], features: Any, work: Path) -> dict[Key, dict[str, Any]]:
    """Run the chosen items through the stage into a temporary store; their rows as the release encodes them."""
    wanted = {(k.split, k.item_id) for k in keys}
    items = [item for item in rebuilt.stage.items if (item.split, item.item_id) in wanted]
    stage = dataclasses.replace(rebuilt.stage, items=items, assembler=None)
    out = work / "regenerated"
    store = ItemStore(join(str(out), WORK_DIR))
    run_stage(stage, str(out), store=store, assemble=False)
    rows: dict[Key, dict[str, Any]] = {}
    config = keys[0].config if keys else "default"
    for split in sorted({k.split for k in keys}):
        folder = work / "encoded" / split
        write_parquet_split(folder, split, rebuilt.rows(store, split), features)
        for path in sorted(p for p in folder.glob("*.parquet") if shard_split(p.name) == split):
            for row in pq.read_table(path).to_pylist():
                rows[Key(config, split, str(row[ID_COLUMN]))] = row
    return rows


def verify_release(
    source: ReleaseFiles,
    *,
    sample: int | None = None,
    items: Sequence[str] | None = None,
    config: str | None = None,
    weights: Mapping[str, str] | None = None,
    device: str | None = None,
) -> VerifyReport:
    """Regenerate the chosen items of ``source`` and compare them with its rows (module docstring)."""
    text = source.read_text(RECORD_NAME)
    record = parse_run_record(text, where=f"{source.label}/{RECORD_NAME}") if text is not None else None
    if record is None:
        raise DataFormatError(
            f"{source.label} has no {RECORD_NAME}: it was made before releases recorded how to regenerate them "
            "(re-assemble it with this version, or verify a newer release)"
        )
    report = VerifyReport(source.label)
    changed = version_differences(record.get("packages", {}))
    if changed:
        report.warnings.append("installed versions differ from the release's: " + "; ".join(changed))
    card = source.read_text(CARD_NAME)
    if card is None:
        raise DataFormatError(f"{source.label} has no {CARD_NAME}: not a dataset release")
    parquet_files = source.parquet_files()
    if not parquet_files:
        raise DataFormatError(f"{source.label} has no {DATA_DIR}/*.parquet: not a dataset release")

    def schema(name: str) -> Any:
        with source.open(name) as handle:
            return pq.read_schema(handle)

    _, merged, splits = dataset_layout(card, parquet_files, schema, where=source.label)
    features = {"default": merged} if isinstance(merged, Features) else merged
    located = released_keys(source, splits)
    chosen = choose(list(located), sample=sample, items=items, config=config)
    report.checked = len(chosen)
    order = list(record["configs"])
    for name in sorted({k.config for k in chosen}, key=lambda c: (order.index(c) if c in order else len(order), c)):
        entry = record["configs"].get(name)
        if entry is None:
            raise DataFormatError(f"{source.label}: {RECORD_NAME} has no entry for config {name!r}")
        keys = [k for k in chosen if k.config == name]
        with tempfile.TemporaryDirectory(prefix="conceptforge-verify-") as work:
            rebuilt = rebuild_config(
                record["generator"], entry, weights=weights or {}, device=device, out=Path(work) / "regenerated"
            )
            report.rules[name] = rebuilt.rule.describe()
            try:
                _verify_config(rebuilt, entry, keys, located, features[name], report, Path(work), source)
            finally:
                rebuilt.close()
    return report


def _verify_config(
    rebuilt: Rebuilt,
    entry: Mapping[str, Any],
    keys: list[Key],
    located: Mapping[Key, tuple[str, int]],
    features: Any,
    report: VerifyReport,
    work: Path,
    source: ReleaseFiles,
) -> None:
    from conceptforge.engine.runner import items_fingerprint

    recorded = (entry.get("plan") or {}).get("fingerprint")
    if recorded and items_fingerprint(rebuilt.stage.items) != recorded:
        report.warnings.append(
            f"the rebuilt work-item plan of {rebuilt.stage.name} differs from the recorded one (fingerprint "
            f"{recorded[:12]}…): this code plans other items or seeds; items are compared by id"
        )
    planned = {(item.split, item.item_id) for item in rebuilt.stage.items}
    unplanned = [k for k in keys if (k.split, k.item_id) not in planned]
    for key in unplanned:
        report.differences.append(
            Difference(key, "item_id", "item_id: released, but the rebuilt plan has no such item")
        )
    keys = [k for k in keys if (k.split, k.item_id) in planned]
    if not keys:
        return
    regenerated = regenerate(rebuilt, keys, features, work)
    released = _read_rows(source, [located[k] for k in keys])
    for key, row in zip(keys, released):
        again = regenerated.get(key)
        if again is None:
            report.differences.append(Difference(key, "item_id", "item_id: the stage made no row for this item"))
            continue
        found = compare_rows(key, row, again, rebuilt)
        report.differences += found
        report.matched += not found
        report.tolerated += not found and any(
            _is_image(value) and _is_image(again.get(column)) and value["bytes"] != again[column]["bytes"]
            for column, value in row.items()
        )
