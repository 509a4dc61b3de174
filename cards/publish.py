"""Publish a dataset directory to the Hugging Face Hub as an immutable, versioned release.

One release = one commit on ``main`` holding the data shards, the card and the grid, then a
``vMAJOR.MINOR.PATCH`` tag on that commit. The order makes every failure safe to rerun:

1. read and validate everything locally (card re-rendered with the version; no upload before the
   card, the data files and the parquet schemas agree);
2. look at the remote: an existing tag with identical files is a no-op, with other files it is
   refused (versions are immutable); a version below the latest is refused;
3. upload the changed files and commit them in **one** commit (``parent_commit`` pinned, so a
   concurrent writer makes us stop instead of interleaving). Until the commit lands nobody sees
   anything new; uploaded-but-uncommitted objects are reused by the rerun;
4. tag the commit. If ``main`` already holds exactly these files (a previous run committed and
   then failed), step 3 is skipped and only the tag is created.

There is deliberately no ``--force``: a tag that a paper cites must never change under it. A wrong
release is fixed by publishing the next version; deleting a tag stays a deliberate, manual act on
the Hub.

Memory stays flat in the dataset size: files are hashed and uploaded as streams from disk; only
the card is held in memory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conceptforge.cards.card import DatasetMetadata, load_line, render_card
from conceptforge.cards.croissant import CROISSANT_NAME, croissant_bytes, croissant_document, empty_rai_fields
from conceptforge.cards.dataset_dir import CARD_NAME, GRID_NAME
from conceptforge.cards.generated import EXPORTS_MANIFEST, check_release_paths
from conceptforge.cards.hub_eval import EVAL_YAML, Benchmark
from conceptforge.cards.hub_remote import (
    REPO_TYPE,
    _diff,
    _network_errors,
    _offline_mode,
    _reason,
    _remote_files,
    _same,
    _status,
    _url,
    hub_validate_card,
)
from conceptforge.cards.local_dataset import LocalDataset, read_dataset_dir
from conceptforge.cards.provenance import redact_secrets
from conceptforge.cards.run_record import RECORD_NAME, read_run_record
from conceptforge.cards.validate import dataset_dir_problems, ensure_valid, grid_problems
from conceptforge.cards.validity import held_out_leaks
from conceptforge.cards.versions import Version, parse_version, previous_version, published_versions
from conceptforge.errors import ConceptforgeError, HubError, InvalidArgumentError, PublishError
from conceptforge.progress import tqdm

logger = logging.getLogger(__name__)

UNCHECKED_OFFLINE = (
    "whether the version is new and above the latest published one, which files the Hub already "
    "holds, and the previous version the card names"
)
HASH_CHUNK = 4 * 1024 * 1024
_REPO_ID_RE = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


@dataclass
class LocalFile:
    path_in_repo: str
    size: int
    sha256: str
    git_oid: str
    source: Path | None = None
    content: bytes | None = None


@dataclass
class PublishResult:
    """What happened; ``action`` is ``published``, ``tagged``, ``unchanged`` or ``dry-run``."""

    repo_id: str
    version: str
    previous_version: str | None
    action: str
    commit_id: str | None = None
    uploaded: list[str] = field(default_factory=list)
    uploaded_bytes: int = 0
    deleted: list[str] = field(default_factory=list)
    total_files: int = 0
    config: str | None = None  # a repo with several configs: the one the load line names
    unchecked: str | None = None  # dry run without the Hub: why the remote checks were skipped
    rai_empty: list[str] = field(default_factory=list)  # croissant.json: required RAI fields left empty
    benchmark: Benchmark | None = None  # the eval.yaml this release writes (None: none asked for)
    leaks: list[str] = field(default_factory=list)  # held-out checks of the card that found violations
    exports: list[str] = field(default_factory=list)  # harness export files (loaders/exports) in the release
    exports_skipped: str | None = None  # why the release carries no harness exports

    @property
    def load_line(self) -> str:
        return load_line(self.repo_id, self.version, self.config)

    def summary(self) -> str:
        """The user-facing lines a command line prints."""
        previous = f" (previous: {self.previous_version})" if self.previous_version else " (first release)"
        if self.action == "unchanged":
            head = f"{self.repo_id} {self.version} is already published with identical files at commit {self.commit_id}; nothing to do"
        elif self.action == "dry-run" and self.unchecked:
            head = (
                f"dry run: {self.repo_id} {self.version} is valid locally ({self.total_files} files, "
                f"{self.uploaded_bytes / 1e6:.1f} MB); not checked, {self.unchecked}: {UNCHECKED_OFFLINE}"
            )
        elif self.action == "dry-run":
            head = (
                f"dry run: would publish {self.repo_id} {self.version}{previous}: upload {len(self.uploaded)} of "
                f"{self.total_files} files ({self.uploaded_bytes / 1e6:.1f} MB), delete {len(self.deleted)}, in one commit"
            )
        elif self.action == "tagged":
            head = f"tagged {self.repo_id} {self.version}{previous} on commit {self.commit_id} (main already held these files)"
        else:
            head = (
                f"published {self.repo_id} {self.version}{previous} at commit {self.commit_id}: "
                f"{len(self.uploaded)} files uploaded ({self.uploaded_bytes / 1e6:.1f} MB), {len(self.deleted)} deleted"
            )
        lines = [head]
        if self.rai_empty:
            lines.append(f"{CROISSANT_NAME}: RAI fields that would be empty: {', '.join(self.rai_empty)}")
        elif self.action != "unchanged":
            lines.append(f"{CROISSANT_NAME}: core and Responsible-AI fields filled")
        lines += [f"warning: held-out compositions leak: {leak} (the card's Validity section)" for leak in self.leaks]
        if self.benchmark is not None and self.action != "unchanged":
            lines.append(
                f"{EVAL_YAML}: {len(self.benchmark.tasks)} task(s), evaluation_framework {self.benchmark.framework}"
            )
        if self.exports:
            sets = sorted({p.rsplit("/", 1)[-1][: -len(".jsonl")] for p in self.exports if p.endswith(".jsonl")})
            lines.append(f"exports: lmms-eval, VLMEvalKit and inspect-ai tasks for {', '.join(sets)} (exports/)")
        elif self.exports_skipped and self.action != "unchanged":
            lines.append(f"exports: none ({self.exports_skipped})")
        lines.append(f"from datasets import load_dataset; ds = {self.load_line}")
        return "\n".join(lines)


# -- local side (reading the directory: cards.local_dataset) ----------------------------------
def release_metadata(
    local: LocalDataset, *, repo_id: str, version: Version, previous: Version | None, changes: list[str] | None = None
) -> DatasetMetadata:
    """The directory's own card spec plus repo id, version, previous version and changes."""
    return DatasetMetadata.from_dict(
        {
            **local.metadata.to_dict(),
            "repo_id": repo_id,
            "version": str(version),
            "previous_version": str(previous) if previous else None,
            "reproducible": local.metadata.reproducible or (local.directory / RECORD_NAME).is_file(),
            "changes_since": str(previous) if previous and changes is not None else None,
            "changes": list(changes or []),
        }
    )


