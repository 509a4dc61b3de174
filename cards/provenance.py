"""Provenance for dataset cards: what a reader needs to reproduce a dataset.

Collected by the generator or filter that makes a dataset and rendered into the card by
:func:`cards.render_card`: the generator, model ids with their *resolved* revisions (a commit, not
"main", which moves), all parameters and seeds, package versions and the command line. Secrets are
redacted on the way in, so nothing downstream (card, logs, Hub) can leak a token.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import re
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

DEFAULT_PACKAGES = (
    "conceptforge",
    "torch",
    "diffusers",
    "transformers",
    "accelerate",
    "peft",
    "datasets",
    "huggingface_hub",
    "pyarrow",
    "numpy",
    "pillow",
    "bpy",
)
COMMIT_RE = re.compile(r"[0-9a-f]{40}")
REDACTED = "***"
# Hugging Face user access tokens start with "hf_"; the flag forms cover any other secret passed
# on a command line.
TOKEN_PATTERN = re.compile(r"\bhf_[A-Za-z0-9]{8,}")
_SECRET_FLAG_RE = re.compile(r"(--(?:hf[-_])?token|--api[-_]key|--password)(=|\s+)(\S+)", re.IGNORECASE)
_SECRET_ENV_RE = re.compile(r"\b((?:HF|HUGGING_FACE_HUB|HUGGINGFACE)_?(?:HUB_)?TOKEN)=(\S+)")
_HEAD_TAIL = 1 << 20  # bytes hashed at each end of a large local weight file


def _known_secrets() -> list[str]:
    """The token the Hub client would use right now, if any (never returned to callers)."""
    found = []
    try:
        from huggingface_hub import get_token

        token = get_token()
        if token:
            found.append(token)
    except Exception:  # pragma: no cover - a broken token cache must not break card rendering
        logger.debug("could not read the Hugging Face token for redaction", exc_info=True)
    return found


def redact_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """Replace tokens and secret-looking arguments in ``text`` with ``***``."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _SECRET_FLAG_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _SECRET_ENV_RE.sub(lambda m: f"{m.group(1)}={REDACTED}", text)
    return TOKEN_PATTERN.sub(f"hf_{REDACTED}", text)


_WINDOWS_ABSOLUTE_RE = re.compile(r"^[A-Za-z]:[\\/]")


def _is_local_path(text: str) -> bool:
    """An absolute (or home-relative) path on this machine: ``/home/me/data/CUB_200_2011``, ``~/x``."""
    if not text or "\n" in text or "://" in text:
        return False
    if text.startswith("~"):
        return True
    if _WINDOWS_ABSOLUTE_RE.match(text):
        return True
    return text.startswith("/") and len([part for part in text.split("/") if part]) >= 2


def _elide(path: str) -> str:
    name = re.split(r"[\\/]", path.rstrip("/\\"))[-1]
    return f".../{name}" if name else "..."


def published_model_id(model_id: str, revision: str | None) -> str:
    """How the card and ``croissant.json`` name a model: its Hub id, or ``.../<folder name>`` for a
    local folder (a ``local-sha256:`` revision, the older ``local``, or an already elided id).

    Why one spelling: a run records the id as it was given, so one release named a relative
    ``fx/vlm`` beside an elided ``.../flux``, which reads like a Hub id beside a folder."""
    text = str(model_id)
    local = str(revision or "").startswith("local-sha256:") or revision == "local" or text.startswith(".../")
    return _elide(text) if local and text else text


def strip_local_path(text: str) -> str:
    """``/home/me/data/CUB_200_2011`` -> ``.../CUB_200_2011``; also inside ``--opt=PATH``.

    Cards are published: a user's home folder, cluster layout or user name does not belong in
    them, and the folder name says what was given.
    """
    if _is_local_path(text):
        return _elide(text)
    flag, eq, value = text.partition("=")
    if eq and flag.startswith("-") and _is_local_path(value):
        return f"{flag}={_elide(value)}"
    return text


