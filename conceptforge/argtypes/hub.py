"""Names resolved elsewhere: Hub repo ids and licences, a model given as a Hub id or a local folder,
and a ``module:function`` reference, each checked in form before anything is downloaded or imported.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from conceptforge.argtypes.base import ArgType, Examples


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


hub_license = HubLicense()
hub_repo_id = HubRepoId()


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


model_source = ModelSource()
