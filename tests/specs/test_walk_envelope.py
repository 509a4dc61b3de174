"""The bad-spec walk, the part every method shares: the file, the envelope, ``spec`` and ``init``.

Each case runs the real command line in a fresh process (``python -m conceptforge …``) in a
folder of its own and expects what a user should get: exit 2, exactly one ``error:`` line on
stderr naming the field (or flag) and the fix, nothing on stdout, and the folder byte for byte as
it was (no spec written, no temp file left). The methods' own fields are walked in
``tests/specs/test_walk_<method>.py``.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.specs.walk_cases import read_cases
from tests.user_shell import script_env


def snapshot(folder: Path) -> dict[str, str]:
    """Every path under ``folder`` with the sha256 of a file's bytes ('dir' for a folder)."""
    return {
        str(path.relative_to(folder)): "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
    }


# (id, files to lay out in the folder, argv after `conceptforge`, fragments the one line must hold)
CASES = [(case["id"], case["files"], case["argv"], case["fragments"]) for case in read_cases("envelope")]


def run_cli(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "conceptforge", *argv],
        cwd=cwd,
        env=script_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(("files", "argv", "fragments"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_bad_spec_or_flag_is_one_line_exit_2_and_nothing_written(tmp_path, files, argv, fragments):
    folder = tmp_path / "work"
    folder.mkdir()
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    before = snapshot(folder)
    done = run_cli(argv, folder)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert snapshot(folder) == before


def test_the_walk_has_the_cases_the_issue_asks_for():
    """At least 12 cases, spread over both commands (the issue's list of envelope mistakes)."""
    assert len(CASES) >= 12
    assert len({case[0] for case in CASES}) == len(CASES)
    assert {"spec", "init"} <= {case[2][0] for case in CASES}
