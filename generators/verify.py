"""``conceptforge verify``: regenerate a release's items from its provenance and compare them.

Why: generators are deterministic (binding is byte-identical across processes, shards and
resumes) and a release records its inputs (``provenance.json``, :mod:`cards.run_record`), so a
reader can check that the published rows are what the recorded code and settings make. The
chosen items are rebuilt through the same stage code (:mod:`generators.rebuild`), written to a
temporary item store by the run engine, turned into rows by the generator's own row function,
encoded with the release's own features, and compared with the released rows column by column:
images byte for byte (or at a stated PSNR where the bytes depend on the hardware, and in every
8×8 window too, so a small local edit is not averaged away), everything else exactly.

Before any item, the release is checked as a whole: in every config and split in scope, the
released ``item_id`` column must be the row list the record holds (:mod:`cards.run_record`,
``rows``): the same ids, each once, in the same order. A dropped, duplicated, added or reordered
row fails the release even when every remaining row regenerates.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import math
import tempfile
from collections import Counter
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
from conceptforge.generators.rebuild import (
    TOLERANCE_PSNR,
    TOLERANCE_WINDOW_PSNR,
    Rebuilt,
    Rule,
    elide,
    rebuild_config,
    tolerance,
)
from conceptforge.output import WORK_DIR

logger = logging.getLogger(__name__)

REPORT_FORMAT = "conceptforge-verify-report/1"
MAX_IDS_PRINTED = 50  # per config and split on the terminal; --report FILE lists every id
#: What ``verify`` says when every difference is an image within the PSNR tolerance under a
#: byte-for-byte rule. Why: binding renders on the CPU are byte-identical on one kind of CPU, but
#: Cycles' ray tracing (Embree) and Open Image Denoise choose their kernels by instruction set
#: (AVX2, AVX-512): the binding demo's two-object and relational images came out with other bytes
#: on an AVX-512 AMD EPYC than on the machines that recorded them (tests/specs/recordings.py).
HARDWARE_HINT = (
    "every difference is an image within the PSNR tolerance, every other column equal: what the same "
    "render gives on another kind of CPU (Cycles and Open Image Denoise pick their kernels by instruction "
    "set). If the release was made on another kind of machine, --tolerate-hardware compares its images "
    "under the PSNR rule and names each one that is not byte-identical"
)


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
    #: Compared byte for byte, this image differs, yet within the PSNR tolerance (whole image and
    #: every window): what the same render on another kind of CPU gives (see ``HARDWARE_HINT``).
    within_tolerance: bool = False

    def line(self) -> str:
        return f"differs: {_where(self.key)}: {self.detail}"


def _where(key: Key) -> str:
    return f"{key.item_id} split={key.split}" + (f" config={key.config}" if key.config != "default" else "")


@dataclass(frozen=True)
class ImageDistance:
    """How far a regenerated image is from the released one (see :func:`image_comparison`)."""

    psnr: float
    pixels: int  # differing pixel values (channels counted apart)
    peak: int  # max absolute difference
    window_psnr: float  # the worst ``window``×``window`` window's PSNR
    window: int
    window_at: tuple[int, int]  # its top-left corner (x, y)

    def describe(self) -> str:
        return (
            f"PSNR {self.psnr:.1f} dB (worst {self.window}x{self.window} window {self.window_psnr:.1f} dB at "
            f"x={self.window_at[0]}, y={self.window_at[1]}), {self.pixels} pixel value(s) differ, max |diff| {self.peak}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "psnr": _finite(self.psnr),
            "window_psnr": _finite(self.window_psnr),
            "window": self.window,
            "window_at": list(self.window_at),
            "pixels": self.pixels,
            "max_abs_diff": self.peak,
        }


def _finite(value: float) -> float | None:
    return round(value, 3) if math.isfinite(value) else None


@dataclass
class Tolerated:
    """An image that matched under the PSNR rule although its bytes differ: named, with its distance."""

    key: Key
    column: str
    distance: ImageDistance

    def line(self) -> str:
        return f"tolerated: {_where(self.key)}: {self.column}: {self.distance.describe()}"


@dataclass
class VerifyReport:
    source: str
    checked: int = 0
    matched: int = 0
    differences: list[Difference] = field(default_factory=list)
    tolerances: list[Tolerated] = field(default_factory=list)
    rules: dict[str, str] = field(default_factory=dict)  # config -> rule applied
    warnings: list[str] = field(default_factory=list)
    row_problems: list[str] = field(default_factory=list)  # the row set against the recorded plan
    checked_keys: list[Key] = field(default_factory=list)
    row_sets: dict[str, int] = field(default_factory=dict)  # "config/split" -> rows checked against the plan

    @property
    def tolerated(self) -> int:
        """Items matched under a PSNR rule although some image bytes differ."""
        return len({t.key for t in self.tolerances if t.key not in {d.key for d in self.differences}})

    @property
    def ok(self) -> bool:
        return not self.differences and not self.row_problems and self.checked == self.matched

    def checked_lines(self, *, limit: int | None = MAX_IDS_PRINTED) -> list[str]:
        """``checked single-object/val (2): val-000000, val-000001``: the ids checked, per config and split."""
        by_stratum: dict[tuple[str, str], list[str]] = {}
        for key in self.checked_keys:
            by_stratum.setdefault((key.config, key.split), []).append(key.item_id)
        out = []
        for (config, split), ids in by_stratum.items():
            shown = ids if limit is None else ids[:limit]
            more = "" if len(shown) == len(ids) else f", … ({len(ids) - len(shown)} more: --report FILE lists them)"
            name = split if config == "default" else f"{config}/{split}"
            out.append(f"checked {name} ({len(ids)}): " + ", ".join(shown) + more)
        return out

    def lines(self) -> list[str]:
        out = [f"warning: {w}" for w in self.warnings]
        out += [f"rows: {p}" for p in self.row_problems]
        out += self.checked_lines()
        out += [t.line() for t in self.tolerances if t.key not in {d.key for d in self.differences}]
        out += [d.line() for d in self.differences]
        for config, rule in self.rules.items():
            out.append(f"rule{'' if config == 'default' else f' ({config})'}: {rule}")
        if self.differences and not self.row_problems and all(d.within_tolerance for d in self.differences):
            out.append(f"hint: {HARDWARE_HINT}")
        differing = len({d.key for d in self.differences})
        tolerated = f" ({self.tolerated} within the PSNR tolerance, not byte-identical)" if self.tolerated else ""
        rows = (
            f"; the row set differs from the recorded plan ({len(self.row_problems)} problem(s))"
            if self.row_problems
            else f"; rows as recorded in {', '.join(self.row_sets)}"
            if self.row_sets
            else ""
        )
        out.append(
            f"{'verified' if self.ok else 'FAILED'}: {self.matched} of {self.checked} item(s) of {self.source} "
            f"match{tolerated}{'' if not differing else f'; {differing} differ'}{rows}"
        )
        return out

    def to_dict(self) -> dict[str, Any]:
        """The ``--report`` file: every checked id with its outcome, the row-set problems, rules and warnings."""
        differing = {d.key for d in self.differences}
        tolerated = {t.key: t for t in self.tolerances}
        return {
            "format": REPORT_FORMAT,
            "source": self.source,
            "ok": self.ok,
            "checked": self.checked,
            "matched": self.matched,
            "tolerated": self.tolerated,
            "rules": self.rules,
            "warnings": self.warnings,
            "rows": {"checked": self.row_sets, "problems": self.row_problems},
            "items": [
                {
                    "config": key.config,
                    "split": key.split,
                    "item_id": key.item_id,
                    "outcome": "differs" if key in differing else "tolerated" if key in tolerated else "identical",
                    **({"image": tolerated[key].distance.to_dict()} if key in tolerated else {}),
                    **(
                        {"differences": [d.detail for d in self.differences if d.key == key]}
                        if key in differing
                        else {}
                    ),
                }
                for key in self.checked_keys
            ],
        }


# -- the row set --------------------------------------------------------------------------------------
def _split_name(config: str, split: str) -> str:
    return split if config == "default" else f"{config}/{split}"


def _ids(values: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(values[:limit])
    return shown + (f", … ({len(values) - limit} more)" if len(values) > limit else "")


def compare_ids(where: str, recorded: Sequence[str] | None, released: Sequence[str] | None) -> list[str]:
    """How the released ids of one split differ from the recorded list: count, duplicates,
    missing and unrecorded ids, order (one line each; empty: the same list)."""
    if recorded is None:
        return [f"{where}: released ({len(released or [])} rows) but the record has no such split"]
    if released is None:
        return [f"{where}: the record lists {len(recorded)} row(s); the release has no such split"]
    if list(recorded) == list(released):
        return []
    problems = []
    if len(recorded) != len(released):
        problems.append(f"{where}: {len(released)} row(s) released, {len(recorded)} recorded")
    counts = Counter(released)
    duplicated = [f"{i} ({n} rows)" for i, n in counts.items() if n > 1]
    if duplicated:
        problems.append(f"{where}: duplicated {_ids(duplicated)}")
    expected = set(recorded)
    missing = [i for i in dict.fromkeys(recorded) if i not in counts]
    if missing:
        problems.append(f"{where}: missing {_ids(missing)}")
    unrecorded = [i for i in counts if i not in expected]
    if unrecorded:
        problems.append(f"{where}: not in the recorded plan {_ids(unrecorded)}")
    if not problems:  # the same ids, each once: only the order differs
        at = next(i for i, (a, b) in enumerate(zip(recorded, released)) if a != b)
        problems.append(f"{where}: reordered: row {at} is {released[at]}, the record has {recorded[at]} there")
    return problems


def check_row_set(
    record: Mapping[str, Any],
    released: Mapping[tuple[str, str], list[str]],
    configs: Sequence[str],
    card_rows: Mapping[tuple[str, str], int],
    report: VerifyReport,
) -> None:
    """The released rows of ``configs`` against the record's row lists (count, ids, order, no
    duplicates), into ``report.row_problems``; contradictions between the record, the card and
    the shards into ``report.warnings``. A record without row lists (made before they existed)
    is checked against its plan's item count, and later against the rebuilt plan's ids."""
    for config in configs:
        entry = record["configs"].get(config) or {}
        here = {split: ids for (c, split), ids in released.items() if c == config}
        for split, ids in here.items():
            said = card_rows.get((config, split))
            if said is not None and said != len(ids):
                report.warnings.append(
                    f"the card says {said} row(s) for {_split_name(config, split)}, its shards hold {len(ids)}"
                )
        planned = (entry.get("plan") or {}).get("items")
        rows = entry.get("rows")
        total = sum(len(ids) for ids in here.values())
        if rows is None:
            report.warnings.append(
                f"{RECORD_NAME} of {config} predates row lists: the row set is checked against the plan's item "
                "count and the rebuilt plan only"
            )
            for split, ids in here.items():
                duplicated = [f"{i} ({n} rows)" for i, n in Counter(ids).items() if n > 1]
                if duplicated:
                    report.row_problems.append(f"{_split_name(config, split)}: duplicated {_ids(duplicated)}")
            if isinstance(planned, int) and planned != total:
                report.row_problems.append(
                    f"{config}: {total} row(s) released, the recorded plan has {planned} item(s)"
                )
            continue
        recorded_total = sum(len(ids) for ids in rows.values())
        if isinstance(planned, int) and planned != recorded_total:
            report.warnings.append(
                f"{RECORD_NAME} contradicts itself for {config}: its plan has {planned} item(s), its row list "
                f"{recorded_total} (items that failed were assembled without?)"
            )
        for split in list(here) + [s for s in rows if s not in here]:  # the release's split order
            found = compare_ids(_split_name(config, split), rows.get(split), here.get(split))
            report.row_problems += found
            if split in here and split in rows:
                report.row_sets[_split_name(config, split)] = len(here[split])


# -- choosing items ---------------------------------------------------------------------------------
def released_rows(
    files: ReleaseFiles, splits: Sequence[SplitStats]
) -> dict[tuple[str, str], list[tuple[str, str, int]]]:
    """(config, split) -> every released row as (item id, shard, row index), in shard order,
    duplicates kept; only the ``item_id`` column is read."""
    found: dict[tuple[str, str], list[tuple[str, str, int]]] = {}
    for split in splits:
        rows = found.setdefault((split.config, split.name), [])
        for name in split.files:
            with files.open(name) as handle:
                # ParquetFile, not read_table: read_table on a Python file object can abort the
                # process at exit (pyarrow 25; see conceptforge.engine.store.decode_chunk)
                ids = pq.ParquetFile(handle).read(columns=[ID_COLUMN]).column(ID_COLUMN).to_pylist()
            rows += [(str(item_id), name, index) for index, item_id in enumerate(ids)]
    return found


def released_keys(files: ReleaseFiles, splits: Sequence[SplitStats]) -> dict[Key, tuple[str, int]]:
    """Every released row's key -> (shard, row index) of its first occurrence."""
    located: dict[Key, tuple[str, int]] = {}
    for (config, split), rows in released_rows(files, splits).items():
        for item_id, name, index in rows:
            located.setdefault(Key(config, split, item_id), (name, index))
    return located


