"""Benchmarks are found, not listed: each stage folder holds one package per benchmark, and a
package takes part in a stage by holding a module of the stage's conventional name.

Why by convention: adding a benchmark used to mean editing central lists (the task registry, the
breakdowns switch, verify's rebuild adapters). Now ``loaders/<benchmark>/tasks.py`` declares its
tasks (with their breakdowns) and ``generators/<benchmark>/rebuild.py`` how verify rebuilds its
items; the harness and verify find them here, as lighteval finds its task files. A benchmark
shipped outside this repository joins the same way by extending the stage package's ``__path__``.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from types import ModuleType


def benchmark_modules(package: str, module: str) -> list[ModuleType]:
    """``package.<benchmark>.module`` for every benchmark package of ``package`` that has one,
    imported, in the order of the benchmark names (so listings are stable)."""
    root = importlib.import_module(package)
    found: list[ModuleType] = []
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda info: info.name):
        if not info.ispkg:
            continue
        name = f"{package}.{info.name}.{module}"
        if importlib.util.find_spec(name) is None:
            continue
        found.append(importlib.import_module(name))
    return found
