"""``conceptforge evaluate --model --tasks`` end to end from published versions, in real processes.

A tiny binding release and a tiny SUB release are published to the local Hub-compatible server
with ``conceptforge publish``; a tiny random CLIP (built from a config, saved, uploaded as a model
repo) is evaluated on them by Hub id; ``--push-results`` writes the results beside it; a plain
``huggingface_hub`` process (no conceptforge import) reads them back. The per-benchmark
sub-commands evaluate the same releases independently, so the task registry's numbers are checked
against the protocols' own command lines, not against themselves.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conceptforge.testing.synthetic import COLOURS, SHAPES, binding_features, single_object_rows, sub_features, sub_rows
from tests.evaluation_fixtures import SMALL_BINDING_SUB_OPTIONS, task_options
from tests.user_shell import check, hub_client_env, plain_python_json

REPO = Path(__file__).resolve().parents[2]
FRAMEWORK = "nemo-evaluator"  # any framework the Hub lists (conceptforge is not one: docs/publishing.md)
MODEL_REPO = "conceptforge-e2e/tiny-clip"
BINDING_REPO = "conceptforge-e2e/binding-single-object"
SUB_REPO = "conceptforge-e2e/sub"


def _metadata(name: str, columns) -> object:
    from conceptforge.cards import DatasetMetadata, collect_provenance

    return DatasetMetadata(
        pretty_name=name,
        license="cc-by-4.0",
        summary=f"Tiny synthetic {name} for the evaluate tests.",
        task_categories=["zero-shot-image-classification"],
        tags=["synthetic", "conceptforge"],
        column_docs={column: column.replace("_", " ") for column in columns},
        provenance=collect_provenance(
            generator="tests.eval", parameters={"name": name}, seeds={"run": 0}, argv=["test"]
        ),
    )


def _write_release(out: Path, name: str, splits: dict[str, list[dict]], features) -> Path:
    from conceptforge.cards import assemble_dataset_dir, render_card

    metadata = _metadata(name, list(features))
    assemble_dataset_dir(
        out,
        splits={split: (lambda rows=rows: iter(rows)) for split, rows in splits.items()},
        features=features,
        render_card=lambda stats: render_card(metadata, features, stats, has_grid=False),  # it writes no grid
    )
    return out


def _binding_splits() -> dict[str, list[dict]]:
    labels = [f"{c} {s}" for c in COLOURS for s in SHAPES]
    train = [label for label in labels if label not in ("red cube", "blue sphere", "green cylinder", "cyan cube")]
    return {
        "train": single_object_rows(train[:8], 1, 1, labels),
        "val": single_object_rows(["red cube", "blue sphere"], 2, 2, labels),
        "gen": single_object_rows(["green cylinder", "cyan cube"], 2, 3, labels),
    }


def _run(command: str, *args, env, timeout: int = 300) -> subprocess.CompletedProcess:
    """``conceptforge COMMAND ARGS`` as a user runs it (``python -m conceptforge``)."""
    return subprocess.run(
        [sys.executable, "-m", "conceptforge", *command.split(), *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """Local Hub with a binding and a SUB release (publish.py) and the tiny CLIP as a model repo."""
    from conceptforge.testing.hub_server import HubServer
    from conceptforge.testing.synthetic import write_fake_cub
    from conceptforge.testing.tiny_models import build_tiny_clip

    work = tmp_path_factory.mktemp("evaluate-e2e")
    token = "hf_" + secrets.token_hex(16)
    server = HubServer(work / "hub", token=token).start()
    env = hub_client_env(server.url, token, work / "hf-home")
    binding = _write_release(work / "binding", "Binding single-object", _binding_splits(), binding_features())
    sub = _write_release(work / "sub", "SUB", {"test": sub_rows()}, sub_features())
    clip = build_tiny_clip(work / "tiny-clip")  # 77 positions: SUB prompts stay distinct
    other = build_tiny_clip(work / "tiny-clip-seed1", seed=1)
    # The datasets' owner declares the benchmarks (eval.yaml) when publishing; evaluators never write there.
    uploads = {
        f"publish {repo}": [sys.executable, "-m", "conceptforge", "publish", str(directory), "--repo-id", repo]
        + ["--version", "v1.0.0", "--eval-framework", FRAMEWORK, "--eval-tasks", tasks]
        for directory, repo, tasks in ((binding, BINDING_REPO, "binding-clip,binding-cdsm"), (sub, SUB_REPO, "sub-vlm"))
    }
    # The model's author uploads it (a separate process: this one may be offline for other tests).
    upload = (
        "import sys; from huggingface_hub import HfApi; api = HfApi(); api.create_repo(sys.argv[1]); "
        "api.upload_folder(repo_id=sys.argv[1], folder_path=sys.argv[2], commit_message='tiny random CLIP')"
    )
    uploads["upload the tiny CLIP"] = [sys.executable, "-c", upload, MODEL_REPO, str(clip)]
    # three repos, three independent processes: side by side (the server is threaded and commits
    # under a lock), where one after the other they were most of this fixture's 20 s
    run = lambda argv: subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)  # noqa: E731
    with ThreadPoolExecutor(max_workers=len(uploads)) as pool:
        for what, done in zip(uploads, pool.map(run, uploads.values())):
            check(done, what)
    yield {
        "work": work,
        "server": server,
        "env": env,
        "token": token,
        "clip": clip,
        "other": other,
        "cub": write_fake_cub(work / "cub"),
    }
    server.stop()


def _evaluate_args(p, output: Path, *extra) -> list:
    return [
        "--tasks",
        f"sub-vlm:{SUB_REPO}@v1.0.0,binding-clip,binding-cdsm,conceptbed-ccd",
        "--dataset",
        f"binding-clip={BINDING_REPO}@v1.0.0",
        "--dataset",
        f"binding-cdsm={BINDING_REPO}",
        "--revision",
        "binding-cdsm=v1.0.0",
        *task_options("binding-cdsm.models=add", *SMALL_BINDING_SUB_OPTIONS[1:]),
        "--cub-dir",
        p["cub"],
        "--cache-dir",
        p["work"] / "emb",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--batch-size",
        8,
        "--output",
        output,
        *extra,
    ]


@pytest.fixture(scope="module")
def evaluated(published):
    p = published
    server = p["server"]
    before = {repo: len(server.history(repo)) for repo in (BINDING_REPO, SUB_REPO)}
    model_before = len(server.history(MODEL_REPO, repo_type="model"))
    model_sha = server.refs(MODEL_REPO, "model")["branches"]["main"]  # what is evaluated (the push comes after)
    output = p["work"] / "results" / "tiny-clip.json"
    done = check(
        _run("evaluate", "--model", MODEL_REPO, *_evaluate_args(p, output, "--push-results"), env=p["env"]),
        "evaluate --push-results",
    )
    return {
        "done": done,
        "output": output,
        "results": json.loads(output.read_text()),
        "before": before,
        "model_before": model_before,
        "model_sha": model_sha,
    }


def test_results_file_names_versions_revisions_and_commits(published, evaluated):
    import conceptforge

    results, server = evaluated["results"], published["server"]
    assert results["conceptforge_version"] == conceptforge.__version__
    model_sha = evaluated["model_sha"]
    assert results["model"] == {
        "id": MODEL_REPO,
        "kind": "clip",
        "source": "hub",
        "revision": None,
        "sha": model_sha,
        "model_type": "clip",
    }
    tasks = {t["task"]: t for t in results["tasks"]}
    assert list(tasks) == ["sub-vlm", "binding-clip", "binding-cdsm"]
    tag = {repo: server.refs(repo)["tags"]["v1.0.0"] for repo in (BINDING_REPO, SUB_REPO)}
    assert tasks["sub-vlm"]["dataset"] == {
        "repo": SUB_REPO,
        "revision": "v1.0.0",
        "sha": tag[SUB_REPO],
        "source": "hub",
        "config": None,
        "split": "test",
    }
    for name in ("binding-clip", "binding-cdsm"):
        assert (tasks[name]["dataset"]["repo"], tasks[name]["dataset"]["revision"], tasks[name]["dataset"]["sha"]) == (
            BINDING_REPO,
            "v1.0.0",
            tag[BINDING_REPO],
        )
    assert tasks["sub-vlm"]["protocol"] == "sub/vlm-within-group" and tasks["sub-vlm"]["variant"]
    assert tasks["binding-cdsm"]["seeds"] == [0, 1] and tasks["binding-cdsm"]["main_metric"] == "add.gen_accuracy"
    cdsm = tasks["binding-cdsm"]["metrics"]["add.gen_accuracy"]
    assert cdsm["n"] == 2 and cdsm["stderr"] is not None and 0.0 <= cdsm["value"] <= 1.0
    assert tasks["binding-clip"]["metrics"]["gen_accuracy"]["stderr"] is None  # deterministic, no seeds
    assert tasks["sub-vlm"]["metrics"]["s_plus"]["n"] == len(sub_rows())
    assert tasks["sub-vlm"]["metrics"]["s_minus"]["n"] > 0 and tasks["sub-vlm"]["variant"].endswith("S- rule paper")
    # the skipped task: one line on stderr and in the file
    assert results["skipped"] == [
        {
            "task": "conceptbed-ccd",
            "reason": (
                f"conceptbed-ccd runs with vlm, generated-images, endpoint (generated images or match); "
                f"{MODEL_REPO} is a clip model (clip)"
            ),
        }
    ]
    assert (
        f"skipped: conceptbed-ccd runs with vlm, generated-images, endpoint (generated images or match); {MODEL_REPO} is a clip model"
        in evaluated["done"].stderr
    )
    markdown = evaluated["output"].with_suffix(".md").read_text()
    assert "| binding-cdsm | add.gen_accuracy *" in markdown and tag[BINDING_REPO][:12] in markdown


@pytest.mark.heavy
def test_task_numbers_match_the_benchmarks_own_commands(published, evaluated):
    """The registry runs the protocols: the per-benchmark sub-commands give the same numbers."""
    p, tasks = published, {t["task"]: t for t in evaluated["results"]["tasks"]}
    model_sha = evaluated["results"]["model"]["sha"]
    out = p["work"] / "binding-own.json"
    check(
        _run(
            "evaluate binding",
            "--dataset",
            BINDING_REPO,
            "--revision",
            "v1.0.0",
            "--models",
            "clip,add",
            "--seeds",
            "0,1",
            "--epochs",
            2,
            "--batch-size",
            8,
            "--clip-model",
            MODEL_REPO,
            "--clip-revision",
            model_sha,
            "--cache-dir",
            p["work"] / "emb-own",
            "--device",
            "cpu",
            "--output",
            out,
            env=p["env"],
        ),
        "evaluate binding",
    )
    own = {t["task"]: t for t in json.loads(out.read_text())["tasks"]}  # the alias writes the one results format
    for split in ("train", "val", "gen"):
        assert tasks["binding-clip"]["metrics"][f"{split}_accuracy"]["value"] == pytest.approx(
            own["binding-clip"]["metrics"][f"{split}_accuracy"]["value"]
        )
        mean, se = (own["binding-cdsm"]["metrics"][f"add.{split}_accuracy"][key] for key in ("value", "stderr"))
        assert tasks["binding-cdsm"]["metrics"][f"add.{split}_accuracy"]["value"] == pytest.approx(mean)
        assert tasks["binding-cdsm"]["metrics"][f"add.{split}_accuracy"]["stderr"] == pytest.approx(se)
    out = p["work"] / "sub-own.json"
    check(
        _run(
            "evaluate sub",
            "--dataset",
            SUB_REPO,
            "--revision",
            "v1.0.0",
            "--cub-dir",
            p["cub"],
            "--cbm-min-classes",
            1,
            "--model",
            MODEL_REPO,
            "--model-revision",
            model_sha,
            "--cache-dir",
            p["work"] / "emb-own",
            "--output",
            out,
            env=p["env"],
        ),
        "evaluate sub",
    )
    (vlm,) = json.loads(out.read_text())["tasks"]
    for metric in ("s_plus", "s_minus", "chance_s_plus", "chance_s_minus"):
        assert tasks["sub-vlm"]["metrics"][metric]["value"] == pytest.approx(vlm["metrics"][metric]["value"])


READ_BACK = r"""
import json, sys, yaml
from huggingface_hub import HfApi, ModelCard, hf_hub_download, parse_eval_result_entries
model, datasets = sys.argv[1], sys.argv[2:]
api = HfApi()
entries = parse_eval_result_entries(yaml.safe_load(open(hf_hub_download(model, ".eval_results/conceptforge.yaml"))))
card = ModelCard.load(model)
out = {"entries": [[e.dataset_id, e.task_id, e.value, e.dataset_revision, e.notes] for e in entries],
       "model_index": [[r.dataset_type, r.task_name, r.metric_type, r.metric_value, r.dataset_revision, r.dataset_split]
                       for r in card.data.eval_results],
       "model_commits": [c.title for c in api.list_repo_commits(model)],
       "model_files": sorted(api.list_repo_files(model)),
       "eval_yaml": {d: yaml.safe_load(open(hf_hub_download(d, "eval.yaml", repo_type="dataset"))) for d in datasets},
       "dataset_commits": {d: [c.title for c in api.list_repo_commits(d, repo_type="dataset")] for d in datasets}}
