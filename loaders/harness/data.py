"""Load a published split: a Hub repo id at a revision, or a local dataset directory.

Both go through ``datasets.load_dataset`` so a local directory written by our generators and the
same data published on the Hub are read identically. Columns are checked up front so that a
wrong dataset fails with one line naming what is missing, not deep inside an evaluation.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from conceptforge.argtypes import dataset_name_problem
from conceptforge.errors import DataFormatError, DataNotFoundError

logger = logging.getLogger(__name__)


def load_split(source: str | os.PathLike, split: str, *, revision: str | None = None, config: str | None = None):
    """``datasets.Dataset`` for ``split`` of ``source`` (a local directory or ``org/name`` on the Hub)."""
    import datasets

    path = str(source)
    local = Path(path).exists()
    problem = dataset_name_problem(path) if local else None
    if problem:
        raise DataFormatError(problem)
    if local and not Path(path).is_dir():
        raise DataFormatError(f"{path} is a file, not a dataset directory")
    try:
        with _quiet_parquet_reader():
            dataset_dict = datasets.load_dataset(path, config, revision=None if local else revision)
    except datasets.exceptions.DatasetGenerationError:  # a shard failed to read: which one, if local
        from conceptforge.cards.local_dataset import local_load_failure

        known = local_load_failure(path) if local else None
        if known is not None:
            raise known from None
        raise  # the cause (a full disk, …) is translated by the command line
    except FileNotFoundError as error:
        raise DataNotFoundError(
            f"no dataset at {path!r}: {str(error).splitlines()[0] if str(error) else 'not found'}"
        ) from None
    except (ValueError, OSError, datasets.exceptions.DatasetNotFoundError) as error:  # type: ignore[attr-defined]
        if local:  # a missing split's files or a damaged shard: name it (the library's text does not)
            from conceptforge.cards.local_dataset import local_load_failure

            known = local_load_failure(path)
            if known is not None:
                raise known from None
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise DataFormatError(f"cannot load dataset {path!r}: {message}") from None
    if split not in dataset_dict:
        raise DataNotFoundError(f"dataset {path!r} has no split {split!r} (splits: {', '.join(dataset_dict)})")
    logger.info("loaded %s split %s: %d rows", path, split, len(dataset_dict[split]))
    return dataset_dict[split]


@contextmanager
def _quiet_parquet_reader() -> Iterator[None]:
    """The datasets parquet reader logs "Failed to read file …" at ERROR before raising; our one
    line says it (naming the file) instead, so that log line is held back while we load."""
    reader = logging.getLogger("datasets.packaged_modules.parquet.parquet")
    level = reader.level
    reader.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        reader.setLevel(level)


def require_columns(dataset, columns: Iterable[str], *, what: str) -> None:
    """One-line error naming every missing column."""
    missing = [column for column in columns if column not in dataset.column_names]
    if missing:
        raise DataFormatError(
            f"{what} dataset lacks column(s) {', '.join(missing)} (has: {', '.join(dataset.column_names)})"
        )


def image_column_raw(dataset, column: str = "image") -> list:
    """The image column as encoded ``{"bytes", "path"}`` dicts (no decoding: hashed for the cache,
    decoded only for images the embedding cache has not seen)."""
    import datasets

    feature = dataset.features.get(column)
    if isinstance(feature, datasets.Image):
        return list(dataset.cast_column(column, datasets.Image(decode=False))[column])
    return list(dataset[column])
