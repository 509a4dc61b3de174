"""Release diffs: row hashes, ``conceptforge diff`` and the card's "Changes since" section on real releases."""

from __future__ import annotations

import math

import pyarrow.parquet as pq
import pytest

from conceptforge.cards.release_diff import Snapshot, diff_snapshots, row_hash
from tests.user_shell import check, publish, run_script
from tests.verify.verify_helpers import copy_release, edit_rows, rerender_card

TRAIN = "data/single-object/train-00000-of-00001.parquet"
EXPECTED = "split `single-object/train`: added 1 (`train-000004`); changed 1 (`train-000001`)"


def test_row_hash_tells_types_and_values_apart():
    base = {"a": 1, "b": [1.5, "x"], "image": {"bytes": b"\x89PNG", "path": "p.png"}}
    assert row_hash(base) == row_hash({"image": {"path": "p.png", "bytes": b"\x89PNG"}, "b": [1.5, "x"], "a": 1})
    variants = [
        {**base, "a": 1.0},
        {**base, "a": "1"},
        {**base, "a": [1]},
        {**base, "a": True},
        {**base, "a": None},
        {**base, "b": [1.5, "y"]},
        {**base, "image": {"bytes": b"\x89PNH", "path": "p.png"}},
        {**base, "c": None},
    ]
    hashes = {row_hash(v) for v in variants}
    assert len(hashes) == len(variants) and row_hash(base) not in hashes
    assert row_hash({"x": math.nan}) == row_hash({"x": float("nan")})  # NaN rows do not all look changed
    assert row_hash({"s": ["ab", "c"]}) != row_hash({"s": ["a", "bc"]})  # lengths are part of the hash


def test_features_and_card_changes_are_listed():
    old = Snapshot(
        "a",
        {"train": {}},
        {"default": {"x": "int64", "y": "string"}},
        {"license": "cc-by-4.0", "version": "v1.0.0", "provenance": {"seeds": {"run": 0}}},
    )
    new = Snapshot(
        "b",
        {"train": {}},
        {"default": {"x": "float32", "z": "Image"}},
        {"license": "cc-by-4.0", "version": "v1.1.0", "provenance": {"seeds": {"run": 1}}, "tags": ["a", "b"]},
    )
    diff = diff_snapshots(old, new)
    assert diff.features == ["column `z` added (Image)", "column `y` removed", "column `x`: int64 -> float32"]
    # old and new values, not just "changed"; the version itself is not a change
    assert diff.card == ["provenance.seeds.run: 0 -> 1", 'tags added: ["a", "b"]']
    assert diff_snapshots(new, old).card == ["provenance.seeds.run: 1 -> 0", 'tags removed (was ["a", "b"])']
    assert diff_snapshots(old, old).empty


def test_duplicate_ids_are_a_change_not_no_change():
    rows = {"train": {"a": "h1", "b": "h2"}}
    old = Snapshot("a", rows, {"default": {}}, {})
    new = Snapshot("b", rows, {"default": {}}, {}, duplicates={"train": {"b": 2}})
    diff = diff_snapshots(old, new)
    assert not diff.empty
    assert diff.summary_lines() == ["split `train`: duplicate ids 1 (`b ×2`)"]
    assert diff_snapshots(new, old).summary_lines() == ["split `train`: no longer duplicated 1 (`b`)"]


def test_reordered_rows_are_a_change_not_no_change():
    old = Snapshot("a", {"train": {"a": "h1", "b": "h2", "c": "h3", "d": "h4"}}, {"default": {}}, {})
    new = Snapshot("b", {"train": {"b": "h2", "a": "h1", "c": "h3", "d": "h4"}}, {"default": {}}, {})
    diff = diff_snapshots(old, new)
    assert not diff.empty
    assert diff.summary_lines() == ["split `train`: moved 2 (`b`, `a`)"]
    # rows added or removed do not move the others
    grown = Snapshot("c", {"train": {"a": "h1", "x": "h9", "b": "h2", "c": "h3"}}, {"default": {}}, {})
    assert diff_snapshots(old, grown).summary_lines() == ["split `train`: added 1 (`x`); removed 1 (`d`)"]


