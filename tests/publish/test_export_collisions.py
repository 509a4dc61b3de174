"""What ``export`` and ``publish`` generate never takes the place of a user's file (issue 45 item 6,
EX22, EX39, EX10b): a file where a folder goes, a folder or a link where a file goes, a user's
file at a path of the exports or at ``croissant.json`` — one line, exit 2, nothing written; and a
switch of ``--formats`` removes the folders ``export`` created that it leaves empty, never a
folder of the user's."""

from __future__ import annotations

import json
import os

import pytest
from publish_helpers import binding_release, run_publish

from conceptforge.commands import main

EXPORT = ["--repo-id", "org/binding", "--version", "v1.0.0"]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def _error(done) -> list[str]:
    """The error lines of a publish run (the log lines before it say what was read)."""
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    return [line for line in done.stderr.splitlines() if line.startswith("error:")]


def _tree(folder) -> dict[str, bytes | None]:
    """Every path under ``folder`` (files with their bytes, folders and links as None)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            out[os.path.relpath(path, folder)] = (
                None if os.path.islink(path) or os.path.isdir(path) else open(path, "rb").read()
            )
    return out


def test_export_refuses_a_file_a_folder_or_a_link_in_the_way_in_one_line(tmp_path, capsys):
    binding, _ = binding_release(tmp_path / "binding")
    argv = ["export", str(binding), *EXPORT]

    # `exports` is a file: it is where every export goes. The first path we write, sorted, is
    # exports/MANIFEST.json's sibling "exports/inspect-ai/conceptforge_tasks.py" ("i" < "l" < "v").
    (binding / "exports").write_text("my notes\n")
    before = _tree(binding)
    assert main(argv) == 2
    assert _one_line(capsys) == (
        f"error: {binding}/exports is a file, not a folder, and conceptforge writes "
        "exports/inspect-ai/conceptforge_tasks.py under it: move it away first"
    )
    assert _tree(binding) == before  # nothing written, the file untouched
    (binding / "exports").unlink()

    # a folder where a file of ours goes
    (binding / "exports" / "vlmevalkit" / "README.md").mkdir(parents=True)
    assert main(argv) == 2
    assert _one_line(capsys) == (
        f"error: {binding}/exports/vlmevalkit/README.md is a folder where conceptforge writes a file: "
        "move it away first"
    )
    assert not (binding / "exports" / "MANIFEST.json").exists()
    os.rmdir(binding / "exports" / "vlmevalkit" / "README.md")

    # a link (here dangling) where a file of ours goes: not followed, not replaced
    os.symlink(tmp_path / "nowhere.md", binding / "exports" / "vlmevalkit" / "README.md")
    assert main(argv) == 2
    assert _one_line(capsys) == (
        f"error: {binding}/exports/vlmevalkit/README.md is a link where conceptforge writes a file: move it away first"
    )
    assert os.readlink(binding / "exports" / "vlmevalkit" / "README.md") == str(tmp_path / "nowhere.md")
    assert not (binding / "exports" / "MANIFEST.json").exists()


def test_switching_formats_removes_the_folders_export_made_and_keeps_the_users(tmp_path, capsys):
    binding, _ = binding_release(tmp_path / "binding")
    exports = binding / "exports"
    (exports / "inspect-ai").mkdir(parents=True)  # the user's own (empty) folder, before any export
    (exports / "mine").mkdir()  # and another one of theirs
    assert main(["export", str(binding), *EXPORT]) == 0
    (exports / "lmms-eval" / "binding_clip_gen" / "notes.txt").write_text("mine\n")
    assert main(["export", str(binding), *EXPORT, "--formats", "vlmevalkit"]) == 0
    capsys.readouterr()
    # Left by hand: vlmevalkit's files and MANIFEST.json; the folders export made and emptied
    # (items/, lmms-eval/binding_clip_train/ and _val/) are gone; lmms-eval/binding_clip_gen/
    # keeps the user's notes and so lmms-eval/ stays; inspect-ai/ and mine/ were the user's.
    assert sorted(p for p, data in _tree(exports).items() if data is None) == [
        "inspect-ai",
        "lmms-eval",
        "lmms-eval/binding_clip_gen",
        "mine",
        "vlmevalkit",
    ]
    assert sorted(p for p, data in _tree(exports).items() if data is not None) == [
        "MANIFEST.json",
        "lmms-eval/binding_clip_gen/notes.txt",
        "vlmevalkit/Conceptforge_binding_clip_gen.tsv",
        "vlmevalkit/Conceptforge_binding_clip_train.tsv",
        "vlmevalkit/Conceptforge_binding_clip_val.tsv",
        "vlmevalkit/README.md",
    ]
    # the manifest still names the folders export made that exist (binding_clip_gen/ holds the notes)
    assert json.loads((exports / "MANIFEST.json").read_text())["folders"] == [
        "exports/lmms-eval",
        "exports/lmms-eval/binding_clip_gen",
        "exports/vlmevalkit",
    ]


@pytest.mark.heavy
def test_publish_and_its_dry_run_refuse_to_put_ours_in_place_of_a_users_file(tmp_path, hub, client_env):
    binding, _ = binding_release(tmp_path / "binding")
    mine = binding / "exports" / "vlmevalkit" / "README.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("# how our lab runs this\n")
    offline = {**client_env, "HF_HUB_OFFLINE": "1"}
    for env, extra in ((offline, ("--dry-run",)), (client_env, ("--dry-run",)), (client_env, ())):
        done = run_publish(env, binding, "org/binding", "v1.0.0", *extra)
        assert _error(done) == [
            f"error: {mine} was not written by conceptforge, and the release would carry conceptforge's own "
            "exports/vlmevalkit/README.md in its place: move it away (or rename it) first"
        ], extra
    assert mine.read_text() == "# how our lab runs this\n" and hub.commits_made == 0

    # a hand-written croissant.json at the folder's root: the same refusal
    mine.unlink()
    (binding / "croissant.json").write_text("{}\n")
    done = run_publish(offline, binding, "org/binding", "v1.0.0", "--dry-run")
    assert _error(done) == [
        f"error: {binding}/croissant.json was not written by conceptforge, and the release would carry "
        "conceptforge's own croissant.json in its place: move it away (or rename it) first"
    ]
    (binding / "croissant.json").unlink()

    # exports that `conceptforge export` wrote (for another tag, so other bytes) are ours: publish goes on,
    # and an edited one of them is refused
    assert main(["export", str(binding), "--repo-id", "org/binding", "--version", "v0.9.0"]) == 0
    done = run_publish(offline, binding, "org/binding", "v1.0.0", "--dry-run")
    assert done.returncode == 0, done.stderr[-2000:]
    utils = binding / "exports" / "lmms-eval" / "binding_clip_val" / "utils.py"
    utils.write_text(utils.read_text() + "# tuned\n")
    done = run_publish(offline, binding, "org/binding", "v1.0.0", "--dry-run")
    assert _error(done) == [
        f"error: {utils} was changed since conceptforge wrote it, and the release would carry conceptforge's own "
        "exports/lmms-eval/binding_clip_val/utils.py in its place: move it away (or rename it) first"
    ]


def test_publish_leaves_a_users_exports_on_the_hub_and_never_replaces_them(tmp_path, hub, hub_token):
    from huggingface_hub import HfApi

    from conceptforge.cards.publish import publish_dataset
    from conceptforge.errors import PublishError
    from conceptforge.loaders.exports import release_exports

    binding, _ = binding_release(tmp_path / "binding")

    def publish(version: str):
        return publish_dataset(
            binding, repo_id="org/binding", version=version, endpoint=hub.url, token=hub_token, exports=release_exports
        )

    publish("v1.0.0")
    api = HfApi(endpoint=hub.url, token=hub_token)
    api.upload_file(
        path_or_fileobj=b"our lab's notes\n",
        path_in_repo="exports/vlmevalkit/notes.md",
        repo_id="org/binding",
        repo_type="dataset",
    )
    # the next release rewrites its own exports (they name the tag) and leaves the notes in place
    publish("v1.0.1")
    files = hub.files("org/binding", "v1.0.1")
    assert files["exports/vlmevalkit/notes.md"] == b"our lab's notes\n"
    assert b"v1.0.1" in files["exports/vlmevalkit/README.md"]

    # a file of ours that someone replaced on the Hub is not silently swapped back
    api.upload_file(
        path_or_fileobj=b"# how our lab runs this\n",
        path_in_repo="exports/vlmevalkit/README.md",
        repo_id="org/binding",
        repo_type="dataset",
    )
    commits = hub.commits_made
    with pytest.raises(PublishError) as raised:
        publish("v1.0.2")
    assert str(raised.value) == (
        "org/binding holds exports/vlmevalkit/README.md on the Hub, which was changed on the Hub since conceptforge "
        "wrote it (see exports/MANIFEST.json there), and this release would replace it with its own: move or rename "
        "it in the repository first"
    )
    assert hub.commits_made == commits and "v1.0.2" not in hub.refs("org/binding")["tags"]
