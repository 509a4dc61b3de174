"""Issue 32: damaged, binary or foreign files given to a command are one line, not a traceback,
and a SQLite file of someone else's is never written into."""

from __future__ import annotations

import os
import sqlite3

import pytest

from conceptforge.commands import main
from conceptforge.errors import DataFormatError, StoreError
from conceptforge.external_errors import translate

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("error: "), err[-2000:]
    return lines[0]


def test_binary_files_given_as_json_are_one_line(tmp_path, capsys):
    results = tmp_path / "results.json"
    results.write_bytes(PNG)
    assert main(["leaderboard", str(results)]) == 2
    assert (
        _one_error_line(capsys)
        == f"error: {results} is not a text file: give the JSON of `conceptforge evaluate --output`"
    )
    spec = tmp_path / "concepts.json"
    spec.write_bytes(PNG)
    out = tmp_path / "out"
    assert (
        main(["generate", "conceptbed", "--learner", "textual-inversion", "--concepts", str(spec), "--out", str(out)])
        == 2
    )
    assert f"concept spec {spec} is not valid JSON: 'utf-8' codec can't decode" in _one_error_line(capsys)
    assert not out.exists()


@pytest.mark.parametrize("kind", ["random bytes", "someone else's database"])
def test_a_foreign_or_damaged_sample_cache_is_refused_untouched(kind, tmp_path):
    from conceptforge.filters.annotation.db import AnnotationDB
    from conceptforge.loaders.harness.embeddings import EmbeddingCache
    from conceptforge.loaders.harness.sample_cache import SampleCache

    # the annotation database too: opening it (WAL mode) rewrote a foreign file's header
    for name, opener in (("samples.sqlite", SampleCache), ("text.sqlite", EmbeddingCache), ("a.sqlite", AnnotationDB)):
        path = tmp_path / name
        if kind == "random bytes":
            path.write_bytes(os.urandom(4096))
        else:
            with sqlite3.connect(path) as conn:
                conn.execute("CREATE TABLE contacts (name TEXT)")
            conn.close()
        before = path.read_bytes()
        with pytest.raises(
            StoreError, match=r"^--(cache-dir|db): .* (is not conceptforge's|is a SQLite database of something else)"
        ):
            opener(path)
        assert path.read_bytes() == before  # no table of ours written into it
    ours = SampleCache(tmp_path / "fresh" / "samples.sqlite")  # absent: created, and ours from then on
    ours.put_many([("k", {"v": 1})])
    ours.close()
    assert SampleCache(tmp_path / "fresh" / "samples.sqlite").get_many(["k"]) == {"k": {"v": 1}}


def test_sqlite_errors_of_the_machine_are_one_line():
    full = translate(sqlite3.OperationalError("database or disk is full"))
    assert isinstance(full, StoreError) and str(full).endswith(
        "free some space or write elsewhere, then rerun the same command"
    )
    damaged = translate(sqlite3.DatabaseError("database disk image is malformed"))
    assert isinstance(damaged, DataFormatError)
    assert translate(sqlite3.OperationalError("no such column: x")) is None  # a bug stays a bug
    enospc = translate(OSError(28, "No space left on device", "/scratch/out/r.json"))
    assert str(enospc) == (
        "cannot write /scratch/out/r.json: No space left on device; free some space or write elsewhere, then rerun the same command"
    )
