"""The one output guard: where a command writes, parsed once, and what it may touch there.

Why one: every command that writes (generate, filter, select-candidates, train-oracle,
annotate --apply, evaluate --output, leaderboard --output, publish staging) must keep the same
promise: **a file this project did not write is never deleted or replaced**. Three shapes of
output share the rules below.

- :class:`RunDir` — an engine run (``OUT`` with its item store in ``OUT/.work``). Made once at
  the command boundary from ``--out`` (or ``--work``); it carries the :class:`Location`, the item
  store and the flag name for messages, and flows through the engine (no re-parsing). A folder
  holding anything but one of our runs is refused, and so is a run of *another stage*: the store
  records the stage that made it (``made_by.json``, created atomically) and a binding run is not
  a SUB filter's ``--out``, nor the other way round.
- :func:`claim_folder` — a plain output folder we write whole (a trained oracle, an annotated
  dataset). We own it when it carries our marker (``.conceptforge.json``, naming the command that
  wrote it); an empty or absent folder is free; anything else is refused.
- :func:`claim_files` — single report files (``x.json`` and the ``x.md`` beside it). A file is ours
  when it is absent or when its first bytes carry our signature (:func:`json_with_keys` for the
  JSON files a command updates: a candidate spec, an annotation export, saved scores).

Every refusal is one line (a :class:`~conceptforge.errors.ConceptforgeError`, exit 2), raised
before anything is written.
"""

from __future__ import annotations

import atexit
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from conceptforge.argtypes import symlink_problem
from conceptforge.engine.store import OWNER_NAME, RUN_CONFIG_NAME, ItemStore, Location, io_error, is_url, join
from conceptforge.errors import InvalidArgumentError, StoreError
from conceptforge.serialization import canonical_json
from conceptforge.staging import is_staging

WORK_DIR = ".work"
#: In a store root: the stage that made the run (``{"stage": "sub/candidates"}``), created once.
MADE_BY = "made_by.json"
#: In a plain output folder (train-oracle, annotate --apply): which command wrote it.
FOLDER_MARKER = ".conceptforge.json"
_ASSEMBLY_ARGS = "assembly.json"  # runner.ASSEMBLY_ARGS (the runner imports us, not the other way)
#: A dataset folder's card and shard folder (cards/dataset_dir.py writes them; defined here, below
#: it, so the guard can tell a user's dataset from other files).
CARD_NAME = "README.md"
DATA_DIR = "data"
#: A data shard's name as the datasets library and our assembly write it (``train-00000-of-00001.parquet``).
SHARD_NAME = re.compile(r"(?P<split>.+)-(?P<index>\d{5})-of-(?P<total>\d{5})\.parquet")


def _shown(entries: Iterable[str]) -> str:
    entries = sorted(entries)
    return ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")


def _is_dataset(location: Location, entries: Sequence[str]) -> bool:
    """A card beside a ``data/`` folder of parquet shards: what assembly and a release download hold."""
    if CARD_NAME not in entries or DATA_DIR not in entries:
        return False
    try:
        if location.local:
            names = (p.name for p in Path(location.root, DATA_DIR).rglob("*.parquet"))
        else:
            names = (str(e).rsplit("/", 1)[-1] for e in location.fs.find(join(location.root, DATA_DIR)))
        return any(SHARD_NAME.fullmatch(name) for name in names)  # a folder of the user's own parquet is not one
    except OSError:
        return False


def foreign_contents(location: Location, entries: Sequence[str]) -> str:
    """What a folder that is not one of our runs holds, in the user's terms.

    Why: a dataset folder (an assembled run, a downloaded release) *is* conceptforge's output;
    calling it "not a conceptforge run" sent users looking for a damaged run.
    """
    if _is_dataset(location, entries):
        return f"a dataset ({CARD_NAME}, {DATA_DIR}/)"
    return f"files that are not a conceptforge run ({_shown(entries)})"


def _url_absence(location: Location) -> str | None:
    """Why an object-store URL holds nothing, as the store says it (NoSuchBucket, no key under a prefix)."""
    bucket = location.root.split("/", 1)[0]
    try:
        if not location.fs.exists(bucket):
            return f"{location.url}: bucket {bucket} does not exist at the object store (NoSuchBucket); check the URL"
        if not location.fs.exists(location.root):
            return f"{location.url}: the object store has no object under this prefix in bucket {bucket}; check the URL"
    except OSError:
        return None
    return None


