"""Long runs survive bad items: retried, recorded as failed, listed by status, refused by assembly.

Uses the engine test stage (tests/engine/engine_stage.py) with a ``make_item`` that fails for chosen
items: a "NaN image" (ValueError) every time, or a flaky error only on the first try.
"""

from __future__ import annotations

import dataclasses

import pyarrow.parquet as pq
import pytest

from conceptforge.engine.failures import ITEM_ATTEMPTS, MAX_FAILURES_IN_A_ROW, failed_items
from conceptforge.engine.runner import Stage, assemble_run, run_stage
from conceptforge.engine.store import ItemStore
from conceptforge.errors import DeviceUnavailableError, ItemError, StoreError
from tests.engine import engine_stage


def failing_stage(
    count: int,
    *,
    bad: dict[str, BaseException],
    flaky: set[str] = frozenset(),
    calls=None,
    chunk_size: int = 4,
    batches: bool = False,
) -> Stage:
    """``bad`` items raise their error on every try; ``flaky`` ones only on the first."""
    make = engine_stage.make_factory(None, 0.0)
    calls = calls if calls is not None else {}

    def make_item(item):
        calls[item.item_id] = calls.get(item.item_id, 0) + 1
        if item.item_id in bad:
            raise bad[item.item_id]
        if item.item_id in flaky and calls[item.item_id] == 1:
            raise RuntimeError("worker hiccup")
        return make(item)

    base = engine_stage.stage(count, chunk_size=chunk_size)
    if batches:
        return dataclasses.replace(base, make_item=None, process_batch=lambda items: [make_item(i) for i in items])
    return dataclasses.replace(base, make_item=make_item)


def test_a_bad_item_is_retried_then_recorded_and_the_shard_goes_on(tmp_path):
    calls: dict[str, int] = {}
    out = tmp_path / "out"
    stage = failing_stage(12, bad={"item00005": ValueError("image is NaN")}, flaky={"item00009"}, calls=calls)
    report = run_stage(stage, out)
    assert calls["item00005"] == ITEM_ATTEMPTS and calls["item00009"] == 2 and calls["item00011"] == 1
    assert report.made == 11 and report.complete and not report.assembled
    assert [(f.item_id, f.split, f.error, f.attempts) for f in report.failed] == [
        ("item00005", "test", "ValueError: image is NaN", 3)
    ]
    assert "1 item(s) failed every attempt" in report.message(str(out)) and "--allow-failed" in report.message(str(out))
    store = ItemStore(out / ".work")
    assert sorted(r.item_id for r in store.records()) == [f"item{n:05d}" for n in range(12) if n != 5]
    assert not (out / "README.md").exists()  # no dataset with a hole in it, unless asked for


def test_status_lists_failed_items_and_assembly_refuses_unless_allowed(tmp_path):
    from conceptforge.commands.status import status_lines

    out = tmp_path / "out"
    run_stage(failing_stage(8, bad={"item00002": ItemError("no valid placement after 200 restarts")}), out)
    lines = status_lines(str(out))
    assert any(line.startswith("failed: 1 item(s) failed every attempt") for line in lines)
    assert "  item00002 (train, 3 attempts): ItemError: no valid placement after 200 restarts" in lines
    with pytest.raises(StoreError, match="1 item\\(s\\) failed every attempt.*--allow-failed"):
        assemble_run(out)
    outcome = assemble_run(out, allow_failed=True)
    assert outcome.status == "assembled"
    card = (out / "README.md").read_text()
    assert (
        "## Failed items" in card
        and "| `item00002` | train | 3 | ItemError: no valid placement after 200 restarts |" in card
    )
    train = pq.read_table(out / "data" / "train.parquet").column("item_id").to_pylist()
    assert "item00002" not in train and len(train) == 5  # items 1, 3, 4, 6, 7 (0 and 5 are test)


def test_a_rerun_retries_the_failed_items_and_then_assembles(tmp_path):
    out = tmp_path / "out"
    run_stage(failing_stage(8, bad={"item00006": ValueError("NaN")}), out)
    calls: dict[str, int] = {}
    report = run_stage(failing_stage(8, bad={}, calls=calls), out)  # the cause is gone
    assert set(calls) == {f"item{n:05d}" for n in range(4, 8)}  # only the chunk that held the failure
    assert report.failed == [] and report.assembled
    assert failed_items(ItemStore(out / ".work")) == []
    assert "## Failed items" not in (out / "README.md").read_text()


