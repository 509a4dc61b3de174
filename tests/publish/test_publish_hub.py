"""Publishing against a local Hub-compatible server with the real huggingface_hub client.

The full flow runs the command line in fresh processes (``HF_ENDPOINT`` read at import) and reads
back with plain ``datasets.load_dataset`` in a process that cannot import conceptforge.
Failure and refusal cases call :func:`cards.publish.publish_dataset` in-process with an explicit
``endpoint=`` (the same client code, faster).
"""

from __future__ import annotations

import hashlib

import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import RepositoryNotFoundError
from publish_helpers import expected_rows, load_with_plain_datasets, make_dataset, run_publish

from conceptforge.cards.publish import publish_dataset
from conceptforge.errors import ConceptforgeError
from conceptforge.testing.hub_server import HubError

REPO = "conceptforge-test/shapes"


def _local_release_files(directory):
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in directory.rglob("*")
        if p.is_file() and p.name != "README.md"
    }


def _puts(hub):
    return [r for r in hub.requests if r[0] == "PUT" and r[1].startswith("/_lfs/")]


def test_publish_two_versions_and_load_each_with_plain_datasets(tmp_path, hub, client_env, hub_token):
    v1 = make_dataset(tmp_path / "v1", n_train=30, variant=0, shard=2500, token=hub_token)
    v2 = make_dataset(tmp_path / "v2", n_train=12, variant=1, shard=10**6)

    first = run_publish(client_env, v1, REPO, "v1.0.0")
    assert first.returncode == 0, first.stderr[-2000:]
    commit1 = hub.refs(REPO)["tags"]["v1.0.0"]
    assert f"at commit {commit1}" in first.stdout
    assert f'ds = load_dataset("{REPO}", revision="v1.0.0")' in first.stdout

    second = run_publish(client_env, v2, REPO, "v1.1.0")
    assert second.returncode == 0, second.stderr[-2000:]
    refs = hub.refs(REPO)
    assert refs["tags"] == {"v1.0.0": commit1, "v1.1.0": refs["branches"]["main"]}
    # One commit per release, each holding every file of that release (stale shards deleted).
    assert [c["title"] for c in hub.history(REPO)] == ["Release v1.1.0", "Release v1.0.0", "initial commit"]
    for version, directory in (("v1.0.0", v1), ("v1.1.0", v2)):
        published = hub.files(REPO, version)
        local = _local_release_files(directory)
        assert set(published) == {".gitattributes", "README.md", "croissant.json", *local}
        assert all(published[path] == data for path, data in local.items())
        assert all(hub_token.encode() not in data for data in published.values())
    assert len([f for f in hub.files(REPO, "v1.0.0") if f.startswith("data/train-")]) == 2
    assert len([f for f in hub.files(REPO, "v1.1.0") if f.startswith("data/train-")]) == 1
    for run in (first, second):
        assert hub_token not in run.stdout + run.stderr

    loaded = load_with_plain_datasets(client_env, REPO, "v1.0.0", "main")
    for revision, directory in (("v1.0.0", v1), ("main", v2)):
        got = loaded[revision]
        assert got["splits"] == expected_rows(directory)
        assert got["features"] == {"image": "Image", "label": "ClassLabel", "idx": "Value", "candidates": "List"}
        assert got["label_names"] == ["cube", "sphere", "cylinder"]
        assert (
            got["grid_png"] and got["grid_sha256"] == hashlib.sha256((directory / "grid.png").read_bytes()).hexdigest()
        )
        assert "![Sample grid](grid.png)" in got["card_text"]
        assert got["card_data"]["license"] == "cc-by-nc-4.0"
    assert loaded["v1.0.0"]["first_image_size"]["train"] == [10, 8]
    assert loaded["main"]["first_image_size"]["train"] == [11, 8]
    assert "This is version `v1.0.0`; first release" in loaded["v1.0.0"]["card_text"]
    assert "This is version `v1.1.0`; previous version: `v1.0.0`" in loaded["main"]["card_text"]
    assert f'load_dataset("{REPO}", revision="v1.1.0")' in loaded["main"]["card_text"]
    assert "--token ***" in loaded["v1.0.0"]["card_text"]  # the generator's command line, redacted

    commits = hub.commits_made
    again = run_publish(client_env, v2, REPO, "v1.1.0")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "already published with identical files" in again.stdout and "nothing to do" in again.stdout
    assert hub.commits_made == commits and not [r for r in hub.requests[-20:] if r[0] in ("PUT", "DELETE")]


