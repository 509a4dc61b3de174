"""The JSON Schema of each method's spec: derived from its dataclass, shipped for editors.

``conceptforge/specs/schemas/<method>.schema.json`` is written by ``conceptforge spec schema
METHOD --write`` (and a test checks the shipped files equal what the code derives, so they cannot drift). A YAML spec
points at it with ``# yaml-language-server: $schema=…``; a JSON spec with ``"$schema"``.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from conceptforge.specs.loading import SPEC_VERSION
from conceptforge.specs.validation import json_schema_of

SCHEMA_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def method_schema(method: str, spec_cls: type) -> dict[str, Any]:
    """The method's fields plus the common envelope (method, spec_version, name, description)."""
    schema = json_schema_of(spec_cls)
    properties = {
        "$schema": {"type": "string", "description": "where editors find this schema (ignored)"},
        "method": {"const": method, "description": "which method this benchmark uses"},
        "spec_version": {"type": "integer", "minimum": 1, "maximum": SPEC_VERSION},
        "name": {"type": "string", "minLength": 1, "description": "the benchmark's name"},
        "description": {"type": "string"},
        **schema.get("properties", {}),
    }
    required = ["method", "spec_version", "name", *schema.get("required", [])]
    return {
        "$schema": SCHEMA_DRAFT,
        "$id": f"https://conceptforge.dev/schemas/{method}.schema.json",
        "title": f"conceptforge {method} benchmark spec (version {SPEC_VERSION})",
        **{key: value for key, value in schema.items() if key not in ("properties", "required", "title")},
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def schema_text(method: str, spec_cls: type) -> str:
    return json.dumps(method_schema(method, spec_cls), indent=2, sort_keys=True) + "\n"


def shipped_schema_path(method: str) -> Path:
    return Path(str(resources.files("conceptforge.specs").joinpath("schemas", f"{method}.schema.json")))
