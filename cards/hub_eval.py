"""Hub benchmarks: the dataset's ``eval.yaml`` and the models' ``.eval_results/*.yaml``, checked as the Hub does.

Why here, in one place: a dataset becomes a Hub benchmark through a root ``eval.yaml`` (``name``,
``description``, ``evaluation_framework``, ``tasks: [{id, config, split}]``; the Hub validates it
at push time and shows "YAML Metadata Error: Invalid content in eval.yaml" on the dataset page
when it is wrong), and models list results on its leaderboard through ``.eval_results/*.yaml``
entries naming the dataset and one of its task ids (huggingface_hub's ``EvalResultEntry``). The
publish step writes the first (the dataset owner's act, on request), ``evaluate --push-results``
the second (in the model repo only), and the local test Hub (``conceptforge.testing.hub_server``)
refuses both where the Hub would flag them, using the same checks, so a test fails where the Hub
would show an error.

Specification followed (hub-docs ``docs/hub/eval-results.md``, "Eval.yaml specification", and
``eval_results.yaml``):

- ``eval.yaml``: ``name`` and ``description`` strings; ``evaluation_framework`` one of the
  frameworks the Hub lists (:data:`EVALUATION_FRAMEWORKS`; exactly one per benchmark);
  ``tasks`` a non-empty list whose items have a unique string ``id`` and optional string
  ``config`` (default: the dataset's default config) and ``split`` (default ``test``). With
  ``inspect-ai`` each task also needs ``field_spec``, ``solvers`` and ``scorers``.
- ``.eval_results/*.yaml``: a list of entries, each with ``dataset.id`` (a Hub dataset id) and
  ``dataset.task_id`` (a task of that dataset's ``eval.yaml``) and a numeric ``value``; optional
  ``dataset.revision``, ``verifyToken``, ``date`` (ISO-8601 date or datetime), ``source`` (with a
  required ``url`` and optional ``name``/``user``/``org``), ``evaluation_framework`` and ``notes``.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from conceptforge.errors import InvalidArgumentError, PublishError

EVAL_YAML = "eval.yaml"
EVAL_RESULTS_DIR = ".eval_results"

#: The huggingface.js commit the list below was read from (``packages/tasks/src/eval.ts``,
#: 2026-08-21); tests/publish/test_hub_eval.py pins it with the names, so a refresh changes both.
EVALUATION_FRAMEWORKS_COMMIT = "fe42e68017ffc76d09922ea8f9b38a6964345710"
#: The frameworks the Hub accepts in ``eval.yaml``: ``EVALUATION_FRAMEWORKS`` of huggingface.js
#: ``packages/tasks/src/eval.ts`` at :data:`EVALUATION_FRAMEWORKS_COMMIT`, in its order (30 names;
#: none of lmms-eval, VLMEvalKit, lighteval or lm-eval-harness is one). The Hub's list is the
#: authority; update this copy and the commit when it grows (docs/publishing.md). The local test
#: Hub validates with this same dict, so it stays in step by construction.
EVALUATION_FRAMEWORKS: dict[str, str] = {
    "exgentic": "https://github.com/Exgentic/exgentic",
    "inspect-ai": "https://inspect.aisi.org.uk/",
    "math-arena": "https://github.com/eth-sri/matharena",
    "mteb": "https://github.com/embeddings-benchmark/mteb",
    "olmocr-bench": "https://github.com/allenai/olmocr/tree/main/olmocr/bench",
    "harbor": "https://github.com/laude-institute/harbor",
    "ifstruct": "https://github.com/Liquid4All/ifstruct",
    "pier": "https://github.com/datacurve-ai/pier",
    "redline-bench": "https://github.com/crosbylegal/redline-bench",
    "archipelago": "https://github.com/Mercor-Intelligence/archipelago",
    "benchflow": "https://github.com/benchflow-ai/benchflow",
    "apex-evals": "https://github.com/Mercor-Intelligence/apex-evals",
    "screenspot-pro": "https://github.com/likaixin2000/ScreenSpot-Pro-GUI-Grounding",
    "swe-bench": "https://github.com/swe-bench/swe-bench",
    "swe-bench-pro": "https://github.com/scaleapi/SWE-bench_Pro-os",
    "nemo-evaluator": "https://github.com/NVIDIA-NeMo/Evaluator",
    "yc-bench": "https://github.com/collinear-ai/yc-bench",
    "open-asr-leaderboard": "https://github.com/huggingface/open_asr_leaderboard",
    "mdpbench": "https://github.com/Yuliang-Liu/MultimodalOCR",
    "real5-omnidocbench": "https://huggingface.co/datasets/PaddlePaddle/Real5-OmniDocBench",
    "parsebench": "https://github.com/run-llama/ParseBench",
    "video-mme-v2": "https://github.com/MME-Benchmarks/Video-MME-v2",
    "claw-eval": "https://github.com/claw-eval/claw-eval",
    "researchclawbench": "https://github.com/InternScience/ResearchClawBench",
    "pbench": "https://github.com/tiiuae/Falcon-Perception",
    "wildclawbench": "https://github.com/InternLM/WildClawBench",
    "wbench": "https://github.com/meituan-longcat/WBench",
    "nanofold": "https://github.com/ChrisHayduk/nanoFold-Competition",
    "mmmu": "https://mmmu-benchmark.github.io/",
    "extractbench": "https://github.com/run-llama/ExtractBench",
}
REGISTER_HINT = (
    "frameworks are registered by a pull request adding them to EVALUATION_FRAMEWORKS in huggingface.js "
    "packages/tasks/src/eval.ts (see docs/publishing.md)"
)
#: Extra per-task fields the Hub requires for ``inspect-ai`` benchmarks.
INSPECT_AI_TASK_FIELDS = ("field_spec", "solvers", "scorers")
DEFAULT_SPLIT = "test"
_DATASET_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


def check_framework(name: str) -> str:
    """``name`` when the Hub lists it; otherwise one line saying how frameworks are registered."""
    if name in EVALUATION_FRAMEWORKS:
        return name
    raise InvalidArgumentError(
        f"evaluation framework {name!r} is not one the Hub lists ({', '.join(sorted(EVALUATION_FRAMEWORKS))}); "
        + REGISTER_HINT
    )


def _problem(path: str, detail: str, *, file: str = EVAL_YAML) -> str:
    return f"Invalid content in {file}: {detail} at {path}"


def eval_yaml_problems(data: Any) -> list[str]:
    """What the Hub flags in an ``eval.yaml`` document (parsed YAML); empty when valid."""
    if not isinstance(data, Mapping):
        return [_problem("(root)", "expected a mapping")]
    problems = []
    for key in ("name", "description"):
        if not isinstance(data.get(key), str) or not data.get(key, "").strip():
            problems.append(_problem(key, "expected a non-empty string"))
    framework = data.get("evaluation_framework")
    if framework not in EVALUATION_FRAMEWORKS:
        problems.append(
            _problem("evaluation_framework", f"{framework!r} is not a known evaluation framework ({REGISTER_HINT})")
        )
    tasks = data.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        return problems + [_problem("tasks", "expected a non-empty list")]
    seen: set[str] = set()
    for index, task in enumerate(tasks):
        where = f"tasks[{index}]"
        if not isinstance(task, Mapping):
            problems.append(_problem(where, "expected a mapping"))
            continue
        task_id = task.get("id")
        if not isinstance(task_id, str) or not task_id:
            problems.append(_problem(f"{where}.id", "expected a non-empty string"))
        elif task_id in seen:
            problems.append(_problem(f"{where}.id", f"duplicate task id {task_id!r}"))
        else:
            seen.add(task_id)
        for key in ("config", "split"):
            if key in task and not isinstance(task[key], str):
                problems.append(_problem(f"{where}.{key}", "expected a string"))
        if framework == "inspect-ai":
            for key in INSPECT_AI_TASK_FIELDS:
                if key not in task:
                    problems.append(_problem(f"{where}.{key}", "required with evaluation_framework inspect-ai"))
    return problems


def _is_date(value: Any) -> bool:
    if isinstance(value, (datetime.date, datetime.datetime)):
        return True
    if not isinstance(value, str):
        return False
    try:
        datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def eval_results_problems(data: Any, *, file: str = f"{EVAL_RESULTS_DIR}/results.yaml") -> list[str]:
    """What the Hub flags in one ``.eval_results/*.yaml`` document (parsed YAML); empty when valid."""
    if not isinstance(data, list) or not data:
        return [_problem("(root)", "expected a non-empty list of results", file=file)]
    problems = []
    for index, entry in enumerate(data):
        where = f"[{index}]"
        if not isinstance(entry, Mapping):
            problems.append(_problem(where, "expected a mapping", file=file))
            continue
        dataset = entry.get("dataset")
        if not isinstance(dataset, Mapping):
            problems.append(_problem(f"{where}.dataset", "expected a mapping with id and task_id", file=file))
        else:
            if not isinstance(dataset.get("id"), str) or not _DATASET_ID.fullmatch(dataset["id"]):
                problems.append(_problem(f"{where}.dataset.id", "expected a Hub dataset id ORG/NAME", file=file))
            if not isinstance(dataset.get("task_id"), str) or not dataset["task_id"]:
                problems.append(_problem(f"{where}.dataset.task_id", "expected a non-empty string", file=file))
            for key in ("revision", "config", "split"):
                if key in dataset and not isinstance(dataset[key], str):
                    problems.append(_problem(f"{where}.dataset.{key}", "expected a string", file=file))
        value = entry.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(_problem(f"{where}.value", "expected a number", file=file))
        for key in ("verifyToken", "notes"):
            if key in entry and not isinstance(entry[key], str):
                problems.append(_problem(f"{where}.{key}", "expected a string", file=file))
        if "date" in entry and not _is_date(entry["date"]):
            problems.append(_problem(f"{where}.date", "expected an ISO-8601 date or datetime", file=file))
        if "evaluation_framework" in entry and entry["evaluation_framework"] not in EVALUATION_FRAMEWORKS:
            problems.append(_problem(f"{where}.evaluation_framework", "not a known evaluation framework", file=file))
        source = entry.get("source")
        if source is not None:
            if not isinstance(source, Mapping) or not isinstance(source.get("url"), str):
                problems.append(_problem(f"{where}.source.url", "required when source is given", file=file))
            else:
                for key in ("name", "user", "org"):
                    if key in source and not isinstance(source[key], str):
                        problems.append(_problem(f"{where}.source.{key}", "expected a string", file=file))
    return problems


def parse_yaml(text: str, *, file: str) -> tuple[Any, list[str]]:
    """(data, problems) of a YAML file; a syntax error is a problem, not an exception."""
    try:
        return yaml.safe_load(text), []
    except yaml.YAMLError as error:
        return None, [f"Invalid YAML in {file}: {' '.join(str(error).split())}"]


def eval_yaml_text(*, name: str, description: str, framework: str, tasks: Sequence[Mapping[str, str]]) -> str:
    """The ``eval.yaml`` a release carries (checked: a ValueError lists what the Hub would flag)."""
    document = {
        "name": name,
        "description": description,
        "evaluation_framework": check_framework(framework),
        "tasks": [dict(task) for task in tasks],
    }
    problems = eval_yaml_problems(document)
    if problems:
        raise InvalidArgumentError("; ".join(problems))
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


@dataclass(frozen=True)
class Benchmark:
    """What the dataset owner asks ``publish`` to declare: the framework and the tasks
    (``{"id", "config", "split"}``: the ids the models' ``.eval_results`` entries name)."""

    framework: str
    tasks: tuple[Mapping[str, str], ...]
    name: str
    description: str

    def __post_init__(self) -> None:
        check_framework(self.framework)
        if not self.tasks:
            raise InvalidArgumentError("a benchmark needs at least one task for its eval.yaml")

    def text(self, splits: Sequence[Any]) -> str:
        """The ``eval.yaml`` text, after checking that every task's config and split is in the release."""
        present = {(getattr(s, "config", "default"), s.name) for s in splits}
        for task in self.tasks:
            if (task.get("config", "default"), task.get("split", DEFAULT_SPLIT)) not in present:
                shown = ", ".join(f"{c}/{n}" if c != "default" else n for c, n in sorted(present))
                raise PublishError(
                    f"eval.yaml task {task['id']!r} names config {task.get('config', 'default')!r} split "
                    f"{task.get('split', DEFAULT_SPLIT)!r}, which this release does not have ({shown})"
                )
        return eval_yaml_text(name=self.name, description=self.description, framework=self.framework, tasks=self.tasks)