def test_an_error_of_the_run_stops_at_once(tmp_path):
    calls: dict[str, int] = {}
    stage = failing_stage(
        8, bad={"item00001": DeviceUnavailableError("--device cuda: no CUDA GPU is visible")}, calls=calls
    )
    with pytest.raises(DeviceUnavailableError):
        run_stage(stage, tmp_path / "out")
    assert calls["item00001"] == 1  # not retried: no item can fix a missing GPU


def test_a_stage_whose_items_all_fail_is_a_bug_not_bad_luck(tmp_path):
    calls: dict[str, int] = {}
    bad = {f"item{n:05d}": ZeroDivisionError("division by zero") for n in range(20)}
    with pytest.raises(ZeroDivisionError):
        run_stage(failing_stage(20, bad=bad, calls=calls), tmp_path / "out")
    assert len(calls) == MAX_FAILURES_IN_A_ROW


def test_a_failing_batch_is_made_one_item_at_a_time(tmp_path):
    calls: dict[str, int] = {}
    report = run_stage(
        failing_stage(8, bad={"item00003": ValueError("NaN")}, calls=calls, batches=True), tmp_path / "out"
    )
    assert [f.item_id for f in report.failed] == ["item00003"] and report.made == 7
    assert calls["item00003"] == 2 * ITEM_ATTEMPTS  # the whole batch three times, then alone three times
    assert calls["item00000"] == ITEM_ATTEMPTS + 1 and calls["item00004"] == 1  # its batch mates alone once


def test_a_batch_that_fails_once_is_made_again_as_the_same_batch(tmp_path):
    """Issue 32: a transient error made the batch's items one at a time, and a model's float32
    results depend on their batch mates: the run then differed from an uninterrupted one."""
    seen: list[tuple[str, ...]] = []
    stage = failing_stage(8, bad={}, flaky={"item00002"}, batches=True)
    inner = stage.process_batch

    def recording(items):
        seen.append(tuple(item.item_id for item in items))
        return inner(items)

    report = run_stage(dataclasses.replace(stage, process_batch=recording), tmp_path / "out")
    assert report.made == 8 and not report.failed
    first = tuple(f"item{n:05d}" for n in range(4))
    assert seen == [first, first, tuple(f"item{n:05d}" for n in range(4, 8))]  # never one at a time


def test_a_run_whose_items_all_fail_exits_non_zero_and_nothing_suggests_assembling_it(tmp_path):
    """Issue 32: `generate conceptbed --resolution 31` failed 3 of 3 images, exited 0 with "made 0",
    and `status` then suggested an assemble that could only give an empty dataset."""
    from conceptforge.commands.status import status_lines

    out = tmp_path / "out"
    bad = {f"item{n:05d}": ValueError("height and width have to be divisible by 8") for n in range(3)}
    with pytest.raises(
        ItemError,
        match=r"^test/engine: every one of the 3 item\(s\) tried failed every attempt \(e\.g\. item00000: ValueError: height",
    ):
        run_stage(failing_stage(3, bad=bad), out)
    lines = status_lines(str(out))
    assert any(line.startswith("failed: every one of the 3 item(s) failed every attempt") for line in lines), lines
    assert not any("conceptforge assemble" in line for line in lines), lines
    with pytest.raises(StoreError, match="there is nothing to assemble"):
        assemble_run(out, allow_failed=True)
    assert not (out / "README.md").exists() and not (out / "data").exists()
    with pytest.raises(ItemError):  # the rerun retries them, and says so again
        run_stage(failing_stage(3, bad=bad), out)
    report = run_stage(failing_stage(3, bad={}), out)  # the cause fixed: the same run finishes
    assert report.made == 3 and report.assembled


def test_a_permanent_failure_is_recorded_at_its_first_attempt_and_not_counted_in_a_row(tmp_path):
    """A damaged weights file fails the same way every time: one attempt each (issue 45.8), and six
    of them in a row (more than MAX_FAILURES_IN_A_ROW) do not stop the shard: the other items run."""
    from conceptforge.errors import PermanentItemError

    calls: dict[str, int] = {}
    bad = {f"item{n:05d}": PermanentItemError(f"cannot load model {n}: file damaged") for n in range(6)}
    report = run_stage(failing_stage(8, bad=bad, calls=calls), tmp_path / "out", allow_failed=True)
    assert [calls[f"item{n:05d}"] for n in range(8)] == [1] * 8
    assert [(f.item_id, f.error, f.attempts) for f in report.failed] == [
        (f"item{n:05d}", f"cannot load model {n}: file damaged", 1) for n in range(6)
    ]
    # allow_failed: the 2 items made are assembled, the card lists the 6 left out
    assert report.made == 2 and report.assembly.status == "assembled"
    assert "6 item(s) failed every attempt" in (tmp_path / "out" / "README.md").read_text()
