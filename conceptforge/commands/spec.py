"""``conceptforge spec``: check a benchmark spec, print or write a method's JSON Schema, list the presets.

    conceptforge spec check FILE | --preset NAME   validate; print method, name, sha256 and a summary
    conceptforge spec schema METHOD [--write]      the JSON Schema editors use (--write: the shipped file)
    conceptforge spec presets [--method METHOD]    the built-in presets with their descriptions

Why a command of its own: a researcher writes a spec by hand and wants to know it is right before
any model loads; ``spec check`` reads exactly what ``generate … --spec`` reads (the same loader, the
same dataclass) and nothing else. See docs/own-benchmark.md.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from conceptforge import argtypes as at
from conceptforge.commands.base import add_verbose
from conceptforge.specs import METHODS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="spec_action", required=True, metavar="{check,schema,presets}")
    check = actions.add_parser("check", help="validate a spec file (or a preset) and summarise it")
    check.add_argument("file", nargs="?", type=at.existing_file, help="the spec file (.yaml, .yml or .json)")
    check.add_argument("--preset", default=None, help="check a built-in preset instead (conceptforge spec presets)")
    check.add_check(_file_or_preset)
    schema = actions.add_parser("schema", help="print a method's JSON Schema (--write: update the shipped file)")
    schema.add_argument("method", choices=METHODS, help="the method whose spec schema to print")
    schema.add_argument(
        "--write", action="store_true", help="write conceptforge/specs/schemas/METHOD.schema.json instead of printing"
    )
    presets = actions.add_parser("presets", help="list the built-in presets (the papers' benchmarks)")
    presets.add_argument("--method", choices=METHODS, default=None, help="only this method's presets")
    for sub in (check, schema, presets):
        add_verbose(sub)


def _file_or_preset(args: argparse.Namespace) -> None:
    from conceptforge.errors import InvalidArgumentError

    if (args.file is None) == (args.preset is None):
        raise InvalidArgumentError("conceptforge spec check: give a spec FILE or --preset NAME (one of them)")


def run(args: argparse.Namespace) -> int:
    return {"check": _check, "schema": _schema, "presets": _presets}[args.spec_action](args)


def load_any_spec(file: Path | None = None, *, preset: str | None = None) -> Any:
    """A spec of whichever method it names, validated by that method's dataclass."""
    from conceptforge.commands.spec_methods import spec_class
    from conceptforge.specs import load_benchmark_spec, preset_path, read_spec_file
    from conceptforge.specs.loading import check_envelope

    path = preset_path(preset) if preset is not None else Path(file)
    source = f"preset {preset}" if preset is not None else str(path)
    method = check_envelope(read_spec_file(path), method=None, source=source)[0]
    cls = spec_class(method)
    if preset is not None:
        return load_benchmark_spec(preset=preset, method=method, spec_cls=cls)
    return load_benchmark_spec(path, method=method, spec_cls=cls)


def _check(args: argparse.Namespace) -> int:
    from conceptforge.commands.spec_methods import resolve_spec_files

    loaded = load_any_spec(args.file, preset=args.preset)
    resolve_spec_files(loaded)
    print(f"ok: {loaded.method} spec {loaded.name!r} (spec_version {loaded.spec_version})")
    print(f"  file: {loaded.path}")
    print(f"  sha256: {loaded.sha256}")
    if loaded.description:
        print(f"  description: {' '.join(loaded.description.split())}")
    for line in summary_lines(loaded.spec):
        print(f"  {line}")
    from conceptforge.commands.spec_methods import RUN_COMMANDS

    print(f"next: {RUN_COMMANDS[loaded.method]} --spec {loaded.path} --dry-run")
    return 0


def summary_lines(spec: Any) -> list[str]:
    """One line per top-level field: a value, a count with the first names, or a source's description."""
    if not dataclasses.is_dataclass(spec):
        return []
    return [f"{field.name}: {_describe(getattr(spec, field.name))}" for field in dataclasses.fields(spec)]


def _name_of(item: Any) -> str | None:
    if isinstance(item, (str, int, float)):
        return str(item)
    name = getattr(item, "name", None)
    return name if isinstance(name, str) else None


def _describe(value: Any, *, shown: int = 8) -> str:
    if dataclasses.is_dataclass(value):
        description = getattr(value, "description", None)
        if isinstance(description, str):
            return description
        set_fields = [f.name for f in dataclasses.fields(value) if getattr(value, f.name) not in (None, (), {}, "")]
        return f"{{{', '.join(set_fields)}}}"
    if isinstance(value, (tuple, list, dict)):
        names = [str(key) for key in value] if isinstance(value, dict) else [_name_of(item) for item in value]
        named = [name for name in names if name is not None]
        head = f"{len(value)} {'entry' if len(value) == 1 else 'entries'}"
        if named:
            more = ", …" if len(named) > shown else ""
            head += f" ({', '.join(named[:shown])}{more})"
        return head
    return repr(value)


def _schema(args: argparse.Namespace) -> int:
    from conceptforge.commands.spec_methods import spec_class
    from conceptforge.serialization import atomic_write_bytes
    from conceptforge.specs.schema import schema_text, shipped_schema_path

    text = schema_text(args.method, spec_class(args.method))
    if not args.write:
        print(text, end="")
        return 0
    path = shipped_schema_path(args.method)
    atomic_write_bytes(path, text.encode("utf-8"))
    print(f"wrote {path}")
    return 0


def _presets(args: argparse.Namespace) -> int:
    from conceptforge.specs import preset_names, preset_path, read_spec_file

    names = preset_names(args.method)
    if not names:
        print(f"no presets shipped{' for ' + args.method if args.method else ''}")
        return 0
    width = max(len(name) for name in names)
    for name in names:
        raw = read_spec_file(preset_path(name))
        description = " ".join(str(raw.get("description", "")).split()) or "(no description)"
        print(f"{name:<{width}}  {description}")
    return 0