def render_release_card(
    local: LocalDataset, *, repo_id: str, version: Version, previous: Version | None, changes: list[str] | None = None
) -> str:
    """The card as published: the directory's own spec plus repo id, version and previous version,
    and, when ``changes`` is given, the "Changes since <previous>" lines (:mod:`cards.release_diff`)."""
    metadata = release_metadata(local, repo_id=repo_id, version=version, previous=previous, changes=changes)
    return render_card(metadata, local.features, local.splits, has_grid=local.has_grid)


def release_croissant(
    local: LocalDataset, *, repo_id: str, version: Version, previous: Version | None, endpoint: str | None = None
) -> tuple[bytes, list[str]]:
    """``croissant.json`` of the release (:mod:`cards.croissant`) and its empty required RAI fields;
    its URLs name ``endpoint``, the Hub the release goes to (None: ``HF_ENDPOINT``, the client's)."""
    from huggingface_hub import constants

    metadata = release_metadata(local, repo_id=repo_id, version=version, previous=previous)
    document = croissant_document(
        metadata,
        local.features,
        local.splits,
        repo_id=repo_id,
        version=str(version),
        record=read_run_record(local.directory),
        hub=endpoint or constants.ENDPOINT,
    )
    return croissant_bytes(document), empty_rai_fields(document)


