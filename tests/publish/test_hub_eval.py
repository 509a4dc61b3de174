"""The eval.yaml and .eval_results checks (cards.hub_eval) that publish and the local Hub share."""

from __future__ import annotations

import pytest
import yaml

from conceptforge.cards.dataset_dir import SplitStats
from conceptforge.cards.hub_eval import (
    EVALUATION_FRAMEWORKS,
    Benchmark,
    check_framework,
    eval_results_problems,
    eval_yaml_problems,
)
from conceptforge.errors import InvalidArgumentError, PublishError
from conceptforge.testing.hub_validation import evaluation_file_problems

VALID = {"name": "B", "description": "d", "evaluation_framework": "mteb", "tasks": [{"id": "t", "split": "test"}]}


def test_eval_yaml_schema():
    assert eval_yaml_problems(VALID) == []
    assert eval_yaml_problems({**VALID, "evaluation_framework": "conceptforge"}) == [
        "Invalid content in eval.yaml: 'conceptforge' is not a known evaluation framework (frameworks are "
        "registered by a pull request adding them to EVALUATION_FRAMEWORKS in huggingface.js "
        "packages/tasks/src/eval.ts (see docs/publishing.md)) at evaluation_framework"
    ]
    twice = {**VALID, "tasks": [{"id": "t"}, {"id": "t", "config": 3}]}
    assert eval_yaml_problems(twice) == [
        "Invalid content in eval.yaml: duplicate task id 't' at tasks[1].id",
        "Invalid content in eval.yaml: expected a string at tasks[1].config",
    ]
    inspect = {**VALID, "evaluation_framework": "inspect-ai"}
    assert [p.rsplit(" at ", 1)[1] for p in eval_yaml_problems(inspect)] == [
        "tasks[0].field_spec",
        "tasks[0].solvers",
        "tasks[0].scorers",
    ]
    assert eval_yaml_problems({"name": "", "tasks": []})[-1].endswith("at tasks")
    assert set(EVALUATION_FRAMEWORKS) >= {"inspect-ai", "mteb", "nemo-evaluator", "harbor"}


def test_eval_results_schema():
    good = [{"dataset": {"id": "org/b", "task_id": "t", "revision": "a" * 40}, "value": 20.9, "date": "2026-01-15"}]
    assert eval_results_problems(good) == []
    assert (
        eval_results_problems(yaml.safe_load("- dataset: {id: org/b, task_id: t}\n  value: 1\n  date: 2026-01-15\n"))
        == []
    )
    bad = [
        {"dataset": {"id": "not a repo", "task_id": ""}, "value": True, "date": "yesterday", "source": {"name": "x"}}
    ]
    assert [p.rsplit(" at ", 1)[1] for p in eval_results_problems(bad, file=".eval_results/a.yaml")] == [
        "[0].dataset.id",
        "[0].dataset.task_id",
        "[0].value",
        "[0].date",
        "[0].source.url",
    ]
    assert eval_results_problems([]) != []


def test_the_local_hub_checks_only_the_files_the_hub_checks():
    assert evaluation_file_problems("dataset", "eval.yaml", b"tasks: [")[0].startswith("Invalid YAML in eval.yaml")
    assert evaluation_file_problems("dataset", "sub/eval.yaml", b"anything") == []  # only the root file
    assert evaluation_file_problems("model", "eval.yaml", b"anything") == []
    assert evaluation_file_problems("model", ".eval_results/x.yaml", b"- value: 1\n")[0].endswith("at [0].dataset")


def test_benchmark_refuses_unlisted_frameworks_and_missing_splits():
    with pytest.raises(InvalidArgumentError, match=r"^evaluation framework 'lm-eval' is not one the Hub lists \("):
        check_framework("lm-eval")
    splits = [SplitStats("test", 2, 10, [], "default")]
    benchmark = Benchmark("mteb", ({"id": "x.s_plus", "config": "default", "split": "test"},), "SUB", "d")
    assert yaml.safe_load(benchmark.text(splits))["tasks"] == [{"id": "x.s_plus", "config": "default", "split": "test"}]
    other = Benchmark("mteb", ({"id": "x.gen", "config": "default", "split": "gen"},), "SUB", "d")
    with pytest.raises(PublishError, match="names config 'default' split 'gen', which this release does not have"):
        other.text(splits)
    with pytest.raises(InvalidArgumentError):
        Benchmark("mteb", (), "SUB", "d")


def test_framework_list_is_huggingface_js_at_the_pinned_commit():
    """The 30 names of huggingface.js packages/tasks/src/eval.ts at fe42e68 (2026-08-21), in its
    order, typed from that file: a refresh changes the commit and this list together."""
    from conceptforge.cards.hub_eval import EVALUATION_FRAMEWORKS_COMMIT

    assert EVALUATION_FRAMEWORKS_COMMIT == "fe42e68017ffc76d09922ea8f9b38a6964345710"
    assert (
        list(EVALUATION_FRAMEWORKS)
        == (
            "exgentic inspect-ai math-arena mteb olmocr-bench harbor ifstruct pier redline-bench archipelago "
            "benchflow apex-evals screenspot-pro swe-bench swe-bench-pro nemo-evaluator yc-bench "
            "open-asr-leaderboard mdpbench real5-omnidocbench parsebench video-mme-v2 claw-eval "
            "researchclawbench pbench wildclawbench wbench nanofold mmmu extractbench"
        ).split()
    )
    for harness in ("lmms-eval", "vlmevalkit", "lighteval", "lm-eval-harness"):
        assert harness not in EVALUATION_FRAMEWORKS
    # the local test Hub refuses what the Hub refuses, with the same list
    document = yaml.safe_dump({**VALID, "evaluation_framework": "extractbench"}).encode()
    assert evaluation_file_problems("dataset", "eval.yaml", document) == []
    document = yaml.safe_dump({**VALID, "evaluation_framework": "lmms-eval"}).encode()
    assert evaluation_file_problems("dataset", "eval.yaml", document)[0].endswith("at evaluation_framework")
