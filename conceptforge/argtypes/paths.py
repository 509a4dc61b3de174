"""Paths read and written: an input that is missing, an output that cannot be created, a URL where
only a local path is read, each refused before any work starts. The name checks are shared with
the library (the writers and the card builders) so that both refuse the same names.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from conceptforge.argtypes.base import ArgType, Examples
from conceptforge.errors import InvalidArgumentError


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


creatable_dir = CreatableDir()
existing_file = PathType("file")
existing_dir = PathType("dir")
existing_path = PathType("any")
output_file = PathType("output-file")
output_dir = PathType("output-dir")
output_location = PathType("output-dir", urls=True, as_str=True)  # a folder or an fsspec URL
existing_location = PathType("dir", urls=True, as_str=True)  # a run folder or an fsspec URL


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
