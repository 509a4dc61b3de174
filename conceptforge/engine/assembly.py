"""Exactly one assembly of a finished run, on a local disk or an object store.

Why a marker and not a barrier: resumed shards finish hours apart, and a barrier times out;
a lock such as ``flock`` is not honoured by many Lustre/NFS mounts and does not exist on S3.
Instead the process that first finds every chunk complete *creates* ``assembly.lock`` with an
atomic create-if-absent (``O_EXCL`` locally, ``If-None-Match: *`` on S3); the others wait for
``assembled.json`` and report that the dataset was assembled. The holder refreshes the lock while
it works; a lock not refreshed for ``stale_after`` seconds belongs to a dead process and is
taken over. ``conceptforge assemble OUT`` runs the same step explicitly and is idempotent.

The dataset is first written to a staging folder, then published: data files first, the card
(README.md) last, and only files this project wrote are ever replaced or removed. ``assembled.json``
records each published file's size and sha256 (its manifest): a rerun, ``conceptforge assemble``
and ``conceptforge status`` check them and name what is missing or changed; ``assemble --force``
rebuilds the files from the store.

Assemblers as objects: how a finished run becomes a dataset, under a stable, stored name.

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

Assembly from the store alone (``conceptforge assemble OUT`` and the engine's last step)
reads only what the store recorded (run.json, assembly.json, the chunks, failed items), so it
needs none of the stage's code beyond its registered assembler.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from conceptforge.engine.failures import failed_items, failures_section
from conceptforge.engine.processes import holder_alive, this_process
from conceptforge.engine.store import ItemStore, Location, io_error, join
from conceptforge.errors import DataNotFoundError, InvalidArgumentError, StoreError
from conceptforge.output import WORK_DIR, RunDir, not_a_run
from conceptforge.serialization import canonical_json
from conceptforge.staging import make_staging, remove_stale

logger = logging.getLogger(__name__)

LOCK_NAME = "assembly.lock"
DONE_NAME = "assembled.json"
#: Every file the assemblies of this store published (kept apart from ``assembled.json``, which is
#: removed while an assembly publishes): what a later assembly may replace or remove.
PUBLISHED_NAME = "published.json"
DEFAULT_STALE_AFTER = 300.0
HEARTBEAT = 20.0
#: Published last: a folder without its card never looks complete.
LAST_FILES = ("README.md",)


@dataclass
class AssemblyOutcome:
    """``assembled`` (by this process), ``already`` (by another), or ``busy`` (still running elsewhere)."""

    status: str
    message: str
    files: list[str] = field(default_factory=list)


class _Heartbeat(threading.Thread):
    def __init__(self, location: Location, payload: bytes) -> None:
        super().__init__(daemon=True)
        self.location, self.payload, self.stop = location, payload, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(HEARTBEAT):
            try:
                self.location.write(LOCK_NAME, self.payload)
            except OSError:  # pragma: no cover - the next beat retries
                logger.debug("heartbeat failed", exc_info=True)


def lock_holder(location: Location) -> dict | None:
    """The record in ``assembly.lock`` (token, host, pid, start time), or None when there is none."""
    try:
        record = json.loads(location.read(LOCK_NAME))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _take_lock(location: Location, stale_after: float) -> tuple[str | None, bool]:
    """Create the lock; take over a dead holder's at once and a stale one after ``stale_after``.

    Returns (our token or None if a live process holds it, whether we took over another's lock).
    A holder on this host whose process is gone (kill -9, OOM) is known dead at once; one on
    another host is dead only when it stopped refreshing the lock.
    """
    token = uuid.uuid4().hex
    payload = canonical_json({"token": token, **this_process(), "time": time.time()})
    took_over = False
    for _ in range(2):
        if location.create(LOCK_NAME, payload):
            try:  # read back: a concurrent stale-lock takeover may have replaced ours
                if json.loads(location.read(LOCK_NAME)).get("token") == token:
                    return token, took_over
            except (OSError, ValueError):
                pass
            return None, False
        holder = lock_holder(location) or {}
        modified = location.mtime(LOCK_NAME)
        if holder_alive(holder) is False:
            logger.warning(
                "taking over the assembly lock of process %s on %s, which is gone",
                holder.get("pid"),
                holder.get("host"),
            )
        elif modified is not None and time.time() - modified > stale_after:
            logger.warning("taking over a stale assembly lock (not refreshed for %.0f s)", time.time() - modified)
        else:
            return None, False
        location.remove(LOCK_NAME)
        took_over = True
    return None, False


def read_done(location: Location) -> dict | None:
    try:
        return json.loads(location.read(DONE_NAME))
    except (FileNotFoundError, ValueError):
        return None


def file_digest(location: Location, name: str) -> tuple[int, str] | None:
    """Size and sha256 of ``name`` in ``location`` (streamed), or None if it is absent."""
    digest, size = hashlib.sha256(), 0
    try:
        if location.local:
            handle = open(location.path(name), "rb")
        else:
            handle = location.fs.open(location.path(name), "rb")
        with handle:
            while block := handle.read(1 << 20):
                digest.update(block)
                size += len(block)
    except (FileNotFoundError, IsADirectoryError):
        return None
    return size, digest.hexdigest()


def verify_assembled(out: Location, done: dict) -> list[str]:
    """What is missing or changed among the files an assembly published (its manifest).

    An assembly made before manifests were recorded has none: nothing to check, nothing said.
    """
    problems = []
    for name, entry in sorted((done.get("manifest") or {}).items()):
        found = file_digest(out, name)
        if found is None:
            problems.append(f"{name} is missing")
        elif found != (entry.get("size"), entry.get("sha256")):
            problems.append(f"{name} was changed")
    return problems


def damage_message(out: str, problems: list[str]) -> str:
    shown = "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more" if len(problems) > 4 else "")
    return (
        f"{out} was assembled, but {len(problems)} of its files no longer match: {shown}; "
        f"`conceptforge assemble {out} --force` rebuilds it from the store"
    )


def _publish(staging: Path, out: Location, work: Location, owned: set[str]) -> tuple[list[str], dict[str, dict]]:
    """Copy the staged dataset into ``out``; remove files of the previous assembly that are gone.

    ``owned`` are the files earlier assemblies published: only those may be replaced or removed.
    A file of the same name that someone else put there is refused before anything is written.
    Returns the files and their manifest (size and sha256 of each, hashed from the staging copy).
    """
    files = sorted(
        str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file() and not p.name.startswith(".")
    )
    foreign = [name for name in files if name not in owned and out.exists(name)]
    if foreign:
        raise StoreError(
            f"{out} holds {', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}, which conceptforge did not write; "
            "move it away, then rerun `conceptforge assemble` (nothing was replaced)"
        )
    manifest = {}
    for name in files:
        size, digest = file_digest(Location(str(staging)), name) or (0, "")
        manifest[name] = {"size": size, "sha256": digest}
    # what this assembly may leave behind if it dies half-way: all of it is ours next time
    work.write(PUBLISHED_NAME, canonical_json({"files": sorted(owned | set(files))}))
    ordered = [f for f in files if f not in LAST_FILES] + [f for f in files if f in LAST_FILES]
    for name in sorted(owned):
        if name not in files and name not in LAST_FILES:
            out.remove(name)
    for name in ordered:
        source = staging / name
        if out.local:
            target = Path(out.path(name))
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
        else:
            out.fs.put_file(str(source), out.path(name))
    work.write(PUBLISHED_NAME, canonical_json({"files": files}))
    return files, manifest


def _owned(work: Location, done: dict | None) -> set[str]:
    owned = set((done or {}).get("files", []))
    try:
        owned |= set(json.loads(work.read(PUBLISHED_NAME)).get("files", []))
    except (FileNotFoundError, ValueError, AttributeError):
        pass
    return owned


def _already(out: str, out_location: Location, done: dict) -> AssemblyOutcome:
    """An earlier assembly of the same work: reported if its files are intact, refused if not."""
    problems = verify_assembled(out_location, done)
    if problems:
        raise StoreError(damage_message(out, problems))
    return AssemblyOutcome(
        "already", f"{out} was already assembled ({len(done.get('files', []))} files)", done.get("files", [])
    )


def assemble_once(
    out: str,
    store: ItemStore,
    build: Callable[[Path], None],
    *,
    fingerprint: str,
    force: bool = False,
    wait: float = 600.0,
    stale_after: float = DEFAULT_STALE_AFTER,
    poll: float = 0.5,
) -> AssemblyOutcome:
    """Assemble ``out`` once: ``build(staging_dir)`` writes the dataset folder to publish.

    ``fingerprint`` names the work that was assembled (settings and items); a run already
    assembled with the same fingerprint is not assembled again unless ``force``.
    """
    work = store.location
    out_location = Location(out)
    deadline = time.monotonic() + wait
    asked_force, said = force, False
    while True:
        done = read_done(work)
        if done and done.get("fingerprint") == fingerprint and not force:
            return _already(out, out_location, done)
        token, took_over = _take_lock(work, stale_after)
        if token is not None:
            if took_over:
                force = asked_force  # its holder died: no result of it to take instead of ours
            break
        if time.monotonic() > deadline:
            return AssemblyOutcome(
                "busy",
                f"another process is assembling {out}; it finishes there, or run `conceptforge assemble {out}` if that process died",
            )
        if not said:  # waiting is never silent
            holder = lock_holder(work) or {}
            logger.info(
                "waiting for process %s on %s, which is assembling %s (`conceptforge status %s` shows it)",
                holder.get("pid", "?"),
                holder.get("host", "?"),
                out,
                out,
            )
            said = True
        time.sleep(poll)
        force = False  # the holder's result is what we wait for
    beat = _Heartbeat(work, work.read(LOCK_NAME))
    beat.start()
    try:
        done = read_done(work)
        if done and done.get("fingerprint") == fingerprint and not force:
            return _already(out, out_location, done)
        if out_location.local:
            parent = Path(work.path(""))
            parent.mkdir(parents=True, exist_ok=True)
            remove_stale(parent, "staging-")  # of assemblies killed half-way: we hold the lock now
            staging = make_staging(parent, "staging-")
        else:
            remove_stale(tempfile.gettempdir(), "conceptforge-staging-")
            staging = make_staging(None, "conceptforge-staging-")
        try:
            build(staging)
            owned = _owned(work, done)
            work.remove(DONE_NAME)
            files, manifest = _publish(staging, out_location, work, owned)
            work.write(
                DONE_NAME,
                canonical_json({"fingerprint": fingerprint, "files": files, "manifest": manifest, "time": time.time()}),
            )
        except OSError as error:
            raise io_error(error, "assemble the dataset in", out, flag=store.flag) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        logger.info(
            "assembled %s (%d files) in process %d", out, len(files), os.getpid()
        )  # counted by the cluster tests
        return AssemblyOutcome("assembled", f"assembled {out} ({len(files)} files)", files)
    finally:
        beat.stop.set()
        beat.join(timeout=5)
        work.remove(LOCK_NAME)


# -- assemblers: stored names -> objects --------------------------------------------------------
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


#: Stored names keep the module a stage's assembler was first registered under; the modules moved
#: (issue #31: one package per benchmark, the engine in ``conceptforge.engine``). The name's module
#: part is looked up here first, so a run stored before the move still assembles.
MOVED_MODULES: dict[str, str] = {
    "conceptforge.generators.binding.generate": "conceptforge.generators.binding.stage",
    "conceptforge.generators.sub.generate": "conceptforge.generators.sub.card",
    "conceptforge.generators.conceptbed.generate": "conceptforge.generators.conceptbed.card",
    "conceptforge.filters.sub_pipeline": "conceptforge.filters.sub.pipeline",
}


def find_assembler(name: str) -> Assembler | RepoAssembler:
    """The assembler stored as ``name``: registered, or registered by importing the module the
    name starts with (``"module:function"``); a module that only defines the function (stages
    outside the package, e.g. tests and benchmarks) works too."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    module_name, _, function = name.partition(":")
    try:
        module = importlib.import_module(MOVED_MODULES.get(module_name, module_name))
        if name in _REGISTRY:
            return _REGISTRY[name]
        found = getattr(module, function)
    except (ImportError, AttributeError, ValueError) as error:
        raise InvalidArgumentError(f"cannot load the assembler {name!r} of this run: {error}") from None
    if isinstance(found, (Assembler, RepoAssembler)):
        return found
    return Assembler(name, found)


ASSEMBLY_ARGS = "assembly.json"


# -- assembly from the store alone ---------------------------------------------------------------
def assemble_run(
    out: str | os.PathLike[str] | RunDir,
    *,
    store: ItemStore | None = None,
    force: bool = False,
    wait: float = 600.0,
    allow_failed: bool = False,
) -> AssemblyOutcome:
    """Assemble the run in ``out`` from its store, once (see :func:`assemble_once`).

    Items that failed every attempt make it refuse, unless ``allow_failed``: then the dataset is
    assembled without them and its card lists them.
    """
    if store is None:
        # `conceptforge assemble OUT`: the folder is the argument, not a flag one could change
        run = out if isinstance(out, RunDir) else RunDir(str(out), join(str(out), WORK_DIR), "OUT")
        if run.existing_store() is None:  # never create a store in a mistyped folder
            raise DataNotFoundError(not_a_run(str(run)))
        store = run.store()
        repo = repo_assembler_of(store)
        if repo is not None:  # a folder of several runs (e.g. one Hub repo with a config per run)
            return repo.assemble(str(run), force=force, wait=wait, **({"allow_failed": True} if allow_failed else {}))
    out = str(out)
    config = store.stored_config()
    if config is None:
        raise StoreError(f"{out} has no finished work yet: run the stage first")
    try:
        spec = json.loads(store.location.read(ASSEMBLY_ARGS))
        assembler, args = spec["assembler"], spec["args"]
        expected = len(plan_chunks_count(config))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        raise StoreError(
            f"{out} does not say how to assemble it ({WORK_DIR}/{ASSEMBLY_ARGS} or run.json is missing or "
            "damaged); rerun the stage"
        ) from None
    done = store.chunk_states()
    if len(done) < expected:
        raise StoreError(
            f"{out}: {expected - len(done)} of {expected} chunks are still missing; finish every shard first (`conceptforge status {out}`)"
        )
    failures = failed_items(store)
    if failures and len(failures) >= int(config["plan"].get("items", 0) or 0):
        raise StoreError(
            f"{out}: every one of its {len(failures)} item(s) failed every attempt (e.g. {failures[0].item_id}: "
            f"{failures[0].error}): there is nothing to assemble; fix the cause and rerun the stage"
        )
    if failures and not allow_failed:
        raise StoreError(
            f"{out}: {len(failures)} item(s) failed every attempt (`conceptforge status {out}` lists them): rerun "
            f"the stage to retry them, or assemble without them: conceptforge assemble {out} --allow-failed"
        )
    found = find_assembler(assembler)
    if not isinstance(found, Assembler):
        raise InvalidArgumentError(f"{out}: {assembler!r} assembles a folder of runs, not one run")
    function = found.assemble
    record = {"config": config, "assembly": spec, **({"failed": [f.item_id for f in failures]} if failures else {})}
    fingerprint = hashlib.sha256(canonical_json(record)).hexdigest()

    def build(staging: Path) -> None:
        function(store, staging, args)
        card = Path(staging) / "README.md"
        if failures and card.exists():  # the card says which items the dataset leaves out
            card.write_text(
                card.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + failures_section(failures), encoding="utf-8"
            )

    return assemble_once(out, store, build, fingerprint=fingerprint, force=force, wait=wait)


def mark_repo(store: ItemStore, assembler: RepoAssembler) -> None:
    """Record in a folder's own store (``OUT/.work``) that it holds several runs
    (``.work/<name>/``) and which :class:`~conceptforge.engine.assembly.RepoAssembler` finishes them."""
    try:
        store.location.write(ASSEMBLY_ARGS, canonical_json({"repo_assembler": assembler.name}))
    except OSError as error:
        raise io_error(error, "write to", str(store)) from None


def repo_assembler_of(store: ItemStore) -> RepoAssembler | None:
    """The repo assembler a folder of several runs names (see :func:`mark_repo`); None for a
    folder of one run."""
    if store.stored_config() is not None:
        return None
    try:
        spec = json.loads(store.location.read(ASSEMBLY_ARGS))
    except (FileNotFoundError, ValueError):
        return None
    name = spec.get("repo_assembler")
    if name is None:
        return None
    assembler = find_assembler(name)
    if not isinstance(assembler, RepoAssembler):
        raise InvalidArgumentError(f"{name!r} assembles one run, not a folder of runs")
    return assembler


def plan_chunks_count(config: Mapping[str, Any]) -> range:
    """Chunk indices of a stored run (recorded when its first chunk was written)."""
    return range(int(config["plan"].get("chunks", 0)))
