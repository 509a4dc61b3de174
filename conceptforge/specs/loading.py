"""Loading a benchmark spec: the common envelope, then the method's own fields.

Every spec file has the same envelope::

    method: sub                  # sub | conceptbed | binding | compmap
    spec_version: 1              # the version of the spec format it was written for
    name: my-cars                # the benchmark's name (cards, release names)
    description: ...             # optional, one paragraph for the card
    ... the method's fields ...

``$schema`` may be present (editors use it to find the JSON Schema) and is ignored.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conceptforge.specs.files import read_spec_file
from conceptforge.specs.presets import preset_path
from conceptforge.specs.validation import parse_fields, spec_error

SPEC_VERSION = 1
METHODS = ("sub", "conceptbed", "binding", "compmap")  # each method's package declares its spec dataclass
ENVELOPE_FIELDS = ("method", "spec_version", "name", "description", "$schema")


@dataclass(frozen=True)
class BenchmarkSpecFile:
    """A validated spec: the envelope, the method's dataclass, and where it came from."""

    method: str
    spec_version: int
    name: str
    description: str
    spec: Any  # the method's dataclass instance
    path: Path | None  # the file read (a preset's file for --preset)
    base_dir: Path  # relative paths inside the spec resolve against this folder
    raw: dict[str, Any] = field(repr=False, default_factory=dict)  # the file's mapping, as read
    preset: str | None = None

    @property
    def sha256(self) -> str:
        """A fingerprint of the spec's content (canonical JSON), for cards and resume checks."""
        text = json.dumps(self.raw, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_benchmark_spec(
    spec_file: str | Path | None = None, *, preset: str | None = None, method: str, spec_cls: type
) -> BenchmarkSpecFile:
    """Read and validate a spec file (or a built-in preset) of ``method``, whose fields are ``spec_cls``.

    Another method's spec is refused naming the command that reads it. ``spec_cls`` is a dataclass
    with ``__pydantic_config__ = ConfigDict(extra="forbid")``; its optional ``check(source=...)``
    method applies the cross-field rules and raises :func:`spec_error`.
    """
    if (spec_file is None) == (preset is None):
        raise ValueError("give exactly one of spec_file and preset")
    path = preset_path(preset, method=method) if preset is not None else Path(spec_file)
    source = f"preset {preset}" if preset is not None else str(path)
    raw = read_spec_file(path)
    given_method, version, name, description = check_envelope(raw, method=method, source=source)
    fields = {key: value for key, value in raw.items() if key not in ENVELOPE_FIELDS}
    spec = parse_fields(spec_cls, fields, source=source)
    check = getattr(spec, "check", None)
    if callable(check):
        check(source=source)  # cross-field rules; raises spec_error(...)
    return BenchmarkSpecFile(
        method=given_method,
        spec_version=version,
        name=name,
        description=description,
        spec=spec,
        path=path,
        base_dir=path.resolve().parent,
        raw=raw,
        preset=preset,
    )


def check_envelope(raw: dict[str, Any], *, method: str | None, source: str) -> tuple[str, int, str, str]:
    """``(method, spec_version, name, description)`` of a spec's mapping; one line for a bad one.

    ``method=None`` accepts any of the four (``conceptforge spec check`` learns the method here,
    before importing that method's package, so an envelope error costs no import of torch).
    """
    given_method = raw.get("method")
    if given_method is None:
        add = f"'method: {method}'" if method else f"'method: ' and one of {', '.join(METHODS)}"
        raise spec_error("method", f"is required; add {add}", source=source)
    if not isinstance(given_method, str) or given_method not in METHODS:
        raise spec_error(
            "method", f"unknown method {given_method!r}; choose one of {', '.join(METHODS)}", source=source
        )
    if method is not None and given_method != method:
        raise spec_error(
            "method",
            f"this is a {given_method} spec, not a {method} spec; use 'conceptforge generate {given_method}'",
            source=source,
        )
    version = raw.get("spec_version")
    if version is None:
        raise spec_error("spec_version", f"is required; add 'spec_version: {SPEC_VERSION}'", source=source)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise spec_error("spec_version", f"must be a positive integer (got {version!r})", source=source)
    if version > SPEC_VERSION:
        raise spec_error(
            "spec_version",
            f"{version} is newer than this conceptforge reads ({SPEC_VERSION}); upgrade conceptforge",
            source=source,
        )
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise spec_error("name", "is required: the benchmark's name, e.g. 'name: my-cars'", source=source)
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise spec_error("description", "must be text", source=source)
    return given_method, version, name.strip(), description