def nesting_problem(out: str | os.PathLike[str], flag: str = "--out") -> str | None:
    """Why a local output folder must not be where it is, or None: inside a run's ``.work`` store,
    or inside another run's or dataset's folder, whose files it would then become part of (the
    dataset is published and verified as a whole; assembly refuses files it did not write)."""
    text = os.fspath(out)
    if is_url(text):
        return None
    path = Path(os.path.abspath(text))
    for parent in path.parents:
        if parent.name == WORK_DIR:
            return f"{flag} {text} is inside the item store {parent} of a run: choose a folder outside it"
        try:
            entries = [p.name for p in parent.iterdir()] if parent.is_dir() else []
        except OSError:
            continue
        if WORK_DIR in entries and (parent / WORK_DIR / OWNER_NAME).exists():
            what = "run"
        elif _is_dataset(Location(str(parent)), entries):
            what = "dataset"
        else:
            continue
        return (
            f"{flag} {text} is inside the {what} folder {parent}, whose files it would become part of: "
            "choose a folder outside it"
        )
    return None


def not_a_run(out: str) -> str:
    """The one line for a path given where a run's ``--out`` folder (with ``.work/``) is expected."""
    location = Location(out)
    try:
        entries = _entries(location, "", out)
    except (OSError, InvalidArgumentError):
        entries = []
    if not entries and not location.local:  # nothing there: the object store's words, not a local path's
        absent = _url_absence(location)
        if absent:
            return absent
    if _is_dataset(location, entries):
        return (
            f"{out} is a dataset folder ({CARD_NAME}, {DATA_DIR}/), not a run: give the --out folder of the "
            f"generate or filter run that made it (the folder holding {WORK_DIR}/)"
        )
    return f"{out} is not a conceptforge run (no {WORK_DIR}/owner.json); check the path"


def _entries(location: Location, flag: str, text: str) -> list[str]:
    """Names in ``location``'s root (files and folders); [] if it does not exist."""
    try:
        if location.local:
            path = Path(location.root)
            linked = symlink_problem(path)
            if linked:
                raise InvalidArgumentError(f"{flag} {linked}".strip())
            if path.exists() and not path.is_dir():
                raise InvalidArgumentError(f"{flag} {text} is a file; choose a folder")
            return [p.name for p in path.iterdir()] if path.is_dir() else []
        location.refresh()
        try:
            return [e.rstrip("/").rsplit("/", 1)[-1] for e in location.fs.ls(location.root, detail=False)]
        except FileNotFoundError:
            return []
    except OSError as error:
        raise io_error(error, "read", text) from None


def recorded_stage(work: Location) -> str | None:
    """The stage that made the run in ``work`` (a store root), or None for a new one.

    Runs made before ``made_by.json`` existed are recognised by their settings record (which
    names the stage) or by a repo of several runs (binding's ``repo_assembler``).
    """
    for name, key in ((MADE_BY, "stage"), (RUN_CONFIG_NAME, "stage")):
        try:
            value = json.loads(work.read(name)).get(key)
        except (FileNotFoundError, NotADirectoryError, ValueError, AttributeError):
            continue  # nothing there (a path through a file is refused later, when writing)
        except OSError as error:
            raise io_error(error, "read", str(work)) from None
        if value:
            return str(value)
    try:
        if json.loads(work.read(_ASSEMBLY_ARGS)).get("repo_assembler"):
            return "binding"
    except (FileNotFoundError, NotADirectoryError, ValueError, AttributeError):
        pass
    except OSError as error:
        raise io_error(error, "read", str(work)) from None
    return None


def _store_being_created(work: Location) -> bool:
    """A ``.work`` folder holding nothing yet but hidden temp/probe files: a store being opened.

    On an object store the owner record is the first object written (an atomic put, no temp
    file), so anything there without it, files or "folders" such as ``chunks/``, is a damaged or
    foreign store: it used to pass (only files were listed) and a run with other settings took
    the chunks over as its own.
    """
    try:
        if work.local:
            return all(name.startswith(".") for name in os.listdir(work.root))
        work.refresh()
        return not work.fs.ls(work.root, detail=False)
    except FileNotFoundError:
        return True
    except OSError:
        return False