assert not any(m.split(".")[0] == "conceptforge" for m in sys.modules)
print(json.dumps(out))
"""


def _read_back(p) -> dict:
    return plain_python_json(READ_BACK, MODEL_REPO, BINDING_REPO, SUB_REPO, env=p["env"], timeout=120)


@pytest.mark.heavy
def test_push_results_writes_the_model_repo_only_with_the_ids_the_datasets_declare(published, evaluated):
    p, results = published, evaluated["results"]
    server = p["server"]
    assert len(server.history(MODEL_REPO, repo_type="model")) == evaluated["model_before"] + 1
    for repo, count in evaluated["before"].items():
        assert len(server.history(repo)) == count, repo  # evaluate never commits to a dataset repo
    assert (
        server.refs(BINDING_REPO)["tags"]["v1.0.0"] == results["tasks"][1]["dataset"]["sha"]
    )  # the release is untouched
    back = _read_back(p)
    # .eval_results: the leaderboard metrics only (no chance levels), under the ids eval.yaml declares
    leaderboard = {"sub-vlm": {"s_plus", "s_minus"}}
    leaderboard["binding-clip"] = {f"{s}_accuracy" for s in ("train", "val", "gen")}
    leaderboard["binding-cdsm"] = {f"add.{s}_accuracy" for s in ("train", "val", "gen")}
    expected = sorted(
        [t["dataset"]["repo"], f"{t['task']}.{name}", round(100 * m["value"], 4), t["dataset"]["sha"]]
        for t in results["tasks"]
        for name, m in t["metrics"].items()
        if name in leaderboard[t["task"]]
    )
    assert sorted(e[:4] for e in back["entries"]) == expected
    declared = {repo: {t["id"] for t in doc["tasks"]} for repo, doc in back["eval_yaml"].items()}
    assert back["eval_yaml"][BINDING_REPO]["evaluation_framework"] == FRAMEWORK
    pushed = {repo: {e[1] for e in back["entries"] if e[0] == repo} for repo in (BINDING_REPO, SUB_REPO)}
    assert pushed[SUB_REPO] == declared[SUB_REPO] == {"sub-vlm.s_plus", "sub-vlm.s_minus"}
    # binding-cdsm ran one of the six default models (models=add): its ids are a subset of the declared ones
    assert pushed[BINDING_REPO] <= declared[BINDING_REPO]
    assert {i for i in declared[BINDING_REPO] if i.startswith("binding-clip.")} == {
        i for i in pushed[BINDING_REPO] if i.startswith("binding-clip.")
    }
    assert len([i for i in declared[BINDING_REPO] if i.startswith("binding-cdsm.")]) == 6 * 3
    assert "does not declare" not in evaluated["done"].stdout and "has no eval.yaml" not in evaluated["done"].stdout
    notes = {e[1]: e[4] for e in back["entries"]}
    se = results["tasks"][2]["metrics"]["add.gen_accuracy"]["stderr"]
    assert f"± {100 * se:.2f} s.e. over seeds 0,1" in notes["binding-cdsm.add.gen_accuracy"]
    assert "non-default options: " in notes["binding-cdsm.add.gen_accuracy"]
    assert "models=add" in notes["binding-cdsm.add.gen_accuracy"]
    # the model-index keeps every metric (chance levels included)
    model_index = {(r[0], r[1], r[2]): r for r in back["model_index"]}
    assert len(model_index) == sum(len(t["metrics"]) for t in results["tasks"])
    assert model_index[(BINDING_REPO, "binding", "binding-clip.gen_accuracy")][3:] == [
        round(100 * results["tasks"][1]["metrics"]["gen_accuracy"]["value"], 4),
        results["tasks"][1]["dataset"]["sha"],
        "gen",
    ]
    assert back["model_commits"][0].startswith("conceptforge evaluate: sub-vlm, binding-clip, binding-cdsm")
    assert back["dataset_commits"][SUB_REPO][0] == "Release v1.0.0"
    assert not [f for f in back["model_files"] if f.startswith(".eval_results/samples/")]  # samples only when asked

    # Again, as a pull request with the samples: main is untouched, the PR branch holds both.
    again = check(
        _run(
            "evaluate",
            "--model",
            MODEL_REPO,
            *_evaluate_args(p, p["work"] / "again.json", "--push-results", "--push-samples", "--results-pr"),
            env=p["env"],
        ),
        "second push",
    )
    assert "pushed results to conceptforge-e2e/tiny-clip (pull request " in again.stdout
    assert len(server.history(MODEL_REPO, repo_type="model")) == evaluated["model_before"] + 1
    for repo, count in evaluated["before"].items():
        assert len(server.history(repo)) == count, repo
    pr = server.refs(MODEL_REPO, "model")["pullRequests"]
    assert list(pr) == ["refs/pr/1"]
    files = server.files(MODEL_REPO, "refs/pr/1", repo_type="model")
    assert [f for f in sorted(files) if f.startswith(".eval_results/samples/")] == [
        f".eval_results/samples/{t['task']}.parquet" for t in sorted(results["tasks"], key=lambda t: t["task"])
    ]
    main_files = server.files(MODEL_REPO, "main", repo_type="model")
    assert not [f for f in main_files if f.startswith(".eval_results/samples/")]


def test_the_local_hub_refuses_what_the_hub_flags(published):
    """eval.yaml with an unlisted framework, and .eval_results entries without a task id, are refused
    (the real Hub shows "YAML Metadata Error: Invalid content in eval.yaml ... at evaluation_framework")."""
    p = published
    script = r"""
