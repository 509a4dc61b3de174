"""Adding a benchmark is one package per stage folder, no edit elsewhere (docs/evaluation-python.md).

A toy benchmark is written to a temporary folder as ``loaders/toybench/{__init__,tasks}.py`` and
``generators/toybench/{__init__,rebuild}.py``, the folders are put on the stage packages' search
path (as a plugin or a new folder in the checkout would be), and the harness, the breakdowns and
verify's rebuild lookup each see it without any list being edited.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import conceptforge.generators
import conceptforge.loaders

TASKS = """
from conceptforge.loaders.analysis.breakdowns import Dimension, TaskSpec
from conceptforge.loaders.harness.task import Metric, Task, TaskOutcome, mean_metric
from conceptforge.loaders.harness.units import PERCENT, MetricSpec

BREAKDOWNS = TaskSpec("toy", "accuracy", ("colour",), (Dimension("colour", "by colour", ("colour",)),),
                      lambda samples, main: ((), ()))


def score(rows, options):
    return {"accuracy": mean_metric([r["value"] for r in rows])}


def run(ctx):
    rows = [{"item_id": str(i), "value": float(i % 2), "colour": "red"} for i in range(4)]
    return TaskOutcome(rows, "accuracy", metrics=score(rows, {}))


def tasks():
    return [Task("toybench-demo", "toybench", "a toy task", ("clip",), "toy/protocol", run, score,
                 columns=(("colour", "string"),), breakdowns=BREAKDOWNS,
                 metrics=(MetricSpec("accuracy", PERCENT),))]
"""

REBUILD = """
GENERATOR = "toybench"


def rebuild(entry, weights, device, out):
    raise NotImplementedError("a toy")
"""


@pytest.fixture
def toy_benchmark(tmp_path, monkeypatch):
    for stage, module, text in (("loaders", "tasks", TASKS), ("generators", "rebuild", REBUILD)):
        package = tmp_path / stage / "toybench"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text('"""A toy benchmark."""\n')
        (package / f"{module}.py").write_text(textwrap.dedent(text))
    monkeypatch.setattr(conceptforge.loaders, "__path__", [*conceptforge.loaders.__path__, str(tmp_path / "loaders")])
    monkeypatch.setattr(
        conceptforge.generators, "__path__", [*conceptforge.generators.__path__, str(tmp_path / "generators")]
    )
    from conceptforge.loaders.harness import registry

    monkeypatch.setattr(registry, "_TASKS", None)  # the registry is built once per process
    yield
    for name in [m for m in sys.modules if "toybench" in m]:
        del sys.modules[name]


def test_a_new_benchmark_package_registers_its_task_breakdowns_and_rebuild(toy_benchmark):
    from conceptforge.generators.rebuild import rebuilders
    from conceptforge.loaders.analysis.breakdowns import spec_for
    from conceptforge.loaders.harness.registry import all_tasks, format_task_list, get_task
    from conceptforge.loaders.harness.task import Metric

    assert "toybench-demo" in all_tasks()
    assert get_task("toybench-demo").benchmark == "toybench"
    assert "toybench-demo" in format_task_list()
    assert spec_for("toybench-demo").family == "toy"
    # its metric with the unit it declares: rows 0..3 valued i % 2 -> accuracy 2/4
    assert get_task("toybench-demo").scored([{"value": float(i % 2)} for i in range(4)], {}) == {
        "accuracy": Metric(0.5, None, 4, "percent")
    }
    assert "toybench" in rebuilders()
    # the benchmarks of the repository are still there, found the same way
    assert {"sub-vlm", "binding-clip", "compmap-cub", "conceptbed-ccd"} <= set(all_tasks())
    assert {"binding", "sub", "conceptbed"} <= set(rebuilders())


def test_every_shipped_task_declares_its_breakdowns():
    """A new sub-* task without breakdowns used to get none silently: every task now names them."""
    from conceptforge.loaders.harness.registry import all_tasks

    missing = [name for name, task in all_tasks().items() if task.breakdowns is None]
    assert missing == []


def test_the_stage_folders_hold_one_package_per_benchmark():
    repo = Path(__file__).resolve().parents[2]
    for stage, benchmarks in {
        "generators": {"sub", "conceptbed", "binding"},
        "filters": {"sub", "conceptbed", "vqa"},
        "loaders": {"sub", "conceptbed", "binding", "compmap"},
    }.items():
        packages = {p.name for p in (repo / stage).iterdir() if (p / "__init__.py").is_file()}
        assert benchmarks <= packages, stage