@dataclass
class RunDir:
    """One engine run's output location (see the module docstring).

    ``out`` is what the user gave (messages and card paths); ``work`` the item store's root,
    ``OUT/.work`` unless a stage keeps several runs (binding: ``OUT/.work/<config>``).
    """

    out: str
    work: str
    flag: str = "--out"
    _store: ItemStore | None = field(default=None, repr=False, compare=False)
    _stages: set[str] = field(default_factory=set, repr=False, compare=False)

    # -- making one --------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        out: str | os.PathLike[str] | RunDir,
        *,
        flag: str = "--out",
        work: str | None = None,
        stage: str | None = None,
    ) -> RunDir:
        """Check ``out`` (read only) and return its RunDir; a RunDir given is returned as it is.

        Refused, before anything is written: a file; a folder with files that are not one of our
        runs; a run of conceptforge's first store format; with ``stage``, a run of another stage.
        """
        if isinstance(out, RunDir):
            if stage is not None:
                out.check_stage(stage)
            return out
        text = str(out)
        run = cls(text, work or join(text, WORK_DIR), flag)
        run._check_folder()
        if stage is not None:
            run.check_stage(stage)
        return run

    @classmethod
    def of_store(cls, store: ItemStore) -> RunDir:
        """The RunDir of a store opened by the caller (who vouches for the folder around it)."""
        url = store.location.url.rstrip("/")
        out = url.rsplit("/", 1)[0] if is_url(url) else str(Path(url).parent)
        return cls(out, store.location.url, "--out", _store=store)

    def child(self, name: str) -> RunDir:
        """The run kept in ``.work/<name>/`` of this folder (one per config of a repo)."""
        return RunDir(self.out, join(self.work, name), self.flag)

    def __str__(self) -> str:
        return self.out

    # -- checks ------------------------------------------------------------------------------
    def _check_folder(self) -> None:
        location = Location(self.out)
        nested = nesting_problem(self.out, self.flag)
        if nested:
            raise StoreError(nested)
        entries = _entries(location, self.flag, self.out)
        if not entries:
            return
        if self.work == self.out:  # the folder is the store itself (select-candidates --work)
            if OWNER_NAME in entries:
                return
            raise StoreError(
                f"{self.flag} {self.out} already holds {foreign_contents(location, entries)}; "
                "choose an empty or new folder"
            )
        work = Location(join(self.out, WORK_DIR))
        if WORK_DIR in entries and work.exists(OWNER_NAME):
            return
        if entries == [WORK_DIR] and _store_being_created(work):
            return  # another process of this run is creating the store right now (shards start together)
        if WORK_DIR in entries and work.exists(RUN_CONFIG_NAME):
            raise StoreError(
                f"{self.flag} {self.out} holds a run of conceptforge's first store format (one file per item), which this "
                f"version cannot resume; choose a new {self.flag}"
            )
        raise StoreError(
            f"{self.flag} {self.out} already holds {foreign_contents(location, entries)}; choose an empty or new folder"
        )

    def check_stage(self, stage: str) -> None:
        """Refuse a run made by another stage (read only; :meth:`record_stage` writes)."""
        if stage in self._stages:
            return
        repo = join(self.out, WORK_DIR)
        # a run of a repo (binding: OUT/.work/<config>) is checked against the repo's stage too
        inside_repo = self.work != repo and self.work.startswith(repo)
        checks = [(self.work, stage)] + ([(repo, stage.split("/", 1)[0])] if inside_repo else [])
        for where, wanted in checks:
            recorded = recorded_stage(Location(where))
            if recorded is not None and recorded != wanted:
                raise StoreError(
                    f"{self.flag} {self.out} holds a conceptforge run of another stage ({recorded}), not {stage}; "
                    f"choose a new {self.flag}"
                )

    def record_stage(self, stage: str) -> None:
        """Record ``stage`` as this run's maker, atomically (two first runs: one record wins)."""
        if stage in self._stages:
            return
        self.check_stage(stage)
        store = self.store()
        payload = canonical_json({"stage": stage})
        try:
            created = store.location.create(MADE_BY, payload)
        except OSError as error:
            raise io_error(error, "write to", str(store)) from None
        if not created:
            self.check_stage(stage)  # another process recorded a stage first: it must be ours
        repo_root = join(self.out, WORK_DIR)
        if self.work != repo_root and self.work.startswith(repo_root):  # a repo of runs: the repo says which stage too
            repo = Location(repo_root)
            try:
                repo.create(MADE_BY, canonical_json({"stage": stage.split("/", 1)[0]}))
            except OSError as error:
                raise io_error(error, "write to", str(repo)) from None
        self._stages.add(stage)

    # -- the store ---------------------------------------------------------------------------
    def store(self) -> ItemStore:
        """The run's item store, created (``owner.json``) on first use."""
        if self._store is None:
            self._store = ItemStore(self.work, flag=self.flag)
        return self._store

    def existing_store(self) -> ItemStore | None:
        """The store if one exists, opened read only (nothing is created); None otherwise."""
        if self._store is not None:
            return self._store
        try:
            if not Location(self.work).exists(OWNER_NAME):
                return None
        except OSError as error:
            raise io_error(error, "read", self.out) from None
        return ItemStore(self.work, create=False, flag=self.flag)


