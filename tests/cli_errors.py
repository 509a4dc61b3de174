"""How a refused command looks: exit 2 and one ``error:`` line, never a traceback.

Shared by the tests that try commands as a new user would (wrong values, missing files), so
that every one of them checks the same promise in the same words.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from conceptforge.commands import main as conceptforge


def one_line_error(argv: Sequence[str], capsys) -> str:
    """Run ``conceptforge ARGV`` in this process; assert it was refused in one line and return that line."""
    assert conceptforge(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def last_error_line(result: subprocess.CompletedProcess) -> str:
    """The last line a refused subprocess wrote to stderr (asserting exit 2 and no traceback)."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]
