"""A dataset directory as a release sees it: card spec, features and splits read back from disk.

Why a module of its own: publishing (:mod:`conceptforge.cards.publish`), the release diff
(:mod:`conceptforge.cards.release_diff`, which ``publish`` calls for the card's "Changes since"
lines) and ``conceptforge verify`` all read dataset directories the same way; keeping the reader
here lets them import it without importing each other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from datasets import Features

from conceptforge.argtypes import dataset_name_problem
from conceptforge.cards.card import DatasetMetadata, read_card_spec
from conceptforge.cards.dataset_dir import CARD_NAME, DATA_DIR, GRID_NAME, SCENES_DIR, SplitStats, shard_split
from conceptforge.cards.filter_stats import FilterStats
from conceptforge.cards.run_record import RECORD_NAME
from conceptforge.cards.validate import parse_card_yaml
from conceptforge.errors import ConceptforgeError, DataFormatError, DataNotFoundError, PublishError, one_line


@dataclass
class LocalDataset:
    """A dataset directory as the publish step sees it."""

    directory: Path
    metadata: DatasetMetadata
    features: Features | dict[str, Features]
    splits: list[SplitStats]
    has_grid: bool

    def data_paths(self) -> list[str]:
        """Parquet shards plus side files the release carries (CLEVR scene files under scenes/)."""
        extra = sorted(
            p.relative_to(self.directory).as_posix()
            for p in (self.directory / SCENES_DIR).rglob("*")
            if p.is_file() and not p.name.startswith(".")
        )
        record = [RECORD_NAME] if (self.directory / RECORD_NAME).is_file() else []
        return sorted(f for split in self.splits for f in split.files) + extra + record + self.spec_paths()

    def spec_paths(self) -> list[str]:
        """A release made from a benchmark spec carries it (``benchmark_spec.yaml``) and the files it
        names (``vocabulary/``: a binding spec's shape and material .blend files); presets carry neither."""
        if not (self.directory / SPEC_FILE_NAME).is_file():
            return []
        files = sorted(
            p.relative_to(self.directory).as_posix()
            for p in (self.directory / SPEC_FILES_DIR).rglob("*")
            if p.is_file() and not p.name.startswith(".")
        )
        return [SPEC_FILE_NAME, *files]


#: A release made from a benchmark spec carries the spec under this name, and the files the spec
#: names (a binding spec's shape and material .blend files) under SPEC_FILES_DIR.
SPEC_FILE_NAME, SPEC_FILES_DIR = "benchmark_spec.yaml", "vocabulary"


def read_dataset_dir(directory: str | Path) -> LocalDataset:
    """Read a dataset directory's card spec, features (from parquet) and splits (from the card).

    A repo with several configs (subsets) gives ``features`` as a mapping config -> Features.
    """
    directory = Path(directory)
    problem = dataset_name_problem(directory)
    if problem:
        raise DataFormatError(problem)
    card_path = directory / CARD_NAME
    if not directory.is_dir():
        raise DataNotFoundError(f"{directory} is not a directory")
    if not card_path.is_file() or not any((directory / DATA_DIR).rglob("*.parquet")):
        raise PublishError(
            f"{directory} is not a complete dataset directory (needs {CARD_NAME} and {DATA_DIR}/*.parquet)"
        )
    all_files = sorted(p.relative_to(directory).as_posix() for p in (directory / DATA_DIR).rglob("*.parquet"))
    metadata, features, splits = dataset_layout(
        card_path.read_text(encoding="utf-8"),
        all_files,
        lambda name: pq.read_schema(directory / name),
        where=str(directory),
    )
    return LocalDataset(directory, metadata, features, splits, (directory / GRID_NAME).is_file())


def dataset_layout(
    text: str,
    all_files: list[str],
    read_schema: Any,
    *,
    where: str,
) -> tuple[DatasetMetadata, Features | dict[str, Features], list[SplitStats]]:
    """Card spec, features and splits from a card's text and the repo's parquet paths.

    ``read_schema(path)`` gives a shard's Arrow schema: a local file here, a range read on the Hub
    for ``conceptforge verify`` (which reads a release without downloading all of it).
    """
    import fnmatch

    from conceptforge.cards.validate import _dataset_infos

    metadata = read_card_spec(text)
    data = parse_card_yaml(text)
    infos = _dataset_infos(data.get("dataset_info"))
    if not infos or any("splits" not in info for info in infos.values()):
        raise PublishError(f"the card of {where} has no dataset_info splits")
    patterns = {
        (config.get("config_name", "default"), entry["split"]): entry["path"]
        for config in data.get("configs") or []
        for entry in config.get("data_files") or []
    }
    features: dict[str, Features] = {}
    splits = []
    for config, info in infos.items():
        for split_info in info["splits"]:
            name = split_info["name"]
            pattern = patterns.get((config, name), f"{DATA_DIR}/{name}-*")
            # the pattern, and the shard name's own split (split names may contain dashes)
            split_files = [
                f for f in all_files if fnmatch.fnmatch(f, pattern) and shard_split(f.rsplit("/", 1)[-1]) == name
            ]
            if split_files and config not in features:
                try:
                    schema = read_schema(split_files[0])
                except (
                    OSError,
                    ValueError,
                ) as error:  # pyarrow's ArrowInvalid is a ValueError: truncated or not parquet
                    raise DataFormatError(
                        f"{where}/{split_files[0]} is not a readable parquet file ({one_line(error)}): "
                        "reassemble the dataset (`conceptforge assemble OUT --force`)"
                    ) from None
                features[config] = Features.from_arrow_schema(schema)
            splits.append(
                SplitStats(
                    name,
                    int(split_info.get("num_examples", 0)),
                    int(split_info.get("num_bytes", 0)),
                    split_files,
                    config,
                )
            )
    if isinstance(metadata.filter_stats, FilterStats):
        metadata.filter_stats.check()  # counts that do not add up are a filter bug, not a release
    if not features:
        raise ConceptforgeError(f"{where}: no parquet file matches the card's configs")
    merged: Features | dict[str, Features] = features["default"] if list(features) == ["default"] else features
    return metadata, merged, splits


def local_load_failure(directory: str | Path) -> ConceptforgeError | None:
    """Why ``datasets.load_dataset`` could not read the dataset folder ``directory``, in one line
    naming the split or the file, or None when nothing of ours explains it.

    Why: the datasets library says "Couldn't infer the same data file format for all splits" for a
    split whose parquet files are missing and "Parquet magic bytes not found" (no file name) for a
    damaged shard; neither says what to restore. Called only after such a failure, so reading
    every shard whole here costs nothing on the normal path."""
    directory = Path(directory)
    if not (directory / CARD_NAME).is_file():
        return None
    try:
        local = read_dataset_dir(directory)
    except DataFormatError as error:  # a damaged first shard of a config: already named
        return error
    except ConceptforgeError:
        return None
    missing = [s for s in local.splits if not s.files]
    if missing:
        names = ", ".join(s.name if s.config == "default" else f"{s.config}/{s.name}" for s in missing)
        return DataNotFoundError(
            f"{directory} lacks the parquet files of split(s) {names}: the card lists them but no file under "
            f"{DATA_DIR}/ matches; restore the files or reassemble the dataset (`conceptforge assemble OUT --force`)"
        )
    for relative in local.data_paths():
        if relative.endswith(".parquet"):
            problem = parquet_problem(directory / relative)
            if problem is not None:
                return problem
    return None


def parquet_problem(path: Path) -> DataFormatError | None:
    """A damaged or non-parquet file, named (None: it reads)."""
    try:
        pq.read_table(path)
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
        reason = re.sub(r"^Could not open Parquet input source '[^']*': ", "", one_line(error))
        return DataFormatError(
            f"{path} is not a readable parquet file ({reason}): regenerate or reassemble the dataset"
        )
    return None
