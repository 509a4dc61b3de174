"""Publish a run's results beside the model on the Hub, and declare our datasets' tasks.

Why two formats in one commit: the Hub reads evaluation results from ``.eval_results/*.yaml`` in
the model repo (huggingface_hub's :class:`EvalResultEntry`; they appear on the model page and on
the benchmark dataset's leaderboard), while older tools read the ``model-index`` of the model
card (:class:`EvalResult`). Both are written in ONE commit, so the repo never shows one without
the other. A benchmark dataset lists results once it declares its tasks in ``eval.yaml``; for
datasets we published (their card carries conceptforge's card spec) that file is written or
extended, again as one commit per dataset, and not at all when it already declares the tasks.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # PyYAML: a dependency of huggingface_hub

from conceptforge.errors import HubError, InvalidArgumentError

logger = logging.getLogger(__name__)

RESULTS_PATH = ".eval_results/conceptforge.yaml"
SAMPLES_PATH = ".eval_results/samples"  # per-task parquet files (--push-samples)
DATASET_EVAL_PATH = "eval.yaml"
FRAMEWORK = "conceptforge"
CARD_SPEC_MARKER = "conceptforge-card-spec"


def task_id(task: str, metric: str) -> str:
    """The id a value is filed under in the dataset's ``eval.yaml`` and the model's results."""
    return f"{task}.{metric}"


def metric_split(task: dict[str, Any], metric: str) -> str:
    for split in ("train", "val", "gen", "test"):
        if metric.split(".")[-1].startswith(split + "_"):
            return split
    split = task["dataset"].get("split") or "test"
    return split.split(",")[-1]


def _notes(task: dict[str, Any], metric: dict[str, Any]) -> str:
    parts = [f"{task['protocol']}; {task['variant']}"]
    if metric.get("stderr") is not None:
        seeds = f" over seeds {','.join(map(str, task['seeds']))}" if task.get("seeds") else ""
        parts.append(f"± {100 * metric['stderr']:.2f} s.e.{seeds}")
    return "; ".join(parts)


def supports_eval_results_folder() -> bool:
    """Whether the installed huggingface_hub knows the ``.eval_results/`` format."""
    import huggingface_hub

    return hasattr(huggingface_hub, "EvalResultEntry") and hasattr(huggingface_hub, "eval_result_entries_to_yaml")


def _hub_metrics(payload: dict[str, Any]):
    """(task, dataset, metric name, metric) for every measured metric on a Hub dataset: what is pushed."""
    for task in payload["tasks"]:
        dataset = task["dataset"]
        if dataset.get("source") != "hub":
            continue
        for name, metric in task["metrics"].items():
            if metric.get("value") is not None:
                yield task, dataset, name, metric


def hub_entries(payload: dict[str, Any]):
    """``EvalResultEntry`` per (task, metric) measured on a Hub dataset (values in %)."""
    from huggingface_hub import EvalResultEntry

    entries = []
    for task, dataset, name, metric in _hub_metrics(payload):
        entries.append(
            EvalResultEntry(
                dataset_id=dataset["repo"],
                task_id=task_id(task["task"], name),
                value=round(100 * metric["value"], 4),
                dataset_revision=dataset["sha"],
                date=payload.get("created") or None,
                notes=_notes(task, metric),
            )
        )
    return entries


def model_index_results(payload: dict[str, Any]):
    """The same values as legacy ``model-index`` :class:`EvalResult` entries."""
    from huggingface_hub import EvalResult

    results = []
    for task, dataset, name, metric in _hub_metrics(payload):
        # model-index groups results by (task type, dataset) and keeps one task name per group,
        # so the task is named in metric_type (unique), and task_name is the benchmark.
        results.append(
            EvalResult(
                task_type="image-classification",
                task_name=task["benchmark"],
                dataset_type=dataset["repo"],
                dataset_name=dataset["repo"],
                dataset_revision=dataset["sha"],
                dataset_config=dataset.get("config"),
                dataset_split=metric_split(task, name),
                metric_type=task_id(task["task"], name),
                metric_name=f"{task['task']} {name} (%)",
                metric_value=round(100 * metric["value"], 4),
            )
        )
    return results


@dataclass
class PushReport:
    model_repo: str
    model_commit: str | None
    dataset_commits: dict[str, str | None] = field(default_factory=dict)  # None: already declared
    datasets_not_ours: list[str] = field(default_factory=list)


def _download_text(api, repo_id: str, path: str, *, repo_type: str, revision: str | None = None) -> str | None:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, RemoteEntryNotFoundError

    try:
        with open(
            hf_hub_download(
                repo_id, path, repo_type=repo_type, revision=revision, endpoint=api.endpoint, token=api.token
            ),
            encoding="utf-8",
        ) as handle:
            return handle.read()
    except (EntryNotFoundError, RemoteEntryNotFoundError):
        return None


def _merged_card(existing: str | None, model_id: str, results) -> str:
    from huggingface_hub import ModelCard, ModelCardData

    card = ModelCard(existing) if existing and existing.lstrip().startswith("---") else None
    if card is None:
        body = existing or f"# {model_id}\n"
        card = ModelCard(f"---\n{ModelCardData().to_yaml()}\n---\n{body}")
    ours = {(r.dataset_type, r.metric_type) for r in results}
    kept = [r for r in (card.data.eval_results or []) if (r.dataset_type, r.metric_type) not in ours]
    card.data.eval_results = kept + list(results)
    card.data.model_name = card.data.model_name or model_id
    return str(card)


def push_model_results(
    payload: dict[str, Any], repo_id: str, *, api=None, create_pr: bool = False, samples: list[Path] = ()
) -> str:  # type: ignore[assignment]
    """One commit to model repo ``repo_id``: ``.eval_results/conceptforge.yaml`` + model-index, and
    the per-task samples files under ``.eval_results/samples/`` when ``samples`` names them
    (``--push-samples``: they can be large, so only on request)."""
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    api = api or HfApi()
    model_index = model_index_results(payload)
    if not model_index:
        raise InvalidArgumentError(
            "no result was measured on a Hub dataset: nothing the Hub can list (results stay in the JSON file)"
        )
    try:
        api.repo_info(repo_id, repo_type="model")
        card = _merged_card(_download_text(api, repo_id, "README.md", repo_type="model"), repo_id, model_index)
        operations = [CommitOperationAdd("README.md", io.BytesIO(card.encode("utf-8")))]
        operations += [CommitOperationAdd(f"{SAMPLES_PATH}/{Path(file).name}", str(file)) for file in samples]
        if supports_eval_results_folder():
            from huggingface_hub import eval_result_entries_to_yaml

            results_yaml = yaml.safe_dump(
                eval_result_entries_to_yaml(hub_entries(payload)), sort_keys=False, allow_unicode=True
            )
            operations.insert(0, CommitOperationAdd(RESULTS_PATH, io.BytesIO(results_yaml.encode("utf-8"))))
        else:
            logger.warning(
                "huggingface_hub %s has no EvalResultEntry: results go to the model card's model-index only",
                __import__("huggingface_hub").__version__,
            )
        summary = f"conceptforge evaluate: {', '.join(t['task'] for t in payload['tasks'])}"
        info = api.create_commit(
            repo_id,
            repo_type="model",
            commit_message=summary,
            create_pr=create_pr,
            commit_description=f"conceptforge {payload['conceptforge_version']}; datasets: "
            + ", ".join(
                sorted(
                    {
                        f"{t['dataset']['repo']}@{t['dataset']['sha']}"
                        for t in payload["tasks"]
                        if t["dataset"].get("source") == "hub"
                    }
                )
            ),
            operations=operations,
        )
    except RepositoryNotFoundError:
        raise HubError(
            f"no model repo {repo_id} on the Hub (or no access): pass --results-repo with a repo you can write"
        ) from None
    except HfHubHTTPError as error:
        raise HubError(f"cannot push results to {repo_id}: {str(error).splitlines()[0]}") from None
    logger.info("pushed %d results to %s (%s)", len(model_index), repo_id, info.oid)
    return info.oid


def declare_dataset_tasks(payload: dict[str, Any], *, api=None) -> tuple[dict[str, str | None], list[str]]:
    """Write/extend ``eval.yaml`` in each Hub dataset we published; one commit per dataset that
    lacks a task. Returns ({repo: commit or None when already declared}, [datasets not ours])."""
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = api or HfApi()
    by_repo: dict[str, list[dict[str, str]]] = {}
    for task in payload["tasks"]:
        dataset = task["dataset"]
        if dataset.get("source") != "hub":
            continue
        declared = by_repo.setdefault(dataset["repo"], [])
        for name, metric in task["metrics"].items():
            if metric.get("value") is None:  # not measured (e.g. no S- images): nothing to list
                continue
            declared.append(
                {
                    "id": task_id(task["task"], name),
                    "config": dataset.get("config") or "default",
                    "split": metric_split(task, name),
                }
            )
    commits: dict[str, str | None] = {}
    not_ours: list[str] = []
    for repo, tasks in by_repo.items():
        card = _download_text(api, repo, "README.md", repo_type="dataset") or ""
        if CARD_SPEC_MARKER not in card:
            not_ours.append(repo)
            logger.info("%s was not published by conceptforge: its eval.yaml is left to its owners", repo)
            continue
        existing_text = _download_text(api, repo, DATASET_EVAL_PATH, repo_type="dataset")
        existing = yaml.safe_load(existing_text) if existing_text else None
        existing = existing if isinstance(existing, dict) else {}
        known = {t.get("id") for t in existing.get("tasks", []) if isinstance(t, dict)}
        new = [t for t in tasks if t["id"] not in known]
        if not new:
            commits[repo] = None
            continue
        from huggingface_hub import DatasetCard

        pretty = DatasetCard(card).data.to_dict().get("pretty_name") or repo
        document = {
            "name": existing.get("name") or pretty,
            "description": existing.get("description")
            or f"{pretty}: tasks evaluated by conceptforge (`conceptforge evaluate --tasks list`).",
            "evaluation_framework": existing.get("evaluation_framework") or FRAMEWORK,
            **{k: v for k, v in existing.items() if k not in ("name", "description", "evaluation_framework", "tasks")},
            "tasks": list(existing.get("tasks", [])) + new,
        }
        text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
        try:
            info = api.create_commit(
                repo,
                repo_type="dataset",
                commit_message=f"Declare {len(new)} conceptforge evaluation task(s)",
                operations=[CommitOperationAdd(DATASET_EVAL_PATH, io.BytesIO(text.encode("utf-8")))],
            )
        except HfHubHTTPError as error:
            raise HubError(f"cannot declare tasks in dataset {repo}: {str(error).splitlines()[0]}") from None
        commits[repo] = info.oid
        logger.info("declared %d task(s) in %s/%s (%s)", len(new), repo, DATASET_EVAL_PATH, info.oid)
    return commits, not_ours


def check_push(datasets: list[str | None]) -> None:
    """Refuse ``--push-results`` before any evaluation when the push cannot happen: no task
    measured on a Hub dataset (nothing the Hub can list), offline, or no token to write with."""
    import os

    from huggingface_hub import get_token

    from conceptforge.external_errors import hub_offline, offline_reason

    if all(dataset is None or os.path.isdir(dataset) for dataset in datasets):
        raise InvalidArgumentError(
            "--push-results: every task runs on a local dataset folder, so no result could be listed on the Hub; "
            "evaluate on the published datasets (ORG/NAME@REVISION) or drop --push-results"
        )
    if hub_offline():
        raise HubError(f"--push-results needs the Hub, but {offline_reason()}")
    if not get_token():
        raise InvalidArgumentError(
            "--push-results needs a Hub token with write access: set HF_TOKEN or run `hf auth login`"
        )


def push_results(
    payload: dict[str, Any], *, repo_id: str, create_pr: bool = False, samples: list[Path] = ()
) -> PushReport:  # type: ignore[assignment]
    """Model results (one commit, with ``samples`` files when given), then each of our datasets'
    task declarations (one commit each)."""
    from huggingface_hub import HfApi

    api = HfApi()
    model_commit = push_model_results(payload, repo_id, api=api, create_pr=create_pr, samples=samples)
    commits, not_ours = declare_dataset_tasks(payload, api=api)
    return PushReport(repo_id, model_commit, commits, not_ours)
