"""``conceptforge verify`` on a freshly generated binding release: identical, then one changed
pixel or field in one row, on a local folder and on releases pushed to the local Hub server."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq
import pytest

from conceptforge.generators.verify import HARDWARE_HINT
from tests.user_shell import check, publish, run_script
from tests.verify.verify_helpers import change_pixel, copy_release, differing_lines, edit_rows, rerender_card

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


@pytest.mark.heavy
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


def test_an_image_off_like_another_cpus_is_hinted_and_passes_with_tolerate_hardware(binding_release, tmp_path):
    """Binding renders are byte-identical on one kind of CPU, not across instruction sets: a release
    made elsewhere differs by a few pixel values. Byte for byte it fails, with the hint; with
    --tolerate-hardware it passes, the image named. A change beyond the tolerance fails either way."""
    near = copy_release(binding_release, tmp_path / "near")
    edit_rows(near / TRAIN, lambda rows: rows[2].update(image=change_pixel(rows[2]["image"])))
    exact = run_script("verify.py", near, "--items", "train-000002")
    assert exact.returncode == 1, exact.stderr[-2000:]
    assert exact.stdout.splitlines()[-2] == f"hint: {HARDWARE_HINT}"
    tolerated = check(run_script("verify.py", near, "--items", "train-000002", "--tolerate-hardware"), "verify.py")
    lines = tolerated.stdout.splitlines()
    assert any(
        line.startswith("tolerated: train-000002 split=train config=single-object: image: PSNR") for line in lines
    )
    assert (
        "rule (single-object): images PSNR >= 40 dB and >= 30 dB in every 8x8 window, equal metadata "
        "(--tolerate-hardware, over the generator's rule: deterministic on the kind of machine that made it)"
    ) in lines
    assert lines[-1].startswith(f"verified: 1 of 1 item(s) of {near} match (1 within the PSNR tolerance")

    far = copy_release(binding_release, tmp_path / "far")  # one value moved by 128: a local edit, not noise
    edit_rows(far / TRAIN, lambda rows: rows[2].update(image=change_pixel(rows[2]["image"], delta=128)))
    for flags in ((), ("--tolerate-hardware",)):
        done = run_script("verify.py", far, "--items", "train-000002", *flags)
        assert done.returncode == 1 and "hint:" not in done.stdout, done.stdout
        assert len(differing_lines(done.stdout)) == 1


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


@pytest.mark.heavy
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


@pytest.mark.heavy
def test_published_tags_verify_and_a_changed_pixel_fails_on_the_hub(binding_release, tmp_path, hub, hub_env):
    repo = "verify-test/binding"
    publish(binding_release, repo, "v1.0.0", hub_env)
    changed = copy_release(binding_release, tmp_path / "changed")
    edit_rows(changed / TRAIN, lambda rows: rows[3].update(image=change_pixel(rows[3]["image"], delta=7)))
    publish(changed, repo, "v1.1.0", hub_env)
    assert "provenance.json" in hub.files(repo, "v1.0.0")

    # three independent reads of the Hub, side by side (the request count below is taken alone)
    runs = [
        (f"{repo}@v1.0.0", "--all"),
        (repo, "--revision", "v1.1.0", "--all"),
        (f"{repo}@v9.9.9", "--all"),
    ]
    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        first, second, missing = pool.map(lambda args: run_script("verify.py", *args, env=hub_env), runs)
    check(first, "verify @v1.0.0")
    assert f"verified: 8 of 8 item(s) of {repo}@v1.0.0 match" in first.stdout
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
    assert missing.returncode == 2 and "has no revision 'v9.9.9'" in missing.stderr


# -- the release as a whole: its row set against the recorded plan ------------------------------------
def _row_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("rows: ")]


def test_the_row_list_is_recorded_at_assembly(binding_release):
    record = json.loads((binding_release / "provenance.json").read_text())
    rows = record["configs"]["single-object"]["rows"]
    assert rows == {
        split: pq.read_table(binding_release / f"data/single-object/{split}-00000-of-00001.parquet")
        .column("item_id")
        .to_pylist()
        for split in ("train", "val", "gen")
    }
    assert rows["train"] == [f"train-{i:06d}" for i in range(4)] and rows["gen"] == ["gen-000000", "gen-000001"]


def test_a_dropped_row_fails_although_every_remaining_row_regenerates(binding_release, tmp_path):
    dropped = copy_release(binding_release, tmp_path / "dropped")
    edit_rows(dropped / TRAIN, lambda rows: rows.pop(2))
    rerender_card(dropped)  # a consistent card: only the record knows a row is missing
    done = run_script("verify.py", dropped, "--sample", "3")
    assert done.returncode == 1, done.stderr[-2000:]
    assert _row_lines(done.stdout) == [
        "rows: single-object/train: 3 row(s) released, 4 recorded",
        "rows: single-object/train: missing train-000002",
    ]
    assert differing_lines(done.stdout) == []  # every row that is there regenerates
    assert done.stdout.splitlines()[-1] == (
        f"FAILED: 3 of 3 item(s) of {dropped} match; the row set differs from the recorded plan (2 problem(s))"
    )
    # the ids checked are printed, one line per config and split (the sample spreads over all three)
    checked = [line for line in done.stdout.splitlines() if line.startswith("checked ")]
    assert [line.split(" (")[0] for line in checked] == [
        "checked single-object/gen",
        "checked single-object/train",
        "checked single-object/val",
    ]


@pytest.mark.heavy
def test_a_duplicated_or_reordered_row_fails(binding_release, tmp_path):
    doubled = copy_release(binding_release, tmp_path / "doubled")
    edit_rows(doubled / TRAIN, lambda rows: rows.insert(2, dict(rows[1])))
    rerender_card(doubled)
    done = run_script("verify.py", doubled, "--items", "val-000000")
    assert done.returncode == 1, done.stderr[-2000:]
    assert _row_lines(done.stdout) == [
        "rows: single-object/train: 5 row(s) released, 4 recorded",
        "rows: single-object/train: duplicated train-000001 (2 rows)",
    ]

    swapped = copy_release(binding_release, tmp_path / "swapped")
    edit_rows(swapped / TRAIN, lambda rows: rows.insert(1, rows.pop(2)))
    record = json.loads((swapped / "provenance.json").read_text())
    record["configs"]["single-object"]["plan"]["items"] = 9  # and the record contradicts itself
    (swapped / "provenance.json").write_text(json.dumps(record))
    report = tmp_path / "report.json"
    done = run_script("verify.py", swapped, "--items", "val-000000", "--report", report)
    assert done.returncode == 1, done.stderr[-2000:]
    assert _row_lines(done.stdout) == [
        "rows: single-object/train: reordered: row 1 is train-000002, the record has train-000001 there"
    ]
    assert (
        "warning: provenance.json contradicts itself for single-object: its plan has 9 item(s), its row list 8"
        in done.stdout
    )
    written = json.loads(report.read_text())
    assert written["format"] == "conceptforge-verify-report/1" and written["ok"] is False
    assert written["rows"]["problems"] == [_row_lines(done.stdout)[0].removeprefix("rows: ")]
    assert [(i["item_id"], i["outcome"]) for i in written["items"]] == [("val-000000", "identical")]

    # a record from before row lists: the plan's item count and the rebuilt plan's order stand in
    for name in ("swapped", "dropped-old"):
        old = copy_release(binding_release if name == "dropped-old" else swapped, tmp_path / f"{name}-old-record")
        record = json.loads((old / "provenance.json").read_text())
        del record["configs"]["single-object"]["rows"]
        record["configs"]["single-object"]["plan"]["items"] = 8
        (old / "provenance.json").write_text(json.dumps(record))
        if name == "dropped-old":
            edit_rows(old / TRAIN, lambda rows: rows.pop(0))
            rerender_card(old)
        done = run_script("verify.py", old, "--items", "val-000000")
        assert done.returncode == 1, done.stderr[-2000:]
        assert "warning: provenance.json of single-object predates row lists" in done.stdout
        expected = (
            ["rows: single-object/train: reordered: row 1 is train-000002, the record has train-000001 there"]
            if name == "swapped"
            else [
                "rows: single-object: 7 row(s) released, the recorded plan has 8 item(s)",
                "rows: single-object/train: 3 row(s) released, 4 recorded",
                "rows: single-object/train: missing train-000000",
            ]
        )
        assert _row_lines(done.stdout) == expected


@pytest.mark.heavy
def test_report_file_is_written_only_where_allowed(binding_release, tmp_path):
    theirs = tmp_path / "notes.json"
    theirs.write_text('{"mine": true}\n')
    done = run_script("verify.py", binding_release, "--sample", "1", "--report", theirs)
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert (
        done.returncode == 2
        and len(errors) == 1
        and "--report" in errors[0]
        and "was not written by conceptforge" in errors[0]
    )
    assert theirs.read_text() == '{"mine": true}\n'
    ours = tmp_path / "verify.json"
    first = check(run_script("verify.py", binding_release, "--sample", "4", "--report", ours), "verify --report")
    written = json.loads(ours.read_text())
    assert written["ok"] is True and written["rows"]["problems"] == []
    assert written["rows"]["checked"] == {"single-object/train": 4, "single-object/val": 2, "single-object/gen": 2}
    printed = {
        item_id
        for line in first.stdout.splitlines()
        if line.startswith("checked ")
        for item_id in line.split(": ", 1)[1].split(", ")
    }
    assert printed == {i["item_id"] for i in written["items"]} and len(printed) == 4
    check(run_script("verify.py", binding_release, "--sample", "1", "--report", ours), "verify --report again")


@pytest.mark.heavy
def test_a_release_that_dropped_a_row_fails_on_the_hub(binding_release, tmp_path, hub, hub_env):
    repo = "verify-test/binding-rows"
    publish(binding_release, repo, "v1.0.0", hub_env)
    dropped = copy_release(binding_release, tmp_path / "dropped")
    edit_rows(dropped / TRAIN, lambda rows: rows.pop(1))
    rerender_card(dropped)
    publish(dropped, repo, "v1.1.0", hub_env)
    card = hub.files(repo, "v1.1.0")["README.md"].decode()
    assert "- split `single-object/train`: removed 1 (`train-000001`)" in card  # its own card says so
    done = run_script("verify.py", f"{repo}@v1.1.0", "--items", "gen-000000", env=hub_env)
    assert done.returncode == 1, done.stderr[-2000:]
    assert _row_lines(done.stdout) == [
        "rows: single-object/train: 3 row(s) released, 4 recorded",
        "rows: single-object/train: missing train-000001",
    ]
    first = check(run_script("verify.py", f"{repo}@v1.0.0", "--items", "gen-000000", env=hub_env), "verify v1.0.0")
    assert first.stdout.splitlines()[-1].endswith(
        "match; rows as recorded in single-object/train, single-object/val, single-object/gen"
    )
