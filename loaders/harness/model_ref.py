"""What ``--model`` names: a model kind (its adapter family) and an exact revision.

Why: one ``conceptforge evaluate`` run offers every task to one model; each task runs with the
families whose adapter provides a capability it needs (loaders/harness/adapters/base.py). The kind
is read from the model's own files (``open_clip_config.json``, ``model_index.json``,
``config.json``'s ``model_type`` and ``architectures``, a dataset's columns), never guessed
from its name, and the revision is pinned to a commit sha (Hub) or a content fingerprint (local
folder) so the results file says exactly what was evaluated.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from conceptforge.errors import (
    DataFormatError,
    DataNotFoundError,
    HubError,
    InvalidArgumentError,
    WeightsUnavailableError,
)
from conceptforge.loaders.harness.adapters.base import CBM as CBM
from conceptforge.loaders.harness.adapters.base import DIFFUSERS as DIFFUSERS
from conceptforge.loaders.harness.adapters.base import DUAL_TYPES as DUAL_TYPES
from conceptforge.loaders.harness.adapters.base import FAMILIES, FAMILY_FILES, HF_DUAL, family_of_files
from conceptforge.loaders.harness.adapters.base import GENERATED as GENERATED
from conceptforge.loaders.harness.adapters.base import ITM as ITM
from conceptforge.loaders.harness.adapters.base import ITM_TYPES as ITM_TYPES
from conceptforge.loaders.harness.adapters.base import OPEN_CLIP as OPEN_CLIP
from conceptforge.loaders.harness.adapters.base import VLM as VLM

logger = logging.getLogger(__name__)

# The model kinds are the adapter families (loaders/harness/adapters/base.py); the names stay
# importable from here.
CLIP = HF_DUAL
KINDS = {name: family.title for name, family in FAMILIES.items()}
#: The dual encoder used where a command needs one and none is named (evaluate binding/compmap, CompMap targets).
DEFAULT_CLIP = "openai/clip-vit-base-patch32"
GENERATED_COLUMNS = {"concept_kind", "concept", "learner", "image"}
_FACTORY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@dataclass(frozen=True)
class ModelRef:
    """``id`` as given; ``kind`` (one of :data:`KINDS`); ``source`` hub/local/python; ``revision``
    as requested; ``sha`` the commit (Hub) or ``local-…`` fingerprint; ``model_type`` from config."""

    id: str
    kind: str
    source: str
    revision: str | None
    sha: str | None
    model_type: str | None = None
    #: A served model (loaders/harness/endpoint_model.py): URL, served name, the key's variable
    #: name (never the key), what the server reported about the model, the probability mode and
    #: the client settings. ``None`` for every model loaded in this process.
    endpoint: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["endpoint"] is None:  # results of local models keep their exact former shape
            del out["endpoint"]
        return out


def _kind_of_files(files: dict[str, Any]) -> tuple[str, str | None]:
    """Kind (adapter family) from a model's files: ``{name: parsed json or None}``."""
    return family_of_files(files)


def _dataset_columns(path: Path) -> set[str]:
    import pyarrow.parquet as pq

    # Hidden folders hold work files, not the dataset (a generator's OUT/.work chunks have other columns).
    for parquet in sorted(path.rglob("*.parquet")):
        if not any(part.startswith(".") for part in parquet.relative_to(path).parts):
            return set(pq.read_schema(parquet).names)
    return set()