import sys
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError
api = HfApi()
repo, kind, path, text = sys.argv[1:5]
try:
    api.upload_file(path_or_fileobj=text.encode(), path_in_repo=path, repo_id=repo, repo_type=kind)
except HfHubHTTPError as error:
    print("REFUSED", error.response.status_code, error.response.json()["error"])
else:
    print("ACCEPTED")
"""
    env = {k: v for k, v in p["env"].items() if k != "PYTHONPATH"}

    def upload(repo, kind, path, text):
        done = subprocess.run(
            [sys.executable, "-c", script, repo, kind, path, text], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip().splitlines()[-1]

    before = len(p["server"].history(SUB_REPO))
    bad = "name: SUB\ndescription: d\nevaluation_framework: conceptforge\ntasks:\n- id: sub-vlm.s_plus\n"
    answer = upload(SUB_REPO, "dataset", "eval.yaml", bad)
    assert answer.startswith("REFUSED 400 YAML Metadata Error: Invalid content in eval.yaml")
    assert "at evaluation_framework" in answer
    assert len(p["server"].history(SUB_REPO)) == before
    assert upload(MODEL_REPO, "model", ".eval_results/x.yaml", "- dataset: {id: a/b}\n  value: 1\n").startswith(
        "REFUSED 400 YAML Metadata Error: Invalid content in .eval_results/x.yaml: expected a non-empty string at [0].dataset.task_id"
    )


@pytest.mark.heavy
def test_leaderboard_compares_two_tiny_models(published, evaluated):
    p = published
    other = p["work"] / "results" / "tiny-clip-seed1.json"
    check(
        _run("evaluate", "--model", p["other"], *_evaluate_args(p, other)[:-2], "--output", other, env=p["env"]),
        "evaluate local model",
    )
    local = json.loads(other.read_text())
    assert local["model"]["source"] == "local" and local["model"]["sha"].startswith("local-")
    done = check(_run("leaderboard", evaluated["output"], other, env=p["env"]), "leaderboard")
    lines = done.stdout.splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header == [
        "model",
        "kind",
        "revision",
        "sub-vlm s_plus (%)",
        "binding-clip gen_accuracy (%)",
        "binding-cdsm add.gen_accuracy (%)",
    ]
    rows = {cells[0]: cells for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:4])}
    for payload, name in ((evaluated["results"], MODEL_REPO), (local, str(p["other"]))):
        tasks = {t["task"]: t for t in payload["tasks"]}
        cdsm = tasks["binding-cdsm"]["metrics"]["add.gen_accuracy"]
        assert rows[name][5] == f"{100 * cdsm['value']:.2f} ± {100 * cdsm['stderr']:.2f}"
        assert rows[name][3] == f"{100 * tasks['sub-vlm']['metrics']['s_plus']['value']:.2f}"


@pytest.mark.heavy
def test_tasks_list_and_a_run_where_every_task_is_skipped(published):
    p = published
    listed = check(_run("evaluate", "--tasks", "list", env=p["env"]), "--tasks list")
    for name, kinds in (
        ("sub-vlm", "clip, open_clip"),
        ("binding-cdsm", "clip, open_clip"),
        ("compmap-cub", "itm, vlm, endpoint"),
        ("conceptbed-ccd", "generated-images"),
        ("sub-cbm", "cbm"),
    ):
        assert any(line.startswith(f"| {name} ") and f"| {kinds} " in line for line in listed.stdout.splitlines()), name
    output = p["work"] / "skipped.json"
    done = _run("evaluate", "--model", p["clip"], "--tasks", "conceptbed-ccd,sub-cbm", "--output", output, env=p["env"])
    assert done.returncode == 2
    assert (
        f"skipped: conceptbed-ccd runs with vlm, generated-images, endpoint (generated images or match); {p['clip']} is a clip "
        "model (clip)" in done.stderr
    )
    assert f"skipped: sub-cbm runs with cbm (concepts); {p['clip']} is a clip model (clip)" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: no task of --tasks can run with")
    assert not output.exists()
    bad = _run("evaluate", "--model", p["clip"], "--tasks", "binding-clip,nope", env=p["env"])
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: unknown task 'nope'")


@pytest.mark.heavy
def test_a_hub_dataset_or_a_missing_repo_as_model_is_one_line(published):
    p = published
    dataset = _run("evaluate", "--model", SUB_REPO, "--tasks", "binding-clip", env=p["env"])
    assert dataset.returncode == 2
    assert dataset.stderr.strip().splitlines()[-1] == (
        f"error: {SUB_REPO} is a dataset, not a model, and not ConceptBed generated images"
    )
    missing = _run("evaluate", "--model", "conceptforge-e2e/nope", "--tasks", "binding-clip", env=p["env"])
    assert missing.returncode == 2 and "error: no model or dataset 'conceptforge-e2e/nope' on the Hub" in missing.stderr
    tag = _run("evaluate", "--model", MODEL_REPO, "--tasks", f"binding-clip:{BINDING_REPO}@v9.9.9", env=p["env"])
    assert tag.returncode == 2
    assert tag.stderr.strip().splitlines()[-1] == (
        f"error: dataset {BINDING_REPO} has no revision 'v9.9.9': pass an existing tag or commit"
    )
