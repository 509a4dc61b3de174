"""The declared dependencies: what the code imports, and caps only where bpy needs them (issue 19)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
LIBRARY = ["conceptforge", "generators", "filters", "cards", "loaders", "scripts"]
OPTIONAL_IMPORTS = {"httpx2"}  # tried inside try/except ImportError: the Hub client's own HTTP stack
PROVIDED_BY = {"mathutils": "bpy", "bpy_extras": "bpy"}  # Blender's modules, on sys.path once bpy is imported


def _project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower().replace("_", "-") for r in requirements}


def _third_party_imports(folders: list[str]) -> set[str]:
    found = set()
    for folder in folders:
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    found |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    local = {
        "conceptforge",
        "tests",
        "benchmarks",
        "filters_fixtures",
        "filters_tiny_models",
        "publish_helpers",
        "hub_server",
    }
    return {name for name in found - local - set(sys.stdlib_module_names) if not name.startswith("_")}


def _distributions(modules: set[str]) -> dict[str, set[str]]:
    mapping = packages_distributions()
    return {
        # not installed here (an optional extra): the distribution is named like the module
        module: {d.lower().replace("_", "-") for d in mapping.get(module, [module])}
        | ({PROVIDED_BY[module]} if module in PROVIDED_BY else set())
        for module in modules
    }


def test_every_library_import_is_declared():
    project = _project()
    declared = (
        _names(project["dependencies"])
        | _names(project["optional-dependencies"]["blender"])
        | _names(project["optional-dependencies"]["ray"])
        | _names(project["optional-dependencies"]["open_clip"])
        | _names(project["optional-dependencies"]["quantize"])
        | _names(project["optional-dependencies"]["serve"])
    )
    undeclared = {
        module: dists
        for module, dists in _distributions(_third_party_imports(LIBRARY) - OPTIONAL_IMPORTS).items()
        if not dists & declared
    }
    assert undeclared == {}, f"imported but not declared in pyproject.toml: {undeclared}"


def test_test_extra_holds_what_tests_import_and_nothing_else():
    project = _project()
    extras = project["optional-dependencies"]
    imported = _distributions(_third_party_imports(["tests", "benchmarks"]) - OPTIONAL_IMPORTS)
    declared = _names(project["dependencies"]) | _names(extras["blender"]) | _names(extras["test"])
    assert {m: d for m, d in imported.items() if not d & declared} == {}
    used = set().union(*imported.values())
    # pytest plugins (timeout; xdist: `make test` runs -n 2); a server started as a command; the linter `make test` runs as a command;
    # this project's own docs extra (conceptforge[docs]: tests/core/test_docs_site.py runs `mkdocs build`)
    extra = _names(extras["test"]) - {"pytest-timeout", "pytest-xdist", "moto", "ruff", "conceptforge"}
    assert extra - used == set(), "the test extra installs packages no test imports (e.g. olah)"


def _caps(requirements: list[str], name: str, environment: dict) -> list[Requirement]:
    return [
        r
        for r in map(Requirement, requirements)
        if r.name.lower() == name and (r.marker is None or r.marker.evaluate(environment))
    ]


@pytest.mark.parametrize("python", ["3.11", "3.12"])
def test_numpy_and_pyarrow_are_capped_only_with_blender(python):
    project = _project()
    environment = {**default_environment(), "python_version": python, "python_full_version": f"{python}.0"}
    for name, newest in (("numpy", "2.4.6"), ("pyarrow", "26.0.1")):
        for requirement in _caps(project["dependencies"], name, environment):
            assert requirement.specifier.contains(Version(newest)), (
                f"{requirement} keeps users without Blender off {name} {newest}"
            )
    blender = project["optional-dependencies"]["blender"]
    with_bpy = bool(_caps(blender, "bpy", environment))
    assert with_bpy == (python == "3.11")  # the last bpy wheel is for 3.11
    assert (
        not any(r.specifier.contains(Version("26.0.1")) for r in _caps(blender, "pyarrow", environment))
        if with_bpy
        else True
    )
    assert (
        not any(r.specifier.contains(Version("2.0")) for r in _caps(blender, "numpy", environment))
        if with_bpy
        else True
    )
    if not with_bpy:
        assert _caps(blender, "pyarrow", environment) == _caps(blender, "numpy", environment) == []


def _resolve(tmp_path: Path, target: str) -> dict[str, Version]:
    report = tmp_path / f"report-{len(list(tmp_path.iterdir()))}.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
            target,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return {
        item["metadata"]["name"].lower(): Version(item["metadata"]["version"])
        for item in json.loads(report.read_text())["install"]
    }


def _newest(name: str) -> Version:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", name], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return Version(result.stdout.split("(", 1)[1].split(")", 1)[0])


@pytest.mark.heavy
def test_real_resolve_gives_current_numpy_and_pyarrow_without_blender(tmp_path):
    """Asks the package index (no install): ``pip install .`` gets the newest numpy and pyarrow."""
    plain = _resolve(tmp_path, ".")
    assert plain["numpy"] == _newest("numpy") and plain["pyarrow"] == _newest("pyarrow")
    assert "bpy" not in plain
    if sys.version_info[:2] == (3, 11):
        blender = _resolve(tmp_path, ".[blender]")
        assert "bpy" in blender and blender["numpy"] < Version("2") and blender["pyarrow"] < Version("26")
