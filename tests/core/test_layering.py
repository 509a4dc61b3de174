"""Import layering of the installed package, read from the source with ``ast`` (nothing is imported).

The direction is command line -> loaders -> filters -> generators -> cards -> core
(``conceptforge/*.py``): a module may import its own layer and the layers below it, never one
above, no two sub-packages may import each other (directly or round a loop), and no two modules
may either (a lazy import that closes a loop is still a loop: it only hides it until run time).
Imports inside functions count too: a lazy import still ties the packages together. ``conceptforge.testing``
(tiny models, the local Hub server) sits beside the command line: tests and benchmarks use it,
the library never does. Benchmarks import only the installed package: no ``tests`` imports and no
``sys.path`` edits.
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAYERS = ["core", "cards", "generators", "filters", "loaders", "commands"]  # bottom to top
RANK = {name: rank for rank, name in enumerate(LAYERS)}


def package_dirs() -> dict[str, Path]:
    """Import package -> source folder, from pyproject's setuptools mapping (what gets installed)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    mapping = config["package-dir"]
    return {package: REPO / mapping[package] for package in mapping}


def library_modules() -> dict[str, Path]:
    """Every module of the installed package, by dotted name."""
    modules: dict[str, Path] = {}
    roots = package_dirs()
    for package, folder in roots.items():
        for path in sorted(folder.rglob("*.py")):
            relative = path.relative_to(folder).with_suffix("").parts
            parts = [p for p in relative if p != "__init__"]
            modules[".".join([package, *parts])] = path
    return modules


def layer_of(module: str) -> str | None:
    """The layer of ``conceptforge.*`` module ``module`` (None outside the package)."""
    parts = module.split(".")
    if parts[0] != "conceptforge":
        return None
    if len(parts) == 1:
        return "core"
    second = parts[1]
    if second == "testing":
        return "testing"
    if second in ("commands", "__main__", "cli") or parts[-1] == "cli" or parts[-1].endswith("_cli"):
        return "commands"  # command-line modules, wherever they still live, belong to the top layer
    return second if second in RANK else "core"


def sub_package(module: str, modules: dict[str, Path]) -> str:
    """The package that holds ``module`` (a package is its own holder)."""
    path = modules.get(module)
    if path is not None and path.name == "__init__.py":
        return module
    return module.rsplit(".", 1)[0] if "." in module else module


def imports_of(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, in functions too."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # ``from conceptforge import cards`` imports the sub-package cards
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names if alias.name != "*"]
    return found


def resolve(target: str, modules: dict[str, Path]) -> str | None:
    """The longest known module that ``target`` names (``pkg.mod.attr`` -> ``pkg.mod``)."""
    parts = target.split(".")
    while parts:
        name = ".".join(parts)
        if name in modules:
            return name
        parts.pop()
    return None


def import_edges() -> list[tuple[str, int, str]]:
    modules = library_modules()
    edges = []
    for module, path in modules.items():
        for line, target in imports_of(module, path):
            resolved = resolve(target, modules)
            if resolved is not None and resolved != module and resolved != "conceptforge":
                edges.append((module, line, resolved))
    return edges


def test_package_modules_found():
    modules = library_modules()
    # the check is only as good as its view of the package: every mapped folder is read
    for package in package_dirs():
        assert package in modules or any(m.startswith(package + ".") for m in modules), package
    assert "conceptforge.loaders.compmap.cub_arrays" in modules and "conceptforge.cub" in modules
    assert not any(m.startswith(("conceptforge.generators.generators", "conceptforge.conceptforge")) for m in modules)


def test_no_upward_imports():
    modules = library_modules()
    problems = []
    for module, line, target in import_edges():
        source, destination = layer_of(module), layer_of(target)
        where = f"{modules[module].relative_to(REPO)}:{line}: {module} imports {target}"
        if destination == "testing" and source != "testing":
            problems.append(f"{where} (the library must not import the testing package)")
        elif source in RANK and destination in RANK and RANK[destination] > RANK[source]:
            problems.append(
                f"{where} ({source} may not import {destination}: order is {' -> '.join(reversed(LAYERS))})"
            )
    assert not problems, "upward imports:\n" + "\n".join(problems)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_no_cycles_between_sub_packages():
    modules = library_modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for module, _, target in import_edges():
        source, destination = sub_package(module, modules), sub_package(target, modules)
        # a package's own ``__init__`` re-exporting its modules is not a dependency between packages
        if source != destination and not destination.startswith(source + "."):
            graph[source].add(destination)
    assert _cycles(graph) == []


def module_graph() -> dict[str, set[str]]:
    """Module -> the library modules it imports (every import, those inside functions too)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for module, _, target in import_edges():
        graph[module].add(target)
    return graph


def test_no_cycles_between_modules():
    cycles = _cycles(module_graph())
    assert cycles == [], "import cycles between modules:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_cycle_finder_and_layers_catch_what_they_should():
    # the checks above must be able to fail: a loop and an upward edge are reported
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    assert layer_of("conceptforge.cards.card") == "cards" and layer_of("conceptforge.engine.store") == "core"
    assert layer_of("conceptforge.loaders.sub_cli") == "commands"
    assert RANK[layer_of("conceptforge.loaders.sub.protocol")] > RANK[layer_of("conceptforge.filters.vqa.scorer")]


@pytest.mark.parametrize("path", sorted((REPO / "benchmarks").glob("*.py")), ids=lambda p: p.name)
def test_benchmarks_use_only_the_installed_package(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            problems += [
                f"line {node.lineno}: import {a.name}"
                for a in node.names
                if a.name.split(".")[0] in ("tests", "generators", "filters", "cards", "loaders")
            ]
        elif isinstance(node, ast.ImportFrom) and (
            node.level or (node.module or "").split(".")[0] in ("tests", "generators", "filters", "cards", "loaders")
        ):
            problems.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import ...")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "path"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ):
            problems.append(f"line {node.lineno}: uses sys.path")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "PYTHONPATH" in node.value:
            problems.append(f"line {node.lineno}: sets PYTHONPATH")
    assert not problems, f"{path.name}: " + "; ".join(problems)