def _sample_order(key: Key) -> str:
    return hashlib.sha256(f"{key.config}/{key.split}/{key.item_id}".encode()).hexdigest()


def choose(keys: Sequence[Key], *, sample: int | None, items: Sequence[str] | None, config: str | None) -> list[Key]:
    """``--all`` (neither given), ``--items`` or a deterministic ``--sample`` stratified over every
    config and split.

    ``--sample N`` takes the configs' splits (strata) in sorted order, round robin, each stratum's
    items in the order of their hash: every stratum gets ``N // strata`` items or one more (as
    long as it has them), whatever the strata's sizes: at paper size a 20-item sample holds
    single-object val and gen items although they are under 1% of the rows.
    """
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
        pools: dict[tuple[str, str], list[Key]] = {}
        for key in dict.fromkeys(keys):
            pools.setdefault((key.config, key.split), []).append(key)
        strata = sorted(pools)
        for stratum in strata:
            pools[stratum].sort(key=_sample_order)
        picked: dict[tuple[str, str], list[Key]] = {stratum: [] for stratum in strata}
        taken, depth = 0, 0
        while taken < sample and any(depth < len(pools[s]) for s in strata):
            for stratum in strata:
                if taken < sample and depth < len(pools[stratum]):
                    picked[stratum].append(pools[stratum][depth])
                    taken += 1
            depth += 1
        return [key for stratum in strata for key in picked[stratum]]
    return list(keys)


