"""The local Hub's ``GET /api/datasets/{id}/leaderboard``: a benchmark's leaderboard, built as the Hub builds it.

Why here and not in hub_server.py: the leaderboard is a read over the whole store (every model
repo's ``.eval_results/*.yaml``), not a route of one repository; hub_server.py only routes to it.

What the Hub documents (huggingface_hub's ``DatasetLeaderboardEntry`` and the "Accessing Benchmark
Leaderboard Data" guide): the answer is a JSON list sorted by rank, each entry ``rank`` (1-based),
``modelId``, ``value``, ``filename`` (the results file in the model repo), ``verified``,
``source`` (``url``, ``name``, ``isExternal``; absent when the entry has none), ``author``
(``type`` "user" or "org" and ``name``), ``pullRequest`` and ``notes``. A dataset that is no
benchmark (no root ``eval.yaml``) has no leaderboard: 404. How the Hub orders values of several
tasks in one list is not documented; this server ranks the values of the eval.yaml's declared
tasks together, highest first (the client never ranks across protocols itself). ``verified``
is the Hub's check of an entry's ``verifyToken`` signature; here a token counts as verified when
the test registered it (:meth:`LeaderboardBook.verify`), since no signature can be checked offline.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

import yaml

#: Where the Hub reads a model's results (huggingface_hub's EvalResultEntry files).
RESULTS_FOLDER = ".eval_results/"
EVAL_YAML = "eval.yaml"


class LeaderboardBook:
    """The verify tokens the local Hub accepts as signed (the real Hub checks a signature)."""

    def __init__(self) -> None:
        self._tokens: set[str] = set()
        self._lock = threading.Lock()

    def verify(self, token: str) -> None:
        with self._lock:
            self._tokens.add(token)

    def verified(self, token: Any) -> bool:
        with self._lock:
            return isinstance(token, str) and token in self._tokens


def _read(store, record: dict[str, Any]) -> bytes:
    return store.object_path(record["sha256"]).read_bytes()


def declared_tasks(store, dataset_id: str) -> list[str] | None:
    """The task ids of the dataset's root eval.yaml on main, or None when it has none (no benchmark)."""
    oid = store.resolve("dataset", dataset_id, "main")
    commit = store.load_commit("dataset", dataset_id, oid)
    record = commit["files"].get(EVAL_YAML)
    if record is None:
        return None
    data = yaml.safe_load(_read(store, record)) or {}
    return [str(task.get("id")) for task in data.get("tasks") or [] if isinstance(task, dict)]


def _model_ids(store) -> list[str]:
    root = store.root / "repos" / "model"
    return sorted(str(path.parent.relative_to(root)) for path in root.glob("*/*/state.json"))


def _source(entry: dict[str, Any]) -> dict[str, Any] | None:
    source = entry.get("source")
    if not isinstance(source, dict) or not source.get("url"):
        return None
    host = urlsplit(str(source["url"])).hostname or ""
    return {"url": source["url"], "name": source.get("name"), "isExternal": host not in ("huggingface.co", "hf.co")}


def leaderboard(store, book: LeaderboardBook, dataset_id: str) -> list[dict[str, Any]] | None:
    """The entries of ``dataset_id``'s leaderboard in the Hub's documented shape, ranked.

    None when the dataset declares no eval.yaml (the server answers 404); lists only values filed
    under a task the dataset's eval.yaml declares, from public model repos' main."""
    tasks = declared_tasks(store, dataset_id)
    if tasks is None:
        return None
    rows = []
    for model_id in _model_ids(store):
        state = store.load_state("model", model_id)
        if state.get("private"):
            continue
        commit = store.load_commit("model", model_id, store.resolve("model", model_id, "main"))
        for path, record in sorted(commit["files"].items()):
            if not (path.startswith(RESULTS_FOLDER) and path.endswith((".yaml", ".yml"))):
                continue
            entries = yaml.safe_load(_read(store, record)) or []
            for entry in entries if isinstance(entries, list) else []:
                dataset = entry.get("dataset") if isinstance(entry, dict) else None
                if not isinstance(dataset, dict) or dataset.get("id") != dataset_id:
                    continue
                if dataset.get("task_id") not in tasks or not isinstance(entry.get("value"), (int, float)):
                    continue
                rows.append(
                    {
                        "modelId": model_id,
                        "value": entry["value"],
                        "filename": path,
                        "verified": book.verified(entry.get("verifyToken")),
                        "source": _source(entry),
                        # the local store has no accounts: every owner is a user
                        "author": {"type": "user", "name": model_id.split("/")[0]},
                        "pullRequest": None,
                        "notes": entry.get("notes"),
                    }
                )
    rows.sort(key=lambda row: (-row["value"], row["modelId"], row["filename"]))
    return [{"rank": rank, **row} for rank, row in enumerate(rows, 1)]