def in_memory_file(path: str, content: bytes) -> LocalFile:
    return LocalFile(path, len(content), *_hash_stream(iter([content]), len(content)), content=content)


def _hash_stream(chunks: Iterator[bytes], size: int) -> tuple[str, str]:
    sha256 = hashlib.sha256()
    git = hashlib.sha1(b"blob %d\0" % size)
    for chunk in chunks:
        sha256.update(chunk)
        git.update(chunk)
    return sha256.hexdigest(), git.hexdigest()


def _file_chunks(path: Path, progress: Any) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            progress.update(len(chunk))
            yield chunk


def local_files(local: LocalDataset, card_text: str, extra: dict[str, bytes] | None = None) -> list[LocalFile]:
    """Card and ``extra`` files (in memory: croissant.json, eval.yaml) + grid + data shards, hashed
    as streams (sha256 for LFS, git oid for blobs)."""
    files = [in_memory_file(CARD_NAME, card_text.encode("utf-8"))]
    files += [in_memory_file(path, content) for path, content in (extra or {}).items()]
    paths = ([GRID_NAME] if local.has_grid else []) + local.data_paths()
    total = sum((local.directory / p).stat().st_size for p in paths)
    with tqdm(total=total, unit="B", unit_scale=True, desc="hashing", leave=False) as progress:
        for relative in paths:
            path = local.directory / relative
            size = path.stat().st_size
            sha256, git_oid = _hash_stream(_file_chunks(path, progress), size)
            files.append(LocalFile(relative, size, sha256, git_oid, source=path))
    return files


@dataclass
class _Release:
    """One release in progress: what every step of :func:`publish_dataset` shares."""

    repo_id: str
    wanted: Version
    secrets: list[str]
    local: LocalDataset
    api: Any
    network_errors: tuple[type[BaseException], ...]
    dry_run: bool
    files: list[LocalFile] = field(default_factory=list)
    benchmark: Benchmark | None = None
    rai_empty: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    exports: list[str] = field(default_factory=list)
    exports_skipped: str | None = None

    @property
    def also_managed(self) -> tuple[str, ...]:
        """``eval.yaml`` belongs to this release only when it writes one; ``exports/`` likewise."""
        return ((EVAL_YAML,) if self.benchmark is not None else ()) + (("exports/",) if self.exports else ())

    def outcome(self) -> dict[str, Any]:
        """The fields every PublishResult of this release shares."""
        return {"exports": self.exports, "exports_skipped": self.exports_skipped}

    def replace_file(self, path: str, content: bytes) -> None:
        for index, existing in enumerate(self.files):
            if existing.path_in_repo == path:
                self.files[index] = in_memory_file(path, content)

    def local_only(self, why: str) -> PublishResult:
        logger.info("dry run without the Hub (%s): local checks only", why)
        return PublishResult(
            self.repo_id,
            str(self.wanted),
            None,
            "dry-run",
            None,
            uploaded=[f.path_in_repo for f in self.files],
            uploaded_bytes=sum(f.size for f in self.files),
            total_files=len(self.files),
            unchecked=why,
            rai_empty=self.rai_empty,
            leaks=self.leaks,
            benchmark=self.benchmark,
            **self.outcome(),
        )

    def fail(self, stage: str, error: BaseException, *, committed: str | None = None) -> HubError:
        repo_id, wanted = self.repo_id, self.wanted
        logger.debug("publish failed while %s", stage, exc_info=True)
        reason = _reason(error, self.secrets)
        status = _status(error)
        if status in (401, 403):
            return HubError(
                f"not allowed to write to {repo_id} while {stage} ({reason}); check that your token "
                "(HF_TOKEN or `hf auth login`) has write access to that namespace"
            )
        if status == 412:
            return HubError(
                f"{repo_id} changed on the Hub while publishing (someone else committed); nothing was "
                f"released — rerun to publish {wanted} on top of it"
            )
        if status == 404:  # not transient: say what does not exist instead of advising a rerun
            url = _url(error)
            what = f"{redact_secrets(url, self.secrets)} does not exist" if url else "the Hub says it does not exist"
            done = f"the files of {wanted} are committed (commit {committed}), but " if committed else ""
            return HubError(
                f"{done}publishing {repo_id} {wanted} failed while {stage}: {what} ({reason}); a rerun will not "
                f"change that — check the repo id and that {self.api.endpoint} (HF_ENDPOINT) is the Hub you mean"
            )
        if committed:
            return HubError(
                f"the files of {wanted} are committed to {repo_id} (commit {committed}) but {stage} failed "
                f"({reason}); rerun the same command to finish the release"
            )
        return HubError(
            f"publishing {repo_id} {wanted} failed while {stage} ({reason}); no version was changed — "
            "rerun the same command to complete the release"
        )


