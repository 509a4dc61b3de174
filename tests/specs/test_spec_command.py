"""``conceptforge spec`` and ``conceptforge init``: the parts every method shares.

Every method's spec class and starter is checked through the contract's map (a missing or
misspelt one fails); the methods' own tests live beside them in tests/specs. What does
not depend on a method (the summary, the schema's envelope, init's source and name rules, the
presets listing) is checked on a toy spec and on the files themselves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conceptforge.commands import main
from conceptforge.commands.init import check_source, default_name
from conceptforge.commands.spec import summary_lines
from conceptforge.commands.spec_methods import SPEC_CLASSES, STARTERS, spec_class, starter
from conceptforge.errors import DataNotFoundError, InvalidArgumentError
from conceptforge.specs import METHODS, DatasetSource, load_benchmark_spec, preset_names, preset_path, read_spec_file
from conceptforge.specs.schema import method_schema, schema_text, shipped_schema_path
from tests.specs.test_spec_core import GOOD, ToyAttribute, ToyGroup, ToySpec


def importable_spec_class(method: str) -> type:
    """Every method's spec class is in this checkout (all four are merged: a missing one fails)."""
    return spec_class(method)


def test_the_map_follows_the_contract():
    """The four methods, each a ``module:Class`` in the method's package; the starter beside it."""
    assert tuple(SPEC_CLASSES) == METHODS
    for method, target in SPEC_CLASSES.items():
        module, name = target.split(":")
        assert module.endswith(".benchmark") and f".{method}." in module and name.endswith("BenchmarkSpec")
        assert STARTERS[method] == module.removesuffix(".benchmark") + ".starter:starter_spec"


def test_an_unknown_method_is_one_line():
    with pytest.raises(InvalidArgumentError, match=r"METHOD: unknown method 'cars'; choose one of sub, conceptbed"):
        spec_class("cars")
    with pytest.raises(InvalidArgumentError, match="unknown method"):
        starter("cars")


# --- spec check's summary ----------------------------------------------------------------------


def test_the_summary_says_each_field_by_hand():
    spec = ToySpec(
        source=DatasetSource(hub="org/cars", revision="v2"),
        groups=(ToyGroup("colour"), ToyGroup("shape")),
        attributes=tuple(ToyAttribute(f"a{i}", "colour") for i in range(10)),
        threshold=0.25,
    )
    assert summary_lines(spec) == [
        "source: org/cars@v2",
        "groups: 2 entries (colour, shape)",
        "attributes: 10 entries (a0, a1, a2, a3, a4, a5, a6, a7, …)",
        "threshold: 0.25",
        "mode: 'exact'",
    ]
    assert summary_lines({"not": "a dataclass"}) == []


# --- the JSON Schema ---------------------------------------------------------------------------


def test_the_schema_has_the_envelope_and_the_method_fields_and_checks_a_spec():
    jsonschema = pytest.importorskip("jsonschema", reason="an editor's check of the schema; pip install jsonschema")
    schema = method_schema("sub", ToySpec)
    assert schema["properties"]["method"] == {"const": "sub", "description": "which method this benchmark uses"}
    assert schema["required"][:3] == ["method", "spec_version", "name"]
    assert {"source", "groups", "attributes"} <= set(schema["required"])
    assert schema["additionalProperties"] is False
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert not list(validator.iter_errors(GOOD))
    bad = dict(GOOD, colour="red", spec_version=2)
    problems = sorted(error.message for error in validator.iter_errors(bad))
    assert any("'colour' was unexpected" in text for text in problems), problems
    assert any("2 is greater than the maximum of 1" in text for text in problems), problems
    nested = dict(GOOD, attributes=[{"name": "red", "group": "colour", "hue": 1}])
    assert list(validator.iter_errors(nested)), "a nested unknown field must be flagged by editors too"
    assert json.loads(schema_text("sub", ToySpec)) == schema


@pytest.mark.parametrize("method", METHODS)
def test_the_shipped_schema_is_what_the_code_derives(method):
    cls = importable_spec_class(method)
    path = shipped_schema_path(method)
    assert path.is_file(), f"write it: conceptforge spec schema {method} --write"
    assert path.read_text(encoding="utf-8") == schema_text(method, cls), (
        f"{path.name} is stale: conceptforge spec schema {method} --write"
    )


