"""Publish a run's results in the model repo, and the task ids a benchmark's ``eval.yaml`` declares.

Why two formats in one commit: the Hub reads evaluation results from ``.eval_results/*.yaml`` in
the model repo (huggingface_hub's :class:`EvalResultEntry`; they appear on the model page and on
the benchmark dataset's leaderboard), while older tools read the ``model-index`` of the model
card (:class:`EvalResult`). Both are written in ONE commit (or one pull request), so the repo
never shows one without the other.

Nothing here writes to a dataset repo: an evaluator usually does not own the benchmark, and a
dataset becomes a Hub benchmark through the root ``eval.yaml`` its owner publishes
(``conceptforge publish --eval-framework NAME --eval-tasks ...``, :func:`benchmark_tasks`). The
task ids of both sides come from the same function (:func:`hub_task_id` over each task's
``leaderboard`` metrics), so the ids in the models' ``.eval_results`` are the ids the dataset
declares; after pushing, :func:`undeclared_ids` reads each dataset's ``eval.yaml`` and says
which pushed ids it does not list.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # PyYAML: a dependency of huggingface_hub

from conceptforge.cards.hub_eval import EVAL_YAML
from conceptforge.errors import HubError, InvalidArgumentError
from conceptforge.loaders.harness.units import COUNT, Unit, hub_value

logger = logging.getLogger(__name__)

RESULTS_PATH = ".eval_results/conceptforge.yaml"
SAMPLES_PATH = ".eval_results/samples"  # per-task parquet files (--push-samples)


def hub_task_id(task: str, metric: str, config: str | None = None) -> str:
    """The id a value is filed under in the dataset's ``eval.yaml`` and the model's results:
    ``task.metric``, or ``task.config.metric`` in a repo with several configs (pass ``config``
    only then: a one-config repo's ids do not depend on its config's name)."""
    return f"{task}.{metric}" if not config or config == "default" else f"{task}.{config}.{metric}"


def leaderboard_id(task: str, metric: str, *, config: str | None, configs: Sequence[str]) -> str:
    """THE id of a leaderboard value, for both sides: ``publish`` (eval.yaml, ``configs`` = the
    release's configs) and ``evaluate --push-results`` (``configs`` = the configs the dataset's
    card declares at the evaluated revision). The config is named only where the repo has several,
    so the two sides agree by construction."""
    return hub_task_id(task, metric, config if len(set(configs)) > 1 else None)


def by_answer_task_id(task: str, metric: str, *, config: str | None, configs: Sequence[str]) -> str:
    """The id of a by-answer leaderboard value (``sub_vlm_s_plus``, ``binding_clip_gen_accuracy``):
    :func:`leaderboard_id` as a Python identifier. It is the name of the exported inspect-ai
    ``@task`` (loaders/exports), the id ``publish --eval-framework inspect-ai`` declares and the id
    ``evaluate --push-results`` files a by-answer result under, so inspect runs and ours share a
    leaderboard row, and by-answer values never share one with the probability protocols'."""
    return re.sub(r"[^0-9A-Za-z_]+", "_", leaderboard_id(task, metric, config=config, configs=configs)).strip("_")


def is_by_answer(protocol: str | None) -> bool:
    """Whether a result's protocol reads the model's words (``sub/choose-by-answer``)."""
    return "by-answer" in str(protocol or "")


def task_id(task: str, metric: str) -> str:
    """The model-index metric type of a value (kept: existing model cards use it)."""
    return f"{task}.{metric}"


def metric_split(task: dict[str, Any], metric: str) -> str:
    for split in ("train", "val", "gen", "test"):
        if metric.split(".")[-1].startswith(split + "_"):
            return split
    split = task["dataset"].get("split") or "test"
    return split.split(",")[-1]


def _changed_options(task: dict[str, Any]) -> list[str]:
    """``name=value`` for every option the run changed from the task's defaults."""
    from conceptforge.loaders.harness.registry import all_tasks

    spec = all_tasks().get(task["task"])
    if spec is None:
        return []
    changed = []
    for name, default in spec.option_defaults().items():
        value = task.get("options", {}).get(name, default)
        as_list = list(default) if isinstance(default, tuple) else default
        if value != as_list and value != default:
            shown = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
            changed.append(f"{name}={shown}")
    return changed