def publish_dataset(
    dataset_dir: str | Path,
    *,
    repo_id: str,
    version: str,
    private: bool = False,
    dry_run: bool = False,
    token: str | None = None,
    endpoint: str | None = None,
    num_threads: int = 4,
    benchmark: Benchmark | None = None,
    cub_dir: str | Path | None = None,
    exports: Callable[..., tuple[dict[str, bytes], str | None]] | None = None,
) -> PublishResult:
    """Publish ``dataset_dir`` as ``repo_id`` at ``version`` (see module docstring): checks, reads
    of the remote, the diff against it, one commit, the tag.

    Every release carries ``croissant.json`` (:mod:`cards.croissant`); ``benchmark`` (the owner's
    request, :class:`cards.hub_eval.Benchmark`) adds the root ``eval.yaml`` that makes the dataset
    a Hub benchmark, its tasks checked against the release's configs and splits first. Every
    release of multiple-choice-shaped data (SUB, binding) carries the harness exports
    (:mod:`loaders.exports`, under ``exports/``, naming ``repo_id`` and ``version``); a paper SUB
    release's need ``cub_dir`` (its options are CUB's attributes), without which they are left out,
    said in the summary (a release made from a user's spec reads its own ``benchmark_spec.yaml``).
    ``exports`` is their builder, :func:`conceptforge.loaders.exports.release_exports`
    (what ``conceptforge publish`` passes): the exports read the by-answer protocol of the
    harness, a layer above the cards, so the caller hands it in (None: no exports)."""
    from huggingface_hub import HfApi, get_token
    from huggingface_hub.errors import RepositoryNotFoundError

    if not _REPO_ID_RE.fullmatch(repo_id):
        raise InvalidArgumentError(f"repo id {repo_id!r} is not of the form ORG/NAME")
    wanted = parse_version(version)
    token = token if token is not None else get_token()
    secrets = [token] if token else []
    local = read_dataset_dir(dataset_dir)
    api = HfApi(endpoint=endpoint, token=token, library_name="conceptforge")
    release = _Release(repo_id, wanted, secrets, local, api, _network_errors(), dry_run, benchmark=benchmark)
    extra: dict[str, bytes] = {}
    if benchmark is not None:
        extra[EVAL_YAML] = benchmark.text(local.splits).encode("utf-8")

    # 0. Everything that needs no Hub, first: a dry run offline still validates the whole release.
    card_text = render_release_card(local, repo_id=repo_id, version=wanted, previous=None)
    on_disk = grid_problems(local.directory, (Path(local.directory) / CARD_NAME).read_text(encoding="utf-8"))
    ensure_valid(on_disk + dataset_dir_problems(local.directory, card_text, secrets=secrets), "the dataset card")
    extra[CROISSANT_NAME], release.rai_empty = release_croissant(
        local, repo_id=repo_id, version=wanted, previous=None, endpoint=endpoint
    )
    if release.rai_empty:
        logger.warning("%s: RAI fields that would be empty: %s", CROISSANT_NAME, ", ".join(release.rai_empty))
    release.leaks = held_out_leaks(local.metadata.validity)
    offline = _offline_mode()
    if offline and not dry_run:
        raise PublishError(
            "offline mode (HF_HUB_OFFLINE=1) blocks publishing; the release is valid locally — "
            "unset HF_HUB_OFFLINE to publish, or pass --dry-run to check it without the Hub"
        )
    _add_exports(release, extra, cub_dir, exports)
    check_release_paths(local.directory, extra)  # no user file of the folder is silently left out
    release.files = local_files(local, card_text, extra)
    if dry_run and offline:
        return release.local_only("offline mode (HF_HUB_OFFLINE=1)")

    # 1. What the remote holds.
    repo_exists = True
    try:
        refs = api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
    except RepositoryNotFoundError:
        repo_exists, refs = False, None
    except release.network_errors as error:
        if dry_run and _status(error) not in (401, 403):
            return release.local_only(f"the Hub could not be read ({_reason(error, secrets)})")
        raise release.fail("reading the repository's tags", error) from None
    tags = {t.name: t.target_commit for t in refs.tags} if refs else {}
    versions = published_versions(tags)
    previous = previous_version(wanted, versions)

    # 2. The release as it would be published, validated before anything is sent.
    _final_card(release, card_text, previous, endpoint=endpoint)

    # 3. The diff against the remote (an identical tagged release is a no-op).
    result = _compare(release, refs, tags, versions, previous)
    if dry_run or result.action == "unchanged":
        return result

    # 4. One commit with every changed file (skipped when main already holds them), then the tag.
    _commit(release, result, repo_exists=repo_exists, private=private, previous=previous, num_threads=num_threads)
    return _tag(release, result)


