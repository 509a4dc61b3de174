"""Where a release's files are: a local dataset directory, or ``org/name[@revision]`` on the Hub.

``verify`` and ``diff`` take either. A Hub release is downloaded (card, provenance record, data
shards and scene files; the sample grid is not needed) through ``huggingface_hub`` into its
cache, so a second run reads it from disk and ``HF_ENDPOINT`` points it at any Hub-compatible
server (the tests' local one).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conceptforge.argtypes import dataset_name_problem
from conceptforge.cards.dataset_dir import CARD_NAME, DATA_DIR, SCENES_DIR
from conceptforge.cards.run_record import RECORD_NAME
from conceptforge.errors import ConceptforgeError, DataFormatError, DataNotFoundError, InvalidArgumentError
from conceptforge.external_errors import hub_failure
from conceptforge.specs.release import BENCHMARK_SPEC_NAME

logger = logging.getLogger(__name__)

_HUB_RE = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<revision>[\w./-]+))?")


@dataclass(frozen=True)
class ReleaseSource:
    """A resolved dataset: its local directory and how to name it in messages."""

    directory: Path
    label: str
    repo_id: str | None = None
    revision: str | None = None


def parse_hub_reference(text: str) -> tuple[str, str | None] | None:
    """``org/name@v1.0.0`` -> (``org/name``, ``v1.0.0``); None when ``text`` is not of that form."""
    match = _HUB_RE.fullmatch(text.strip())
    return (match["repo"], match["revision"]) if match else None


def hub_target(text: str, revision: str | None) -> tuple[str, str | None]:
    """``ORG/NAME[@REVISION]`` and ``--revision`` -> (repo id, revision); one line when ``text`` is
    no Hub id or the two revisions disagree."""
    reference = parse_hub_reference(text)
    if reference is None:
        if "://" in text:  # an object-store URL: say so, not "no such folder"
            raise InvalidArgumentError(
                f"{text} is a URL; a release is read from a local folder or a Hub id ORG/NAME[@REVISION]: "
                "copy it to a local folder first"
            )
        raise DataNotFoundError(f"{text} is neither a local dataset directory nor a Hub id ORG/NAME[@REVISION]")
    repo_id, pinned = reference
    if pinned and revision and pinned != revision:
        raise InvalidArgumentError(f"{text} names revision {pinned} but --revision says {revision}; give one")
    return repo_id, pinned or revision


def resolve_release(text: str, *, revision: str | None = None) -> ReleaseSource:
    """A local directory (``revision`` must then be None) or a Hub dataset downloaded at ``revision``."""
    path = Path(text).expanduser()
    if path.exists():
        if revision:
            raise InvalidArgumentError(f"--revision applies to a Hub dataset, but {text} is a local folder")
        if not path.is_dir():
            raise InvalidArgumentError(f"{text} is a file; give a dataset directory or ORG/NAME[@REVISION]")
        problem = dataset_name_problem(path)
        if problem:
            raise DataFormatError(problem)
        return ReleaseSource(path, str(path))
    repo_id, revision = hub_target(text, revision)
    return ReleaseSource(download_release(repo_id, revision), f"{repo_id}@{revision or 'main'}", repo_id, revision)


def download_release(
    repo_id: str, revision: str | None, *, endpoint: str | None = None, token: str | None = None
) -> Path:
    """The release's card, record and data files in the Hub cache; one-line errors for the usual failures."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    try:
        folder = snapshot_download(
            repo_id,
            repo_type="dataset",
            revision=revision,
            endpoint=endpoint,
            token=token,
            allow_patterns=[CARD_NAME, RECORD_NAME, BENCHMARK_SPEC_NAME, f"{DATA_DIR}/**", f"{SCENES_DIR}/**"],
        )
    except RevisionNotFoundError:
        raise DataNotFoundError(f"{repo_id} has no revision {revision!r} on the Hub") from None
    except RepositoryNotFoundError:
        raise DataNotFoundError(f"dataset {repo_id} is not on the Hub (or is private: set HF_TOKEN)") from None
    except ConceptforgeError:
        raise
    except Exception as error:  # offline, connection refused, a mute endpoint, 5xx: one line
        raise hub_failure(error, f"download {repo_id}@{revision or 'main'}") from None
    return Path(folder)


class ReleaseFiles:
    """Read access to a release's files without holding all of them: ``verify`` reads the card,
    ``provenance.json``, the ``item_id`` column of every shard and only the row groups of the
    chosen items. Local: the directory. Hub: range reads through ``HfFileSystem`` at the commit
    the revision resolved to (so every read sees the same release)."""

    def __init__(
        self, label: str, *, directory: Path | None = None, repo_id: str | None = None, commit: str | None = None
    ) -> None:
        self.label, self.directory, self.repo_id, self.commit = label, directory, repo_id, commit
        self._fs = None

    @property
    def fs(self):
        if self._fs is None:
            from huggingface_hub import HfFileSystem

            self._fs = HfFileSystem()
        return self._fs

    def _remote(self, name: str) -> str:
        return f"datasets/{self.repo_id}@{self.commit}/{name}"

    def open(self, name: str) -> Any:
        """A binary file object for the release file ``name`` (``data/train-00000-of-00001.parquet``)."""
        if self.directory is not None:
            return open(self.directory / name, "rb")
        return self.fs.open(self._remote(name), "rb", block_size=1 << 20)

    def read_text(self, name: str) -> str | None:
        """A small text file of the release (the card, the record); None when the release has none."""
        if self.directory is not None:
            path = self.directory / name
            return path.read_text(encoding="utf-8") if path.is_file() else None
        try:
            with self.fs.open(self._remote(name), "rb") as handle:
                return handle.read().decode("utf-8")
        except FileNotFoundError:
            return None

    def parquet_files(self) -> list[str]:
        """Every ``data/**.parquet`` path of the release, sorted."""
        if self.directory is not None:
            return sorted(
                p.relative_to(self.directory).as_posix() for p in (self.directory / DATA_DIR).rglob("*.parquet")
            )
        prefix = self._remote("")
        found = self.fs.glob(self._remote(f"{DATA_DIR}/**/*.parquet")) + self.fs.glob(
            self._remote(f"{DATA_DIR}/*.parquet")
        )
        return sorted({path[len(prefix) :] for path in found})


def open_release(text: str, *, revision: str | None = None) -> ReleaseFiles:
    """:class:`ReleaseFiles` for a local directory or ``org/name[@revision]`` (resolved to its commit)."""
    path = Path(text).expanduser()
    if path.exists():
        source = resolve_release(text, revision=revision)  # the same checks as a download would get
        return ReleaseFiles(source.label, directory=source.directory)
    repo_id, revision = hub_target(text, revision)
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    try:
        commit = HfApi().dataset_info(repo_id, revision=revision).sha
    except RevisionNotFoundError:
        raise DataNotFoundError(f"{repo_id} has no revision {revision!r} on the Hub") from None
    except RepositoryNotFoundError:
        raise DataNotFoundError(f"dataset {repo_id} is not on the Hub (or is private: set HF_TOKEN)") from None
    except Exception as error:  # offline, connection refused, a mute endpoint, 5xx: one line
        raise hub_failure(error, f"read {repo_id}@{revision or 'main'} on the Hub") from None
    return ReleaseFiles(f"{repo_id}@{revision or 'main'}", repo_id=repo_id, commit=commit)