def test_existing_and_lower_versions_are_refused(tmp_path, hub, hub_token, client_env):
    v1 = make_dataset(tmp_path / "v1", variant=0)
    v2 = make_dataset(tmp_path / "v2", variant=1)
    publish_dataset(v1, repo_id=REPO, version="v1.0.0", endpoint=hub.url, token=hub_token)
    publish_dataset(v2, repo_id=REPO, version="v1.2.0", endpoint=hub.url, token=hub_token)
    before, commits = hub.refs(REPO), hub.commits_made

    with pytest.raises(ConceptforgeError, match=r"v1\.0\.0 already exists .* immutable .* e\.g\. v1\.2\.1"):
        publish_dataset(v2, repo_id=REPO, version="v1.0.0", endpoint=hub.url, token=hub_token)
    refused = run_publish(client_env, v2, REPO, "v1.1.0")
    assert refused.returncode == 2
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("error: v1.1.0 is lower than the latest published version v1.2.0")
    assert hub.refs(REPO) == before and hub.commits_made == commits


@pytest.mark.heavy
def test_commit_failure_then_rerun_completes(tmp_path, hub, hub_token, client_env):
    v1 = make_dataset(tmp_path / "v1", variant=0)
    v2 = make_dataset(tmp_path / "v2", variant=1)
    publish_dataset(v1, repo_id=REPO, version="v1.0.0", endpoint=hub.url, token=hub_token)
    before = hub.refs(REPO)

    hub.fail_next("commit", status=500)
    failed = run_publish(client_env, v2, REPO, "v1.1.0")
    assert failed.returncode == 2
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "error: publishing conceptforge-test/shapes v1.1.0 failed while uploading and committing the files (HTTP 500"
    )
    assert "rerun the same command" in last and hub_token not in failed.stderr + failed.stdout
    assert hub.refs(REPO) == before  # previous version and main untouched
    assert (
        hub.files(REPO, "v1.0.0")["data/train-00000-of-00001.parquet"]
        == (v1 / "data/train-00000-of-00001.parquet").read_bytes()
    )
    uploaded = len(_puts(hub))

    rerun = run_publish(client_env, v2, REPO, "v1.1.0")
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "published conceptforge-test/shapes v1.1.0 (previous: v1.0.0)" in rerun.stdout
    assert len(_puts(hub)) == uploaded  # objects uploaded before the failure were reused
    assert set(hub.refs(REPO)["tags"]) == {"v1.0.0", "v1.1.0"}
    assert (
        hub.files(REPO, "v1.1.0")["data/train-00000-of-00001.parquet"]
        == (v2 / "data/train-00000-of-00001.parquet").read_bytes()
    )


@pytest.mark.parametrize(
    "route, mode, first_error, second_action",
    [
        ("commit", "disconnect", "failed while uploading and committing", "published"),
        ("commit", "lose-response", "failed while uploading and committing", "tagged"),
        ("tag", "status", "are committed to conceptforge-test/shapes", "tagged"),
        ("lfs-upload", "status", None, None),  # one 5xx on an upload: the client's retry absorbs it
    ],
)
def test_interrupted_release_is_completed_by_rerun(tmp_path, hub, hub_token, route, mode, first_error, second_action):
    v1 = make_dataset(tmp_path / "v1", variant=0)
    v2 = make_dataset(tmp_path / "v2", variant=1)
    publish_dataset(v1, repo_id=REPO, version="v1.0.0", endpoint=hub.url, token=hub_token)
    hub.fail_next(route, status=503, mode=mode)
    if first_error is None:
        result = publish_dataset(v2, repo_id=REPO, version="v1.1.0", endpoint=hub.url, token=hub_token)
        assert result.action == "published"
        assert any(status == 503 for method, _, status in hub.requests if method == "PUT")
    else:
        with pytest.raises(ConceptforgeError, match=first_error) as error:
            publish_dataset(v2, repo_id=REPO, version="v1.1.0", endpoint=hub.url, token=hub_token)
        assert "rerun the same command" in str(error.value) and hub_token not in str(error.value)
        assert set(hub.refs(REPO)["tags"]) == {"v1.0.0"}
        commits = hub.commits_made
        result = publish_dataset(v2, repo_id=REPO, version="v1.1.0", endpoint=hub.url, token=hub_token)
        assert result.action == second_action
        assert hub.commits_made == commits + (1 if second_action == "published" else 0)
    refs = hub.refs(REPO)
    assert refs["tags"]["v1.1.0"] == refs["branches"]["main"] == result.commit_id
    assert [c["title"] for c in hub.history(REPO)] == ["Release v1.1.0", "Release v1.0.0", "initial commit"]


