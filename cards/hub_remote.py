"""The Hub side of a release: which remote files a release owns and how they compare with the
local ones, the Hub's card check, and one-line reasons for the Hub's errors.

Why apart from :mod:`conceptforge.cards.publish`: these talk to the Hub (or read its errors) and
are the same for every step of a release; the release's order of steps stays readable there.
"""

from __future__ import annotations

import logging
from typing import Any

from conceptforge.cards.croissant import CROISSANT_NAME
from conceptforge.cards.dataset_dir import CARD_NAME, DATA_DIR, GRID_NAME, SCENES_DIR
from conceptforge.cards.provenance import redact_secrets
from conceptforge.cards.run_record import RECORD_NAME
from conceptforge.errors import ConceptforgeError

logger = logging.getLogger(__name__)

REPO_TYPE = "dataset"


def _managed(path: str, also: tuple[str, ...] = ()) -> bool:
    """Paths a release owns; anything else in the repo (LICENSE, .gitattributes) is left alone.

    ``eval.yaml`` is owned only by a release that writes one (``also``): a release published
    without ``--eval-framework`` leaves the benchmark declaration of an earlier one in place.
    An ``also`` entry ending in ``/`` owns a folder (``exports/``, for a release that writes its
    harness exports: stale files of an earlier release's exports are deleted with it).
    """
    prefixes = (f"{DATA_DIR}/", f"{SCENES_DIR}/", *(a for a in also if a.endswith("/")))
    return path in (CARD_NAME, GRID_NAME, RECORD_NAME, CROISSANT_NAME, *also) or path.startswith(prefixes)


def _remote_files(api: Any, repo_id: str, revision: str, also: tuple[str, ...] = ()) -> dict[str, Any]:
    from huggingface_hub.hf_api import RepoFile

    entries = api.list_repo_tree(repo_id, recursive=True, revision=revision, repo_type=REPO_TYPE)
    return {e.path: e for e in entries if isinstance(e, RepoFile) and _managed(e.path, also)}


def _same(local: Any, remote: Any) -> bool:  # local: publish.LocalFile
    if remote.lfs is not None:
        return remote.lfs.sha256 == local.sha256
    return remote.blob_id == local.git_oid


def _diff(files: list[Any], remote: dict[str, Any]) -> tuple[list[Any], list[str]]:
    changed = [f for f in files if f.path_in_repo not in remote or not _same(f, remote[f.path_in_repo])]
    local_paths = {f.path_in_repo for f in files}
    return changed, sorted(p for p in remote if p not in local_paths)


def _root_cause(error: BaseException) -> BaseException:
    seen = set()
    while error.__cause__ is not None and id(error) not in seen:
        seen.add(id(error))
        error = error.__cause__
    return error


def _reason(error: BaseException, secrets: list[str]) -> str:
    cause = _root_cause(error)
    response = getattr(cause, "response", None) or getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    detail = " ".join(str(cause).split())[:200]
    if status is not None:
        try:
            server = response.json().get("error")
        except Exception:
            server = None
        detail = f"HTTP {status}" + (f": {' '.join(str(server).split())[:160]}" if server else "")
    else:
        detail = f"{type(cause).__name__}: {detail}" if detail else type(cause).__name__
    return redact_secrets(detail, secrets)


def _url(error: BaseException) -> str | None:
    """The URL of the request that failed (no query string), where the error carries one."""
    for candidate in (error, _root_cause(error)):
        response = getattr(candidate, "response", None)
        url = getattr(response, "url", None) or getattr(getattr(response, "request", None), "url", None)
        if url:
            return str(url).split("?", 1)[0]
    return None


def _status(error: BaseException) -> int | None:
    for candidate in (error, _root_cause(error)):
        status = getattr(getattr(candidate, "response", None), "status_code", None)
        if status is not None:
            return status
    return None


def _offline_mode() -> bool:
    """Whether the Hub client is in offline mode (HF_HUB_OFFLINE=1, read when it was imported)."""
    from huggingface_hub import constants

    return bool(getattr(constants, "HF_HUB_OFFLINE", False))


def _network_errors() -> tuple[type[BaseException], ...]:
    from huggingface_hub.errors import HfHubHTTPError

    kinds: list[type[BaseException]] = [HfHubHTTPError, OSError, RuntimeError, ValueError]
    try:
        import httpx2

        kinds.append(httpx2.HTTPError)
    except ImportError:  # older huggingface_hub uses httpx or requests: both raise OSError subclasses
        pass
    return tuple(kinds)


def hub_validate_card(card_text: str, *, endpoint: str | None = None) -> None:
    """Ask the Hub to validate the card's metadata (``POST /api/validate-yaml``), before upload.

    Uses ``huggingface_hub.DatasetCard.validate``; that method always talks to the client's
    configured endpoint (``HF_ENDPOINT``), so an explicit other ``endpoint`` gets the same request
    through the client's session.
    """
    from huggingface_hub import DatasetCard, constants
    from huggingface_hub.utils import get_session, hf_raise_for_status

    card = DatasetCard(card_text)
    try:
        if endpoint is None or endpoint.rstrip("/") == constants.ENDPOINT.rstrip("/"):
            card.validate(repo_type=REPO_TYPE)
        else:
            response = get_session().post(
                f"{endpoint.rstrip('/')}/api/validate-yaml",
                json={"repoType": REPO_TYPE, "content": str(card)},
                headers={"Accept": "text/plain"},
            )
            if response.status_code == 400:
                raise ValueError(response.text)
            hf_raise_for_status(response)
    except ValueError as error:  # the Hub's 400: the metadata is invalid
        raise ConceptforgeError(f"the Hub rejects the dataset card: {' '.join(str(error).split())[:300]}") from None
