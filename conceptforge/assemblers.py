"""Assemblers as objects: how a finished run becomes a dataset, under a stable, stored name.

Why a registry of objects and not the bare function: a run may be finished by another process
and another machine (``conceptforge assemble OUT``) that has only the store, so the store keeps
the assembler's *name*; the name must outlive refactors of the module that defines the function.
A stage hands the engine an :class:`Assembler` (name + function); the engine stores the name, and
:func:`find_assembler` gets the object back from it. Names of the package's stages keep the
``"module:function"`` form they were first stored under (existing ``run.json`` and
``assembly.json`` files stay valid): the part before ``:`` says which module registers the
assembler, so the core finds it without importing any stage package itself (imports go one way).

Two kinds: a run assembler (``Assembler``: one store -> one staging folder) and a repo assembler
(``RepoAssembler``: a folder that holds several runs, e.g. the binding repo with one run per
config, finished together with whatever they share).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from conceptforge.errors import InvalidArgumentError

if TYPE_CHECKING:
    from conceptforge.assembly import AssemblyOutcome
    from conceptforge.store import ItemStore


class AssembleFunction(Protocol):
    def __call__(self, store: ItemStore, staging: Path, args: Mapping[str, Any], /) -> None: ...


class AssembleRepoFunction(Protocol):
    def __call__(
        self, out: str | os.PathLike[str], *, force: bool = False, wait: float = 600.0, allow_failed: bool = False
    ) -> AssemblyOutcome: ...


@dataclass(frozen=True)
class Assembler:
    """A run's assembler: ``assemble(store, staging_dir, args)`` writes the dataset into
    ``staging_dir`` from the complete ``store`` and the stage's JSON ``assembly_args``."""

    name: str
    assemble: AssembleFunction


@dataclass(frozen=True)
class RepoAssembler:
    """A folder of several runs (``.work/<name>/`` each): ``assemble(out, force=, wait=, allow_failed=)``
    assembles every finished run and whatever they share, each step exactly once."""

    name: str
    assemble: AssembleRepoFunction


_REGISTRY: dict[str, Assembler | RepoAssembler] = {}


def register_assembler(name: str, function: Callable[..., Any], *, repo: bool = False) -> Assembler | RepoAssembler:
    """Register ``function`` under the stable ``name`` (once per name) and return its object."""
    kind = RepoAssembler if repo else Assembler
    known = _REGISTRY.get(name)
    if known is not None:
        if known.assemble is not function or not isinstance(known, kind):
            raise ValueError(f"assembler name {name!r} is already registered for {known.assemble!r}")
        return known
    assembler = kind(name, function)
    _REGISTRY[name] = assembler
    return assembler


def find_assembler(name: str) -> Assembler | RepoAssembler:
    """The assembler stored as ``name``: registered, or registered by importing the module the
    name starts with (``"module:function"``); a module that only defines the function (stages
    outside the package, e.g. tests and benchmarks) works too."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    module_name, _, function = name.partition(":")
    try:
        module = importlib.import_module(module_name)
        if name in _REGISTRY:
            return _REGISTRY[name]
        found = getattr(module, function)
    except (ImportError, AttributeError, ValueError) as error:
        raise InvalidArgumentError(f"cannot load the assembler {name!r} of this run: {error}") from None
    if isinstance(found, (Assembler, RepoAssembler)):
        return found
    return Assembler(name, found)