def _local(path: Path, revision: str | None) -> ModelRef:
    from conceptforge.cards.provenance import local_fingerprint

    files: dict[str, Any] = {}
    for name in FAMILY_FILES:
        if (path / name).is_file():
            try:
                files[name] = json.loads((path / name).read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise DataFormatError(f"{path / name} is not valid JSON") from None
    if files:
        kind, model_type = _kind_of_files(files)
    elif GENERATED_COLUMNS <= _dataset_columns(path):
        kind, model_type = GENERATED, None
    else:
        raise DataFormatError(
            f"{path} holds no config.json, open_clip_config.json, model_index.json or ConceptBed generated images: "
            "pass a model folder or Hub id"
        )
    return ModelRef(str(path), kind, "local", revision, local_fingerprint(path), model_type)


def _hub(repo_id: str, revision: str | None) -> ModelRef:
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    api = HfApi()
    try:
        info = api.model_info(repo_id, revision=revision)
    except RevisionNotFoundError:
        raise DataNotFoundError(f"model {repo_id} has no revision {revision!r}") from None
    except RepositoryNotFoundError:
        try:
            info = api.dataset_info(repo_id, revision=revision)
        except (RepositoryNotFoundError, RevisionNotFoundError):
            raise DataNotFoundError(
                f"no model or dataset {repo_id!r} on the Hub ({api.endpoint}); check the id or pass a local folder"
            ) from None
        card = info.card_data.to_dict() if getattr(info, "card_data", None) is not None else {}
        dataset_info = card.get("dataset_info") or {}
        if isinstance(dataset_info, list):  # one entry per config
            dataset_info = dataset_info[0] if dataset_info else {}
        names = {f.get("name") for f in dataset_info.get("features", []) if isinstance(f, dict)}
        if not GENERATED_COLUMNS <= names:
            raise InvalidArgumentError(
                f"{repo_id} is a dataset, not a model, and not ConceptBed generated images"
            ) from None
        return ModelRef(repo_id, GENERATED, "hub", revision, info.sha, None)
    except HfHubHTTPError as error:
        raise HubError(f"cannot reach the Hub for model {repo_id}: {str(error).splitlines()[0]}") from None
    names = {s.rfilename for s in (info.siblings or [])}
    files: dict[str, Any] = {}
    for name in FAMILY_FILES:
        if name in names:
            try:
                files[name] = json.loads(Path(hf_hub_download(repo_id, name, revision=info.sha)).read_text())
            except EntryNotFoundError:
                pass
    kind, model_type = _kind_of_files(files)
    return ModelRef(repo_id, kind, "hub", revision, info.sha, model_type)


def resolve_model(spec: str, *, revision: str | None = None, endpoint: Any = None) -> ModelRef:
    """Identify ``spec`` (local folder, Hub id, CBM factory ``package.module:function``, or a
    served model ``endpoint:NAME@URL`` / ``PROVIDER:NAME``; ``endpoint``: its client's
    :class:`~conceptforge.loaders.harness.endpoint_model.EndpointOptions`)."""
    from conceptforge.endpoint_spec import is_endpoint_spec

    if not os.path.isdir(spec) and is_endpoint_spec(spec):
        if revision is not None:
            raise InvalidArgumentError(
                f"--model-revision does not apply to a served model ({spec}): the server reports what it serves"
            )
        return resolve_endpoint(spec, endpoint)
    if os.path.isdir(spec):
        return _local(Path(spec), revision)
    if os.path.exists(spec):
        raise InvalidArgumentError(
            f"--model {spec} is a file: pass a model folder, a Hub id or a CBM factory module:function"
        )
    if spec.startswith("hf-hub:"):  # open_clip's spelling of a Hub id
        spec = spec.removeprefix("hf-hub:")
    if _FACTORY.match(spec):
        return ModelRef(spec, CBM, "python", None, None, None)
    from conceptforge.external_errors import hub_offline, model_unavailable, offline_fix, offline_reason

    problem = model_unavailable(spec)  # a mistyped folder, or a Hub id offline and not cached
    if problem is not None:
        raise WeightsUnavailableError(f"--model: {problem}")
    if hub_offline():
        raise HubError(f"--model {spec} is no local folder, and {offline_reason()}: {offline_fix()}")
    return _hub(spec, revision)


def resolve_endpoint(spec: str, options: Any = None) -> ModelRef:
    """The :class:`ModelRef` of a served model, from what the server reports (one-line errors:
    unreachable, key refused, model not served); ``options``: an
    :class:`~conceptforge.loaders.harness.endpoint_model.EndpointOptions` (None: the defaults).
    Here, not in ``endpoint_model``, so that the probing module never needs the reference type."""
    from conceptforge.endpoint_spec import GENERIC, parse_endpoint_spec
    from conceptforge.loaders.harness.adapters.base import ENDPOINT, ENDPOINT_TEXT
    from conceptforge.loaders.harness.endpoint_client import EndpointClient
    from conceptforge.loaders.harness.endpoint_model import (
        NO_LOGPROBS,
        EndpointOptions,
        fingerprint,
        load_tokenizer,
        probability_mode,
        settings_of,
    )

    parsed = parse_endpoint_spec(spec)
    options = options or EndpointOptions()
    settings = settings_of(parsed, options)
    with EndpointClient(settings, cache_dir=None) as client:
        identity = client.identity()
        # a hosted provider's model has no tokenizer to load (and its API takes no token ids)
        tokenizer = load_tokenizer(identity, parsed.model) if parsed.provider == GENERIC else None
        mode = probability_mode(client, tokenizer)
        identity = {**identity, "system_fingerprint": client.identity().get("system_fingerprint")}
    kind = ENDPOINT_TEXT if mode == NO_LOGPROBS else ENDPOINT
    endpoint = {
        "provider": parsed.provider,
        "base_url": parsed.base_url,
        "served_model": parsed.model,
        "key_env": settings.api_key_env,  # the variable's name, never the key
        "identity": identity,
        "probabilities": mode,
        "client": {
            "max_concurrency": options.concurrency,
            "timeout_s": options.timeout_s,
            "max_requests": options.max_requests,
            "max_retries": options.retries,
            "temperature": 0.0,
            "seed": 0,
        },
    }
    logger.info("endpoint %s: %s, probabilities: %s", parsed.id, identity.get("id"), mode)
    return ModelRef(parsed.id, kind, "endpoint", None, fingerprint(identity, mode), None, endpoint)
