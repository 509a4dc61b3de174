"""Reading a spec file: YAML or JSON by its suffix, one line for a file that does not parse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from conceptforge.errors import DataNotFoundError, SpecError

SPEC_SUFFIXES = (".yaml", ".yml", ".json")


def read_spec_file(path: str | Path) -> dict[str, Any]:
    """The mapping a spec file holds; YAML and JSON alike (JSON is YAML, but its errors read better)."""
    path = Path(path)
    if not path.exists():
        raise DataNotFoundError(f"{path}: no such spec file; give the path of a .yaml or .json spec, or --preset NAME")
    if path.is_dir():
        raise SpecError(f"{path}: is a folder, not a spec file; give the path of a .yaml or .json spec")
    if path.suffix.lower() not in SPEC_SUFFIXES:
        raise SpecError(f"{path}: a spec file ends in .yaml, .yml or .json; rename it or give the right file")
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM (Windows editors) is not content
    except UnicodeDecodeError:
        raise SpecError(f"{path}: is not UTF-8 text; save the spec as UTF-8") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as error:
        raise SpecError(f"{path}: line {error.lineno}: not valid JSON ({error.msg})") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or "cannot be parsed"
        raise SpecError(f"{path}: {where}not valid YAML ({problem})") from None
    if data is None:
        raise SpecError(f"{path}: is empty; a spec starts with 'method: sub|conceptbed|binding|compmap'")
    if not isinstance(data, dict):
        raise SpecError(
            f"{path}: holds a {type(data).__name__}, not a mapping of fields; a spec starts with 'method: …'"
        )
    return data
