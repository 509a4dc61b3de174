"""A package's public names, each imported on its first use (PEP 562).

Why: a benchmark package gathers light names (its spec, its planning) and heavy ones (model code
importing torch, card code importing ``datasets``) under one import path. Imported eagerly, a
``conceptforge spec check`` or a ``--dry-run`` on a login node paid 1–2 s of torch for a YAML
file. With :func:`lazy_exports` the package's ``__init__`` names where each export lives and
imports nothing until a name is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Mapping
from typing import Any


def lazy_exports(
    package: str,
    exports: Mapping[str, str],
    *,
    optional: Collection[str] = (),
    install_hint: str = "pip install conceptforge",
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps each public name to the module
    that defines it (a relative name is ``package``'s own module). A module in ``optional`` may
    need ``datasets``/``pyarrow``, which an image made for one job can lack on purpose; asking it
    for a name then says what is missing, as a :class:`~conceptforge.errors.DependencyMissingError`.
    """
    namespace: dict[str, Any] = {}

    def __getattr__(name: str) -> Any:
        if name in namespace:
            return namespace[name]
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            module = importlib.import_module(where, package)
        except ImportError as error:
            if where not in optional or error.name not in ("datasets", "pyarrow"):
                raise
            from conceptforge.errors import DependencyMissingError

            raise DependencyMissingError(f"{package}.{name} needs {error.name!r}: {install_hint}") from None
        namespace[name] = getattr(module, name)
        return namespace[name]

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