# -- comparing --------------------------------------------------------------------------------------
def _is_image(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"bytes", "path"}


def _pixels(a: bytes, b: bytes):
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(a)) as x, Image.open(io.BytesIO(b)) as y:
        return np.asarray(x.convert("RGB"), dtype=np.float64), np.asarray(y.convert("RGB"), dtype=np.float64)


def _psnr(mse: float) -> float:
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def image_distance(a: bytes, b: bytes) -> tuple[float, int, int]:
    """(PSNR in dB, differing pixel values, max absolute difference) between two encoded images."""
    found = image_comparison(a, b)
    return found.psnr, found.pixels, found.peak


def image_comparison(a: bytes, b: bytes, *, window: int = 8) -> ImageDistance:
    """The whole image's PSNR and the worst ``window``×``window`` window's (every position, by
    an integral image of the squared error summed over channels), and the differing values."""
    import numpy as np

    left, right = _pixels(a, b)
    if left.shape != right.shape:
        return ImageDistance(-math.inf, int(max(left.size, right.size)), 255, -math.inf, window, (0, 0))
    delta = np.abs(left - right)
    squared = (delta**2).sum(axis=2)
    height, width = squared.shape
    size = max(1, min(window, height, width))
    integral = np.zeros((height + 1, width + 1))
    integral[1:, 1:] = squared.cumsum(axis=0).cumsum(axis=1)
    sums = integral[size:, size:] - integral[:-size, size:] - integral[size:, :-size] + integral[:-size, :-size]
    y, x = np.unravel_index(int(np.argmax(sums)), sums.shape)
    window_mse = float(sums[y, x]) / (size * size * left.shape[2])
    return ImageDistance(
        _psnr(float(np.mean(delta**2))),
        int(np.count_nonzero(delta)),
        int(delta.max(initial=0)),
        _psnr(window_mse),
        size,
        (int(x), int(y)),
    )


