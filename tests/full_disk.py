"""A real full disk for the tests of issue 32: a small tmpfs filled to the brim.

Writes then fail the way they do on a full cluster scratch disk (ENOSPC from the kernel, from
pyarrow, from SQLite), not through a patched function. Mounting needs root (CI and the
development containers run as root); elsewhere the tests that use it skip with one reason.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def full_disk(path: Path, *, size_kib: int = 4096, free_kib: int = 0) -> Iterator[Path]:
    """Mount a ``size_kib`` tmpfs at ``path`` and fill it, leaving about ``free_kib`` KiB free.

    Yields the path; ``path / "filler"`` is the file that fills it (delete it to free the disk).
    """
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("a full disk needs a tmpfs mount (root)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(path)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        with open(path / "filler", "wb") as handle:
            try:
                handle.write(b"\0" * ((size_kib - free_kib) * 1024))
            except OSError:
                pass  # full: what we wanted
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)
