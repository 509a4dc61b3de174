"""The harness exports in a release, and the inspect-ai one run for real: tiny SUB and binding
releases are published to the local Hub with the command line (the release carries exports/),
``conceptforge evaluate`` scores a tiny random LLaVA by the by-answer protocol on them, and
inspect-ai runs the exported task module (downloaded alone: it reads the items and the rows from
the Hub at the tag) on the same model through a real inspect provider. Both must give the same
answer per item and the same accuracy; the eval.yaml written for ``--eval-framework inspect-ai``
passes the local Hub's checks and lists exactly the ids the by-answer results are filed under."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from publish_helpers import REPO_ROOT, binding_release, run_publish, sub_release

from conceptforge.cards.hub_eval import eval_yaml_problems

INSPECT_RUN = """
import json, sys
helpers, module, model, log_dir, out, *tasks = sys.argv[1:]
sys.path.insert(0, helpers)  # tests/publish: inspect_vlm.py, the test-only conceptforge/ provider
import inspect_vlm  # registers the conceptforge/ provider
from inspect_ai import eval as inspect_eval

found = {}
for task in tasks:
    (log,) = inspect_eval(f"{module}@{task}", model=f"conceptforge/{model}", log_dir=log_dir, display="none")
    assert log.status == "success", log.error
    metrics = {k: v.value for s in log.results.scores for k, v in s.metrics.items()}
    samples = {
        str(s.id): {"completion": s.output.completion, "parsed": next(iter(s.scores.values())).answer or None}
        for s in log.samples
    }
    found[task] = {"metrics": metrics, "samples": samples}