def _notes(task: dict[str, Any], metric: dict[str, Any], unit: Unit) -> str:
    parts = [f"{task['protocol']}; {task['variant']}", f"value in {unit.words}"]
    if unit is COUNT and metric.get("n") is not None:
        parts[-1] += f", of {int(metric['n'])}"
    if metric.get("stderr") is not None:
        seeds = f" over seeds {','.join(map(str, task['seeds']))}" if task.get("seeds") else ""
        parts.append(f"± {unit.scale * metric['stderr']:.2f} s.e.{seeds}")
    changed = _changed_options(task)
    if changed:
        parts.append("non-default options: " + " ".join(changed))
    return "; ".join(parts)


def _evaluated_splits(task_split: str | None, available: Sequence[str]) -> list[str]:
    wanted = [s for s in (task_split or "test").split(",") if s]
    return [s for s in wanted if s in set(available)]


#: With ``--eval-framework inspect-ai`` each eval.yaml task also says how inspect runs it (the
#: Hub requires ``field_spec``, ``solvers`` and ``scorers``): the release's columns, and the
#: exported task module's solver (our prompt, then greedy generation) and scorer (our parser).
INSPECT_TASK_MODULE = "exports/inspect-ai/conceptforge_tasks.py"
_INSPECT_FIELDS = {
    "sub-vlm": {"input": "image", "target": "attribute", "metadata": ["bird", "removed_attribute"]},
    "binding-clip": {"input": "image", "target": "label_index", "choices": "candidates"},
}


def _inspect_fields(name: str, task_id: str) -> dict[str, Any]:
    scorer = "sub_by_answer" if name == "sub-vlm" else "choice_by_answer"
    return {
        "field_spec": dict(_INSPECT_FIELDS[name]),
        "solvers": [
            {"name": "conceptforge_by_answer_prompt", "args": {"module": INSPECT_TASK_MODULE, "task": task_id}},
            {"name": "generate", "args": {"temperature": 0}},
        ],
        "scorers": [{"name": scorer, "args": {"module": INSPECT_TASK_MODULE}}],
    }


def benchmark_tasks(
    names: Sequence[str], splits_by_config: Mapping[str, Sequence[str]], *, framework: str | None = None
) -> list[dict[str, Any]]:
    """The ``eval.yaml`` tasks of a dataset for conceptforge tasks ``names`` (default options):
    one ``{id, config, split}`` per leaderboard metric, config and evaluated split of the dataset.

    ``framework="inspect-ai"``: only the tasks with an inspect export (sub-vlm, binding-clip); the
    ids are the exported ``@task`` names (:func:`by_answer_task_id`), with inspect's fields."""
    from conceptforge.loaders.harness.registry import get_task

    declared: list[dict[str, Any]] = []
    inspect = framework == "inspect-ai"
    for name in names:
        if inspect and name not in _INSPECT_FIELDS:
            raise InvalidArgumentError(
                f"{name} has no inspect-ai export (those are {', '.join(_INSPECT_FIELDS)}, by the by-answer protocol): "
                "leave it out of --eval-tasks or choose another --eval-framework"
            )
        task = get_task(name)
        if task.leaderboard is None:
            raise InvalidArgumentError(
                f"{name} has no Hub dataset leaderboard (it scores {'a local folder' if task.needs else 'the model'}"
                "'s data, not a dataset's rows): leave it out of --eval-tasks"
            )
        found = False
        for config, available in splits_by_config.items():
            splits = _evaluated_splits(task.split, available)
            for metric, split in task.leaderboard(splits, task.option_defaults()):
                found = True
                make_id = by_answer_task_id if inspect else leaderboard_id
                task_id = make_id(name, metric, config=config, configs=list(splits_by_config))
                entry: dict[str, Any] = {"id": task_id, "config": config, "split": split}
                declared.append({**entry, **(_inspect_fields(name, task_id) if inspect else {})})
        if not found:
            raise InvalidArgumentError(
                f"{name} evaluates split(s) {task.split or 'test'}, which this dataset does not have "
                f"({', '.join(sorted({s for v in splits_by_config.values() for s in v}))})"
            )
    return declared


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


def leaderboard_metrics(task: dict[str, Any]) -> set[str]:
    """The metrics of a results-file task that are Hub leaderboards (what ``eval.yaml`` declares
    for the task's default options on the splits it evaluated)."""
    from conceptforge.loaders.harness.registry import all_tasks

    spec = all_tasks().get(task["task"])
    if spec is None or spec.leaderboard is None:
        return set()
    splits = [s for s in (task["dataset"].get("split") or spec.split or "test").split(",") if s]
    return {metric for metric, _ in spec.leaderboard(splits, spec.option_defaults())}


