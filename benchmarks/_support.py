"""Test fixtures the benchmarks need (tiny models, the local Hub server), from one place.

They come from ``conceptforge.testing`` once it exists (helper ``layers`` is moving the tiny
model builders and the Hub-compatible server there). Until then they are loaded by file path
from ``tests/`` without editing ``sys.path``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def _from_tests(name: str, relative: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / relative)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def testing_module(new_name: str, old_name: str, relative: str) -> ModuleType:
    """``conceptforge.testing.<new_name>`` if installed, else ``tests/<relative>``."""
    try:
        return importlib.import_module(f"conceptforge.testing.{new_name}")
    except ImportError:
        return _from_tests(old_name, relative)


def hub_server() -> ModuleType:
    return testing_module("hub_server", "hub_server", "tests/publish/hub_server.py")


def tiny_llava_builder():
    return testing_module("tiny_models", "filters_tiny_models", "tests/filters/filters_tiny_models.py").build_tiny_llava
