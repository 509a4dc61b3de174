"""``evaluate --push-results`` on a release with several configs files its values under the ids the
release's ``eval.yaml`` declares (``binding-clip.relational.gen_accuracy``), issue 39.5.

A two-config binding release (single-object + relational rows) is published with
``conceptforge publish --eval-framework``; a tiny random CLIP, uploaded as a model repo, is
evaluated on its ``relational`` config with ``--push-results``; a plain ``huggingface_hub``
process reads back the model's ``.eval_results`` and the dataset's ``eval.yaml``. Before the fix
the pushed ids lacked the config, so none reached the leaderboard.
"""

from __future__ import annotations

import secrets
import subprocess
import sys

import pytest

from conceptforge.testing.synthetic import binding_features, relational_rows, single_object_rows
from tests.publish.publish_helpers import tiny_repo_metadata
from tests.user_shell import check, hub_client_env, plain_python_json

DATASET = "cf-configs/binding"
MODEL = "cf-configs/tiny-clip"
READ_BACK = r"""
import json, sys, yaml
from huggingface_hub import HfApi, hf_hub_download
dataset, model = sys.argv[1], sys.argv[2]
declared = yaml.safe_load(open(hf_hub_download(dataset, "eval.yaml", repo_type="dataset", revision="v1.0.0")))
pushed = yaml.safe_load(open(hf_hub_download(model, ".eval_results/conceptforge.yaml")))
print(json.dumps({"declared": declared["tasks"], "pushed": [e["dataset"]["task_id"] for e in pushed]}))
"""


def _release(out):
    from conceptforge.cards import render_card
    from conceptforge.cards.dataset_dir import assemble_config_dir, write_card_and_grid
    from conceptforge.testing.synthetic import COLOURS, SHAPES

    labels = [f"{c} {s}" for c in COLOURS for s in SHAPES]
    configs = {
        "single-object": {
            "train": single_object_rows(labels[4:10], 1, 1, labels),
            "val": single_object_rows(labels[:2], 1, 2, labels),
            "gen": single_object_rows(labels[2:4], 1, 3, labels),
        },
        "relational": {
            "train": relational_rows([("cube", "left", "sphere"), ("sphere", "front", "cylinder")], 2, 1),
            "val": relational_rows([("sphere", "behind", "cube")], 2, 2),
            "gen": relational_rows([("cube", "behind", "cylinder")], 2, 3),
        },
    }
    features = binding_features()
    stats = []
    for config, splits in configs.items():
        stats += assemble_config_dir(
            out, config=config, splits={s: (lambda r=r: iter(r)) for s, r in splits.items()}, features=features
        )
    metadata = tiny_repo_metadata(
        pretty_name="Binding (two configs)",
        license="cc-by-4.0",
        summary="Tiny two-config binding release for the push-results tests.",
        task_categories=["zero-shot-image-classification"],
        language=["en"],
    )
    write_card_and_grid(out, render_card(metadata, {c: features for c in configs}, stats, has_grid=False), None)
    return out


def _conceptforge(*args, env) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "conceptforge", *map(str, args)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture
def hub_env(tmp_path):
    from conceptforge.testing.hub_server import HubServer

    token = "hf_" + secrets.token_hex(16)
    server = HubServer(tmp_path / "hub", token=token).start()
    yield hub_client_env(server.url, token, tmp_path / "hf-home")
    server.stop()


@pytest.mark.heavy
def test_pushed_ids_of_a_multi_config_release_are_the_ids_its_eval_yaml_declares(tmp_path, hub_env):
    from concurrent.futures import ThreadPoolExecutor

    from conceptforge.testing.tiny_models import build_tiny_clip

    release = _release(tmp_path / "release")
    clip = build_tiny_clip(tmp_path / "clip", max_length=32)
    upload = (
        "import sys; from huggingface_hub import HfApi; a = HfApi(); a.create_repo(sys.argv[1]); "
        "a.upload_folder(repo_id=sys.argv[1], folder_path=sys.argv[2])"
    )
    with ThreadPoolExecutor(max_workers=2) as pool:  # two repos, two independent processes: side by side
        published = pool.submit(
            _conceptforge,
            "publish", release, "--repo-id", DATASET, "--version", "v1.0.0",
            "--eval-framework", "harbor", "--eval-tasks", "binding-clip", env=hub_env,
        )  # fmt: skip
        uploaded = pool.submit(
            subprocess.run,
            [sys.executable, "-c", upload, MODEL, str(clip)], env=hub_env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        check(published.result(), "publish")
        check(uploaded.result(), "upload the tiny CLIP")
    done = check(
        _conceptforge(
            "evaluate", "--model", MODEL, "--tasks", "binding-clip", "--dataset", f"binding-clip={DATASET}@v1.0.0",
            "--task-option", "binding-clip.config=relational", "--device", "cpu", "--dtype", "float32",
            "--cache-dir", tmp_path / "cache", "--output", tmp_path / "run.json", "--push-results", env=hub_env,
        ),
        "evaluate --push-results",
    )  # fmt: skip
    back = plain_python_json(READ_BACK, DATASET, MODEL, env=hub_env)
    declared = {t["id"] for t in back["declared"] if t["config"] == "relational"}
    assert declared == {f"binding-clip.relational.{s}_accuracy" for s in ("train", "val", "gen")}
    assert set(back["pushed"]) == declared  # every pushed value is on the leaderboard
    assert "does not declare" not in done.stdout and "not on its leaderboard" not in done.stdout