def _evaluated_config(task: dict[str, Any]) -> str | None:
    """The config a results-file task evaluated (recorded by the task, else its ``config`` option)."""
    return task["dataset"].get("config") or task.get("options", {}).get("config")


def dataset_configs(api, repo: str, revision: str) -> list[str]:
    """The configs a dataset's card declares at ``revision`` (``["default"]`` when it declares none)."""
    from conceptforge.cards.validate import parse_card_yaml
    from conceptforge.errors import ConceptforgeError

    text = _download_text(api, repo, "README.md", repo_type="dataset", revision=revision)
    try:
        configs = parse_card_yaml(text).get("configs") if text else None
    except ConceptforgeError:
        configs = None
    names = [c.get("config_name") for c in configs or [] if isinstance(c, dict)]
    return names or ["default"]


def run_dataset_configs(payload: dict[str, Any], api) -> dict[tuple[str, str], list[str]]:
    """The configs of every Hub dataset of the run, read from its card at the evaluated commit
    (what ``publish`` declared its eval.yaml from)."""
    found: dict[tuple[str, str], list[str]] = {}
    for _, dataset, _, _ in _hub_metrics(payload):
        key = (dataset["repo"], dataset["sha"])
        if key not in found:
            found[key] = dataset_configs(api, *key)
    return found


def hub_entries(payload: dict[str, Any], configs: Mapping[tuple[str, str], Sequence[str]] | None = None):
    """``EvalResultEntry`` per leaderboard metric measured on a Hub dataset, each value in its
    metric's unit (``loaders.harness.units``: a share in %, a count as counted), said in its notes.

    ``configs[(repo, sha)]``: the configs that dataset declares (:func:`run_dataset_configs`);
    where it has several, the ids name the evaluated config, as ``publish`` declares them
    (:func:`leaderboard_id`). A dataset missing from ``configs`` counts as one-config.
    """
    from huggingface_hub import EvalResultEntry

    from conceptforge.loaders.harness.registry import metric_unit

    entries = []
    for task, dataset, name, metric in _hub_metrics(payload):
        if name not in leaderboard_metrics(task):
            continue  # chance levels, per-model extras: in the model-index and the results file only
        declared = (configs or {}).get((dataset["repo"], dataset["sha"])) or ["default"]
        unit = metric_unit(task["task"], name, metric)
        entries.append(
            EvalResultEntry(
                dataset_id=dataset["repo"],
                task_id=(by_answer_task_id if is_by_answer(task.get("protocol")) else leaderboard_id)(
                    task["task"], name, config=_evaluated_config(task), configs=declared
                ),
                value=hub_value(metric, unit),
                dataset_revision=dataset["sha"],
                date=payload.get("created") or None,
                notes=_notes(task, metric, unit),
            )
        )
    return entries


def model_index_results(payload: dict[str, Any]):
    """The same values as legacy ``model-index`` :class:`EvalResult` entries."""
    from huggingface_hub import EvalResult

    from conceptforge.loaders.harness.registry import metric_unit

    results = []
    for task, dataset, name, metric in _hub_metrics(payload):
        unit = metric_unit(task["task"], name, metric)
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
                metric_name=f"{task['task']} {name} ({unit.label})",
                metric_value=hub_value(metric, unit),
            )
        )
    return results


