"""``conceptforge leaderboard --hub ORG/NAME [--revision R]``: the benchmark's Hub leaderboard beside
this machine's results files, against the local Hub server (conceptforge/testing/hub_server.py),
which answers ``GET /api/datasets/{id}/leaderboard`` in the Hub's documented shape.

The Hub side is built as on the Hub: a dataset with a root eval.yaml, models whose
``.eval_results/*.yaml`` file values under its task ids. Every expected row is written by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.user_shell import hub_client_env

DATASET = "cf-board/binding"
NOT_BENCHMARK = "cf-board/plain"
TASKS = ["binding-clip.gen_accuracy", "binding_clip_gen_accuracy"]  # probability and by-answer ids


def _commit(api, repo_id: str, files: dict[str, bytes], *, repo_type: str) -> str:
    from huggingface_hub import CommitOperationAdd

    info = api.create_commit(
        repo_id,
        [CommitOperationAdd(path, data) for path, data in files.items()],
        commit_message="test",
        repo_type=repo_type,
    )
    return info.oid


def _results(entries: list[dict]) -> bytes:
    return yaml.safe_dump(entries, sort_keys=False).encode()


@pytest.fixture(scope="module")
def board(hub, tmp_path_factory):
    """The Hub side (dataset at v1.0.0 and one later commit, four model repos) and the client's env."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub.url, token=hub.token)
    api.create_repo(DATASET, repo_type="dataset")
    eval_yaml = {
        "name": "Binding",
        "description": "Binding test benchmark.",
        "evaluation_framework": "mteb",
        "tasks": [{"id": task, "config": "default", "split": "gen"} for task in TASKS],
    }
    v1 = _commit(api, DATASET, {"eval.yaml": yaml.safe_dump(eval_yaml).encode()}, repo_type="dataset")
    api.create_tag(DATASET, tag="v1.0.0", revision=v1, repo_type="dataset")
    later = _commit(api, DATASET, {"NOTES.txt": b"a later commit"}, repo_type="dataset")
    api.create_repo(NOT_BENCHMARK, repo_type="dataset")
    _commit(api, NOT_BENCHMARK, {"data.txt": b"no eval.yaml"}, repo_type="dataset")

    def entry(task: str, value: float, notes: str, **extra) -> dict:
        return {"dataset": {"id": DATASET, "task_id": task, "revision": v1}, "value": value, "notes": notes, **extra}

    models = {
        "alice/clip-a": {
            ".eval_results/conceptforge.yaml": [
                entry(TASKS[0], 62.5, "binding/zero-shot; argmax; value in percent", verifyToken="signed-a")
            ]
        },
        "bob/vlm-b": {  # one model, two protocols: two entries, never one row
            ".eval_results/conceptforge.yaml": [
                entry(TASKS[0], 55.0, "binding/zero-shot; argmax; value in percent"),
                entry(TASKS[1], 48.25, "binding/choose-by-answer; greedy; value in percent"),
            ]
        },
        "carol/other": {".eval_results/other.yaml": [entry(TASKS[0], 70.0, "run with our own script")]},
        # filed under a task the eval.yaml does not declare: not on its leaderboard
        "dave/stray": {".eval_results/stray.yaml": [entry("binding-clip.val_accuracy", 99.0, "x")]},
    }
    for model, files in models.items():
        api.create_repo(model)
        _commit(api, model, {path: _results(entries) for path, entries in files.items()}, repo_type="model")
    hub.verify_results_token("signed-a")
    env = hub_client_env(hub.url, hub.token, tmp_path_factory.mktemp("hf-home-board"))
    return {"v1": v1, "later": later, "env": env}


def _payload(model: str, sha: str, tasks: list[tuple[str, float]], dataset_sha: str) -> dict:
    """A results file as `conceptforge evaluate --output` writes it: binding-clip on the Hub dataset."""
    return {
        "format": "conceptforge-eval-results/1",
        "conceptforge_version": "0",
        "created": "2026-12-01T00:00:00Z",
        "model": {"id": model, "kind": "clip", "revision": None, "sha": sha},
        "settings": {},
        "skipped": [],
        "tasks": [
            {
                "task": "binding-clip",
                "benchmark": "binding",
                "protocol": protocol,
                "variant": "v",
                "seeds": [],
                "options": {},
                "dataset": {"repo": DATASET, "revision": "v1.0.0", "sha": dataset_sha, "source": "hub", "split": "gen"},
                "main_metric": "gen_accuracy",
                "metrics": {"gen_accuracy": {"value": value, "stderr": None, "n": 40}},
            }
            for protocol, value in tasks
        ],
    }


def conceptforge(*args, env) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conceptforge", *map(str, args)], env=env, capture_output=True, text=True, timeout=300
    )


