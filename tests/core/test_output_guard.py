"""Issue 24 items 1-3: one output guard, settings fixed atomically, assembled output checked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conceptforge.engine.runner import assemble_run, check_output, run_stage
from conceptforge.engine.store import ItemStore
from conceptforge.errors import DataNotFoundError, InvalidArgumentError, StoreError
from tests.engine import engine_stage
from tests.foreign_out import make_foreign_folder, snapshot

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "tests" / "engine" / "engine_stage.py")
ENV = {
    **{
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM_", "OMPI_", "PMI_")) and k not in {"WORLD_SIZE", "RANK", "LOCAL_RANK"}
    },
    "PYTHONPATH": str(REPO),
}


def _stage(count: int = 16, name: str = "test/engine"):
    stage = engine_stage.stage(count)
    stage.name = name
    return stage


def _finished(tmp_path: Path, name: str = "sub/candidates") -> Path:
    out = tmp_path / "run"
    report = run_stage(_stage(16, name), out)
    assert report.assembled
    return out


# -- item 1: a run of another stage is refused, untouched --------------------------------------
def test_a_finished_run_of_another_stage_is_refused_untouched(tmp_path):
    out = _finished(tmp_path, "binding/clevr-like")
    before = snapshot(out)
    with pytest.raises(
        StoreError,
        match=r"^--out .* holds a conceptforge run of another stage \(binding/clevr-like\), not sub/vqa-filter",
    ):
        run_stage(_stage(16, "sub/vqa-filter"), out)
    with pytest.raises(StoreError, match="another stage"):
        check_output(out, stage="binding")  # the binding command's check, before anything is rendered
    assert snapshot(out) == before


def test_binding_repo_and_sub_run_refuse_each_other(tmp_path):
    """binding keeps its runs in .work/<config>/, SUB in .work/: neither may take the other's folder."""
    repo = tmp_path / "repo"
    run = check_output(repo, stage="binding")
    run.record_stage("binding")
    report = run_stage(_stage(8, "binding/cfg"), run.child("cfg"), assemble=False)
    assert report.complete
    before = snapshot(repo)
    with pytest.raises(StoreError, match=r"another stage \(binding\)"):
        check_output(repo, stage="sub/candidates")
    with pytest.raises(StoreError, match="another stage"):
        run_stage(_stage(8, "sub/candidates"), repo)
    assert snapshot(repo) == before
    sub = _finished(tmp_path / "s")
    with pytest.raises(StoreError, match=r"another stage \(sub/candidates\)"):
        check_output(sub, stage="binding")


def test_a_run_made_before_the_stage_record_is_recognised_by_its_settings(tmp_path):
    out = _finished(tmp_path)
    (out / ".work" / "made_by.json").unlink()  # as written by 0.2.0: only run.json names the stage
    with pytest.raises(StoreError, match=r"another stage \(sub/candidates\)"):
        check_output(out, stage="conceptbed")
    check_output(out, stage="sub/candidates")  # its own stage resumes


# -- item 2: settings fixed atomically; empty plans refused -------------------------------------
def test_two_runs_with_other_settings_racing_on_one_out_exactly_one_proceeds(tmp_path):
    """Both check the settings before either fixed them (the race of two runs started at once)."""
    out = tmp_path / "out"
    first, second = _stage(16), _stage(16)
    second.settings = {"count": 16, "steps": 2}
    a, b = ItemStore(out / ".work"), ItemStore(out / ".work")
    a.bind_config({"settings": dict(first.settings)})
    b.bind_config({"settings": dict(second.settings)})  # nothing fixed yet: both pass the check
    items = engine_stage.items(2)
    make = engine_stage.make_factory(None, 0)
    a.write_chunk(0, [(item, make(item)) for item in items])
    with pytest.raises(StoreError, match=r"other settings \(differs in: steps\)"):
        b.write_chunk(1, [(item, make(item)) for item in items])
    assert sorted(a.chunk_states()) == [0]  # the loser wrote no chunk
    assert ItemStore(out / ".work").stored_config() == {"settings": {"count": 16}}


