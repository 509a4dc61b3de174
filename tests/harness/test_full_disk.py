"""Issue 32: a full disk under evaluate's outputs is one line, not a traceback, and the rerun
after space is freed finishes (the scores were cached)."""

from __future__ import annotations

import json

from conceptforge.commands import main
from tests.full_disk import full_disk


def _evaluate(tiny_clip_dir, single_object_dir, *flags):
    return [
        "evaluate",
        "--tasks",
        "binding-clip",
        "--model",
        str(tiny_clip_dir),
        "--dataset",
        f"binding-clip={single_object_dir}",
        *flags,
    ]


def test_a_full_disk_under_output_or_the_sample_cache_is_one_line(tiny_clip_dir, single_object_dir, tmp_path, capsys):
    with full_disk(tmp_path / "disk") as disk:
        cache = ["--cache-dir", str(tmp_path / "cache")]
        assert main(_evaluate(tiny_clip_dir, single_object_dir, *cache, "--output", str(disk / "r.json"))) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert (
            err[-1].startswith(f"error: cannot write to {disk}")  # the first write that fails: a claim or the samples
            and "No space left on device" in err[-1]
        ), err
        assert "Traceback" not in "\n".join(err)
        assert not (disk / "r.json").exists()  # nothing half-written left as if complete

        flags = ["--cache-dir", str(disk / "cache"), "--output", str(tmp_path / "r2.json")]
        assert main(_evaluate(tiny_clip_dir, single_object_dir, *flags)) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1] == (
            "error: cannot write a SQLite file (database or disk is full): free some space or write elsewhere, "
            "then rerun the same command"
        ), err

        (disk / "filler").unlink()  # space freed: the same commands finish
        assert main(_evaluate(tiny_clip_dir, single_object_dir, *cache, "--output", str(disk / "r.json"))) == 0
        assert json.loads((disk / "r.json").read_text())["tasks"][0]["task"] == "binding-clip"
        assert main(_evaluate(tiny_clip_dir, single_object_dir, *flags)) == 0, capsys.readouterr().err


def test_a_disk_that_fills_part_way_through_the_outputs_leaves_none_of_them(
    tiny_clip_dir, single_object_dir, tmp_path, capsys
):
    """FD5: with room for the results file but not for the charts, r.json, r.md and r.samples/
    were left as if the run had finished. For each amount of free space the set is whole (exit 0)
    or absent (exit 2); among the amounts tried, some fail only at the analyses."""
    cache = ["--cache-dir", str(tmp_path / "cache")]
    failed_late = []
    for free_kib in (8, 24, 40, 48, 56, 72, 128):
        with full_disk(tmp_path / f"disk{free_kib}", size_kib=1024, free_kib=free_kib) as disk:
            code = main(_evaluate(tiny_clip_dir, single_object_dir, *cache, "--output", str(disk / "r.json")))
            err = capsys.readouterr().err.strip().splitlines()
            left = sorted(p.name for p in disk.iterdir() if p.name != "filler")
            if code == 0:
                assert left == ["r.breakdowns.json", "r.charts", "r.json", "r.md", "r.samples"], left
            else:
                assert code == 2 and "No space left on device" in err[-1] and left == [], (free_kib, left, err[-1])
                failed_late += [free_kib] if ("r.charts" in err[-1] or "breakdowns" in err[-1]) else []
    assert failed_late, "no amount of free space reached the analyses: widen the amounts"
