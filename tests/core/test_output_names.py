"""An ``--output`` name the machine cannot hold is one line before any work (issue 39.6): a part
longer than the file system allows was a traceback (ENAMETOOLONG from ``Path.exists``) in the
argument check, and a name that is not UTF-8 was accepted and failed after the evaluation."""

from __future__ import annotations

import os

import pytest

from conceptforge.argtypes import check_writable
from conceptforge.commands import main
from conceptforge.errors import InvalidArgumentError

NOT_UTF8 = os.fsdecode(b"results-\xff.json")  # what Python makes of a Latin-1 name from the shell


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("r" * 300 + ".json", "the name rrrrrrrrrrrrrrrrrrrrrrrr… is 305 bytes long; this file system allows 255: use a shorter one"),
        (NOT_UTF8, "\\xff.json is not valid UTF-8: use a name in UTF-8"),
    ],
)  # fmt: skip
def test_an_output_name_the_machine_cannot_hold_is_one_line(name, expected, tmp_path, capsys):
    output = str(tmp_path / name)
    argv = ["evaluate", "--tasks", "binding-clip", "--model", str(tmp_path / "no-model"), "--output", output]
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: conceptforge evaluate: argument --output: "), lines
    assert expected in lines[0] and "Traceback" not in captured.err
    assert list(tmp_path.iterdir()) == []  # nothing written
    with pytest.raises(InvalidArgumentError, match="bytes long|not valid UTF-8"):
        check_writable(output)  # the library's own check says the same


def test_an_existing_non_utf8_input_stays_readable(tmp_path):
    """Only names to be written must be UTF-8: a file someone else named can still be read."""
    from conceptforge.argtypes import existing_file

    path = tmp_path / NOT_UTF8
    path.write_bytes(b"{}")
    assert existing_file(str(path)) == path
    with pytest.raises(Exception, match="bytes long"):
        existing_file(str(tmp_path / ("r" * 300)))
