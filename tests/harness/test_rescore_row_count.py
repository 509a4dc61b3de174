"""FP03: ``--from-predictions`` on a samples file that lost (or gained) rows since its run wrote it
says so in one warning line — how many rows, of how many, and that the metrics are the rows
left's — instead of rescoring a subset as if it were the run. The run's row count travels in the
file's metadata (``conceptforge.rows``), which a user's pyarrow slice keeps."""

from __future__ import annotations

import json
import logging

import pyarrow.parquet as pq

from tests.harness.test_rescore_rules import _folder, _rescore, _sub_vlm_rows


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "rows" in r.getMessage()]


def test_rows_dropped_from_a_samples_file_are_counted_in_one_warning(tmp_path, caplog):
    folder = _folder(tmp_path / "run.samples", "sub-vlm", _sub_vlm_rows(), "s_plus")
    path = folder / "sub-vlm.parquet"
    caplog.set_level(logging.WARNING)
    status, err = _rescore(folder, tmp_path / "whole.json")
    assert status == 0, err
    assert _warnings(caplog) == []  # every row the run wrote: nothing to say
    # images 0 and 1 are right, 2-7 wrong (test_rescore_rules._sub_vlm_rows): S+ = 2/8
    assert json.loads((tmp_path / "whole.json").read_text())["tasks"][0]["metrics"]["s_plus"]["value"] == 2 / 8

    table = pq.read_table(path)
    pq.write_table(table.slice(0, 5), path)  # a user keeps the first 5 rows: the metadata stays
    caplog.clear()
    status, err = _rescore(folder, tmp_path / "cut.json")
    assert status == 0, err
    assert _warnings(caplog) == [
        f"{path} holds 5 of the 8 rows its run wrote: 3 rows were dropped from the file since; "
        "the metrics are rescored from the 5 rows left"
    ]
    # the 5 rows left: images 0, 1 right, 2-4 wrong: S+ = 2/5
    s_plus = json.loads((tmp_path / "cut.json").read_text())["tasks"][0]["metrics"]["s_plus"]
    assert (s_plus["value"], s_plus["n"]) == (2 / 5, 5)


def test_rows_added_to_a_samples_file_are_counted_too(tmp_path, caplog):
    rows = _sub_vlm_rows()
    folder = _folder(tmp_path / "run.samples", "sub-vlm", rows[:6], "s_plus")
    path = folder / "sub-vlm.parquet"
    table = pq.read_table(path)
    extra = _folder(tmp_path / "more.samples", "sub-vlm", rows[6:], "s_plus") / "sub-vlm.parquet"
    import pyarrow as pa

    pq.write_table(pa.concat_tables([table, pq.read_table(extra).cast(table.schema)]), path)
    caplog.set_level(logging.WARNING)
    status, err = _rescore(folder, tmp_path / "more.json")
    assert status == 0, err
    assert _warnings(caplog) == [
        f"{path} holds 8 rows, 2 more than the 6 its run wrote: rows were added to the file since; "
        "the metrics are rescored from all 8"
    ]
