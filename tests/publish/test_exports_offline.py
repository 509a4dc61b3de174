"""An exported lmms-eval task runs offline from a local copy of the release
(``CONCEPTFORGE_RELEASE_DIR``), and a run that cannot reach the Hub says what it could not reach
before the harness's own retries end in a bare connection error (issue 45 item 9).

lmms-eval itself lives in a heavy venv (tests/publish/test_exports_heavy.py); here a plain Python
process without conceptforge reads the exported YAML the way lmms-eval 0.7 does — PyYAML with a
``!function`` constructor that executes the ``utils.py`` beside the YAML and returns the named
attribute — and loads the split as its ``ConfigurableTask.download`` does
(``datasets.load_dataset(path=dataset_path, name=dataset_name, **dataset_kwargs)``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from publish_helpers import binding_release

from conceptforge.commands import main
from conceptforge.loaders.binding.data import load_binding
from conceptforge.loaders.harness.by_answer import binding_choice_items, render_choice_prompt

TASK = "binding_clip_gen"
HARNESS = r"""
import importlib.util, json, os, sys
import yaml

def function(loader, node):  # lmms-eval's `!function module.attr`: the attribute of the file beside the YAML
    *module, attr = loader.construct_scalar(node).split(".")
    path = os.path.join(os.path.dirname(loader.name), ".".join(module) + ".py")
    spec = importlib.util.spec_from_file_location(".".join(module), path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return getattr(loaded, attr)

yaml.add_constructor("!function", function)
with open(sys.argv[1], "rb") as handle:
    config = yaml.full_load(handle)
kwargs = dict(config.get("dataset_kwargs") or {})
out = {"dataset_path": config["dataset_path"], "revision": kwargs.get("revision")}
if sys.argv[2] == "load":
    import datasets

    data = datasets.load_dataset(path=config["dataset_path"], name=config.get("dataset_name"), **kwargs)
    docs = config["process_docs"](data[config["test_split"]])
    out["prompts"] = [config["doc_to_text"](doc) for doc in docs]
    out["right"] = [config["process_results"](doc, [config["doc_to_target"](doc)]) for doc in docs]
    out["unparsed"] = [config["process_results"](doc, ["no idea"]) for doc in docs]
assert not any(name.split(".")[0] == "conceptforge" for name in sys.modules), "conceptforge was imported"
print(json.dumps(out))
"""


def _run(tmp_path, yaml_path, mode: str, **env_vars: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "CONCEPTFORGE_", "PYTHONPATH"))}
    env.update({"HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_DISABLE_TELEMETRY": "1", **env_vars})
    return subprocess.run(
        [sys.executable, "-c", HARNESS, str(yaml_path), mode],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_an_exported_lmms_eval_task_runs_offline_from_a_local_copy(tmp_path, capsys):
    release, _ = binding_release(tmp_path / "release")
    assert main(["export", str(release), "--repo-id", "org/binding", "--version", "v1.0.0"]) == 0
    capsys.readouterr()
    copy = tmp_path / "copy"  # what `hf download org/binding --revision v1.0.0 --local-dir copy` gives
    shutil.copytree(release, copy)
    tasks = tmp_path / "tasks" / TASK  # the task folder alone, away from the items it reads
    shutil.copytree(release / "exports" / "lmms-eval" / TASK, tasks)
    yaml_path = tasks / f"{TASK}.yaml"
    nowhere = "http://127.0.0.1:9"  # nothing listens on the discard port

    done = _run(
        tmp_path, yaml_path, "load", CONCEPTFORGE_RELEASE_DIR=str(copy), HF_HUB_OFFLINE="1", HF_ENDPOINT=nowhere
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert (out["dataset_path"], out["revision"]) == (str(copy), None)  # the folder is the tag's files
    questions = [q for q in binding_choice_items({"gen": load_binding(str(release))["gen"]})]
    assert out["prompts"] == [render_choice_prompt(q) for q in questions] and len(questions) == 2
    assert out["right"] == [{"accuracy": 1.0}] * 2  # the answer letter is right
    assert out["unparsed"] == [{"accuracy": 0.0}] * 2  # an answer naming no option is scored wrong
    assert "cannot be reached" not in done.stderr

    # Without the local copy, the Hub is where the rows come from: a Hub that cannot be reached is
    # named in one line with the way out, before the harness's own retries.
    done = _run(tmp_path, yaml_path, "resolve", HF_ENDPOINT=nowhere)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {"dataset_path": "org/binding", "revision": "v1.0.0"}
    assert done.stderr.strip().splitlines() == [
        f"org/binding at tag v1.0.0 is read from {nowhere}, which cannot be reached (nothing answers at {nowhere}: "
        "ConnectionRefusedError: [Errno 111] Connection refused); to run offline, copy the release (hf download "
        "org/binding --repo-type dataset --revision v1.0.0 --local-dir DIR) and set CONCEPTFORGE_RELEASE_DIR=DIR"
    ]

    # A local copy that is not one: said, naming the variable and the download that makes one.
    done = _run(tmp_path, yaml_path, "resolve", CONCEPTFORGE_RELEASE_DIR=str(tmp_path / "missing"))
    assert done.returncode != 0
    assert (
        f"FileNotFoundError: CONCEPTFORGE_RELEASE_DIR={tmp_path / 'missing'} is not a copy of org/binding at v1.0.0 "
        "(it needs README.md and data/): hf download org/binding --repo-type dataset --revision v1.0.0 "
        f"--local-dir {tmp_path / 'missing'}"
    ) in done.stderr
