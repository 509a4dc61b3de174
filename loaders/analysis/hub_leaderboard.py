"""The Hub's leaderboard of a benchmark beside this machine's results: ``conceptforge leaderboard --hub ORG/NAME``.

Why one table with a row per (source, model, task, protocol): a number is only comparable with
another measured the same way, and the Hub's leaderboard API returns values without saying how
each was measured. Each row therefore says where it comes from (the Hub, verified or not, or a
results file of this machine) and which protocol produced it: for a Hub entry, the protocol its
notes name (``evaluate --push-results`` writes ``PROTOCOL; VARIANT; value in UNIT…``), for a local
result the protocol its results file records. A row never stands for two protocols: a local run
that measured one task two ways gives two rows.

Local values are converted exactly as ``evaluate --push-results`` would file them
(:func:`conceptforge.loaders.harness.push_results.hub_entries`: the same task ids, units and
rounding), so a local row and a Hub row of the same run show the same number.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from conceptforge.errors import DataNotFoundError, HubError, InvalidArgumentError

logger = logging.getLogger(__name__)

NOT_STATED = "not stated"
NO_CACHE_HINT = "a leaderboard is read from the Hub each time (nothing is cached): run it where the Hub can be reached"


@dataclass(frozen=True)
class BoardRow:
    """One value of the combined table: where it comes from, whose it is and how it was measured."""

    where: str  # "Hub, verified" | "Hub, not verified" | "this machine"
    rank: int | None  # the Hub's rank; None for local results
    model: str
    task: str | None  # the leaderboard task id; None where the Hub does not say
    value: float
    protocol: str
    dataset_revision: str | None
    origin: str  # the model repo's results file (Hub) or the local results file


def protocol_of(notes: str | None) -> str:
    """The protocol a leaderboard entry's notes name, or ``not stated``.

    conceptforge's notes start ``PROTOCOL; VARIANT; value in UNIT`` (push_results._notes); other
    tools' notes are free text, which names no protocol we could trust."""
    parts = [part.strip() for part in (notes or "").split(";")]
    if len(parts) >= 3 and "/" in parts[0] and any(part.startswith("value in ") for part in parts[2:]):
        return parts[0]
    return NOT_STATED


def fetch_hub_entries(repo_id: str) -> list[dict[str, Any]]:
    """The Hub's leaderboard of ``repo_id`` as plain dicts (rank, model_id, value, verified, notes,
    filename), through ``HfApi.get_dataset_leaderboard`` where the installed huggingface_hub has it,
    else ``GET /api/datasets/{id}/leaderboard``. Offline, a missing dataset or one that is no
    benchmark: one line."""
    from huggingface_hub import HfApi

    from conceptforge.external_errors import OFFLINE_HINT, hub_failure, hub_offline, offline_reason

    what = f"read the leaderboard of {repo_id} on the Hub"
    if hub_offline():  # the leaderboard has no cached copy: nothing to fall back on
        raise HubError(f"cannot {what}: {offline_reason()}; {NO_CACHE_HINT}")
    api = HfApi()
    try:
        entries = (
            method_entries(api, repo_id) if hasattr(api, "get_dataset_leaderboard") else rest_entries(api, repo_id)
        )
    except Exception as error:  # noqa: BLE001 - every Hub failure becomes one line
        status = getattr(getattr(error, "response", None), "status_code", None)
        if status == 404:
            raise DataNotFoundError(
                f"{repo_id} has no leaderboard on the Hub: the dataset does not exist, is private, or is not a "
                "benchmark (a root eval.yaml the Hub lists; docs/publishing.md)"
            ) from None
        # the usual hint (HF_HUB_OFFLINE=1, the local cache) cannot help: a leaderboard is never cached
        raise HubError(str(hub_failure(error, what)).replace(OFFLINE_HINT, NO_CACHE_HINT)) from None
    return entries


def _entry(rank: Any, model_id: Any, value: Any, verified: Any, notes: Any, filename: Any) -> dict[str, Any]:
    return {
        "rank": int(rank),
        "model_id": str(model_id),
        "value": float(value),
        "verified": bool(verified),
        "notes": notes,
        "filename": filename or "",
    }


def method_entries(api, repo_id: str) -> list[dict[str, Any]]:
    """The leaderboard through ``HfApi.get_dataset_leaderboard`` (huggingface_hub >= 2.5)."""
    return [
        _entry(e.rank, e.model_id, e.value, e.verified, e.notes, e.filename)
        for e in api.get_dataset_leaderboard(repo_id)
    ]