def test_dry_run_changes_nothing_and_reports_the_plan(tmp_path, hub, hub_token):
    v1 = make_dataset(tmp_path / "v1", variant=0, shard=2500)
    v2 = make_dataset(tmp_path / "v2", variant=1, shard=10**6)
    plan = publish_dataset(v1, repo_id=REPO, version="v1.0.0", endpoint=hub.url, token=hub_token, dry_run=True)
    assert plan.action == "dry-run" and plan.previous_version is None
    assert set(plan.uploaded) == {
        "README.md",
        "croissant.json",
        "grid.png",
        "data/train-00000-of-00002.parquet",
        "data/train-00001-of-00002.parquet",
        "data/test-00000-of-00001.parquet",
    }
    with pytest.raises(HubError):
        hub.refs(REPO)  # the repository was not even created
    publish_dataset(v1, repo_id=REPO, version="v1.0.0", endpoint=hub.url, token=hub_token)
    before = hub.refs(REPO)
    plan = publish_dataset(v2, repo_id=REPO, version="v2.0.0", endpoint=hub.url, token=hub_token, dry_run=True)
    assert plan.previous_version == "v1.0.0"
    assert plan.deleted == ["data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"]
    assert "data/train-00000-of-00001.parquet" in plan.uploaded
    assert "would publish conceptforge-test/shapes v2.0.0 (previous: v1.0.0)" in plan.summary()
    assert hub.refs(REPO) == before


def test_private_repo_and_files_outside_the_release_are_kept(tmp_path, hub, hub_token):
    v1 = make_dataset(tmp_path / "v1", variant=0)
    v2 = make_dataset(tmp_path / "v2", variant=1)
    publish_dataset(v1, repo_id=REPO, version="v1.0.0", endpoint=hub.url, token=hub_token, private=True)
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=hub.url, token=False).list_repo_refs(REPO, repo_type="dataset")
    HfApi(endpoint=hub.url, token=hub_token).upload_file(
        path_or_fileobj=b"license text", path_in_repo="LICENSE", repo_id=REPO, repo_type="dataset"
    )
    publish_dataset(v2, repo_id=REPO, version="v1.1.0", endpoint=hub.url, token=hub_token)
    assert hub.files(REPO, "v1.1.0")["LICENSE"] == b"license text"


def test_bad_input_is_refused_before_any_request(tmp_path, hub, hub_token):
    directory = make_dataset(tmp_path / "v1", shard=2500)
    cases = [
        (dict(version="1.0.0"), "not of the form vMAJOR.MINOR.PATCH"),
        (dict(version="v1.0"), "not of the form vMAJOR.MINOR.PATCH"),
        (dict(repo_id="no-namespace"), "not of the form ORG/NAME"),
        (dict(dataset_dir=tmp_path / "missing"), "is not a directory"),
        (dict(dataset_dir=tmp_path), "not a complete dataset directory"),
    ]
    for overrides, message in cases:
        kwargs = {
            **dict(dataset_dir=directory, repo_id=REPO, version="v1.0.0", endpoint=hub.url, token=hub_token),
            **overrides,
        }
        with pytest.raises(ConceptforgeError, match=message):
            publish_dataset(**kwargs)
    assert hub.requests == []
    # A shard gone missing after assembly: the card no longer matches the files.
    (directory / "data" / "train-00001-of-00002.parquet").unlink()
    with pytest.raises(ConceptforgeError, match=r"card says 30 rows, parquet files hold"):
        publish_dataset(directory, repo_id=REPO, version="v1.0.0", endpoint=hub.url, token=hub_token)
    assert not [r for r in hub.requests if r[0] in ("PUT", "POST")]
