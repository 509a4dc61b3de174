"""What changed between two releases of a dataset: rows added, removed and changed, per split.

Why rows, not files: a shard's bytes change when one row in it changes (and shard boundaries
move with sizes), so comparing files says little. Every row is hashed by its content (image
bytes included) and keyed by its ``item_id``; two releases then differ by the ids only one has
and by the ids whose hash differs, and by the ids that moved (the same rows in another order are
another release: ``verify`` rebuilds items by position). The same computation feeds ``conceptforge diff A B`` and the
"Changes since vX" section that ``publish`` writes into a release card.

Memory: one hash per row (a few dozen bytes), read a row group at a time.
"""

from __future__ import annotations

import hashlib
import math
import struct
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from datasets import Features

from conceptforge.cards.dataset_dir import CARD_NAME, DATA_DIR, ID_COLUMN
from conceptforge.cards.validate import feature_type
from conceptforge.errors import DataFormatError, one_line

#: Card fields that change with every release and say nothing about the data.
RELEASE_FIELDS = ("version", "previous_version", "repo_id", "changes_since", "changes")
MAX_IDS_SHOWN = 10


def _update(digest: Any, value: Any) -> None:
    """Feed ``value`` into ``digest`` with type tags, so ``1`` / ``1.0`` / ``"1"`` / ``[1]`` differ."""
    if value is None:
        digest.update(b"N")
    elif isinstance(value, bool):
        digest.update(b"T" if value else b"F")
    elif isinstance(value, int):
        digest.update(b"i" + str(value).encode() + b";")
    elif isinstance(value, float):
        digest.update(b"f" + (b"nan" if math.isnan(value) else struct.pack("<d", value)))
    elif isinstance(value, str):
        data = value.encode("utf-8")
        digest.update(b"s" + struct.pack("<Q", len(data)) + data)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        digest.update(b"b" + struct.pack("<Q", len(data)) + data)
    elif isinstance(value, Mapping):
        digest.update(b"{" + struct.pack("<Q", len(value)))
        for key in sorted(value):
            _update(digest, str(key))
            _update(digest, value[key])
    elif isinstance(value, (list, tuple)):
        digest.update(b"[" + struct.pack("<Q", len(value)))
        for item in value:
            _update(digest, item)
    else:  # dates, decimals: their text form
        _update(digest, f"{type(value).__name__}:{value}")


def row_hash(row: Mapping[str, Any]) -> str:
    """The content hash of one row (every column, image bytes included)."""
    digest = hashlib.sha256()
    _update(digest, row)
    return digest.hexdigest()


def iter_rows(files: list[Path]) -> Iterator[dict[str, Any]]:
    """The rows of a split's shards, in order, a row group at a time."""
    for path in files:
        try:
            parquet = pq.ParquetFile(path)
            for group in range(parquet.num_row_groups):
                rows = parquet.read_row_group(group).to_pylist()
                yield from rows
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid names no file: we do (R_ND13)
            raise DataFormatError(
                f"{path} is not a readable parquet file ({one_line(error)}): regenerate or reassemble the dataset"
            ) from None


def row_key(row: Mapping[str, Any], index: int) -> str:
    """A row's identity: its ``item_id``, or its position for datasets without one."""
    value = row.get(ID_COLUMN)
    return str(value) if value is not None else f"#{index}"


@dataclass
class Snapshot:
    """One release as the diff sees it: row hashes per ``config/split``, schema and card spec;
    ``duplicates``: per ``config/split``, the ids held by more than one row (with their count)."""

    label: str
    rows: dict[str, dict[str, str]]
    features: dict[str, dict[str, str]]
    metadata: dict[str, Any]
    duplicates: dict[str, dict[str, int]] = field(default_factory=dict)


def split_key(config: str, split: str) -> str:
    return split if config == "default" else f"{config}/{split}"


