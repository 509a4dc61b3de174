"""``conceptforge verify`` on a freshly generated binding release: identical, then one changed
pixel or field in one row, on a local folder and on releases pushed to the local Hub server."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from tests.verify.verify_helpers import (
    change_pixel,
    check,
    copy_release,
    differing_lines,
    edit_rows,
    run_script,
)

TRAIN = "data/single-object/train-00000-of-00001.parquet"


def test_fresh_release_verifies_byte_identical(binding_release):
    done = check(run_script("verify.py", binding_release, "--all"), "verify.py")
    assert differing_lines(done.stdout) == []
    assert "rule (single-object): byte-identical images, equal metadata" in done.stdout
    assert f"verified: 8 of 8 item(s) of {binding_release} match" in done.stdout
    record = json.loads((binding_release / "provenance.json").read_text())
    entry = record["configs"]["single-object"]
    assert record["generator"] == "binding" and entry["device"] == "cpu" and entry["plan"]["items"] == 8
    assert entry["rebuild"]["config"]["width"] == 64 and entry["settings"] == entry["rebuild"]["config"]
    assert "`conceptforge verify path/to/this/folder --sample 20`" in (binding_release / "README.md").read_text()


def test_one_changed_pixel_fails_naming_that_item(binding_release, tmp_path):
    changed = copy_release(binding_release, tmp_path / "changed")
    edit_rows(changed / TRAIN, lambda rows: rows[2].update(image=change_pixel(rows[2]["image"])))
    done = run_script("verify.py", changed, "--all")
    assert done.returncode == 1, done.stderr[-2000:]
    lines = differing_lines(done.stdout)
    assert len(lines) == 1
    assert lines[0].startswith("differs: train-000002 split=train config=single-object: image: image bytes differ (")
    assert "1 pixel value(s) differ, max |diff| 1" in lines[0]
    assert "FAILED: 7 of 8 item(s)" in done.stdout and "; 1 differ" in done.stdout
    # the other items still verify: the failure is that row's, not the release's
    others = check(
        run_script("verify.py", changed, "--items", "train-000001,gen-000000,val-000001"), "verify.py --items"
    )
    assert "verified: 3 of 3 item(s)" in others.stdout


def test_one_changed_field_is_named_with_both_values(binding_release, tmp_path):
    changed = copy_release(binding_release, tmp_path / "changed")
    original = pq.read_table(changed / TRAIN).to_pylist()[1]["label_index"]
    edited = (original + 1) % 5
    edit_rows(changed / TRAIN, lambda rows: rows[1].update(label_index=edited))
    done = run_script("verify.py", changed, "--items", "train-000001")
    assert done.returncode == 1
    assert differing_lines(done.stdout) == [
        f"differs: train-000001 split=train config=single-object: label_index: released {edited}, "
        f"regenerated {original} (|diff| {abs(edited - original)})"
    ]


def test_version_differences_are_a_warning_not_a_failure(binding_release, tmp_path):
    changed = copy_release(binding_release, tmp_path / "older")
    record = json.loads((changed / "provenance.json").read_text())
    installed = record["packages"]["conceptforge"]
    record["packages"]["conceptforge"] = "0.0.1"
    (changed / "provenance.json").write_text(json.dumps(record))
    done = check(run_script("verify.py", changed, "--sample", "2"), "verify.py --sample")
    assert f"warning: installed versions differ from the release's: conceptforge 0.0.1 -> {installed}" in done.stdout
    assert "verified: 2 of 2 item(s)" in done.stdout


def test_bad_input_is_one_error_line_and_exit_2(binding_release, tmp_path):
    without = copy_release(binding_release, tmp_path / "no-record")
    (without / "provenance.json").unlink()
    cases = [
        ((without, "--all"), "has no provenance.json"),
        ((binding_release, "--items", "train-999999"), "--items: no released row has item id train-999999"),
        ((binding_release, "--sample", "0"), "argument --sample: must be >= 1"),
        (
            (binding_release, "--config", "relational"),
            "--config 'relational' is not in this release; it has single-object",
        ),
        ((tmp_path / "nowhere", "--all"), "is neither a local dataset directory nor a Hub id"),
        ((binding_release, "--revision", "v1.0.0"), "--revision applies to a Hub dataset"),
        ((binding_release, "--weights", "diffusion"), "is not ROLE=PATH"),
    ]
    for args, message in cases:
        done = run_script("verify.py", *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr[-1500:])
        errors = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(errors) == 1 and errors[0].startswith("error: ") and message in errors[0], (args, done.stderr)
    assert not (without / ".work").exists()  # nothing written into the user's folder


def test_published_tags_verify_and_a_changed_pixel_fails_on_the_hub(binding_release, tmp_path, hub, hub_env):
    repo = "verify-test/binding"
    check(
        run_script("publish.py", binding_release, "--repo-id", repo, "--version", "v1.0.0", env=hub_env),
        "publish v1.0.0",
    )
    changed = copy_release(binding_release, tmp_path / "changed")
    edit_rows(changed / TRAIN, lambda rows: rows[3].update(image=change_pixel(rows[3]["image"], delta=7)))
    check(run_script("publish.py", changed, "--repo-id", repo, "--version", "v1.1.0", env=hub_env), "publish v1.1.0")
    assert "provenance.json" in hub.files(repo, "v1.0.0")

    first = check(run_script("verify.py", f"{repo}@v1.0.0", "--all", env=hub_env), "verify @v1.0.0")
    assert f"verified: 8 of 8 item(s) of {repo}@v1.0.0 match" in first.stdout
    second = run_script("verify.py", repo, "--revision", "v1.1.0", "--all", env=hub_env)
    assert second.returncode == 1, second.stderr[-2000:]
    lines = differing_lines(second.stdout)
    assert len(lines) == 1 and lines[0].startswith("differs: train-000003 split=train config=single-object: image:")
    assert "max |diff| 7" in lines[0]

    card = hub.files(repo, "v1.1.0")["README.md"].decode()
    assert "## Changes since v1.0.0\n\n- split `single-object/train`: changed 1 (`train-000003`)\n" in card
    assert f"`conceptforge verify {repo}@v1.1.0 --sample 20`" in card
    assert "## Changes since" not in hub.files(repo, "v1.0.0")["README.md"].decode()
    before = len(hub.requests)
    sampled = check(
        run_script("verify.py", f"{repo}@v1.1.0", "--items", "train-000001,val-000000", env=hub_env), "verify --items"
    )
    assert "verified: 2 of 2 item(s)" in sampled.stdout
    # only the rows asked for are read: range requests on the shards, never a whole download of the release
    reads = [r for r in hub.requests[before:] if r[0] == "GET" and "/resolve/" in r[1] and r[1].endswith(".parquet")]
    assert reads and all(r[2] == 206 for r in reads)
    missing = run_script("verify.py", f"{repo}@v9.9.9", "--all", env=hub_env)
    assert missing.returncode == 2 and "has no revision 'v9.9.9'" in missing.stderr
