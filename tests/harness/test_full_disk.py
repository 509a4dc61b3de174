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
