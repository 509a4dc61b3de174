"""Issue 20.1: a user's folder given as --out. Every stage must refuse it and change nothing."""

from __future__ import annotations

from pathlib import Path

FILES = {
    "README.md": b"# my project\n",
    "grid.png": b"\x89PNG not ours",
    "data/notes.txt": b"keep me\n",
    "train.py": b"print('mine')\n",
}


def make_foreign_folder(path: Path) -> dict:
    for name, data in FILES.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    return snapshot(path)


def snapshot(path: Path) -> dict:
    return {
        str(p.relative_to(path)): (p.read_bytes(), p.stat().st_mtime_ns) if p.is_file() else "dir"
        for p in sorted(path.rglob("*"))
    }


def assert_refused_untouched(path: Path, before: dict, code: int, stderr: str) -> None:
    assert code == 2, stderr[-2000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: --out") and "not a conceptforge run" in last, stderr[-2000:]
    assert snapshot(path) == before  # no file changed, none added, none deleted