def _add_exports(
    release: _Release,
    extra: dict[str, bytes],
    cub_dir: str | Path | None,
    release_exports: Callable[..., tuple[dict[str, bytes], str | None]] | None,
) -> None:
    """The harness exports of the release (loaders.exports) into ``extra``, or why there are none."""
    if release_exports is None:
        release.exports, release.exports_skipped = [], "no exports builder was passed (publish_dataset(exports=...))"
        return
    try:
        files, why_not = release_exports(
            release.local.directory,
            repo_id=release.repo_id,
            tag=str(release.wanted),
            cub_dir=cub_dir,
            pretty_name=release.local.metadata.pretty_name,
        )
    except InvalidArgumentError as error:  # SUB without --cub-dir: the release goes out without them
        files, why_not = {}, str(error)
    if why_not:  # the summary says it; a release without exports is not an error
        logger.debug("no harness exports in this release: %s", why_not)
    extra.update(files)
    release.exports, release.exports_skipped = sorted(files), why_not


def _final_card(release: _Release, card_text: str, previous: Version | None, *, endpoint: str | None) -> None:
    """The card as published (naming the previous version), checked locally and by the Hub."""
    local, secrets = release.local, release.secrets
    if previous is not None:  # the card names the previous version and what changed since: render and check it again
        try:
            from conceptforge.cards.release_diff import (
                release_changes,
            )  # late: it reads parquet rows, needed only for a new version

            changes = release_changes(
                local.directory,
                release.repo_id,
                previous,
                api=release.api,
                local={f.sha256: f.source for f in release.files if f.source is not None},
            )
        except release.network_errors as error:
            raise release.fail(f"reading the previous release {previous} to list the changes", error) from None
        card_text = render_release_card(
            local, repo_id=release.repo_id, version=release.wanted, previous=previous, changes=changes
        )
        ensure_valid(dataset_dir_problems(local.directory, card_text, secrets=secrets), "the dataset card")
        release.replace_file(CARD_NAME, card_text.encode("utf-8"))
        croissant, _ = release_croissant(
            local, repo_id=release.repo_id, version=release.wanted, previous=previous, endpoint=endpoint
        )
        release.replace_file(CROISSANT_NAME, croissant)
    try:  # the Hub's own check of the card's metadata (DatasetCard.validate), before any upload
        hub_validate_card(card_text, endpoint=endpoint)
    except release.network_errors as error:
        raise release.fail("validating the card with the Hub", error) from None