def within_tolerance(distance: ImageDistance) -> bool:
    """Whether an image this far from the released one passes the PSNR rule (whole and windows)."""
    return distance.psnr >= TOLERANCE_PSNR and distance.window_psnr >= TOLERANCE_WINDOW_PSNR


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def compare_values(
    released: Any,
    regenerated: Any,
    path: str,
    rule: Rule,
    tolerated: list[tuple[str, ImageDistance]] | None = None,
    near: list[str] | None = None,
) -> str | None:
    """How ``regenerated`` differs from ``released`` at ``path`` (None: equal under ``rule``).
    Images that differ but pass the rule are appended to ``tolerated`` as (path, distance); under
    a byte-for-byte rule, the paths of differing images within the PSNR tolerance go to ``near``."""
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
        found = image_comparison(a, b, window=rule.window)
        if rule.min_psnr is not None and found.psnr >= rule.min_psnr:
            if rule.min_window_psnr is not None and found.window_psnr < rule.min_window_psnr:
                return (
                    f"{path}: localised change: the whole image reaches {found.psnr:.1f} dB but the "
                    f"{found.window}x{found.window} window at x={found.window_at[0]}, y={found.window_at[1]} only "
                    f"{found.window_psnr:.1f} dB (rule: >= {rule.min_window_psnr:g} dB in every window); "
                    f"{found.pixels} pixel value(s) differ, max |diff| {found.peak}"
                )
            if tolerated is not None:
                tolerated.append((path, found))
            return None
        if near is not None and rule.min_psnr is None and within_tolerance(found):
            near.append(path)
        return (
            f"{path}: image bytes differ (PSNR {found.psnr:.1f} dB, {found.pixels} pixel value(s) differ, "
            f"max |diff| {found.peak})"
        )
    if isinstance(released, dict) and isinstance(regenerated, dict):
        for key in list(released) + [k for k in regenerated if k not in released]:
            found = compare_values(released.get(key), regenerated.get(key), f"{path}.{key}", rule, tolerated, near)
            if found:
                return found
        return None
    if isinstance(released, list) and isinstance(regenerated, list):
        if len(released) != len(regenerated):
            return f"{path}: {len(released)} value(s) released, {len(regenerated)} regenerated"
        for index, (a, b) in enumerate(zip(released, regenerated)):
            found = compare_values(a, b, f"{path}[{index}]", rule, tolerated, near)
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
    key: Key,
    released: Mapping[str, Any],
    regenerated: Mapping[str, Any],
    rebuilt: Rebuilt,
    tolerances: list[Tolerated] | None = None,
) -> list[Difference]:
    """One :class:`Difference` per differing column (the first difference inside it); images
    within the rule's tolerance are added to ``tolerances``."""
    found = []
    for column in list(released) + [c for c in regenerated if c not in released]:
        a, b = released.get(column), regenerated.get(column)
        if column in rebuilt.path_columns:
            a, b = elide(a), elide(b)
        if column in rebuilt.revision_columns and a == "local" and str(b).startswith("local-sha256:"):
            b = a  # an earlier release's spelling of a local folder's revision
        near: list[tuple[str, ImageDistance]] = []
        hardware_like: list[str] = []
        detail = compare_values(a, b, column, rebuilt.rule, near, hardware_like)
        if detail:
            found.append(Difference(key, column, detail, within_tolerance=bool(hardware_like)))
        elif tolerances is not None:
            tolerances += [Tolerated(key, path, distance) for path, distance in near]
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
    tolerate_hardware: bool = False,
) -> VerifyReport:
    """Check the release's row set against its record, then regenerate the chosen items of
    ``source`` and compare them with its rows (module docstring). ``tolerate_hardware``: compare
    images under the PSNR rule where the generator's rule is byte for byte (a release made on
    another kind of CPU; see :data:`HARDWARE_HINT`)."""
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
    rows = released_rows(source, splits)
    located: dict[Key, tuple[str, int]] = {}
    for (name, split), found in rows.items():
        for item_id, shard, index in found:
            located.setdefault(Key(name, split, item_id), (shard, index))
    chosen = choose(list(located), sample=sample, items=items, config=config)
    report.checked = len(chosen)
    report.checked_keys = list(chosen)

    configs = list(dict.fromkeys(c for c, _ in rows if config is None or c == config))
    unrecorded = [c for c in configs if c not in record["configs"]]
    for name in unrecorded:
        report.row_problems.append(f"config {name} is released, but {RECORD_NAME} has no entry for it")
    absent = [c for c in record["configs"] if c not in {c for c, _ in rows} and config in (None, c)]
    if absent:
        report.warnings.append(f"{RECORD_NAME} records config(s) {', '.join(absent)} that the release does not hold")
    card_rows = {(s.config, s.name): s.num_examples for s in splits}
    ids = {key: [item_id for item_id, _, _ in found] for key, found in rows.items()}
    check_row_set(record, ids, [c for c in configs if c not in unrecorded], card_rows, report)

    order = list(record["configs"])
    for name in sorted({k.config for k in chosen}, key=lambda c: (order.index(c) if c in order else len(order), c)):
        entry = record["configs"].get(name)
        if entry is None:
            raise DataFormatError(f"{source.label}: {RECORD_NAME} has no entry for config {name!r}")
        keys = [k for k in chosen if k.config == name]
        with tempfile.TemporaryDirectory(prefix="conceptforge-verify-") as work:
            rebuilt = rebuild_config(
                record["generator"],
                entry,
                weights=weights or {},
                device=device,
                out=Path(work) / "regenerated",
                release=source,
            )
            if tolerate_hardware and rebuilt.rule.min_psnr is None:
                rebuilt.rule = tolerance(f"--tolerate-hardware, over the generator's rule: {rebuilt.rule.why}")
            report.rules[name] = rebuilt.rule.describe()
            try:
                if "rows" not in entry:  # an older record: the rebuilt plan stands in for its row list
                    _check_against_plan(rebuilt, entry, name, ids, report)
                _verify_config(rebuilt, entry, keys, located, features[name], report, Path(work), source)
            finally:
                rebuilt.close()
    return report


def _check_against_plan(
    rebuilt: Rebuilt,
    entry: Mapping[str, Any],
    config: str,
    ids: Mapping[tuple[str, str], list[str]],
    report: VerifyReport,
) -> None:
    """A record without row lists: compare each split's ids with the rebuilt plan's, in plan
    order, when the rebuilt plan is the recorded one (same fingerprint)."""
    from conceptforge.engine.runner import items_fingerprint

    recorded = (entry.get("plan") or {}).get("fingerprint")
    if not recorded or items_fingerprint(rebuilt.stage.items) != recorded:
        return
    planned: dict[str, list[str]] = {}
    for item in rebuilt.stage.items:
        planned.setdefault(item.split, []).append(item.item_id)
    here = {split: found for (c, split), found in ids.items() if c == config}
    for split in list(planned) + [s for s in here if s not in planned]:
        report.row_problems += compare_ids(_split_name(config, split), planned.get(split), here.get(split))
        if split in here and split in planned:
            report.row_sets[_split_name(config, split)] = len(here[split])


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
        found = compare_rows(key, row, again, rebuilt, report.tolerances)
        report.differences += found
        report.matched += not found
