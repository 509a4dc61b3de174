"""A task's default dataset is read at the revision its table pins, recorded, and named in errors.

binding's tasks declare ``conceptforge/binding@v1.0.0`` (``--tasks list``, docs/evaluation.md). The
local Hub-compatible server holds that repo with a ``v1.0.0`` tag and a later ``main`` commit of
other data; a run without ``--dataset``/``--revision`` must read the tag (its row counts), record
``revision: v1.0.0`` with the tag's commit, and an offline run must say ``@v1.0.0``. Before the
fix the run read ``main`` and recorded ``revision: null``. The same server checks that a
``--results-repo`` which does not exist is refused before the first task.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.user_shell import check

REPO_ID = "conceptforge/binding"  # the binding tasks' default repo (loaders/binding/tasks.py)

PUBLISH = """
import sys
from huggingface_hub import HfApi
api = HfApi()
repo, first, later = sys.argv[1:4]
api.create_repo(repo, repo_type="dataset")
api.upload_folder(repo_id=repo, repo_type="dataset", folder_path=first, commit_message="v1.0.0 data")
api.create_tag(repo, repo_type="dataset", tag="v1.0.0")
api.upload_folder(repo_id=repo, repo_type="dataset", folder_path=later, delete_patterns="*", commit_message="later")
"""


def _evaluate(*args, env: dict[str, str]) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "conceptforge", "evaluate", *map(str, args)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


def _gen_rows(folder: Path) -> int:
    from conceptforge.loaders.binding.data import load_binding

    return len(load_binding(str(folder))["gen"].labels)


@pytest.fixture(scope="module")
def pinned_release(hub, hub_env, tmp_path_factory):
    """``conceptforge/binding``: v1.0.0 (2 images per label) then main (3 per label)."""
    from conceptforge.testing.synthetic import write_single_object

    work = tmp_path_factory.mktemp("pin")
    first = write_single_object(work / "v1", n_per_label=2)
    later = write_single_object(work / "later", n_per_label=3)
    done = subprocess.run(
        [sys.executable, "-c", PUBLISH, REPO_ID, str(first), str(later)],
        env=hub_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    check(done, "publish the pinned release")
    refs = hub.refs(REPO_ID, "dataset")
    tag, main = refs["tags"]["v1.0.0"], refs["branches"]["main"]
    assert tag != main
    return {"work": work, "tag": tag, "main": main, "gen_tag": _gen_rows(first), "gen_main": _gen_rows(later)}


def test_a_default_run_reads_records_and_names_the_pinned_revision(pinned_release, hub_env, tiny_clip_dir):
    work = pinned_release["work"]
    assert pinned_release["gen_tag"] != pinned_release["gen_main"]
    out = work / "pinned.json"
    common = ["--model", tiny_clip_dir, "--tasks", "binding-clip", "--device", "cpu", "--cache-dir", work / "cache"]
    check(_evaluate(*common, "--output", out, env=hub_env), "evaluate binding-clip on the default dataset")
    (task,) = json.loads(out.read_text())["tasks"]
    assert task["dataset"]["repo"] == REPO_ID
    assert task["dataset"]["revision"] == "v1.0.0"
    assert task["dataset"]["sha"] == pinned_release["tag"]
    assert task["metrics"]["gen_accuracy"]["n"] == pinned_release["gen_tag"]  # the tag's rows, not main's
    assert f"{REPO_ID}@v1.0.0" in out.with_suffix(".md").read_text()

    # offline: the one-line error names the revision the run would have read
    offline = _evaluate(*common, "--output", work / "offline.json", env={**hub_env, "HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 2, offline.stderr[-2000:]
    (line,) = [text for text in offline.stderr.splitlines() if text.startswith("error:")]  # one error line
    assert f"{REPO_ID}@v1.0.0" in line and "@main" not in line


@pytest.mark.heavy
def test_the_repo_named_keeps_the_pin_and_an_explicit_revision_wins(pinned_release, hub_env, tiny_clip_dir):
    """Two more runs of the default test's proof: the default repo named without @REV, then main."""
    work = pinned_release["work"]
    common = ["--model", tiny_clip_dir, "--tasks", "binding-clip", "--device", "cpu", "--cache-dir", work / "cache"]
    # the default repo named without @REV keeps the pin; an explicit revision wins
    again = work / "again.json"
    check(_evaluate(*common, "--dataset", f"binding-clip={REPO_ID}", "--output", again, env=hub_env), "repo named")
    assert json.loads(again.read_text())["tasks"][0]["dataset"]["sha"] == pinned_release["tag"]
    main = work / "main.json"
    check(_evaluate(*common, "--revision", "binding-clip=main", "--output", main, env=hub_env), "main asked for")
    (latest,) = json.loads(main.read_text())["tasks"]
    assert (latest["dataset"]["revision"], latest["dataset"]["sha"]) == ("main", pinned_release["main"])
    assert latest["metrics"]["gen_accuracy"]["n"] == pinned_release["gen_main"]


def test_a_results_repo_that_does_not_exist_is_refused_before_any_task(pinned_release, hub_env, tiny_clip_dir):
    """``--push-results --results-repo`` naming no model repo: one line before the evaluation (it
    used to run every task, write the results, then fail to push)."""
    work = pinned_release["work"]
    out = work / "pushed.json"
    done = _evaluate(
        "--model", tiny_clip_dir, "--tasks", "binding-clip", "--device", "cpu", "--cache-dir", work / "cache",
        "--push-results", "--results-repo", "conceptforge-e2e/no-such-model", "--output", out, env=hub_env,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = [text for text in done.stderr.splitlines() if text.startswith("error:")]
    assert line.startswith("error: no model repo conceptforge-e2e/no-such-model on the Hub")
    assert "binding-clip on" not in done.stderr  # no task started
    assert not out.exists()