def strip_local_paths(value: Any) -> Any:
    """:func:`strip_local_path` on every string inside a JSON-like value (command lines token by token)."""
    if isinstance(value, str):
        if _is_local_path(value) and not re.search(r"\s-", value):
            return strip_local_path(value)  # one path with spaces in it, not a command line to split
        if " " in value and "/" in value:
            try:
                tokens = shlex.split(value)
            except ValueError:
                return strip_local_path(value)
            stripped = [strip_local_path(token) for token in tokens]
            return shlex.join(stripped) if stripped != tokens else value
        return strip_local_path(value)
    if isinstance(value, Mapping):
        return {key: strip_local_paths(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strip_local_paths(item) for item in value]
    return value


def redact_value(value: Any, secrets: Iterable[str] = ()) -> Any:
    """:func:`redact_secrets` applied to every string inside a JSON-like value."""
    secrets = list(secrets)
    if isinstance(value, str):
        return redact_secrets(value, secrets)
    if isinstance(value, Mapping):
        return {key: redact_value(item, secrets) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(item, secrets) for item in value]
    return value


def command_line(argv: Sequence[str] | None = None, *, secrets: Iterable[str] = ()) -> str:
    """The command that is running (or ``argv``), shell-quoted, secrets redacted."""
    argv = list(sys.argv if argv is None else argv)
    if argv and (
        os.path.basename(argv[0]) == "conceptforge" or argv[0].endswith(os.path.join("conceptforge", "__main__.py"))
    ):
        argv = ["conceptforge", *argv[1:]]  # the console script or `python -m conceptforge`: no install paths
    elif argv and argv[0].endswith(".py"):
        argv = ["python", _short_path(argv[0]), *argv[1:]]
    argv = [strip_local_path(str(arg)) for arg in argv]
    return redact_secrets(shlex.join(argv), [*secrets, *_known_secrets()])


def _short_path(path: str) -> str:
    """Script paths relative to the working directory, so cards do not show home folders.

    A script outside the working directory is named by its folder and file (``scripts/x.py``).
    """
    try:
        relative = os.path.relpath(path)
    except ValueError:
        relative = path
    if relative.startswith("..") or os.path.isabs(relative):
        return f"{Path(path).parent.name}/{Path(path).name}".lstrip("/")
    return relative


def package_versions(names: Iterable[str] = DEFAULT_PACKAGES) -> dict[str, str]:
    """Installed versions of ``names`` (missing packages are left out)."""
    versions = {}
    for name in names:
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return versions


def local_fingerprint(path: str | os.PathLike[str], *, whole_suffixes: tuple[str, ...] | None = None) -> str:
    """``local-sha256:<16 hex>``: the revision of a local model or data folder, for cards, results
    and cache keys (the one folder fingerprint of the package).

    File names and sizes are always hashed; hidden files (``.cache`` of a download) do not count.
    Contents: by default files up to 2 MiB whole, larger ones (weights) by their size plus their
    first and last MiB, which changes whenever the weights do without reading gigabytes on every
    load. A data folder passes ``whole_suffixes`` (its metadata files, e.g. ``.txt``/``.json``):
    only those files (up to 64 MiB) are read, so a CUB folder's 11,788 JPEGs are named and sized
    but not read.
    """
    path = Path(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")):
        size = file.stat().st_size
        digest.update(f"{file.relative_to(path).as_posix()}\0{size}\0".encode())
        if whole_suffixes is not None:
            if file.suffix in whole_suffixes and size <= 64 << 20:
                digest.update(file.read_bytes())
            continue
        with open(file, "rb") as handle:
            if size <= 2 * _HEAD_TAIL:
                digest.update(handle.read())
            else:
                digest.update(handle.read(_HEAD_TAIL))
                handle.seek(size - _HEAD_TAIL)
                digest.update(handle.read())
    return f"local-sha256:{digest.hexdigest()[:16]}"


def resolve_model_revision(
    model_id: str,
    revision: str | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    allow_network: bool | None = None,
) -> str:
    """The commit ``model_id`` at ``revision`` resolves to, for the card.

    Order: an explicit 40-hex commit; a local folder (its HF-cache snapshot commit, else
    ``local-sha256:<fingerprint>``); the HF cache's ``refs/<revision>`` file written by any
    ``from_pretrained``/``snapshot_download``; the Hub (unless offline); else the revision name as
    given, marked unresolved so nobody mistakes it for a pin.
    """
    if revision and COMMIT_RE.fullmatch(revision):
        return revision
    local = Path(model_id).expanduser()
    if local.is_dir():
        parts = local.resolve().parts
        if len(parts) >= 2 and parts[-2] == "snapshots" and COMMIT_RE.fullmatch(parts[-1]):
            return parts[-1]
        return local_fingerprint(local)
    from huggingface_hub import constants

    wanted = revision or "main"
    cache = Path(cache_dir) if cache_dir is not None else Path(constants.HF_HUB_CACHE)
    for kind in ("models", "datasets"):
        ref = cache / f"{kind}--{model_id.replace('/', '--')}" / "refs" / wanted
        if ref.is_file():
            value = ref.read_text().strip()
            if COMMIT_RE.fullmatch(value):
                return value
    if allow_network is None:
        allow_network = not constants.HF_HUB_OFFLINE
    if allow_network:
        try:
            from huggingface_hub import HfApi

            sha = HfApi().model_info(model_id, revision=revision).sha
            if sha:
                return sha
        except Exception as error:  # offline, gated, missing: the card says so instead
            logger.info("could not resolve %s@%s on the Hub: %s", model_id, wanted, type(error).__name__)
    return f"{wanted} (unresolved)"


def _model_entries(
    models: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None, cache_dir: Any
) -> list[dict[str, str]]:
    entries = []
    if models is None:
        return entries
    if isinstance(models, Mapping):
        items = []
        for role, spec in models.items():
            model_id, revision = (spec, None) if isinstance(spec, str) else (spec[0], spec[1])
            items.append({"role": role, "id": model_id, "revision": revision})
    else:
        items = [dict(item) for item in models]
    for item in items:
        model_id = str(item["id"])
        entries.append(
            {
                "role": str(item.get("role", "")),
                "id": model_id,
                "revision": resolve_model_revision(model_id, item.get("revision"), cache_dir=cache_dir),
            }
        )
    return entries


def collect_provenance(
    *,
    generator: str,
    models: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    parameters: Mapping[str, Any] | None = None,
    seeds: Mapping[str, Any] | int | None = None,
    filters: Mapping[str, Any] | None = None,
    argv: Sequence[str] | None = None,
    packages: Iterable[str] = DEFAULT_PACKAGES,
    cache_dir: str | os.PathLike[str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything needed to reproduce a dataset, as a JSON-serialisable dict for the card.

    ``models`` maps a role to a model id or ``(model_id, revision)`` (or is a list of
    ``{"role", "id", "revision"}``); each revision is resolved with :func:`resolve_model_revision`.
    ``parameters``/``filters`` are the generation and filter settings, ``seeds`` the run seed(s).
    """
    secrets = _known_secrets()
    provenance: dict[str, Any] = {
        "generator": generator,
        "models": _model_entries(models, cache_dir),
        "parameters": redact_value(dict(parameters or {}), secrets),
        "filters": redact_value(dict(filters or {}), secrets),
        "seeds": seeds if isinstance(seeds, int) or seeds is None else redact_value(dict(seeds), secrets),
        "packages": package_versions(packages),
        "python": platform.python_version(),
        "command_line": command_line(argv, secrets=secrets),
    }
    if extra:
        provenance["extra"] = redact_value(dict(extra), secrets)
    return {key: value for key, value in provenance.items() if value not in (None, {}, [])}