open(out, "w").write(json.dumps(found))
"""


@pytest.fixture(scope="module")
def letter_llava(tmp_path_factory):
    """The tiny random LLaVA answering one option letter (its generation config), so that the
    by-answer accuracies are not all 0 and a wrong score on either side would show."""
    from conceptforge.testing.tiny_vlms import build_tiny_llava, make_letter_answerer

    return make_letter_answerer(build_tiny_llava(tmp_path_factory.mktemp("models") / "letter-llava"))


@pytest.fixture(scope="module")
def released(tmp_path_factory, letter_llava, fake_cub):
    """The local Hub with tiny binding and SUB releases published with their exports and an
    inspect-ai eval.yaml, and ``conceptforge evaluate``'s by-answer run of the tiny LLaVA on them."""
    import secrets

    from conceptforge.testing.hub_server import HubServer
    from tests.user_shell import hub_client_env

    work = tmp_path_factory.mktemp("exports-inspect")
    token = "hf_" + secrets.token_hex(16)
    server = HubServer(work / "hub", token=token).start()
    env = {**hub_client_env(server.url, token, work / "hf-home"), "PYTHONPATH": str(REPO_ROOT)}
    binding, _ = binding_release(work / "binding")
    sub = sub_release(work / "sub")
    published = {}
    for directory, repo, task in ((binding, "org/binding", "binding-clip"), (sub, "org/sub", "sub-vlm")):
        extra = ["--cub-dir", str(fake_cub), "--eval-framework", "inspect-ai", "--eval-tasks", task]
        done = run_publish(env, directory, repo, "v1.0.0", *extra)
        assert done.returncode == 0, done.stderr[-3000:]
        published[repo] = done.stdout
    output = work / "ours.json"
    argv = [sys.executable, "-m", "conceptforge", "evaluate", "--model", str(letter_llava)]
    argv += ["--tasks", "binding-clip:org/binding@v1.0.0,sub-vlm:org/sub@v1.0.0", "--cub-dir", str(fake_cub)]
    argv += ["--task-option", "binding-clip.by_answer=true", "--task-option", "sub-vlm.by_answer=true"]
    argv += ["--device", "cpu", "--cache-dir", str(work / "cache"), "--output", str(output)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    yield {"server": server, "env": env, "work": work, "published": published, "ours": output}
    server.stop()


@pytest.mark.heavy
def test_a_release_carries_the_three_exports(released):
    files = released["server"].files("org/binding", "v1.0.0")
    assert (
        "exports: lmms-eval, VLMEvalKit and inspect-ai tasks for binding_clip_gen"
        in released["published"]["org/binding"]
    )
    for path in (
        "exports/lmms-eval/binding_clip_gen/binding_clip_gen.yaml",
        "exports/lmms-eval/binding_clip_gen/utils.py",
        "exports/vlmevalkit/Conceptforge_binding_clip_gen.tsv",
        "exports/vlmevalkit/README.md",
        "exports/inspect-ai/conceptforge_tasks.py",
        "exports/items/binding_clip_gen.jsonl",
        "exports/MANIFEST.json",
    ):
        assert path in files, path
        assert b"org/binding" in files[path] or path.endswith((".tsv", ".jsonl")), path
    lmms = yaml.safe_load(
        files["exports/lmms-eval/binding_clip_gen/binding_clip_gen.yaml"].decode().replace("!function ", "")
    )
    # the release at its tag, or a local copy: utils.py says which (tests/publish/test_exports_offline.py)
    assert (lmms["dataset_path"], lmms["dataset_kwargs"]["revision"], lmms["test_split"]) == (
        "utils.DATASET_PATH",
        "utils.DATASET_REVISION",
        "gen",
    )
    assert (
        b"# dataset_path is org/binding at revision v1.0.0 on the Hub"
        in files["exports/lmms-eval/binding_clip_gen/binding_clip_gen.yaml"]
    )
    assert lmms["output_type"] == "generate_until" and lmms["generation_kwargs"]["temperature"] == 0
    manifest = json.loads(files["exports/MANIFEST.json"])
    assert manifest["release"] == "org/binding" and manifest["tag"] == "v1.0.0"
    assert manifest["written_by"].startswith("conceptforge ")


@pytest.mark.heavy
def test_inspect_task_gives_our_answers_and_accuracy(released, letter_llava):
    from concurrent.futures import ThreadPoolExecutor

    work = released["work"]
    results = json.loads(released["ours"].read_text())
    ours = {t["task"]: t for t in results["tasks"]}
    cases = (
        ("org/binding", "binding-clip", ["binding_clip_gen_accuracy", "binding_clip_val_accuracy"]),
        ("org/sub", "sub-vlm", ["sub_vlm_s_plus"]),
    )
    argvs = []
    for repo, task, ids in cases:  # each task's module alone, in its own folder: items and rows come from the Hub
        module = work / f"download-{task}" / "conceptforge_tasks.py"
        module.parent.mkdir(exist_ok=True)
        module.write_bytes(released["server"].files(repo, "v1.0.0")["exports/inspect-ai/conceptforge_tasks.py"])
        out = work / f"inspect-{task}.json"
        argv = [sys.executable, "-c", INSPECT_RUN, Path(__file__).parent, module, letter_llava, work / f"logs-{task}"]
        argvs.append(list(map(str, [*argv, out, *ids])))
    # the two inspect-ai runs are independent processes: side by side (on a quiet 2-core machine
    # the second core is otherwise idle while the test waits)
    run = lambda argv: subprocess.run(argv, env=released["env"], capture_output=True, text=True, timeout=600)  # noqa: E731
    with ThreadPoolExecutor(max_workers=len(argvs)) as pool:
        runs = list(pool.map(run, argvs))
    for (_repo, task, _ids), done in zip(cases, runs):
        assert done.returncode == 0, done.stderr[-3000:]
        out = work / f"inspect-{task}.json"
        inspected = json.loads(out.read_text())
        rows = pq.read_table(released["ours"].with_name("ours.samples") / f"{task}.parquet").to_pylist()
        assert ours[task]["protocol"].endswith("choose-by-answer")
        if task == "binding-clip":
            for task_id, split in (("binding_clip_gen_accuracy", "gen"), ("binding_clip_val_accuracy", "val")):
                mine = {r["item_id"]: r for r in rows if r["split"] == split}
                theirs = inspected[task_id]["samples"]
                assert sorted(theirs) == sorted(mine) and mine
                for item_id, sample in theirs.items():
                    assert sample["completion"] == mine[item_id]["answer"]
                    assert sample["parsed"] == mine[item_id]["parsed_answer"]
                assert any(sample["parsed"] for sample in theirs.values())  # letters read: accuracy means something
                expected = ours[task]["metrics"][f"{split}_accuracy"]["value"]
                print(
                    f"PARITY inspect-ai {task_id}: items {len(theirs)}, accuracy {inspected[task_id]['metrics']['accuracy']} ours {expected}"
                )
                assert inspected[task_id]["metrics"]["accuracy"] == pytest.approx(expected, abs=1e-12)
        else:
            mine = {r["item_id"].split("/")[0]: r for r in rows if r["side"] == "S+"}
            theirs = inspected["sub_vlm_s_plus"]["samples"]
            assert sorted(theirs) == sorted(mine) and mine
            for item_id, sample in theirs.items():
                assert sample["completion"] == mine[item_id]["answer"]
                assert sample["parsed"] == mine[item_id]["parsed_answer"]
            expected = ours[task]["metrics"]["s_plus"]["value"]
            found = inspected["sub_vlm_s_plus"]["metrics"]["accuracy"]
            print(f"PARITY inspect-ai sub_vlm_s_plus: items {len(theirs)}, accuracy {found} ours {expected}")
            assert inspected["sub_vlm_s_plus"]["metrics"]["accuracy"] == pytest.approx(expected, abs=1e-12)


@pytest.mark.heavy
def test_inspect_eval_yaml_lists_the_ids_by_answer_results_are_filed_under(released):
    from conceptforge.loaders.harness.push_results import hub_entries

    results = json.loads(released["ours"].read_text())
    for repo, task in (("org/binding", "binding-clip"), ("org/sub", "sub-vlm")):
        files = released["server"].files(repo, "v1.0.0")
        declared = yaml.safe_load(files["eval.yaml"])
        assert eval_yaml_problems(declared) == [] and declared["evaluation_framework"] == "inspect-ai"
        ids = {t["id"] for t in declared["tasks"]}
        module = files["exports/inspect-ai/conceptforge_tasks.py"].decode()
        assert all(f"\ndef {task_id}(" in module for task_id in ids)  # every id is an exported @task
        payload = {**results, "tasks": [t for t in results["tasks"] if t["task"] == task]}
        pushed = {e.task_id for e in hub_entries(payload)}
        measured = {name for name, m in payload["tasks"][0]["metrics"].items() if m.get("value") is not None}
        # every measured leaderboard value lands on a declared id (the tiny SUB has no image S- scores)
        expected = {i for i in ids if any(i.endswith(name) for name in measured)}
        assert pushed and pushed == expected, (pushed, ids, measured)
