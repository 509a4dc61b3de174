"""Argument types that check a flag's value before any work starts.

Why: a value outside its domain (``--epochs 0``, ``--validation-fraction 1.5``, ``--ece-bins 0``)
used to be accepted and then trained on NaN, printed every ECE as 0, or failed after hours. Each
type here is what ``add_argument(type=...)`` takes: it converts the text, checks the domain and
otherwise raises :class:`argparse.ArgumentTypeError`, which the command line prints as one
``error: …`` line (exit 2) before anything is loaded or written.

Each type also knows a few values outside its domain (:meth:`ArgType.bad_examples`) and one inside
(:meth:`ArgType.good_example`), so the test that walks every flag of every sub-command
(tests/core/test_flag_walk.py) exercises a new flag without anyone listing it.

The device check (:func:`check_device`) is shared with library code: a ``--device cuda`` on a
machine without CUDA is one :class:`~conceptforge.errors.DeviceUnavailableError` line whether the
command line or a library caller asked for it.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conceptforge.errors import DeviceUnavailableError, InvalidArgumentError

__all__ = [
    "ArgType",
    "IntRange",
    "FloatRange",
    "PathType",
    "DeviceType",
    "Examples",
    "positive_int",
    "non_negative_int",
    "port",
    "seed",
    "positive_float",
    "seconds_measured",
    "non_negative_float",
    "finite_float",
    "unit_interval",
    "open_unit_interval",
    "fraction_below_one",
    "fraction_above_zero",
    "existing_dir",
    "existing_file",
    "existing_path",
    "output_file",
    "output_dir",
    "output_location",
    "existing_location",
    "rating",
    "device",
    "device_checked_in_run",
    "device_name",
    "check_device",
    "check_writable",
    "ListOf",
    "Resolution",
    "Template",
    "ByteSize",
    "HubLicense",
    "HubRepoId",
    "hub_license",
    "hub_repo_id",
    "Choice",
    "DType",
    "dtype",
    "DTYPES",
    "DTYPE_ALIASES",
    "SHORT_DTYPES",
    "IntList",
    "StrList",
    "Optional",
    "Flag",
    "Text",
    "ChoiceList",
    "ModelSource",
    "FunctionRef",
    "RelativeName",
    "flag",
    "model_source",
]


@dataclass(frozen=True)
class Examples:
    """Paths the flag walker offers the path types: a missing path, a file, a folder, …"""

    missing: str
    file: str
    folder: str
    under_file: str  # a path whose parent is a file: never creatable


class ArgType:
    """An ``add_argument(type=...)`` callable that can name values inside and outside its domain."""

    __name__ = "value"  # argparse names the type in some messages

    def __call__(self, text: str) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def good_example(self, paths: Examples) -> str:
        raise NotImplementedError

    def bad_examples(self, paths: Examples) -> list[str]:
        raise NotImplementedError


def _parse_number(kind: type, text: str) -> int | float:
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(
            f"expected {'an integer' if kind is int else 'a number'}, got {text!r}"
        ) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


class IntRange(ArgType):
    """An integer in ``[minimum, maximum]`` (either end open when None)."""

    def __init__(
        self,
        minimum: int | None = None,
        maximum: int | None = None,
        *,
        name: str = "integer",
        multiple_of: int = 1,
        why: str = "",
        bound_why: str = "",
    ) -> None:
        self.minimum, self.maximum, self.__name__ = minimum, maximum, name
        self.multiple_of, self.why, self.bound_why = multiple_of, why, bound_why

    def __call__(self, text: str) -> int:
        value = _parse_number(int, str(text).strip())
        if self.minimum is not None and value < self.minimum:
            raise argparse.ArgumentTypeError(f"must be >= {self.minimum}, got {value}")
        if self.maximum is not None and value > self.maximum:
            why = f" ({self.bound_why})" if self.bound_why else ""
            raise argparse.ArgumentTypeError(f"must be <= {self.maximum}{why}, got {value}")
        if value % self.multiple_of:
            lower = value - value % self.multiple_of
            nearest = (
                f"{lower} or {lower + self.multiple_of}" if lower >= (self.minimum or 0) else lower + self.multiple_of
            )
            raise argparse.ArgumentTypeError(
                f"must be a multiple of {self.multiple_of}{f' ({self.why})' if self.why else ''}, got {value}; "
                f"use {nearest}"
            )
        return value

    def good_example(self, paths: Examples) -> str:
        value = (
            self.minimum
            if self.minimum is not None and self.minimum > 0
            else 1
            if self.maximum is None or self.maximum >= 1
            else self.maximum
        )
        return str(-(-value // self.multiple_of) * self.multiple_of)

    def bad_examples(self, paths: Examples) -> list[str]:
        bad = ["abc", "1.5", ""]
        if self.minimum is not None:
            bad.append(str(self.minimum - 1))
        if self.maximum is not None:
            bad.append(str(self.maximum + 1))
        if self.multiple_of > 1:
            bad.append(str(int(self.good_example(paths)) + 1))
        return bad

    def __repr__(self) -> str:
        return self.__name__


class FloatRange(ArgType):
    """A finite float within bounds; each bound is inclusive or exclusive."""

    def __init__(
        self,
        minimum: float | None = None,
        maximum: float | None = None,
        *,
        min_inclusive: bool = True,
        max_inclusive: bool = True,
        name: str = "number",
        bound_why: str = "",
    ) -> None:
        self.minimum, self.maximum, self.__name__ = minimum, maximum, name
        self.min_inclusive, self.max_inclusive, self.bound_why = min_inclusive, max_inclusive, bound_why

    def __call__(self, text: str) -> float:
        value = float(_parse_number(float, str(text).strip()))
        if self.minimum is not None and (value < self.minimum or (value == self.minimum and not self.min_inclusive)):
            raise argparse.ArgumentTypeError(
                f"must be {'>=' if self.min_inclusive else '>'} {self.minimum:g}, got {value:g}"
            )
        if self.maximum is not None and (value > self.maximum or (value == self.maximum and not self.max_inclusive)):
            why = f" ({self.bound_why})" if self.bound_why else ""
            raise argparse.ArgumentTypeError(
                f"must be {'<=' if self.max_inclusive else '<'} {self.maximum:g}{why}, got {value:g}"
            )
        return value

    def good_example(self, paths: Examples) -> str:
        low = self.minimum if self.minimum is not None else 0.0
        high = self.maximum if self.maximum is not None else low + 2.0
        return f"{(low + high) / 2:g}"

    def bad_examples(self, paths: Examples) -> list[str]:
        bad = ["abc", "nan", "inf", ""]
        if self.minimum is not None:
            bad.append(f"{self.minimum:g}" if not self.min_inclusive else f"{self.minimum - 0.5:g}")
        if self.maximum is not None:
            bad.append(f"{self.maximum:g}" if not self.max_inclusive else f"{self.maximum + 0.5:g}")
        return bad

    def __repr__(self) -> str:
        return self.__name__


positive_int = IntRange(1, name="positive_int")
non_negative_int = IntRange(0, name="non_negative_int")
port = IntRange(0, 65535, name="port")
seed = IntRange(0, 2**32 - 1, name="seed")  # numpy's seed range; torch takes the same
positive_float = FloatRange(0.0, min_inclusive=False, name="positive_float")
#: A measured time per image or step (the dry-run estimates): a day bounds any real measurement,
#: and a typo (``1e300``) used to print a 300-digit GPU-hours figure.
seconds_measured = FloatRange(
    0.0, 86400.0, min_inclusive=False, name="seconds", bound_why="one day; a measured time per image or step"
)
non_negative_float = FloatRange(0.0, name="non_negative_float")
finite_float = FloatRange(name="finite_float")
unit_interval = FloatRange(0.0, 1.0, name="fraction in [0, 1]")
open_unit_interval = FloatRange(0.0, 1.0, min_inclusive=False, max_inclusive=False, name="fraction in (0, 1)")
fraction_below_one = FloatRange(0.0, 1.0, max_inclusive=False, name="fraction in [0, 1)")
fraction_above_zero = FloatRange(0.0, 1.0, min_inclusive=False, name="fraction in (0, 1]")


def _is_url(text: str) -> bool:
    return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text))


def url_refused(text: str) -> str:
    """The one line for a URL (``s3://…``) where only a local path is read: say it is a URL, not that it
    "does not exist" (it may well exist, at the object store)."""
    return f"{text} is a URL; this argument reads a local path only: copy it to a local folder first"


def _nearest_existing(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def dataset_name_problem(path: str | os.PathLike) -> str | None:
    """Why a dataset folder at ``path`` cannot be read by name, or None: pyarrow and ``datasets``
    take UTF-8 paths only, so a folder whose name holds bytes that are not UTF-8 (from the shell)
    failed inside them with "surrogates not allowed". Checked before they are asked."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(text).decode("utf-8", "backslashreplace")
        return (
            f"{shown} is not valid UTF-8, and datasets and pyarrow read folders by UTF-8 names only: "
            "rename it (or link it under a UTF-8 name)"
        )
    return None


def name_problem(path: str | os.PathLike, *, written: bool = True) -> str | None:
    """Why ``path`` cannot be a name on this machine, or None: a part longer than the file system
    allows (the kernel's ENAMETOOLONG, which ``Path.exists`` raises instead of answering), or,
    for a path to be ``written``, text that is not UTF-8 (undecodable bytes from the shell: the
    files written beside it name it in JSON and cards, which need UTF-8, so such a run failed
    after its work; an existing file with such a name can still be read)."""
    text = os.fspath(path)
    if written:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(text).decode("utf-8", "backslashreplace")  # the bytes the shell gave: r\xff.json
            return f"{shown} is not valid UTF-8: use a name in UTF-8"
    base = _nearest_existing_name(Path(text))
    try:
        name_max = os.pathconf(base, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    for part in Path(text).parts:
        size = len(os.fsencode(part))
        if size > name_max:
            shown = part[:24].encode("utf-8", "backslashreplace").decode("utf-8")
            return f"the name {shown}… is {size} bytes long; this file system allows {name_max}: use a shorter one"
    return None


def _nearest_existing_name(path: Path) -> Path:
    """The nearest existing folder above ``path``, asking only about names short enough to ask."""
    path = Path(os.path.abspath(path))
    while path != path.parent:
        try:
            if path.exists():
                return path
        except OSError:
            pass  # a part too long: its parent answers
        path = path.parent
    return path


def symlink_problem(path: str | os.PathLike) -> str | None:
    """Why an output at ``path`` must not be written through a symbolic link there, or None.

    The one rule for links (every output: flags, report files, run and plain folders): a link to
    a folder is followed (the folder is the output); a dangling link is refused (writing used to
    replace the user's link with our file or folder); so is a link to a file, since results are
    written whole by rename, which replaces the link and leaves the file it names stale."""
    target = Path(path).expanduser()
    if not target.is_symlink():
        return None
    points_to = os.readlink(target)
    if not target.exists():
        return f"{target} is a symbolic link to {points_to}, which does not exist: remove the link or create its target"
    if not target.is_dir():
        return f"{target} is a symbolic link to the file {points_to}: name that file itself, or remove the link"
    return None


def check_writable(path: str | os.PathLike, *, what: str = "output", folder: bool = False) -> Path:
    """Refuse an output path that cannot be written, before the work that would fill it.

    Writes nothing: the nearest existing folder above ``path`` must be a folder we may write to on
    a writable file system; ``path`` itself must not be a folder (``folder=False``) or a file
    (``folder=True``). Raises :class:`InvalidArgumentError` (one line).
    """
    target = Path(path).expanduser()
    problem = name_problem(target) or symlink_problem(target)
    if problem:
        raise InvalidArgumentError(f"{what} {problem}".strip())
    if target.exists():
        if folder and not target.is_dir():
            raise InvalidArgumentError(f"{what} {target} is a file, not a folder")
        if not folder and target.is_dir():
            raise InvalidArgumentError(f"{what} {target} is a folder, not a file")
        if not os.access(target, os.W_OK):
            raise InvalidArgumentError(f"{what} {target} is not writable")
        base = target if folder else target.parent
    else:
        base = target.parent
    base = _nearest_existing(base)
    if not base.is_dir():
        raise InvalidArgumentError(f"{what} {target}: {base} is a file, not a folder")
    try:
        read_only = bool(os.statvfs(base).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only or not os.access(base, os.W_OK | os.X_OK):
        raise InvalidArgumentError(f"{what} {target}: cannot write in {base}")
    return target


class PathType(ArgType):
    """A local path checked for what the flag needs (an existing file/folder, or a writable output).

    ``kind``: ``file``, ``dir``, ``any`` (must exist), ``output-file``, ``output-dir`` (checked
    writable, see :func:`check_writable`). ``urls=True`` passes ``s3://…``-style URLs through as text
    (they are checked when the store opens). The value is a :class:`~pathlib.Path` unless
    ``as_str``.
    """

    def __init__(self, kind: str, *, urls: bool = False, as_str: bool = False) -> None:
        if kind not in {"file", "dir", "any", "output-file", "output-dir"}:
            raise ValueError(kind)
        self.kind, self.urls, self.as_str = kind, urls, as_str
        self.__name__ = {
            "file": "existing_file",
            "dir": "existing_dir",
            "any": "existing_path",
            "output-file": "output_file",
            "output-dir": "output_dir",
        }[kind]

    def __call__(self, text: str) -> Path | str:
        text = str(text)
        if not text.strip():
            raise argparse.ArgumentTypeError("expected a path, got an empty string")
        if _is_url(text):
            if self.urls:
                return text
            raise argparse.ArgumentTypeError(url_refused(text))
        path = Path(text).expanduser()
        if self.kind in {"file", "dir", "any"}:
            problem = name_problem(path, written=False)
            if problem:  # a name too long to exist
                raise argparse.ArgumentTypeError(problem)
            if not path.exists():
                raise argparse.ArgumentTypeError(f"{text} does not exist")
            if self.kind == "file" and not path.is_file():
                raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
            if self.kind == "dir" and not path.is_dir():
                raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
        else:
            try:
                check_writable(path, what="", folder=self.kind == "output-dir")
            except InvalidArgumentError as error:
                raise argparse.ArgumentTypeError(str(error).strip()) from None
        return str(path) if self.as_str else path

    def as_text(self) -> PathType:
        """The same check, the value kept as the text given (for code that expects a string)."""
        return PathType(self.kind, urls=self.urls, as_str=True)

    def good_example(self, paths: Examples) -> str:
        return {
            "file": paths.file,
            "dir": paths.folder,
            "any": paths.folder,
            "output-file": paths.missing,
            "output-dir": paths.missing,
        }[self.kind]

    def bad_examples(self, paths: Examples) -> list[str]:
        too_long = os.path.join(paths.folder, "x" * 300)
        if self.kind == "file":
            return [paths.missing, paths.folder, "", too_long]
        if self.kind == "dir":
            return [paths.missing, paths.file, "", too_long]
        if self.kind == "any":
            return [paths.missing, "", too_long]
        too_long = os.path.join(paths.missing, "x" * 300)  # ENAMETOOLONG, not a traceback
        if self.kind == "output-file":
            return [paths.folder, paths.under_file, "", too_long, paths.missing + "-\udcff.json"]
        return [paths.file, paths.under_file, "", too_long, paths.missing + "-\udcff"]

    def __repr__(self) -> str:
        return self.__name__


class CreatableDir(ArgType):
    """A folder that must exist or be creatable now, tried for real: its missing parts are made,
    a file written and removed in it, and what was made removed again (nothing is left).

    Why tried, not only checked: :func:`check_writable` asks the permission bits, which a root
    user always passes and which say nothing of ``/proc`` or a full disk; accelerate makes
    ``--offload-folder`` only after the data loaded and the model started loading, so such a
    folder failed minutes in with "[Errno 2] …" (issue 45.8)."""

    __name__ = "creatable_dir"

    def __call__(self, text: str) -> str:
        import tempfile

        text = str(text)
        if not text.strip():
            raise argparse.ArgumentTypeError("expected a path, got an empty string")
        path = Path(text).expanduser()
        try:
            check_writable(path, what="", folder=True)
        except InvalidArgumentError as error:
            raise argparse.ArgumentTypeError(str(error).strip()) from None
        made: list[Path] = []
        missing = Path(os.path.abspath(path))
        while not missing.exists() and missing != missing.parent:
            made.append(missing)
            missing = missing.parent
        try:
            for folder in reversed(made):
                folder.mkdir()
            fd, probe = tempfile.mkstemp(prefix=".conceptforge-probe-", dir=path)
            os.close(fd)
            os.unlink(probe)
        except OSError as error:
            raise argparse.ArgumentTypeError(
                f"cannot make the folder {text} ({error.strerror}): give a folder on a disk you can write to"
            ) from None
        finally:
            for folder in made:
                try:
                    folder.rmdir()
                except OSError:
                    pass
        return str(path)

    def good_example(self, paths: Examples) -> str:
        return paths.missing

    def bad_examples(self, paths: Examples) -> list[str]:
        bad = [paths.file, paths.under_file, ""]
        if os.path.isdir("/proc/self"):  # Linux: no folder can be made in /proc, even by root
            bad.append("/proc/conceptforge-offload")
        return bad

    def __repr__(self) -> str:
        return self.__name__


creatable_dir = CreatableDir()

existing_file = PathType("file")
existing_dir = PathType("dir")
existing_path = PathType("any")
output_file = PathType("output-file")
output_dir = PathType("output-dir")
output_location = PathType("output-dir", urls=True, as_str=True)  # a folder or an fsspec URL
existing_location = PathType("dir", urls=True, as_str=True)  # a run folder or an fsspec URL
rating = FloatRange(1.0, 5.0, name="rating in [1, 5]")

_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def check_device(name: str | None, *, flag: str = "--device") -> str | None:
    """Refuse a device this machine does not have: one :class:`DeviceUnavailableError` line.

    ``None`` and ``auto`` mean "CUDA when there is one" and always pass; other torch device types
    (``xpu`` …) are left to torch. Why here: every model loader (VQA, oracles, CLIP, FLUX) used to
    fail on its own, most with a torch traceback; the command line's ``--device`` type and the
    loaders all call this.
    """
    if name is None:
        return None
    if re.match(r"^cuda(:|$)", name) and not _DEVICE.match(name):
        raise InvalidArgumentError(f"{flag}: unknown device {name!r}: use cpu, cuda, cuda:N, mps or auto")
    if name.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise DeviceUnavailableError(
                f"{flag} {name}: no CUDA GPU is visible on this machine "
                "(check nvidia-smi and CUDA_VISIBLE_DEVICES, or pass --device cpu)"
            )
        index = int(name.split(":", 1)[1]) if ":" in name else 0
        if index >= torch.cuda.device_count():
            raise DeviceUnavailableError(f"{flag} {name}: only {torch.cuda.device_count()} CUDA GPU(s) are visible")
    elif name == "mps":
        import torch

        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise DeviceUnavailableError(f"{flag} mps: Apple's Metal backend is not available here")
    return name


class DeviceType(ArgType):
    """``--device``: cpu, cuda, cuda:N, mps or auto; with ``check=True`` the machine must have it.
    ``checked_in_run``: the command checks the machine itself, first thing in its run, after
    refusing the flag where it does not apply (``evaluate`` with a served model)."""

    def __init__(self, *, check: bool = True, checked_in_run: bool = False) -> None:
        self.check = check
        self.checked_in_run = checked_in_run
        self.__name__ = "device"

    def __call__(self, text: str) -> str:
        text = str(text).strip()
        if not _DEVICE.match(text):
            raise argparse.ArgumentTypeError(f"unknown device {text!r}: use cpu, cuda, cuda:N, mps or auto")
        # DeviceUnavailableError is no ValueError: argparse lets it through as our own one line.
        return check_device(text) if self.check else text

    def good_example(self, paths: Examples) -> str:
        return "cpu"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["tpu", "cuda:x", ""]

    def __repr__(self) -> str:
        return self.__name__


device = DeviceType()
device_name = DeviceType(check=False)  # checked when the model loads (a --dry-run needs no GPU)
device_checked_in_run = DeviceType(check=False, checked_in_run=True)  # evaluate: a served model takes no --device


class MaxMemory(ArgType):
    """``--max-memory 0=20GiB,1=20GiB,cpu=64GiB``: accelerate's per-device limits for a model split
    by ``--device-map`` (GPU index, ``cpu`` or ``mps`` = size), as ``{device: bytes}``; a GPU
    this machine does not have is refused now, not ignored by the placement later."""

    __name__ = "max_memory"

    def __call__(self, text: str) -> dict:
        from conceptforge.placement import check_gpus, parse_max_memory

        try:
            limits = parse_max_memory(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        check_gpus(limits)  # DeviceUnavailableError: our own one line through argparse
        return limits

    def good_example(self, paths: Examples) -> str:
        return "cpu=64GiB"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["20GiB", "cpu=lots", "tpu=1GiB", "cpu=1GiB,cpu=2GiB", ""]

    def __repr__(self) -> str:
        return self.__name__


max_memory = MaxMemory()


class ListOf(ArgType):
    """Comma-separated values of one :class:`ArgType` (at least one): ``--seeds 0,1,2``."""

    def __init__(self, item: ArgType, *, name: str = "list") -> None:
        self.item, self.__name__ = item, name

    def __call__(self, text: str) -> list:
        parts = [part.strip() for part in str(text).split(",") if part.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"expected comma-separated values, got {text!r}")
        values = []
        for part in parts:
            try:
                values.append(self.item(part))
            except argparse.ArgumentTypeError as error:
                raise argparse.ArgumentTypeError(f"{part!r} in {text!r}: {error}") from None
        return values

    def good_example(self, paths: Examples) -> str:
        return self.item.good_example(paths)

    def bad_examples(self, paths: Examples) -> list[str]:
        good = self.item.good_example(paths)
        return [f"{good},{bad}" for bad in self.item.bad_examples(paths) if bad and "," not in bad] + ["", ","]

    def __repr__(self) -> str:
        return self.__name__


class Template(ArgType):
    """A ``str.format`` prompt template: only the ``allowed`` fields, each ``required`` one present.

    Why: an unknown field (``{colour}`` for ``{value}``) used to end in a KeyError traceback once
    the model was loaded; a missing one silently gave every option the same prompt.
    """

    def __init__(self, *, allowed: set[str], required: set[str]) -> None:
        self.allowed, self.required, self.__name__ = set(allowed), set(required), "template"

    def __call__(self, text: str) -> str:
        import string

        try:
            fields = {name for _, name, _, _ in string.Formatter().parse(str(text)) if name is not None}
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"not a valid template ({error}): {text!r}") from None
        unknown = sorted(fields - self.allowed)
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown field(s) {', '.join('{' + f + '}' for f in unknown)} in {text!r}; the fields are "
                f"{', '.join('{' + f + '}' for f in sorted(self.allowed))}"
            )
        missing = sorted(self.required - fields)
        if missing:
            raise argparse.ArgumentTypeError(f"{text!r} lacks {', '.join('{' + f + '}' for f in missing)}")
        return str(text)

    def good_example(self, paths: Examples) -> str:
        return " ".join("{" + f + "}" for f in sorted(self.allowed))

    def bad_examples(self, paths: Examples) -> list[str]:
        bad = ["{no_such_field} " + self.good_example(paths), "{unclosed"]
        if self.required:
            bad.append("no fields at all")
        return bad

    def __repr__(self) -> str:
        return self.__name__


class ByteSize(ArgType):
    """A positive size such as ``500MB``, ``2GiB`` or ``1000000`` (the Hub's units); the value stays the text.

    Why: ``--max-shard-size`` is read when the dataset is assembled, hours after the start.
    """

    UNITS = {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "KB": 10**3, "MB": 10**6, "GB": 10**9, "B": 1}

    def __init__(self) -> None:
        self.__name__ = "size"

    def __call__(self, text: str) -> str:
        upper = str(text).strip().upper()
        factor = next((f for unit, f in self.UNITS.items() if upper.endswith(unit)), 1)
        number = next((upper[: -len(unit)] for unit in self.UNITS if upper.endswith(unit)), upper)
        try:
            size = float(number) * factor
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a size such as 500MB or 2GiB, got {text!r}") from None
        if not math.isfinite(size) or size < 1:
            raise argparse.ArgumentTypeError(f"must be a positive size, got {text!r}")
        return str(text).strip()

    def good_example(self, paths: Examples) -> str:
        return "500MB"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["abc", "0MB", "-5MB", "MB", "nanGB", ""]

    def __repr__(self) -> str:
        return self.__name__


class Resolution(ArgType):
    """``WIDTHxHEIGHT``, each at least ``minimum`` pixels; the value stays the text given."""

    def __init__(self, minimum: int = 16, maximum: int = 8192) -> None:
        self.minimum, self.maximum, self.__name__ = minimum, maximum, "resolution"

    def __call__(self, text: str) -> str:
        match = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", str(text))
        if not match:
            raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 320x240, got {text!r}")
        if min(int(match.group(1)), int(match.group(2))) < self.minimum:
            raise argparse.ArgumentTypeError(f"width and height must be >= {self.minimum}, got {text!r}")
        if max(int(match.group(1)), int(match.group(2))) > self.maximum:
            raise argparse.ArgumentTypeError(
                f"width and height must be <= {self.maximum} (CLEVR renders 320x240; {self.maximum} px a side is "
                f"already {self.maximum * self.maximum / 1e6:.0f} megapixels an image), got {text!r}"
            )
        return str(text).strip()

    def good_example(self, paths: Examples) -> str:
        return "320x240"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["abc", "320", "0x240", "-320x240", f"{self.minimum - 1}x240", f"320x{self.maximum + 1}", ""]

    def __repr__(self) -> str:
        return self.__name__


class HubLicense(ArgType):
    """A Hub license id (``cc-by-nc-4.0``, ``mit`` …), checked before any work: the card validator
    refused an unknown one only at ``publish``, after the whole dataset was made."""

    def __init__(self) -> None:
        self.__name__ = "license"

    def __call__(self, text: str) -> str:
        from conceptforge.hub_ids import HUB_LICENSES

        value = str(text).strip()
        if value == "other":
            raise argparse.ArgumentTypeError(
                "'other' needs a license name and link in the card, which no flag sets: use a Hub license id"
            )
        if value not in HUB_LICENSES:
            near = sorted(name for name in HUB_LICENSES if name.startswith(value.split("-")[0].lower()))[:4]
            raise argparse.ArgumentTypeError(
                f"{value!r} is not a Hub license id (https://huggingface.co/docs/hub/repositories-licenses)"
                + (f"; did you mean {', '.join(near)}?" if near else "")
            )
        return value

    def good_example(self, paths: Examples) -> str:
        return "cc-by-nc-4.0"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["CC BY-NC 4.0", "not-a-license", "other", ""]

    def __repr__(self) -> str:
        return self.__name__


class Choice(ArgType):
    """One of a fixed set of names. Why a type (not just ``choices=``): the same check serves a
    task option given as ``--task-option TASK.NAME=VALUE``, where argparse's ``choices`` is not in
    the loop; a flag built from the option passes ``choices=`` too, for its usage line."""

    def __init__(self, choices: tuple[str, ...] | list[str], *, name: str = "choice") -> None:
        self.choices, self.__name__ = tuple(choices), name

    def __call__(self, text: str) -> str:
        if text not in self.choices:
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(self.choices)}, got {text!r}")
        return str(text)

    def good_example(self, paths: Examples) -> str:
        return self.choices[0]

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["not-a-choice", ""]

    def __repr__(self) -> str:
        return self.__name__


#: The number formats a model runs in, spelled one way for every command (torch's names); ``auto``
#: lets the command choose (bfloat16 on CUDA, float32 on the CPU). Before, ``evaluate`` took
#: ``float16``, ``generate sub`` ``fp16`` and ``generate conceptbed --mixed-precision`` ``fp16``/``no``.
DTYPES = ("auto", "float32", "float16", "bfloat16")
#: The other spellings, still accepted (documented in docs/evaluation.md): each reads as its DTYPES name.
DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "no": "float32"}
#: The short names the SUB generator and accelerate's ``mixed_precision`` store.
SHORT_DTYPES = {"auto": "auto", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


class DType(ArgType):
    """One of :data:`DTYPES`, or an alias of one (returned as its :data:`DTYPES` name): the one
    choices list of every ``--dtype`` flag."""

    def __init__(self) -> None:
        self.__name__ = "dtype"
        self.choices = DTYPES

    def __call__(self, text: str) -> str:
        value = str(text).strip().lower()
        value = DTYPE_ALIASES.get(value, value)
        if value not in DTYPES:
            aliases = ", ".join(f"{a}={n}" for a, n in DTYPE_ALIASES.items())
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(DTYPES)} (aliases: {aliases}), got {text!r}")
        return value

    def good_example(self, paths: Examples) -> str:
        return "bf16"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["float8", "half", ""]

    def __repr__(self) -> str:
        return self.__name__