def rest_entries(api, repo_id: str) -> list[dict[str, Any]]:
    """The leaderboard through ``GET /api/datasets/{id}/leaderboard``, the endpoint the method wraps
    (for an older huggingface_hub), read in the Hub's documented field names."""
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    response = get_session().get(
        f"{api.endpoint}/api/datasets/{repo_id}/leaderboard", headers=build_hf_headers(token=api.token)
    )
    hf_raise_for_status(response)
    return [
        _entry(e["rank"], e["modelId"], e["value"], e.get("verified"), e.get("notes"), e.get("filename"))
        for e in response.json()
    ]


def resolve_revision(repo_id: str, revision: str) -> str:
    """The commit ``revision`` (tag, branch or commit) of the dataset names on the Hub."""
    from huggingface_hub import HfApi

    from conceptforge.external_errors import hub_failure

    try:
        return HfApi().dataset_info(repo_id, revision=revision).sha
    except Exception as error:  # noqa: BLE001 - every Hub failure becomes one line
        status = getattr(getattr(error, "response", None), "status_code", None)
        if status == 404:
            raise DataNotFoundError(
                f"{repo_id} has no revision {revision!r} on the Hub: give a tag, branch or commit it has"
            ) from None
        raise hub_failure(error, f"resolve {repo_id}@{revision} on the Hub") from None


def hub_rows(entries: Sequence[dict[str, Any]]) -> list[BoardRow]:
    return [
        BoardRow(
            where="Hub, verified" if entry["verified"] else "Hub, not verified",
            rank=entry["rank"],
            model=entry["model_id"],
            task=None,
            value=entry["value"],
            protocol=protocol_of(entry["notes"]),
            dataset_revision=None,
            origin=entry["filename"],
        )
        for entry in sorted(entries, key=lambda e: e["rank"])
    ]


def local_rows(
    payloads: Sequence[dict[str, Any]], repo_id: str, *, sha: str | None, configs: dict | None = None
) -> tuple[list[BoardRow], list[str]]:
    """This machine's values on ``repo_id`` (at commit ``sha`` when given), as ``--push-results``
    would file them, and notes on the results that were left out and why."""
    from conceptforge.loaders.harness.push_results import hub_entries

    rows, notes = [], []
    for payload in payloads:
        path = payload.get("_path", payload["model"]["id"])
        entries = [entry for entry in hub_entries(payload, configs) if entry.dataset_id == repo_id]
        if not entries:
            notes.append(f"{path}: no leaderboard value measured on {repo_id}")
            continue
        if sha is not None:
            other = sorted({entry.dataset_revision for entry in entries if entry.dataset_revision != sha})
            entries = [entry for entry in entries if entry.dataset_revision == sha]
            if other:
                notes.append(f"{path}: left out, measured on {repo_id}@{', '.join(s[:7] for s in other)}")
        revision = payload["model"].get("sha") or payload["model"].get("revision")
        model = payload["model"]["id"] + (f"@{str(revision)[:12]}" if revision else "")
        rows += [
            BoardRow(
                where="this machine",
                rank=None,
                model=model,
                task=entry.task_id,
                value=float(entry.value),
                protocol=protocol_of(entry.notes),
                dataset_revision=entry.dataset_revision,
                origin=str(path),
            )
            for entry in entries
        ]
    rows.sort(key=lambda row: (row.task or "", row.protocol, -row.value, row.model))
    return rows, notes


def board_markdown(
    repo_id: str,
    rows: Sequence[BoardRow],
    *,
    revision: str | None = None,
    sha: str | None = None,
    notes: Sequence[str] = (),
) -> str:
    """The combined table and its notes, as markdown."""
    from conceptforge.loaders.harness.reports import markdown_table

    if not rows:
        raise InvalidArgumentError(
            f"nothing to show for {repo_id}: its Hub leaderboard is empty and no results file measured it"
            + (f" at {revision}" if revision else "")
        )
    headers = ["where", "rank", "model", "task", "value", "protocol", "dataset revision", "from"]
    table = [
        [
            row.where,
            str(row.rank) if row.rank is not None else "–",
            row.model,
            row.task or "–",
            f"{row.value:g}",
            row.protocol,
            row.dataset_revision[:7] if row.dataset_revision else "–",
            row.origin,
        ]
        for row in rows
    ]
    said = [
        f"Hub: the leaderboard of {repo_id} as the Hub serves it now (its API takes no revision and names no "
        "task); verified = the Hub checked the entry's verify token; protocol = what the entry's notes name.",
        "this machine: values as `conceptforge evaluate --push-results` would file them (task id, unit, rounding).",
    ]
    if sha:
        said.append(
            f"Local results measured on {repo_id}@{sha[:7]}" + (f" ({revision})" if revision else "") + " only."
        )
    return markdown_table(headers, table) + "\n\n" + "\n".join(f"- {line}" for line in [*said, *notes]) + "\n"