# -- plain output folders ------------------------------------------------------------------------
def claim_folder(
    path: str | os.PathLike[str],
    *,
    made_by: str,
    flag: str = "--out",
    allow: Sequence[str] = (),
    nested_ok: bool = False,
) -> Path:
    """Check that ``path`` may be written whole by ``made_by`` (read only); return it as a Path.

    Free: absent, empty, or carrying our marker from the same command; and (unless ``nested_ok``,
    for a folder the project places itself, such as artifacts inside a run) not inside a run or
    dataset folder. ``allow`` names entries
    that may be there besides (none of them is touched). Anything else is refused.
    """
    path = Path(path)
    linked = symlink_problem(path)
    if linked:
        raise InvalidArgumentError(f"{flag} {linked}")
    if path.exists() and not path.is_dir():
        raise InvalidArgumentError(f"{flag} {path} is a file; choose a folder")
    nested = None if nested_ok else nesting_problem(path, flag)  # a folder the user named (not ours inside a run)
    if nested:
        raise StoreError(nested)
    try:
        # a staging folder of ours (left by a killed run) is not someone else's file
        entries = [p.name for p in path.iterdir() if not is_staging(p)] if path.is_dir() else []
    except OSError as error:
        raise io_error(error, "read", str(path)) from None
    entries = [e for e in entries if e not in allow]
    if not entries:
        return path
    marker = _read_marker(path)
    if marker is None:
        raise StoreError(
            f"{flag} {path} already holds {foreign_contents(Location(str(path)), entries)}; "
            "choose an empty or new folder"
        )
    if marker.get("made_by") != made_by:
        raise StoreError(
            f"{flag} {path} holds output of `conceptforge {marker.get('made_by')}`, not of `conceptforge {made_by}`; "
            "choose an empty or new folder"
        )
    return path


def _read_marker(path: Path) -> dict | None:
    try:
        marker = json.loads((path / FOLDER_MARKER).read_bytes())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def owned_files(path: str | os.PathLike[str]) -> list[str]:
    """Files our marker in ``path`` says we wrote ([] without a marker)."""
    marker = _read_marker(Path(path)) or {}
    return [str(name) for name in marker.get("files", [])]


def marker_bytes(made_by: str, files: Iterable[str]) -> bytes:
    return canonical_json({"made_by": made_by, "files": sorted(files)})


def normal_mode(path: Path, *, directory: bool) -> None:
    """The mode a plain ``open()``/``mkdir()`` gives (``mkdtemp``/``mkstemp`` give 0700/0600)."""
    current = os.umask(0)
    os.umask(current)
    os.chmod(path, (0o777 if directory else 0o666) & ~current)


# -- single report files -------------------------------------------------------------------------
def claim_files(
    paths: Sequence[str | os.PathLike[str]], *, ours: Callable[[Path, bytes], bool], flag: str = "--output"
) -> None:
    """Refuse (before any work) if one of ``paths`` exists and is not ours, or cannot be written.

    ``ours(path, head)`` tells from a file's first KiB whether this project wrote it.
    """
    for path in map(Path, paths):
        linked = symlink_problem(path)
        if linked:
            raise InvalidArgumentError(f"{flag} {linked}")
        if path.is_dir():
            raise InvalidArgumentError(f"{flag} {path} is a folder; give a file name")
        if path.exists():
            try:
                with path.open("rb") as handle:
                    head = handle.read(1024)
            except OSError as error:
                raise io_error(error, "read", str(path)) from None
            if not ours(path, head):
                raise StoreError(
                    f"{flag}: {path} already exists and was not written by conceptforge; move it away or choose another name"
                )
    for path in map(Path, paths):
        _lock_output(path, flag)


#: Output files this process holds (see :func:`_lock_output`), removed when it exits.
_HELD: dict[Path, Path] = {}


def hold_output(path: str | os.PathLike[str], *, flag: str = "--out") -> None:
    """Hold an output folder (or file) for this process until it exits (see :func:`_lock_output`).

    For a command that writes a folder whole at its end (train-oracle, annotate --apply): two
    such runs on one ``--out`` used to both say "saved", one result silently replaced. Call it
    in one process of a distributed run (rank 0), after :func:`claim_folder`.
    """
    _lock_output(Path(path), flag)