def table_rows(stdout: str) -> list[list[str]]:
    """The markdown table's body rows as cells."""
    lines = [line for line in stdout.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_hub_leaderboard_beside_local_results(board, tmp_path):
    v1, later = board["v1"], board["later"]
    mine = tmp_path / "mine.json"
    mine.write_text(
        json.dumps(
            _payload(
                "me/clip-local",
                "0123456789abcdef0123",
                [("binding/zero-shot", 0.6), ("binding/choose-by-answer", 0.45)],
                v1,
            )
        )
    )
    old = tmp_path / "old.json"
    old.write_text(json.dumps(_payload("me/clip-old", "fedcba9876543210fedc", [("binding/zero-shot", 0.5)], later)))
    done = conceptforge("leaderboard", mine, old, "--hub", DATASET, "--revision", "v1.0.0", env=board["env"])
    assert done.returncode == 0, done.stderr
    # by hand: the Hub ranks the declared tasks' values highest first (dave's undeclared task is not
    # on it); alice's token is signed; protocols from the notes (carol's free text names none);
    # local values in percent as --push-results files them (0.6 -> 60, 0.45 -> 45), the by-answer
    # one under the by-answer id; old.json was measured on the later commit, so --revision v1.0.0 leaves it out
    assert table_rows(done.stdout) == [
        ["Hub, not verified", "1", "carol/other", "–", "70", "not stated", "–", ".eval_results/other.yaml"],
        [
            "Hub, verified",
            "2",
            "alice/clip-a",
            "–",
            "62.5",
            "binding/zero-shot",
            "–",
            ".eval_results/conceptforge.yaml",
        ],
        ["Hub, not verified", "3", "bob/vlm-b", "–", "55", "binding/zero-shot", "–", ".eval_results/conceptforge.yaml"],
        [
            "Hub, not verified",
            "4",
            "bob/vlm-b",
            "–",
            "48.25",
            "binding/choose-by-answer",
            "–",
            ".eval_results/conceptforge.yaml",
        ],
        [
            "this machine",
            "–",
            "me/clip-local@0123456789ab",
            "binding-clip.gen_accuracy",
            "60",
            "binding/zero-shot",
            v1[:7],
            str(mine),
        ],
        [
            "this machine",
            "–",
            "me/clip-local@0123456789ab",
            "binding_clip_gen_accuracy",
            "45",
            "binding/choose-by-answer",
            v1[:7],
            str(mine),
        ],
    ]
    assert f"{old}: left out, measured on {DATASET}@{later[:7]}" in done.stdout
    # without --revision, the later commit's result is shown too, with its commit
    board_md = tmp_path / "board.md"
    done = conceptforge("leaderboard", old, "--hub", DATASET, "--output", board_md, env=board["env"])
    assert done.returncode == 0, done.stderr
    assert board_md.read_text() == done.stdout
    assert table_rows(done.stdout)[-1] == [
        "this machine", "–", "me/clip-old@fedcba987654", "binding-clip.gen_accuracy", "50", "binding/zero-shot", later[:7], str(old)
    ]  # fmt: skip


def test_plain_client_reads_the_local_servers_leaderboard(board):
    """The server's answer is what huggingface_hub's own get_dataset_leaderboard parses."""
    code = (
        "import json, sys\nfrom huggingface_hub import HfApi\n"
        "rows = HfApi().get_dataset_leaderboard(sys.argv[1])\n"
        "print(json.dumps([[r.rank, r.model_id, r.value, r.verified, r.author.username] for r in rows]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, DATASET], env=board["env"], capture_output=True, text=True, timeout=120, cwd="/"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [
        [1, "carol/other", 70.0, False, "carol"],
        [2, "alice/clip-a", 62.5, True, "alice"],
        [3, "bob/vlm-b", 55.0, False, "bob"],
        [4, "bob/vlm-b", 48.25, False, "bob"],
    ]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--hub", NOT_BENCHMARK], f"error: {NOT_BENCHMARK} has no leaderboard on the Hub: "),
        (["--hub", "cf-board/missing"], "error: cf-board/missing has no leaderboard on the Hub: "),
        (["--hub", DATASET, "--revision", "v9.9.9"], f"error: {DATASET} has no revision 'v9.9.9' on the Hub"),
        (["--revision", "v1.0.0"], "error: --revision needs --hub ORG/NAME"),
        ([], "error: give results files"),
    ],
)
def test_bad_requests_are_one_line(board, tmp_path, args, expected):
    out = tmp_path / "table.md"
    done = conceptforge("leaderboard", *args, "--output", out, env=board["env"])
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(expected) and done.stderr.count("\n") == 1, done.stderr
    assert done.stdout == "" and not out.exists()


def test_offline_is_one_line(board, tmp_path):
    import socket

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    env = {**board["env"], "HF_ENDPOINT": f"http://127.0.0.1:{port}"}
    done = conceptforge("leaderboard", "--hub", DATASET, env=env)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: cannot read the leaderboard of {DATASET} on the Hub: cannot connect to ")
    assert done.stderr.rstrip().endswith("nothing is cached): run it where the Hub can be reached")
    assert done.stderr.count("\n") == 1 and done.stdout == ""
    env["HF_HUB_OFFLINE"] = "1"
    done = conceptforge("leaderboard", "--hub", DATASET, env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "offline mode (HF_HUB_OFFLINE=1)" in done.stderr


def test_rest_path_reads_what_the_method_reads(board):
    """With a huggingface_hub that lacks get_dataset_leaderboard, the REST endpoint the method
    wraps gives the same entries (both paths against the same server, in a fresh process)."""
    code = (
        "import json, sys\nfrom huggingface_hub import HfApi\n"
        "from conceptforge.loaders.analysis.hub_leaderboard import method_entries, rest_entries\n"
        "api = HfApi()\n"
        "print(json.dumps([method_entries(api, sys.argv[1]), rest_entries(api, sys.argv[1])]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, DATASET], env=board["env"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    by_method, by_rest = json.loads(done.stdout.splitlines()[-1])
    assert by_rest == by_method
    assert [(e["rank"], e["model_id"], e["verified"]) for e in by_rest] == [
        (1, "carol/other", False),
        (2, "alice/clip-a", True),
        (3, "bob/vlm-b", False),
        (4, "bob/vlm-b", False),
    ]