dtype = DType()


class HubRepoId(ArgType):
    """A Hub repository id ``ORG/NAME``, checked before the work whose results go there."""

    def __init__(self) -> None:
        self.__name__ = "repo_id"

    def __call__(self, text: str) -> str:
        from conceptforge.hub_ids import repo_id_problem

        value = str(text).strip()
        problem = repo_id_problem(value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    def good_example(self, paths: Examples) -> str:
        return "my-org/my-model"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["not a repo!", "name-only", "org/name/extra", ""]

    def __repr__(self) -> str:
        return self.__name__


class IntList(ArgType):
    """Comma-separated integers within bounds, as a tuple (a task option's value: ``ways=5,10``).

    A flag built from such an option takes ``nargs="+"`` of it, so ``--ways 5 10`` and
    ``--ways 5,10`` both work."""

    def __init__(self, minimum: int | None = None, maximum: int | None = None, *, name: str = "integers") -> None:
        self.item = IntRange(minimum, maximum)
        self.minimum, self.maximum, self.__name__ = minimum, maximum, name

    def __call__(self, text: str) -> tuple[int, ...]:
        parts = [part.strip() for part in str(text).split(",") if part.strip()]
        try:
            values = tuple(int(part) for part in parts)
        except ValueError:
            values = ()
        if not values:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
        for value in values:
            try:
                self.item(str(value))
            except argparse.ArgumentTypeError as error:
                raise argparse.ArgumentTypeError(f"{error} (in {text!r})") from None
        return values

    def good_example(self, paths: Examples) -> str:
        return self.item.good_example(paths)

    def bad_examples(self, paths: Examples) -> list[str]:
        good = self.item.good_example(paths)
        bad = ["abc", f"{good},abc", "1.5", "", ","]
        if self.minimum is not None:
            bad.append(f"{good},{self.minimum - 1}")
        if self.maximum is not None:
            bad.append(f"{good},{self.maximum + 1}")
        return bad

    def __repr__(self) -> str:
        return self.__name__


class StrList(ArgType):
    """Comma-separated names (at least one), as a tuple: ``models=csp,add``."""

    def __init__(self, *, name: str = "names") -> None:
        self.__name__ = name

    def __call__(self, text: str) -> tuple[str, ...]:
        values = tuple(part.strip() for part in str(text).split(",") if part.strip())
        if not values:
            raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
        return values

    def good_example(self, paths: Examples) -> str:
        return "a,b"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["", ","]

    def __repr__(self) -> str:
        return self.__name__


class Optional(ArgType):
    """``inner``'s value, or ``empty`` for one of ``words`` (compared lower-case): an option whose
    default means "not set" (``lr``: Appendix A's rate; ``concept_names``: the CBM's own order)."""

    def __init__(self, inner: ArgType, *, words: tuple[str, ...] = ("", "none"), empty: Any = None) -> None:
        self.inner, self.words, self.empty = inner, tuple(words), empty
        self.__name__ = f"optional {getattr(inner, '__name__', 'value')}"

    def __call__(self, text: str) -> Any:
        if str(text).strip().lower() in self.words:
            return self.empty
        return self.inner(text)

    def good_example(self, paths: Examples) -> str:
        return self.inner.good_example(paths)

    def bad_examples(self, paths: Examples) -> list[str]:
        return [bad for bad in self.inner.bad_examples(paths) if bad.strip().lower() not in self.words]

    def __repr__(self) -> str:
        return self.__name__


hub_license = HubLicense()
hub_repo_id = HubRepoId()


class Flag(ArgType):
    """An on/off value as text (``true``/``false``, ``yes``/``no``, ``on``/``off``, ``1``/``0``):
    a task option such as ``binding-cdsm.calibrate`` given as ``--task-option`` text (its alias
    flag is ``--calibrate/--no-calibrate``)."""

    TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")

    def __init__(self) -> None:
        self.__name__ = "flag"

    def __call__(self, text: str) -> bool:
        word = str(text).strip().lower()
        if word in self.TRUE:
            return True
        if word in self.FALSE:
            return False
        raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")

    def good_example(self, paths: Examples) -> str:
        return "true"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["maybe", "2", ""]

    def __repr__(self) -> str:
        return self.__name__


class Text(ArgType):
    """Free text (a prompt, a display name). Why checked at all: a control character (a NUL, an
    escape) is never meant, and a line break in a one-line name breaks the tables it is printed
    in; ``multiline`` allows line breaks (a prompt's extra line), ``required`` refuses ''."""

    def __init__(self, *, multiline: bool = False, required: bool = False, name: str = "text") -> None:
        self.multiline, self.required, self.__name__ = multiline, required, name

    def __call__(self, text: str) -> str:
        text = str(text)
        allowed = "\n\t" if self.multiline else ""
        bad = sorted({c for c in text if (ord(c) < 32 or ord(c) == 127) and c not in allowed})
        if bad:
            raise argparse.ArgumentTypeError(
                f"{text!r} holds control character(s) {', '.join(repr(c) for c in bad)}"
                + ("" if self.multiline else " (one line, no line breaks)")
            )
        if self.required and not text.strip():
            raise argparse.ArgumentTypeError("expected some text, got an empty string")
        return text

    def good_example(self, paths: Examples) -> str:
        return "a photo"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["a\x00b"] + ([] if self.multiline else ["two\nlines"]) + (["", "  "] if self.required else [])

    def __repr__(self) -> str:
        return self.__name__


class ChoiceList(ArgType):
    """Comma-separated names, each from a fixed set (at least one, no repeats), as a tuple:
    ``models=csp,add``. ``refused``: names with their own one-line reason (``clip`` is another task)."""

    def __init__(self, choices: tuple[str, ...], *, refused: dict[str, str] | None = None, name: str = "names") -> None:
        self.choices, self.refused, self.__name__ = tuple(choices), dict(refused or {}), name

    def __call__(self, text: str) -> tuple[str, ...]:
        values = tuple(part.strip() for part in str(text).split(",") if part.strip())
        if not values:
            raise argparse.ArgumentTypeError(f"expected comma-separated names from {', '.join(self.choices)}")
        for value in values:
            if value in self.refused:
                raise argparse.ArgumentTypeError(f"{value}: {self.refused[value]}")
            if value not in self.choices:
                raise argparse.ArgumentTypeError(
                    f"unknown name {value!r} in {text!r}; choose from {', '.join(self.choices)}"
                )
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise argparse.ArgumentTypeError(f"{', '.join(repeated)} listed twice in {text!r}")
        return values

    def good_example(self, paths: Examples) -> str:
        return self.choices[0]

    def bad_examples(self, paths: Examples) -> list[str]:
        good = self.choices[0]
        return [f"{good},not-a-choice", f"{good},{good}", "", ","] + [f"{good},{name}" for name in self.refused]

    def __repr__(self) -> str:
        return self.__name__


class ModelSource(ArgType):
    """A model to load later: a local model folder, or a Hub id (``ORG/NAME`` or ``NAME``).

    Why checked here: an oracle or encoder named by a path that does not exist used to be found
    only when that model loaded, after the model under evaluation had loaded (and run)."""

    _NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")

    def __init__(self) -> None:
        self.__name__ = "model"

    def __call__(self, text: str) -> str:
        from conceptforge.hub_ids import repo_id_problem

        value = str(text).strip()
        if not value:
            raise argparse.ArgumentTypeError("expected a model folder or Hub id, got an empty string")
        path = Path(value).expanduser()
        if path.is_dir():
            return value
        if path.exists():
            raise argparse.ArgumentTypeError(f"{value} is a file: pass a model folder or a Hub id")
        from conceptforge.external_errors import looks_like_path

        if looks_like_path(value):
            raise argparse.ArgumentTypeError(f"no such local folder {value}")
        if "/" in value and repo_id_problem(value) is None:
            return value
        if "/" not in value and self._NAME.fullmatch(value) and ".." not in value:
            return value
        raise argparse.ArgumentTypeError(f"{value!r} is neither a model folder nor a Hub id ORG/NAME")

    def good_example(self, paths: Examples) -> str:
        return "my-org/my-model"

    def bad_examples(self, paths: Examples) -> list[str]:
        return [paths.missing, paths.file, "not a model!", ""]

    def __repr__(self) -> str:
        return self.__name__


class FunctionRef(ArgType):
    """``package.module:function``, importable now (or one of ``words``, e.g. ``rules``).

    Why import at parse time: a misspelt module used to fail after the models had loaded."""

    _REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

    def __init__(self, *, words: tuple[str, ...] = (), name: str = "module:function") -> None:
        self.words, self.__name__ = tuple(words), name

    def __call__(self, text: str) -> str:
        import importlib

        value = str(text).strip()
        if value in self.words:
            return value
        if not self._REF.match(value):
            either = f"{' or '.join(repr(w) for w in self.words)} or " if self.words else ""
            raise argparse.ArgumentTypeError(f"expected {either}package.module:function, got {text!r}")
        module, _, attribute = value.partition(":")
        try:
            found = getattr(importlib.import_module(module), attribute)
        except ImportError as error:
            raise argparse.ArgumentTypeError(f"cannot import {module} for {value}: {error}") from None
        except AttributeError:
            raise argparse.ArgumentTypeError(f"{module} has no {attribute} (from {value})") from None
        if not callable(found):
            raise argparse.ArgumentTypeError(f"{value} is not a function")
        return value

    def good_example(self, paths: Examples) -> str:
        return self.words[0] if self.words else "os.path:join"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["no-colon", "conceptforge_no_such_module:f", "os.path:no_such_function", ""]

    def __repr__(self) -> str:
        return self.__name__


class RelativeName(ArgType):
    """A file or folder name inside a folder another flag gives (``split_dir`` of the MIT-States
    folder): relative, without ``..``; whether it exists there is checked beside that folder."""

    def __init__(self, *, name: str = "name") -> None:
        self.__name__ = name

    def __call__(self, text: str) -> str:
        value = str(text).strip()
        if not value:
            raise argparse.ArgumentTypeError("expected a name, got an empty string")
        if Path(value).is_absolute() or ".." in Path(value).parts:
            raise argparse.ArgumentTypeError(f"{value} must be a name inside the data folder (relative, no '..')")
        return value

    def good_example(self, paths: Examples) -> str:
        return "data"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["/abs/path", "../outside", ""]

    def __repr__(self) -> str:
        return self.__name__


flag = Flag()
model_source = ModelSource()
