"""Which spec dataclass and which starter each method has, as ``module:name`` strings.

Why strings, imported lazily: ``conceptforge spec`` and ``conceptforge init`` must start fast and
must not import every method's stage (torch, diffusers) to check one file. Why here, in the
commands layer: the four methods' packages sit in three layers (``generators``, ``loaders``); only
the top layer may import them all. A method whose module is not in this conceptforge is said in
one line (each method's package declares its own spec; see docs/own-benchmark.md).
"""

from __future__ import annotations

import importlib
from typing import Any

from conceptforge.errors import DependencyMissingError, InvalidArgumentError
from conceptforge.specs import METHODS

#: method -> ``module:Class`` of its spec dataclass (issue 46's contract between the methods).
SPEC_CLASSES: dict[str, str] = {
    "sub": "conceptforge.generators.sub.benchmark:SubBenchmarkSpec",
    "conceptbed": "conceptforge.generators.conceptbed.benchmark:ConceptBedBenchmarkSpec",
    "binding": "conceptforge.generators.binding.benchmark:BindingBenchmarkSpec",
    "compmap": "conceptforge.loaders.compmap.benchmark:CompMapBenchmarkSpec",
}

#: method -> ``module:function`` of its starter: ``starter_spec(source, *, name) -> YAML text``.
STARTERS: dict[str, str] = {
    method: target.split(":", 1)[0].rsplit(".", 1)[0] + ".starter:starter_spec"
    for method, target in SPEC_CLASSES.items()
}

#: method -> ``module:function`` that resolves a loaded spec against the files it names
#: (``resolve(spec_file)``; one line naming the field when one is missing or wrong), for methods
#: whose spec points at files the dataclass cannot see: binding's shape and material ``.blend``
#: files. ``spec check`` calls it, so it refuses what ``generate --spec`` would refuse.
RESOLVERS: dict[str, str] = {
    "binding": "conceptforge.generators.binding.benchmark:spec_vocabulary",
}

#: method -> the command that makes its benchmark from ``--spec FILE`` (CompMap evaluates directly:
#: it has no generation step), for the "next:" lines of ``spec check`` and ``init``.
RUN_COMMANDS: dict[str, str] = {
    "sub": "conceptforge generate sub",
    "conceptbed": "conceptforge generate conceptbed",
    "binding": "conceptforge generate binding",
    "compmap": "conceptforge evaluate compmap",
}


def _import(target: str, *, method: str, what: str) -> Any:
    module_name, attribute = target.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        # Only the method's own module being absent is "not here yet"; a dependency missing
        # inside it is a real problem with its own message.
        if error.name is None or not module_name.startswith(error.name):
            raise
        raise DependencyMissingError(
            f"this conceptforge has no {what} for method {method!r} yet ({module_name} is not installed); "
            "update conceptforge"
        ) from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise DependencyMissingError(
            f"this conceptforge has no {what} for method {method!r} yet ({target} is missing); update conceptforge"
        ) from None


def known_method(method: Any, *, flag: str = "METHOD") -> str:
    """``method`` when it is one of the four; one line naming them otherwise."""
    if not isinstance(method, str) or method not in METHODS:
        raise InvalidArgumentError(f"{flag}: unknown method {method!r}; choose one of {', '.join(METHODS)}")
    return method


def spec_class(method: str) -> type:
    """The dataclass that validates ``method``'s spec fields."""
    return _import(SPEC_CLASSES[known_method(method)], method=method, what="benchmark spec")


def starter(method: str) -> Any:
    """``method``'s ``starter_spec(source, *, name) -> str``."""
    return _import(STARTERS[known_method(method)], method=method, what="starter (conceptforge init)")


def resolve_spec_files(spec_file: Any) -> None:
    """Resolve a loaded spec's files with its method's resolver, where the method has one."""
    target = RESOLVERS.get(spec_file.method)
    if target is not None:
        _import(target, method=spec_file.method, what="spec resolver")(spec_file)
