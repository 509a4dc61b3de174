"""The built-in presets: the papers' benchmarks (and small demos) as spec files shipped in the package."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from conceptforge.errors import InvalidArgumentError


def _folder() -> Path:
    return Path(str(resources.files("conceptforge.specs").joinpath("presets")))


def preset_names(method: str | None = None) -> list[str]:
    """The presets shipped (of one method when given): file stems, e.g. ``sub-cub-paper``."""
    names = sorted(path.stem for path in _folder().glob("*.yaml"))
    if method is None:
        return names
    return [name for name in names if name.split("-", 1)[0] == method]


def preset_path(name: str, *, method: str | None = None) -> Path:
    """The spec file of a built-in preset; one line naming the known presets otherwise."""
    path = _folder() / f"{name}.yaml"
    known = preset_names(method)
    if not path.is_file() or (method is not None and name not in known):
        raise InvalidArgumentError(
            f"--preset: unknown preset {name!r}; choose one of {', '.join(known) or '(none)'} or give --spec FILE"
        )
    return path
