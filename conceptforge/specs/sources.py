"""Where a spec's concepts come from: a ``datasets`` dataset (on the Hub at a pinned revision, or
local), or an ImageFolder (``<root>/<class>/<image>``).

A method's spec embeds a :class:`DatasetSource` under ``source:``; :func:`open_source` returns
the ``datasets.Dataset`` split it names. Paper readers (CUB, PACS, ImageNet, MIT-States) stay in
their methods and appear in a spec as their own source kinds beside these.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ConfigDict

from conceptforge.errors import ConceptforgeError, DataFormatError, DataNotFoundError, HubError
from conceptforge.hub_ids import repo_id_problem
from conceptforge.specs.validation import check_exactly_one, spec_error

logger = logging.getLogger(__name__)


@cache
def imagefolder_suffixes() -> frozenset[str]:
    """The file suffixes ``datasets``' imagefolder loader reads: a class folder it would find
    empty is refused here, before it silently drops the class."""
    from datasets.packaged_modules.imagefolder.imagefolder import ImageFolder

    return frozenset(suffix.lower() for suffix in ImageFolder.EXTENSIONS)


@dataclass(frozen=True)
class DatasetSource:
    """One dataset: exactly one of ``hub`` (with ``revision``), ``path`` or ``imagefolder``.

    ``hub``: ``ORG/NAME`` read with ``datasets.load_dataset`` at ``revision`` (a tag or commit:
    a benchmark must say which data it was made from). ``path``: a local dataset directory (the
    Hub layout, parquet/csv/json files, or a ``save_to_disk`` folder). ``imagefolder``: a folder
    of class folders of images; the class is the folder name.
    """

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    hub: str | None = None
    revision: str | None = None
    path: str | None = None
    imagefolder: str | None = None
    config: str | None = None
    split: str = "train"
    image_column: str = "image"
    class_column: str = "label"

    def check(self, *, source: str = "", location: str = "source") -> None:
        given = [name for name in ("hub", "path", "imagefolder") if getattr(self, name)]
        check_exactly_one(given, "hub (with revision), path or imagefolder", location=location, source=source)
        if self.hub:
            problem = repo_id_problem(self.hub)
            if problem:
                raise spec_error(f"{location}.hub", problem, source=source)
            if not self.revision:
                raise spec_error(
                    f"{location}.revision",
                    "a Hub source needs a pinned revision (a tag or commit); add e.g. 'revision: v1.0.0'",
                    source=source,
                )
        elif self.revision:
            raise spec_error(f"{location}.revision", "applies to a hub source only; remove it", source=source)
        if self.imagefolder and self.config:
            raise spec_error(f"{location}.config", "an imagefolder has no configs; remove it", source=source)

    @property
    def description(self) -> str:
        """How the card names it: ``ORG/NAME@REV``, a local path, or ``imagefolder PATH``."""
        if self.hub:
            return f"{self.hub}@{self.revision}"
        if self.imagefolder:
            return f"imagefolder {self.imagefolder}"
        return str(self.path)


def resolve_path(text: str, base_dir: Path) -> Path:
    """A spec's relative path is relative to the spec file's folder, not to the working directory."""
    path = Path(text).expanduser()
    return path if path.is_absolute() else base_dir / path


def _at(spec_source: str, location: str) -> str:
    """``cars.yaml: source.path`` — where a problem is, as :func:`spec_error` says it."""
    return ": ".join(part for part in (spec_source, location) if part)


def image_folder_classes(
    root: Path, *, location: str = "source.imagefolder", source: str = ""
) -> dict[str, list[Path]]:
    """``class -> sorted image paths`` of an ImageFolder; a class folder without images is an error."""
    if not root.is_dir():
        raise DataNotFoundError(
            f"{_at(source, location)}: no such folder {str(root)!r}; give the folder holding one folder per class"
        )
    classes: dict[str, list[Path]] = {}
    for folder in sorted(child for child in root.iterdir() if child.is_dir() and not child.name.startswith(".")):
        images = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in imagefolder_suffixes())
        if not images:
            raise spec_error(
                location,
                f"class folder {folder.name!r} has no images (.jpg, .png, … as datasets' imagefolder reads); "
                "add images or remove the folder",
                source=source,
            )
        classes[folder.name] = images
    if not classes:
        raise spec_error(
            location, f"{str(root)!r} has no class folders; lay it out as <root>/<class>/<image>", source=source
        )
    return classes


#: Files ``datasets.load_dataset`` reads from a local folder (the Hub layout and plain files).
DATA_SUFFIXES = frozenset({".parquet", ".arrow", ".csv", ".tsv", ".json", ".jsonl", ".txt", ".tar", ".zip"})


def _has_data_files(root: Path) -> bool:
    return any(
        path.is_file()
        and path.suffix.lower() in DATA_SUFFIXES | imagefolder_suffixes()
        and not path.name.startswith(".")
        for path in root.rglob("*")
    )


def _select_split(loaded: Any, split: str, *, what: str, spec_source: str) -> Any:
    import datasets

    if not isinstance(loaded, datasets.DatasetDict):
        return loaded
    if split not in loaded:
        raise DataNotFoundError(
            f"{_at(spec_source, 'source.split')}: {what} has no split {split!r} (splits: {', '.join(loaded)})"
        )
    return loaded[split]


def _load(source: DatasetSource, *, base_dir: Path, spec_source: str) -> Any:
    import datasets

    if source.imagefolder:
        root = resolve_path(source.imagefolder, base_dir)
        image_folder_classes(root, source=spec_source)
        return _load_split("imagefolder", source, what=repr(str(root)), spec_source=spec_source, data_dir=str(root))
    if source.path:
        root = resolve_path(source.path, base_dir)
        if not root.is_dir():
            raise DataNotFoundError(
                f"{_at(spec_source, 'source.path')}: no such dataset folder {str(root)!r}; "
                "give a folder saved with datasets (save_to_disk) or holding parquet/csv/json files"
            )
        if (root / "state.json").is_file() or (root / "dataset_dict.json").is_file():
            loaded = datasets.load_from_disk(str(root))
        elif not _has_data_files(root):
            raise DataFormatError(
                f"{_at(spec_source, 'source.path')}: {str(root)!r} holds no dataset (no save_to_disk files, "
                "no parquet/csv/json/arrow files, no images); give the dataset's folder"
            )
        else:
            return _load_split(str(root), source, what=repr(str(root)), spec_source=spec_source)
        return _select_split(loaded, source.split, what=repr(str(root)), spec_source=spec_source)
    return _load_split(source.hub, source, what=source.description, spec_source=spec_source, revision=source.revision)


def _load_split(path: str, source: DatasetSource, *, what: str, spec_source: str, **options: Any) -> Any:
    """``datasets.load_dataset`` of one split (only its files are read); a missing split named."""
    import datasets

    try:
        return datasets.load_dataset(path, source.config, split=source.split, **options)
    except ValueError as error:
        if not str(error).startswith("Unknown split"):
            raise
        known = str(error).split("Should be one of", 1)[-1].strip(" .[]").replace("'", "")
        raise DataNotFoundError(
            f"{_at(spec_source, 'source.split')}: {what} has no split {source.split!r} (splits: {known})"
        ) from None


def open_source(source: DatasetSource, *, base_dir: Path, spec_source: str = "") -> Any:
    """The ``datasets.Dataset`` split a source names (images decoded lazily by ``datasets``).

    Every problem is one line starting with the spec file and the field (``cars.yaml:
    source.split: …``), so the user knows which line of which file to change.
    """
    import datasets

    source.check(source=spec_source)
    try:
        loaded = _load(source, base_dir=base_dir, spec_source=spec_source)
    except ConceptforgeError:
        raise
    except (ConnectionError, datasets.exceptions.DatasetNotFoundError) as error:  # type: ignore[attr-defined]
        raise HubError(
            f"{_at(spec_source, 'source')}: cannot read {source.description}: {_first_line(error)}"
        ) from None
    except (ValueError, OSError) as error:
        raise DataFormatError(
            f"{_at(spec_source, 'source')}: cannot read {source.description}: {_first_line(error)}"
        ) from None
    for column, field_name in ((source.image_column, "image_column"), (source.class_column, "class_column")):
        if column not in loaded.column_names:
            raise spec_error(
                f"source.{field_name}",
                f"{source.description} has no column {column!r} (columns: {', '.join(loaded.column_names)})",
                source=spec_source,
            )
    logger.info("read %s: %d rows", source.description, len(loaded))
    return loaded


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