@pytest.mark.heavy
def test_diff_of_a_release_with_reordered_rows_exits_1(binding_release, tmp_path):
    """Issue 39.5: ``diff`` said "no change" (exit 0) for two rows swapped, which ``verify`` fails."""
    swapped = copy_release(binding_release, tmp_path / "swapped")

    def swap(rows):
        rows[0], rows[1] = rows[1], rows[0]

    edit_rows(swapped / TRAIN, swap)
    rerender_card(swapped)
    done = run_script("diff.py", binding_release, swapped)
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert done.stdout.splitlines()[1:] == ["split `single-object/train`: moved 2 (`train-000001`, `train-000000`)"]


def _second_release(first, directory):
    """``first`` with row train-000001 changed and a row train-000004 added (card counts updated)."""
    second = copy_release(first, directory)

    def edit(rows):
        # a change publish accepts (it checks every row's answer key for the harness exports)
        rows[1]["seed"] = rows[1]["seed"] + 1000
        rows.append({**rows[3], "item_id": "train-000004", "seed": rows[3]["seed"] + 1})

    edit_rows(second / TRAIN, edit)
    rerender_card(second)
    return second


def test_diff_of_two_directories_reports_exactly_the_changed_and_added_row(binding_release, tmp_path):
    second = _second_release(binding_release, tmp_path / "second")
    assert pq.ParquetFile(second / TRAIN).metadata.num_rows == 5
    done = run_script("diff.py", binding_release, second)
    assert done.returncode == 1, done.stderr[-2000:]  # they differ: exit 1, as `git diff --exit-code`
    assert done.stdout.splitlines() == [f"{binding_release} -> {second}: 1 change line(s)", EXPECTED]
    same = check(run_script("diff.py", binding_release, binding_release), "diff.py same")
    assert same.stdout.splitlines()[0].endswith(": no change")


def test_diff_reports_a_duplicated_row(binding_release, tmp_path):
    doubled = copy_release(binding_release, tmp_path / "doubled")
    edit_rows(doubled / TRAIN, lambda rows: rows.insert(2, dict(rows[1])))
    rerender_card(doubled)
    done = run_script("diff.py", binding_release, doubled)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stdout.splitlines()[1:] == ["split `single-object/train`: duplicate ids 1 (`train-000001 ×2`)"]


@pytest.mark.heavy
def test_changes_since_section_and_diff_on_releases_pushed_to_the_hub(binding_release, tmp_path, hub, hub_env):
    repo = "verify-test/binding-diff"
    second = _second_release(binding_release, tmp_path / "second")
    publish(binding_release, repo, "v1.0.0", hub_env)
    before = len(hub.requests)
    publish(second, repo, "v1.1.0", hub_env)
    # the previous release is read from the Hub only where this one differs: its card, the train
    # shard, and the exports' manifest (its exports name the tag, so they differ: the manifest's
    # git blob ids say they are conceptforge's own without downloading them)
    fetched = sorted(r[1].rsplit("/", 1)[-1] for r in hub.requests[before:] if r[0] == "GET" and "/resolve/" in r[1])
    assert fetched == ["MANIFEST.json", "README.md", "train-00000-of-00001.parquet"]
    card = hub.files(repo, "v1.1.0")["README.md"].decode()
    assert f"## Changes since v1.0.0\n\n- {EXPECTED}\n\n## How to load" in card
    assert "## Changes since" not in hub.files(repo, "v1.0.0")["README.md"].decode()
    done = run_script("diff.py", f"{repo}@v1.0.0", f"{repo}@v1.1.0", env=hub_env)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stdout.splitlines() == [f"{repo}@v1.0.0 -> {repo}@v1.1.0: 1 change line(s)", EXPECTED]
    # republishing the same version renders the same section: the release is unchanged, not refused
    again = publish(second, repo, "v1.1.0", hub_env)
    assert "already published with identical files" in again.stdout


def test_diff_bad_input_is_one_error_line(binding_release, tmp_path):
    done = run_script("diff.py", binding_release, tmp_path / "nowhere")
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(errors) == 1
    assert (
        errors[0]
        == f"error: {tmp_path / 'nowhere'} is neither a local dataset directory nor a Hub id ORG/NAME[@REVISION]"
    )