def _compare(
    release: _Release, refs: Any, tags: dict[str, str], versions: list[Version], previous: Version | None
) -> PublishResult:
    """What would change: ``unchanged`` for an identical tagged release, else the files to
    upload and delete on ``main`` (a ``dry-run`` result until committed)."""
    api, repo_id, wanted, files = release.api, release.repo_id, release.wanted, release.files
    first_config = next((s.config for s in release.local.splits if s.config != "default"), None)
    try:
        if str(wanted) in tags:
            tagged = tags[str(wanted)]
            changed, deleted = _diff(files, _remote_files(api, repo_id, tagged, release.also_managed))
            if not changed and not deleted:
                logger.info("%s %s already published at %s", repo_id, wanted, tagged)
                return PublishResult(
                    repo_id,
                    str(wanted),
                    str(previous) if previous else None,
                    "unchanged",
                    tagged,
                    total_files=len(files),
                    config=first_config,
                    rai_empty=release.rai_empty,
                    leaks=release.leaks,
                    benchmark=release.benchmark,
                    **release.outcome(),
                )
            differing = ", ".join([f.path_in_repo for f in changed][:3] + deleted[:2])
            raise PublishError(
                f"{wanted} already exists on {repo_id} (commit {tagged[:12]}) with other files ({differing}); "
                "published versions are immutable — publish the change as a new version, e.g. "
                f"{wanted.bump_patch() if not versions else max(versions).bump_patch()}"
            )
        if versions and wanted < max(versions):
            raise PublishError(
                f"{wanted} is lower than the latest published version {max(versions)} of {repo_id}; "
                "versions only go up — choose a version above it"
            )
        main_head = next((b.target_commit for b in refs.branches if b.name == "main"), None) if refs else None
        remote = _remote_files(api, repo_id, main_head, release.also_managed) if main_head else {}
        remote = _leave_foreign_exports(release, remote, main_head)
    except ConceptforgeError:
        raise  # our own refusal (a PublishError is an OSError too): not a network failure
    except release.network_errors as error:
        raise release.fail("comparing with the published files", error) from None
    changed, deleted = _diff(files, remote)
    return PublishResult(
        repo_id,
        str(wanted),
        str(previous) if previous else None,
        "dry-run",
        main_head,
        uploaded=[f.path_in_repo for f in changed],
        uploaded_bytes=sum(f.size for f in changed),
        deleted=deleted,
        total_files=len(files),
        config=first_config,
        rai_empty=release.rai_empty,
        leaks=release.leaks,
        benchmark=release.benchmark,
        **release.outcome(),
    )


def _leave_foreign_exports(release: _Release, remote: dict[str, Any], revision: str | None) -> dict[str, Any]:
    """``remote`` without the files under ``exports/`` that conceptforge did not write there (not in
    the repository's ``exports/MANIFEST.json``, or changed since): a release leaves them in place
    instead of deleting them, and refuses to replace one with a file of its own (a user's
    ``exports/vlmevalkit/README.md`` uploaded by hand is never silently swapped for ours)."""
    exported = [p for p in remote if p.startswith("exports/") and p != EXPORTS_MANIFEST]
    if not exported or revision is None:
        return remote
    local = {f.path_in_repo: f for f in release.files}
    if all(p in local and _same(local[p], remote[p]) for p in exported):
        return remote  # every file there is the one this release uploads: nothing is replaced
    ours: dict[str, str] = {}
    blob_ids: dict[str, str] = {}
    if EXPORTS_MANIFEST in remote:
        try:
            manifest = json.loads(_remote_bytes(release, EXPORTS_MANIFEST, revision))
            ours = dict(manifest["files"])
            blob_ids = dict(manifest.get("git_blob_ids", {}))  # manifests before 0.x lack them
        except (ValueError, KeyError, TypeError):
            ours = {}
    foreign = []
    for path in exported:
        entry = remote[path]
        if path in local and _same(local[path], entry):
            continue  # the bytes this release uploads: replacing them changes nothing
        if path in ours:
            if entry.lfs is not None:
                unchanged = entry.lfs.sha256 == ours[path]
            elif path in blob_ids:  # the tree listing's blob id against the one we recorded
                unchanged = entry.blob_id == blob_ids[path]
            elif path in local:  # an older manifest: hash the small file we would replace
                unchanged = hashlib.sha256(_remote_bytes(release, path, revision)).hexdigest() == ours[path]
            else:
                unchanged = True  # ours by the manifest, and this release leaves it alone
            if unchanged:
                continue
        foreign.append(path)
    replacing = set(local)
    clash = sorted(p for p in foreign if p in replacing)
    if clash:
        what = (
            "was changed on the Hub since conceptforge wrote it" if clash[0] in ours else "conceptforge did not write"
        )
        raise PublishError(
            f"{release.repo_id} holds {clash[0]} on the Hub, which {what} (see exports/MANIFEST.json there), and this "
            "release would replace it with its own: move or rename it in the repository first"
        )
    if foreign:
        logger.info("left in place under exports/ (not written by conceptforge): %s", ", ".join(sorted(foreign)))
    return {p: e for p, e in remote.items() if p not in foreign}


