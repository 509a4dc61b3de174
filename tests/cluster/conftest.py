"""A real single-node Slurm (session-wide), the docs' batch scripts, and helpers for the cluster tests.

The Slurm daemons run from Debian's ``slurm-wlm`` with a private configuration
(:mod:`conceptforge.testing.slurm`), beside any system Slurm. Where they cannot start (not root,
packages missing) every test that needs them skips with one reason.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "cluster.md"
BIN = str(Path(sys.executable).parent)
#: What jobs need: this venv's `conceptforge` and python first on PATH, the repo for `tests.*`.
JOB_ENV = {
    "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    "PYTHONPATH": str(REPO),
    "HF_HUB_OFFLINE": "1",
    "OMP_NUM_THREADS": "1",
}
#: Resources for the tiny test jobs; on the command line they win over the scripts' #SBATCH lines.
SMALL_JOB = ["--cpus-per-task=1", "--mem=300M", "--time=10"]


@pytest.fixture(scope="session")
def slurm():
    from conceptforge.testing.slurm import start_cluster, unavailable_reason

    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    cluster = start_cluster(cpus=8)
    yield cluster
    cluster.stop()


def published(out: Path) -> dict[str, bytes]:
    """Every published file of a run or sweep folder, by path (the item store under .work is not the
    result): what two runs that must agree byte for byte are compared by."""
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and ".work" not in p.relative_to(out).parts
    }


def bash_blocks(markdown: str) -> list[str]:
    """The fenced ```bash blocks of a Markdown text, in order."""
    return [match.group(1) for match in re.finditer(r"^```bash\n(.*?)^```", markdown, flags=re.S | re.M)]


def doc_script(*needles: str) -> str:
    """The one bash block of docs/cluster.md that contains every needle (fails if not exactly one)."""
    blocks = [block for block in bash_blocks(DOCS.read_text()) if all(needle in block for needle in needles)]
    assert len(blocks) == 1, f"docs/cluster.md has {len(blocks)} bash blocks with {needles}"
    return blocks[0]


def adapt(script: str, replacements: dict[str, str], *, append: str = "") -> str:
    """The docs' script for a test: GPU lines dropped, each ``old`` replaced (it must be there),
    ``append`` added to the conceptforge command (the script's last line)."""
    lines = [line for line in script.splitlines() if not re.search(r"--gres|gpu", line, flags=re.I)]
    text = "\n".join(lines) + "\n"
    for old, new in replacements.items():
        assert old in text, f"{old!r} is no longer in the docs' script:\n{script}"
        text = text.replace(old, new)
    if append:
        text = text.rstrip("\n") + f" {append}\n"
    return text
