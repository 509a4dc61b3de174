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

from conceptforge.cards.dataset_dir import CARD_NAME, DATA_DIR, SCENES_DIR
from conceptforge.cards.run_record import RECORD_NAME
from conceptforge.errors import ConceptforgeError, DataNotFoundError, HubError, InvalidArgumentError

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


def resolve_release(text: str, *, revision: str | None = None) -> ReleaseSource:
    """A local directory (``revision`` must then be None) or a Hub dataset downloaded at ``revision``."""
    path = Path(text).expanduser()
    if path.exists():
        if revision:
            raise InvalidArgumentError(f"--revision applies to a Hub dataset, but {text} is a local folder")
        if not path.is_dir():
            raise InvalidArgumentError(f"{text} is a file; give a dataset directory or ORG/NAME[@REVISION]")
        return ReleaseSource(path, str(path))
    reference = parse_hub_reference(text)
    if reference is None:
        raise DataNotFoundError(f"{text} is neither a local dataset directory nor a Hub id ORG/NAME[@REVISION]")
    repo_id, pinned = reference
    if pinned and revision and pinned != revision:
        raise InvalidArgumentError(f"{text} names revision {pinned} but --revision says {revision}; give one")
    revision = pinned or revision
    return ReleaseSource(download_release(repo_id, revision), f"{repo_id}@{revision or 'main'}", repo_id, revision)


def download_release(repo_id: str, revision: str | None, *, endpoint: str | None = None, token: str | None = None) -> Path:
    """The release's card, record and data files in the Hub cache; one-line errors for the usual failures."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    try:
        folder = snapshot_download(
            repo_id, repo_type="dataset", revision=revision, endpoint=endpoint, token=token,
            allow_patterns=[CARD_NAME, RECORD_NAME, f"{DATA_DIR}/**", f"{SCENES_DIR}/**"],
        )
    except RevisionNotFoundError:
        raise DataNotFoundError(f"{repo_id} has no revision {revision!r} on the Hub") from None
    except RepositoryNotFoundError:
        raise DataNotFoundError(f"dataset {repo_id} is not on the Hub (or is private: set HF_TOKEN)") from None
    except ConceptforgeError:
        raise
    except Exception as error:  # offline, connection refused, 5xx: one line
        reason = " ".join(str(error).split())[:200]
        raise HubError(f"cannot download {repo_id}@{revision or 'main'}: {type(error).__name__}: {reason}") from None
    return Path(folder)