def _remote_bytes(release: _Release, path: str, revision: str) -> bytes:
    """One file of the repository at ``revision`` (small files of ``exports/``)."""
    local = release.api.hf_hub_download(release.repo_id, path, repo_type=REPO_TYPE, revision=revision)
    return Path(local).read_bytes()


def _commit(
    release: _Release,
    result: PublishResult,
    *,
    repo_exists: bool,
    private: bool,
    previous: Version | None,
    num_threads: int,
) -> None:
    """One commit on ``main`` with every changed file (none when ``main`` already holds them)."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    api, repo_id, wanted, files, local = release.api, release.repo_id, release.wanted, release.files, release.local
    main_head = result.commit_id
    by_path = {f.path_in_repo: f for f in files}
    changed, deleted = [by_path[p] for p in result.uploaded], list(result.deleted)
    stage = "creating the repository"  # each step names itself: the error says which one failed
    try:
        if not repo_exists:
            api.create_repo(repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True)
            stage = "reading the new repository's branches"
            refs = api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
            main_head = next((b.target_commit for b in refs.branches if b.name == "main"), None)
            stage = "listing the files of the new repository"
            changed, deleted = _diff(
                files, _remote_files(api, repo_id, main_head, release.also_managed) if main_head else {}
            )
        elif private:
            stage = "reading the repository's visibility"
            if not api.repo_info(repo_id, repo_type=REPO_TYPE).private:
                logger.warning(
                    "%s exists and is public: --private does not change an existing repo's visibility", repo_id
                )
    except release.network_errors as error:
        raise release.fail(stage, error) from None

    commit_id = main_head
    if changed or deleted:
        operations: list[Any] = []
        for item in changed:
            operation = CommitOperationAdd(
                path_in_repo=item.path_in_repo,
                path_or_fileobj=item.content if item.content is not None else str(item.source),
            )
            try:  # we hashed the file already; spare the client a second pass over it
                operation.upload_info.sha256 = bytes.fromhex(item.sha256)
            except AttributeError:
                pass
            operations.append(operation)
        operations += [CommitOperationDelete(path_in_repo=path) for path in deleted]
        logger.info(
            "uploading %d file(s) (%.1f MB) and deleting %d in one commit",
            len(changed),
            result.uploaded_bytes / 1e6,
            len(deleted),
        )
        try:
            info = api.create_commit(
                repo_id,
                operations,
                commit_message=f"Release {wanted}",
                commit_description=f"{local.metadata.pretty_name} {wanted}"
                + (f" (previous: {previous})" if previous else ""),
                repo_type=REPO_TYPE,
                revision="main",
                parent_commit=main_head,
                num_threads=num_threads,
            )
        except release.network_errors as error:
            raise release.fail("uploading and committing the files", error) from None
        commit_id = info.oid
        result.action = "published"
    else:
        logger.info("main already holds exactly these files (commit %s); only the tag is missing", main_head)
        result.action = "tagged"
    result.commit_id = commit_id


def _tag(release: _Release, result: PublishResult) -> PublishResult:
    """The version tag on the release's commit (a tag that already points there is fine)."""
    api, repo_id, wanted, commit_id = release.api, release.repo_id, release.wanted, result.commit_id
    try:
        api.create_tag(
            repo_id,
            tag=str(wanted),
            revision=commit_id,
            tag_message=f"{release.local.metadata.pretty_name} {wanted}",
            repo_type=REPO_TYPE,
        )
    except release.network_errors as error:
        if _status(error) == 409:  # someone (a lost response of ours?) created it: fine if it is ours
            target = {t.name: t.target_commit for t in api.list_repo_refs(repo_id, repo_type=REPO_TYPE).tags}.get(
                str(wanted)
            )
            if target == commit_id:
                return result
        raise release.fail(f"creating the tag {wanted}", error, committed=commit_id) from None
    return result