def _lock_output(path: Path, flag: str) -> None:
    """Hold ``path`` for this process until it exits: a second process claiming it meanwhile is
    refused in one line (two runs writing one ``--output`` used to both exit 0, one result lost).

    The lock is a hidden file beside the output naming our process; one left by a process that is
    gone (kill -9) is taken over.
    """
    from conceptforge.engine.processes import holder_alive, this_process

    path = Path(os.path.abspath(path))
    if path in _HELD:
        return
    lock = path.with_name(f".{path.name}.conceptforge-lock")
    record = this_process()
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            if Location(str(lock.parent)).create(lock.name, json.dumps(record).encode()):
                break
            try:
                holder = json.loads(lock.read_bytes())
            except (OSError, ValueError):
                holder = {}
            if holder == record:
                break
            if holder_alive(holder) is not False and holder:
                where = f"process {holder.get('pid')} on {holder.get('host')}"
                raise StoreError(
                    f"{flag}: {path} is being written by another conceptforge run ({where}); wait for it to "
                    f"finish or choose another name (if that run is gone, delete {lock})"
                )
            lock.unlink(missing_ok=True)  # its process is gone (or the lock is unreadable): take it over
        else:
            raise StoreError(f"{flag}: cannot take {lock}; delete it if no conceptforge run is writing {path}")
    except OSError as error:  # the lock is the output's first byte on disk: name the output
        raise io_error(error, "write to", str(path), flag=flag) from None
    if not _HELD:
        atexit.register(release_outputs)
    _HELD[path] = lock


def release_outputs() -> None:
    """Let go of the outputs this process claimed (a command's end; also at exit)."""
    for lock in _HELD.values():
        try:
            lock.unlink(missing_ok=True)
        except OSError:
            pass
    _HELD.clear()


def json_with_keys(*keys: str, lines: bool = False) -> Callable[[Path, bytes], bool]:
    """An ``ours`` test for :func:`claim_files`: the file is a JSON object holding every one of
    ``keys`` (with ``lines=True``: JSON lines, the first of them such an object; an empty file
    counts as ours, it is what a run with no records writes).

    Why whole-file parsing: a user's JSON that merely starts like ours (``{"birds": …}`` written
    by hand) must not be rewritten.
    """

    def ours(path: Path, head: bytes) -> bool:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return False
        if lines:
            text = next((line for line in text.splitlines() if line.strip()), "")
            if not text:
                return True
        try:
            value = json.loads(text)
        except ValueError:
            return False
        return isinstance(value, dict) and all(key in value for key in keys)

    return ours


def mark_folder(path: str | os.PathLike[str], *, made_by: str) -> None:
    """Put our marker into ``path`` (created if needed) unless one is there: the folder is ours.

    For a working folder that collects many files over many runs (``generate conceptbed
    --work-dir``), checked with :func:`claim_folder` before the first write.
    """
    path = Path(path)
    if _read_marker(path) is not None:
        return
    path.mkdir(parents=True, exist_ok=True)
    Location(str(path)).create(FOLDER_MARKER, marker_bytes(made_by, []))


def claim_sqlite(
    path: str | os.PathLike[str], *, tables: Iterable[str], flag: str, what: str, rebuilt: bool = True
) -> Path:
    """Refuse (read only, before anything is written) an existing ``path`` that is not our SQLite file.

    Ours: absent, empty, or a SQLite database holding every one of ``tables`` and no table of
    another schema. Why: ``CREATE TABLE IF NOT EXISTS`` on a user's own database (or on any file
    that happens to have the name) writes our tables into it, and a damaged file ended in a
    ``sqlite3.DatabaseError`` traceback. ``what`` names the file in the message ("sample cache");
    ``rebuilt=False`` for a file whose loss is not made good by a rerun (human annotations).
    """
    import sqlite3

    path = Path(path)
    if path.is_dir():
        raise InvalidArgumentError(f"{flag} {path} is a folder; give a file name")
    try:
        if not path.exists() or path.stat().st_size == 0:
            return path
    except OSError as error:
        raise io_error(error, "read", str(path), flag=flag) from None
    wanted = set(tables)
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
        try:
            found = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.Error as error:
        fix = "delete it (it is made again)" if rebuilt else "restore it from a copy"
        raise StoreError(
            f"{flag}: {path} is not conceptforge's {what} ({error}); if it is and got damaged, {fix}, "
            "otherwise choose another path"
        ) from None
    found = {name for name in found if not name.startswith("sqlite_")}
    if found and not (wanted <= found):
        raise StoreError(
            f"{flag}: {path} is a SQLite database of something else (tables {_shown(found)}), not conceptforge's "
            f"{what}; move it away or choose another path"
        )
    return path