def test_no_stray_schema_files():
    folder = shipped_schema_path("sub").parent
    names = {path.name for path in folder.iterdir() if not path.name.startswith(".")}
    assert names <= {"README.md", *(f"{method}.schema.json" for method in METHODS)}


@pytest.mark.parametrize("method", METHODS)
def test_spec_schema_prints_the_shipped_schema(method, capsys):
    cls = importable_spec_class(method)
    assert main(["spec", "schema", method]) == 0
    assert capsys.readouterr().out == schema_text(method, cls)


# --- presets -----------------------------------------------------------------------------------


def test_spec_presets_lists_each_preset_with_its_description(capsys):
    assert main(["spec", "presets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = preset_names()
    if not names:
        assert lines == ["no presets shipped"]
        return
    assert [line.split()[0] for line in lines] == names
    for name, line in zip(names, lines, strict=True):
        description = " ".join(str(read_spec_file(preset_path(name)).get("description", "")).split())
        assert line.split(None, 1)[1] == (description or "(no description)")


@pytest.mark.parametrize("method", METHODS)
def test_spec_check_of_each_preset_prints_its_name_and_sha256(method, capsys):
    cls = importable_spec_class(method)
    names = preset_names(method)
    assert names, f"{method} has a spec class but no preset in conceptforge/specs/presets"
    for name in names:
        loaded = load_benchmark_spec(preset=name, method=method, spec_cls=cls)
        assert main(["spec", "check", "--preset", name]) == 0
        out = capsys.readouterr().out
        assert f"ok: {method} spec {loaded.name!r}" in out
        assert f"sha256: {loaded.sha256}" in out


# --- init: the parts that are not the method's -------------------------------------------------


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("someone/Stanford-Cars@v1.0.0", "stanford-cars"),
        ("data/my_cars/", "my-cars"),
        ("clevr/data/properties.json", "data"),
        ("/abs/Faces 2024", "faces-2024"),
        ("___", "benchmark"),
    ],
)
def test_the_default_name_comes_from_the_source(source, name):
    assert default_name(source) == name


def test_init_sources_a_pinned_hub_id_or_an_existing_path(tmp_path):
    check_source("someone/cars@v1.0.0")
    check_source("someone/cars@0123abcd")
    check_source(str(tmp_path))
    (tmp_path / "properties.json").write_text("{}")
    check_source(str(tmp_path / "properties.json"))
    with pytest.raises(InvalidArgumentError, match="needs its revision"):
        check_source("someone/cars")
    with pytest.raises(DataNotFoundError, match="no such file or folder"):
        check_source(str(tmp_path / "missing"))
    with pytest.raises(DataNotFoundError, match="no such file or folder"):
        check_source("not a repo@v1")
    with pytest.raises(InvalidArgumentError, match="is empty"):
        check_source("  ")


def test_every_method_has_its_spec_class_and_starter():
    """The contract's map resolves for all four methods (the map is strings: a typo fails here)."""
    for method in METHODS:
        assert callable(starter(method)), method
        assert spec_class(method).__name__.endswith("BenchmarkSpec"), method


def test_each_preset_is_named_after_its_method():
    for name in preset_names():
        method = name.split("-", 1)[0]
        assert method in METHODS, name
        assert read_spec_file(preset_path(name)).get("method") == method, name


def test_a_local_source_is_named_so_the_spec_finds_it(tmp_path, monkeypatch):
    """Relative when the spec is written here (portable with its folder), absolute elsewhere."""
    from conceptforge.commands.init import _source_for

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "specs").mkdir()
    assert _source_for("data", Path(".")) == "data"
    assert _source_for("data", tmp_path / "specs") == str(tmp_path / "data")
    assert _source_for("org/cars@v1", tmp_path / "specs") == "org/cars@v1"


@pytest.mark.parametrize("preset", preset_names())
def test_checking_a_preset_imports_neither_torch_nor_datasets(preset):
    """``spec check`` reads a YAML file and validates it: it must answer at once on a login node.
    Importing ``conceptforge.generators.sub`` used to import its FLUX model code (torch, 1.1 s)
    and its card (``datasets``, 0.5 s) for a spec check."""
    import subprocess
    import sys

    probe = (
        "import sys; from conceptforge.commands import main; rc = main(['spec', 'check', '--preset', sys.argv[1]]); "
        "heavy = sorted(m for m in ('torch', 'datasets', 'diffusers', 'transformers') if m in sys.modules); "
        "print('heavy:', heavy); sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", probe, preset], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "heavy: []", done.stdout[-2000:]