@dataclass
class PushReport:
    model_repo: str
    model_commit: str | None
    pull_request: str | None = None  # --results-pr: the pull request's URL
    entries: int = 0  # .eval_results entries written
    # per dataset: the pushed task ids its eval.yaml (at the evaluated revision) does not declare;
    # None when it has no eval.yaml at all
    undeclared: dict[str, list[str] | None] = field(default_factory=dict)


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
    payload: dict[str, Any],
    repo_id: str,
    *,
    api=None,
    create_pr: bool = False,
    samples: list[Path] = (),  # type: ignore[assignment]
    configs: Mapping[tuple[str, str], Sequence[str]] | None = None,
) -> tuple[str, str | None, int]:
    """One commit (or pull request) to model repo ``repo_id``: ``.eval_results/conceptforge.yaml``
    + model-index, and the per-task samples files under ``.eval_results/samples/`` when ``samples``
    names them (``--push-samples``: they can be large, so only on request). Returns (commit id,
    pull request URL or None, number of .eval_results entries)."""
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    api = api or HfApi()
    model_index = model_index_results(payload)
    if not model_index:
        raise InvalidArgumentError(
            "no result was measured on a Hub dataset: nothing the Hub can list (results stay in the JSON file)"
        )
    entries = hub_entries(payload, configs) if supports_eval_results_folder() else []
    try:
        api.repo_info(repo_id, repo_type="model")
        card = _merged_card(_download_text(api, repo_id, "README.md", repo_type="model"), repo_id, model_index)
        operations = [CommitOperationAdd("README.md", io.BytesIO(card.encode("utf-8")))]
        operations += [CommitOperationAdd(f"{SAMPLES_PATH}/{Path(file).name}", str(file)) for file in samples]
        if entries:
            from huggingface_hub import eval_result_entries_to_yaml

            results_yaml = yaml.safe_dump(eval_result_entries_to_yaml(entries), sort_keys=False, allow_unicode=True)
            operations.insert(0, CommitOperationAdd(RESULTS_PATH, io.BytesIO(results_yaml.encode("utf-8"))))
        elif not supports_eval_results_folder():
            logger.warning(
                "huggingface_hub %s has no EvalResultEntry: results go to the model card's model-index only",
                __import__("huggingface_hub").__version__,
            )
        else:
            logger.warning("no task of this run has a Hub leaderboard metric: results go to the model-index only")
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
    return info.oid, (info.pr_url if create_pr else None), len(entries)


def undeclared_ids(
    payload: dict[str, Any], *, api=None, configs: Mapping[tuple[str, str], Sequence[str]] | None = None
) -> dict[str, list[str] | None]:
    """Per Hub dataset of the run: the pushed task ids its ``eval.yaml`` (read at the evaluated
    revision) does not declare, or None when it has no ``eval.yaml``. Reads only."""
    from huggingface_hub import HfApi

    api = api or HfApi()
    pushed: dict[tuple[str, str], set[str]] = {}
    for entry in hub_entries(payload, configs):
        pushed.setdefault((entry.dataset_id, entry.dataset_revision), set()).add(entry.task_id)
    report: dict[str, list[str] | None] = {}
    for (repo, revision), ids in sorted(pushed.items()):
        text = _download_text(api, repo, EVAL_YAML, repo_type="dataset", revision=revision)
        if text is None:
            report[repo] = None
            continue
        data = yaml.safe_load(text)
        declared = {t.get("id") for t in (data or {}).get("tasks", []) if isinstance(t, dict)}
        report[repo] = sorted(ids - declared)
    return report


def check_push(datasets: list[str | None], *, results_repo: str | None = None) -> None:
    """Refuse ``--push-results`` before any evaluation when the push cannot happen: no task
    measured on a Hub dataset (nothing the Hub can list), offline, no token to write with, or no
    model repo ``results_repo`` to write to (it used to be found after every task had run)."""
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
    if results_repo:
        from huggingface_hub import HfApi
        from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

        try:
            HfApi().repo_info(results_repo, repo_type="model")
        except RepositoryNotFoundError:
            raise HubError(
                f"no model repo {results_repo} on the Hub (or no access): pass --results-repo with a model repo you "
                "can write (create it first: hf repo create NAME)"
            ) from None
        except (HfHubHTTPError, OSError) as error:
            from conceptforge.external_errors import hub_failure

            raise hub_failure(error, f"check --results-repo {results_repo}") from None


def push_results(
    payload: dict[str, Any], *, repo_id: str, create_pr: bool = False, samples: list[Path] = ()
) -> PushReport:  # type: ignore[assignment]
    """The model's results (one commit or pull request, with ``samples`` files when given); then,
    reading only, which pushed task ids each dataset's ``eval.yaml`` does not declare."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi()
    try:
        configs = run_dataset_configs(payload, api)
    except HfHubHTTPError as error:
        raise HubError(f"cannot read the evaluated datasets' cards: {str(error).splitlines()[0]}") from None
    commit, pull_request, entries = push_model_results(
        payload, repo_id, api=api, create_pr=create_pr, samples=samples, configs=configs
    )
    try:
        undeclared = undeclared_ids(payload, api=api, configs=configs)
    except (HfHubHTTPError, OSError, yaml.YAMLError) as error:  # a read after the push: the push succeeded
        logger.warning("could not read the datasets' eval.yaml after pushing: %s", str(error).splitlines()[0])
        undeclared = {}
    return PushReport(repo_id, commit, pull_request, entries, undeclared)