def test_two_processes_with_other_settings_one_exits_2(tmp_path):
    out = tmp_path / "out"
    procs = [
        subprocess.Popen(
            [sys.executable, SCRIPT, str(out), "--count", str(count), "--delay", "0.05"],
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for count in (16, 24)
    ]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    loser = next(err for code, err in results if code == 2)
    assert "other settings" in loser.strip().splitlines()[-1]


@pytest.mark.parametrize("count", [0])
def test_a_plan_with_no_items_is_refused_before_anything_is_written(tmp_path, count):
    out = tmp_path / "out"
    with pytest.raises(InvalidArgumentError, match="no items"):
        run_stage(_stage(count), out)
    assert not out.exists()
    run_stage(_stage(8), out)  # and nothing blocks the corrected run


# -- item 3: assembled output is checked -----------------------------------------------------------
def test_a_deleted_or_changed_file_of_an_assembled_run_is_named_and_force_rebuilds(tmp_path):
    from conceptforge.commands.status import status_lines

    out = _finished(tmp_path)
    reference = {name: (out / name).read_bytes() for name in ("README.md", "data/test.parquet", "data/train.parquet")}
    (out / "data" / "test.parquet").unlink()
    (out / "README.md").write_text("# edited\n")
    with pytest.raises(
        StoreError, match=r"2 of its files no longer match: README.md was changed; data/test.parquet is missing"
    ):
        run_stage(_stage(16, "sub/candidates"), out)  # the rerun
    with pytest.raises(StoreError, match="conceptforge assemble .* --force"):
        assemble_run(out)
    lines = status_lines(str(out))
    assert "damaged" in lines[-1] and "data/test.parquet is missing" in lines[-1], lines
    outcome = assemble_run(out, force=True)
    assert outcome.status == "assembled"
    assert {name: (out / name).read_bytes() for name in reference} == reference
    assert "sizes and sha256 checked" in status_lines(str(out))[-1]
    assert run_stage(_stage(16, "sub/candidates"), out).assembly.status == "already"


def test_assembly_never_replaces_a_file_it_did_not_write(tmp_path):
    out = tmp_path / "out"
    run_stage(_stage(16), out, assemble=False)
    (out / "README.md").write_text("# mine\n")  # someone's file where the card goes
    with pytest.raises(StoreError, match="README.md, which conceptforge did not write"):
        assemble_run(out)
    assert (out / "README.md").read_text() == "# mine\n"


def test_status_never_writes(tmp_path, monkeypatch):
    from conceptforge.commands.status import status_lines
    from conceptforge.engine.store import Location

    out = _finished(tmp_path)
    before = snapshot(out)

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Read-only file system")

    for name in ("write", "create", "remove"):
        monkeypatch.setattr(Location, name, refuse)
    monkeypatch.setattr(Path, "write_bytes", refuse)
    monkeypatch.setattr(Path, "mkdir", refuse)
    lines = status_lines(str(out))
    assert lines[0].startswith(f"{out}: stage sub/candidates, 16 of 16 items done")
    assert snapshot(out) == before


def test_status_hint_for_a_repo_of_runs_runs_as_printed(tmp_path):
    from conceptforge.commands.status import status_lines

    repo = tmp_path / "repo"
    run = check_output(repo, stage="binding")
    run.record_stage("binding")
    run_stage(_stage(8, "binding/cfg"), run.child("cfg"), assemble=False)
    lines = status_lines(str(repo))
    assert any(line.startswith(f"{repo} [cfg]: stage binding/cfg") for line in lines), lines
    hint = next(line for line in lines if "every chunk is done" in line)
    assert hint.endswith(f"run `conceptforge assemble {repo}`"), hint


def test_assemble_of_a_folder_that_is_no_run_creates_nothing(tmp_path):
    folder = tmp_path / "typo"
    folder.mkdir()
    with pytest.raises(DataNotFoundError, match="is not a conceptforge run"):
        assemble_run(folder)
    assert list(folder.iterdir()) == []


# -- the store's own folder: select-candidates --work ----------------------------------------------
def test_a_store_folder_flag_is_named_in_messages(tmp_path):
    from conceptforge.output import RunDir

    foreign = tmp_path / "mine"
    foreign.mkdir()
    before = make_foreign_folder(foreign)
    with pytest.raises(StoreError, match=r"^--work .* not a conceptforge run"):
        RunDir.open(foreign, flag="--work", work=str(foreign))
    assert snapshot(foreign) == before
    work = tmp_path / "work"
    run = RunDir.open(work, flag="--work", work=str(work))
    run_stage(_stage(8), run, assemble=False)
    other = _stage(8)
    other.settings = {"count": 9}
    with pytest.raises(StoreError, match=r"use a new --work$"):
        run_stage(other, RunDir.open(work, flag="--work", work=str(work)))


def test_the_guard_on_an_object_store(s3_server):
    """The same rules on S3: stage record, create-if-absent settings, manifest check, force."""
    from conceptforge.commands.status import status_lines

    s3_server.make_bucket("guard-test")
    url = "s3://guard-test/run"
    assert run_stage(_stage(16, "sub/candidates"), url).assembled
    with pytest.raises(StoreError, match="another stage"):
        check_output(url, stage="binding")
    fs = s3_server.filesystem()
    fs.rm_file("guard-test/run/data/test.parquet")
    with pytest.raises(StoreError, match="data/test.parquet is missing"):
        run_stage(_stage(16, "sub/candidates"), url)
    assert "data/test.parquet is missing" in status_lines(url)[-1]
    assert assemble_run(url, force=True).status == "assembled"
    assert "sizes and sha256 checked" in status_lines(url)[-1]
    a, b = ItemStore("s3://guard-test/race/.work"), ItemStore("s3://guard-test/race/.work")
    a.bind_config({"settings": {"n": 1}})
    b.bind_config({"settings": {"n": 2}})
    make = engine_stage.make_factory(None, 0)
    pairs = [(item, make(item)) for item in engine_stage.items(2)]
    a.write_chunk(0, pairs)
    with pytest.raises(StoreError, match="other settings"):
        b.write_chunk(1, pairs)
    # Issue 32: chunks without the owner record (a damaged or foreign store) were taken over on S3
    # by a run with other settings (only files were listed, and chunks/ is a "folder"); refused
    # as on a local disk.
    assert run_stage(_stage(8, "sub/candidates"), "s3://guard-test/ownerless", assemble=False).complete
    for path in fs.find("guard-test/ownerless/.work"):
        if "/chunks/" not in path:
            fs.rm_file(path)
    with pytest.raises(StoreError, match=r"already holds files that are not a conceptforge run \(\.work\)"):
        run_stage(_stage(8, "other/stage"), "s3://guard-test/ownerless", assemble=False)


def test_assemble_of_a_run_with_a_damaged_record_is_one_line(tmp_path):
    """Issue 24: `conceptforge assemble` on a folder mixed by two stages ended in a KeyError traceback."""
    import json

    out = tmp_path / "out"
    run_stage(_stage(8), out, assemble=False)
    record = out / ".work" / "run.json"
    record.write_text(json.dumps({k: v for k, v in json.loads(record.read_text()).items() if k != "plan"}))
    with pytest.raises(StoreError, match="missing or damaged"):
        assemble_run(out)


def test_a_run_refused_for_other_settings_leaves_no_assembly_args(tmp_path):
    """Of two runs racing, the loser must not replace the winner's card metadata (assembly.json)."""
    import json

    out = tmp_path / "out"
    winner, loser = _stage(16), _stage(16)
    loser.settings = {"count": 16, "steps": 2}
    loser.assembly_args = {"license": "not the winner's"}
    store = ItemStore(out / ".work")
    # the loser checks the settings before the winner fixed them, then the winner writes first
    original = store.bind_config

    def bind_then_lose(config):
        original(config)
        run_stage(winner, out, assemble=False, max_items=8)

    store.bind_config = bind_then_lose
    with pytest.raises(StoreError, match="other settings"):
        run_stage(loser, out, store=store, assemble=False)
    assert json.loads((out / ".work" / "assembly.json").read_text())["args"] == dict(winner.assembly_args)


def test_a_store_being_created_by_another_shard_is_not_foreign(tmp_path):
    """Shards start together: one may list OUT while another has made .work but not owner.json yet."""
    out = tmp_path / "out"
    (out / ".work").mkdir(parents=True)
    (out / ".work" / ".write-probe-1-2").write_bytes(b"")
    check_output(out)
    (out / ".work" / "notes.txt").write_text("someone's")
    with pytest.raises(StoreError, match="not a conceptforge run"):
        check_output(out)