def snapshot(directory: str | Path, *, label: str | None = None) -> Snapshot:
    """Hash every row of the dataset directory ``directory`` (see :func:`row_hash`)."""
    from conceptforge.cards.local_dataset import read_dataset_dir

    local = read_dataset_dir(directory)
    rows: dict[str, dict[str, str]] = {}
    duplicates: dict[str, dict[str, int]] = {}
    for split in local.splits:
        hashes: dict[str, str] = {}
        counts: dict[str, int] = {}
        for index, row in enumerate(iter_rows([local.directory / f for f in split.files])):
            key = row_key(row, index)
            counts[key] = counts.get(key, 0) + 1
            if counts[key] == 1:  # a duplicated id is compared by its first row and listed apart
                hashes[key] = row_hash(row)
        rows[split_key(split.config, split.name)] = hashes
        repeated = {key: n for key, n in counts.items() if n > 1}
        if repeated:
            duplicates[split_key(split.config, split.name)] = repeated
    features = {"default": local.features} if isinstance(local.features, Features) else local.features
    schema = {config: {name: feature_type(feature) for name, feature in f.items()} for config, f in features.items()}
    return Snapshot(label or str(directory), rows, schema, local.metadata.to_dict(), duplicates)


@dataclass
class SplitChanges:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)  # ids the new release holds in several rows
    deduplicated: list[str] = field(default_factory=list)  # ids the old release held in several rows, the new once
    # ids both releases hold, at another place among them in the new one: a reordered split is a
    # different release (verify rebuilds items by position, loaders and seeds follow the order)
    moved: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.duplicated or self.deduplicated or self.moved)


@dataclass
class ReleaseDiff:
    """Rows added/removed/changed per split, and schema and card changes, from ``old`` to ``new``."""

    old: str
    new: str
    splits: dict[str, SplitChanges]
    features: list[str]
    card: list[str]

    @property
    def empty(self) -> bool:
        return all(s.empty for s in self.splits.values()) and not self.features and not self.card

    def summary_lines(self, *, max_ids: int | None = MAX_IDS_SHOWN) -> list[str]:
        """One line per split with a change, then schema and card lines (ids shown up to ``max_ids``)."""

        def ids(values: list[str]) -> str:
            shown = values if max_ids is None else values[:max_ids]
            more = "" if len(shown) == len(values) else f", … ({len(values) - len(shown)} more)"
            return ", ".join(f"`{v}`" for v in shown) + more

        lines = []
        for name, change in self.splits.items():
            parts = [
                f"{kind} {len(values)} ({ids(values)})"
                for kind, values in (
                    ("added", change.added),
                    ("removed", change.removed),
                    ("changed", change.changed),
                    ("duplicate ids", change.duplicated),
                    ("no longer duplicated", change.deduplicated),
                    ("moved", change.moved),
                )
                if values
            ]
            if parts:
                lines.append(f"split `{name}`: " + "; ".join(parts))
        lines += [f"features: {line}" for line in self.features]
        lines += [f"card: {line}" for line in self.card]
        return lines


MAX_VALUE_SHOWN = 80  # characters of a card value in a change line


def _shown(value: Any) -> str:
    """A card value in a change line: JSON-like, cut at :data:`MAX_VALUE_SHOWN` characters."""
    import json

    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_VALUE_SHOWN else text[: MAX_VALUE_SHOWN - 1] + "…"


