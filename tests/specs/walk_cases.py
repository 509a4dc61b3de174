"""The walk tests' tables of bad specs, kept as data (``walk_<method>_cases.yaml`` beside this file).

Why data: each case is one mistake (a good spec with one edit, or files and a command line) and
what its refusal must say; written as YAML the table reads as the list of mistakes it is, and the
walks that edit a good spec apply the edits one way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent


def read_cases(method: str) -> list[dict[str, Any]]:
    """The cases of ``walk_<method>_cases.yaml``, in file order."""
    return yaml.safe_load((HERE / f"walk_{method}_cases.yaml").read_text(encoding="utf-8"))


def edited(text: str, case: dict[str, Any]) -> str:
    """``text`` with the case's ``replace`` pairs applied in order (each old text must be there, or
    the case would silently test the good spec) and its ``append`` added."""
    for old, new in case.get("replace", ()):
        assert old in text, (case, old)
        text = text.replace(old, new)
    return text + case.get("append", "")