def _dict_changes(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Where two JSON values differ, with the old and new values: ``provenance.seeds.run: 0 -> 1``
    (nested mappings are walked; added and removed keys show their one value)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        found = []
        for key in sorted(set(old) | set(new), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in old:
                found.append(f"{path} added: {_shown(new[key])}")
            elif key not in new:
                found.append(f"{path} removed (was {_shown(old[key])})")
            else:
                found += _dict_changes(old[key], new[key], path)
        return found
    return [] if old == new else [f"{prefix}: {_shown(old)} -> {_shown(new)}"]


def moved_ids(before: Sequence[str], after: Sequence[str]) -> list[str]:
    """The ids both orders hold that the new order puts at another place among the shared ids
    (added and removed rows do not count as moving the others), in the new order."""
    kept = set(before) & set(after)
    old_order = [key for key in before if key in kept]
    new_order = [key for key in after if key in kept]
    return [key for key, was in zip(new_order, old_order) if key != was]


def diff_snapshots(old: Snapshot, new: Snapshot) -> ReleaseDiff:
    splits: dict[str, SplitChanges] = {}
    for name in list(old.rows) + [n for n in new.rows if n not in old.rows]:
        before, after = old.rows.get(name, {}), new.rows.get(name, {})
        repeated = new.duplicates.get(name, {})
        splits[name] = SplitChanges(
            added=[key for key in after if key not in before],
            removed=[key for key in before if key not in after],
            changed=[key for key in after if key in before and before[key] != after[key]],
            duplicated=[f"{key} ×{count}" for key, count in repeated.items()],
            deduplicated=[key for key in old.duplicates.get(name, {}) if key in after and key not in repeated],
            moved=moved_ids(list(before), list(after)),
        )
    features = []
    for config in list(old.features) + [c for c in new.features if c not in old.features]:
        where = "" if config == "default" else f"config `{config}`: "
        if config not in new.features:
            features.append(f"{where}removed")
            continue
        if config not in old.features:
            features.append(f"{where}added")
            continue
        a, b = old.features[config], new.features[config]
        features += [f"{where}column `{c}` added ({b[c]})" for c in b if c not in a]
        features += [f"{where}column `{c}` removed" for c in a if c not in b]
        features += [f"{where}column `{c}`: {a[c]} -> {b[c]}" for c in a if c in b and a[c] != b[c]]
    card_old = {k: v for k, v in old.metadata.items() if k not in RELEASE_FIELDS}
    card_new = {k: v for k, v in new.metadata.items() if k not in RELEASE_FIELDS}
    return ReleaseDiff(old.label, new.label, splits, features, _dict_changes(card_old, card_new))


def diff_dirs(
    old: str | Path, new: str | Path, *, old_label: str | None = None, new_label: str | None = None
) -> ReleaseDiff:
    """:func:`diff_snapshots` of two dataset directories."""
    return diff_snapshots(snapshot(old, label=old_label), snapshot(new, label=new_label))


def changes_lines(diff: ReleaseDiff, *, max_ids: int = MAX_IDS_SHOWN) -> list[str]:
    """The card's "Changes since" bullet lines: counts per split, then schema and card changes."""
    return diff.summary_lines(max_ids=max_ids)


def release_changes(directory: Path, repo_id: str, previous: Any, *, api: Any, local: dict[str, Path]) -> list[str]:
    """The card's "Changes since" lines: rows, features and card settings of ``directory`` against the
    published ``previous`` release, for ``publish``.

    Only the previous card and the shards whose content this release does not hold are downloaded
    (into the Hub cache): a shard with the same sha256 as a local one (``local``: sha256 -> path)
    is read from disk, so a new version that changes a few rows fetches a few shards.
    """
    from conceptforge.cards.hub_remote import REPO_TYPE, _remote_files

    remote = _remote_files(api, repo_id, str(previous))
    with tempfile.TemporaryDirectory(prefix="conceptforge-previous-") as folder:
        for path, entry in remote.items():
            if path != CARD_NAME and not path.startswith(f"{DATA_DIR}/"):
                continue
            target = Path(folder) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            same = local.get(entry.lfs.sha256) if entry.lfs is not None else None
            source = same or api.hf_hub_download(repo_id, path, repo_type=REPO_TYPE, revision=str(previous))
            target.symlink_to(Path(source).resolve())
        return changes_lines(diff_dirs(folder, directory, old_label=str(previous), new_label="this release"))
