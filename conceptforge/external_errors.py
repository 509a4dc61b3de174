"""One mapping of other libraries' environment errors to our one-line kinds.

Why one place: the Hub client, ``transformers``, fsspec/s3fs (botocore, aiohttp) and pyarrow each
raise their own classes for what is the user's environment, not a bug: no network, no
credentials, a dead endpoint, a model id that is neither a folder nor a Hub id, a damaged parquet
file. Every command used to end in their traceback. :func:`translate` turns such an error (or
one in its ``__cause__``/``__context__`` chain) into a :class:`~conceptforge.errors.ConceptforgeError`,
which the command line prints as one ``error: …`` line with exit 2; anything it does not know
stays a traceback (a bug). Classes are recognised by module and name, so none of these libraries
is imported here.

:func:`probe_hub` is the fast offline check: one TCP connection to ``HF_ENDPOINT`` with a short
timeout, instead of minutes of the Hub client's retries before the same failure.

:func:`bound_hub_timeouts` is the other half: an endpoint that accepts connections and never
answers passes the probe, and the Hub client's own calls (``HfApi.dataset_info``,
``list_repo_refs`` …) wait with no read timeout at all. It gives every Hub request (``datasets``
uses the same client) a bound, so such an endpoint fails in seconds with one line.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator
from urllib.parse import urlparse

from conceptforge.errors import (
    ClusterError,
    ConceptforgeError,
    DataFormatError,
    DataNotFoundError,
    HubError,
    StoreError,
    WeightsUnavailableError,
    one_line,
)

logger = logging.getLogger(__name__)

OFFLINE_HINT = "no network? set HF_HUB_OFFLINE=1 to use the local cache only (see README, Working offline)"
CREDENTIALS_HINT = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, ~/.aws/credentials) for the object store"
)
ENDPOINT_HINT = "check the endpoint (FSSPEC_S3_ENDPOINT_URL or AWS_ENDPOINT_URL) and the network"

_CREDENTIALS = {
    "botocore.NoCredentialsError",
    "botocore.PartialCredentialsError",
    "botocore.CredentialRetrievalError",
    "botocore.NoAuthTokenError",
    "botocore.UnauthorizedSSOTokenError",
}
_ENDPOINT = {
    "botocore.EndpointConnectionError",
    "botocore.ConnectTimeoutError",
    "botocore.ReadTimeoutError",
    "botocore.ConnectionClosedError",
    "botocore.ProxyConnectionError",
    "aiohttp.ClientConnectorError",
    "aiohttp.ServerDisconnectedError",
    "aiohttp.ServerTimeoutError",
    "botocore.InvalidEndpointConfigurationError",
}
_STORE_REFUSED = {"botocore.ClientError", "botocore.ParamValidationError"}
_HUB_NOT_CACHED = {"huggingface_hub.LocalEntryNotFoundError", "huggingface_hub.OfflineModeIsEnabled"}
_HUB = {
    "huggingface_hub.RepositoryNotFoundError",
    "huggingface_hub.GatedRepoError",
    "huggingface_hub.RevisionNotFoundError",
    "huggingface_hub.EntryNotFoundError",
    "huggingface_hub.RemoteEntryNotFoundError",
    "huggingface_hub.HfHubHTTPError",
    "huggingface_hub.BadRequestError",
    "datasets.DatasetNotFoundError",
}
_HUB_ID = {"huggingface_hub.HFValidationError"}
_NETWORK = {
    "requests.ConnectionError",
    "requests.Timeout",
    "httpx.ConnectError",
    "httpx.ConnectTimeout",
    "httpx.ReadTimeout",
    "httpx.TimeoutException",
    "httpx2.ConnectError",
    "httpx2.ConnectTimeout",
    "httpx2.TimeoutException",
    "httpx.NetworkError",
    "httpx2.NetworkError",
    "urllib3.MaxRetryError",
    "urllib3.NewConnectionError",
    "socket.gaierror",
    "_socket.gaierror",
}
#: An HTTP client's "no answer in time" (after :func:`bound_hub_timeouts`): the endpoint is up but mute.
_TIMEOUT = {"httpx.TimeoutException", "httpx2.TimeoutException", "requests.Timeout", "urllib3.ReadTimeoutError"}
_PARQUET = {"pyarrow.ArrowInvalid"}
#: Ray's own errors about the cluster (not a task's exception, which is a RayTaskError).
_RAY = {
    "ray.AuthenticationError",
    "ray.RpcError",
    "ray.RaySystemError",
    "ray.LocalRayletDiedError",
    "ray.NodeDiedError",
    "ray.GetTimeoutError",
}
#: transformers and diffusers report a model they cannot find or read as a bare OSError.
_WEIGHTS_PHRASES = (
    "is not a local folder and is not a valid model identifier",
    "We couldn't connect to",
    "Can't load",
    "does not appear to have a file named",
    "Incorrect path_or_model_id",
    "is not a valid model identifier",
    "Error no file named",
)


def _names(error: BaseException) -> set[str]:
    """``package.ClassName`` of the error's class and its bases (package = first module part)."""
    return {f"{cls.__module__.split('.')[0]}.{cls.__name__}" for cls in type(error).__mro__}


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


#: A write the file system refused for a reason of the machine, not of the program: what to do.
_DISK_HINTS = {
    errno.ENOSPC: "free some space or write elsewhere, then rerun the same command",
    errno.EDQUOT: "free some of your quota or write elsewhere, then rerun the same command",
    errno.EFBIG: "the file system refused the file size; write elsewhere",
    errno.EROFS: "the file system is read-only; write elsewhere",
}
#: SQLite's own words for the same (it raises sqlite3 errors, not OSError).
_SQLITE_FULL = ("database or disk is full", "disk i/o error")
_SQLITE_DAMAGED = ("file is not a database", "database disk image is malformed")


def _disk(error: BaseException) -> ConceptforgeError | None:
    """One line for a full, read-only or over-quota disk, whichever library hit it."""
    if isinstance(error, OSError) and error.errno in _DISK_HINTS:
        where = f" {error.filename}" if error.filename else ""
        return StoreError(
            f"cannot write{where}: {error.strerror or os.strerror(error.errno)}; {_DISK_HINTS[error.errno]}"
        )
    if "sqlite3.Error" in _names(error):
        text = str(error).lower()
        if any(phrase in text for phrase in _SQLITE_FULL):
            return StoreError(f"cannot write a SQLite file ({error}): {_DISK_HINTS[errno.ENOSPC]}")
        if any(phrase in text for phrase in _SQLITE_DAMAGED):
            return DataFormatError(
                f"a SQLite file is damaged or not SQLite ({error}): if it is a conceptforge cache, delete it (it is "
                "rebuilt); otherwise point the flag elsewhere"
            )
    return None


#: safetensors (Rust) raises one class for a file it cannot read or write, naming neither the
#: file nor, except in its text, the OS error: "… I/O error: No space left on device (os error 28)".
_SAFETENSORS = {"safetensors.SafetensorError"}
_OS_ERROR = re.compile(r"\(os error (\d+)\)")
#: A model file in the Hub cache: ``…/models--ORG--NAME/snapshots/REVISION/PATH``.
_HUB_CACHE_FILE = re.compile(r"/(models|datasets)--([^/]+?)--([^/]+)/snapshots/([0-9a-f]{40})/(.+)$")


def _safetensors_file(error: BaseException) -> str | None:
    """The ``.safetensors`` file the failing call was reading or writing: the innermost frame's
    variable that names one (safetensors' error does not; transformers and diffusers hold it in a
    local of the frame that called safe_open/save_file)."""
    found = None
    tb = error.__traceback__
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if isinstance(value, (str, os.PathLike)) and os.fspath(value).endswith(".safetensors"):
                found = os.fspath(value)
        tb = tb.tb_next
    return found


def safetensors_os_error(error: BaseException) -> OSError | None:
    """The OS error inside a safetensors error (a full disk while saving), as an ``OSError`` with
    the file it was writing; None for any other error."""
    if not _names(error) & _SAFETENSORS:
        return None
    match = _OS_ERROR.search(str(error))
    if match is None:
        return None
    code = int(match[1])
    return OSError(code, os.strerror(code), _safetensors_file(error))


def refetch_hint(path: str | None) -> str:
    """How to get a damaged weights file again: from the Hub for a file of the Hub cache."""
    cached = _HUB_CACHE_FILE.search(path or "")
    if cached:
        kind, org, name, revision, inner = cached.groups()
        repo_type = " --repo-type dataset" if kind == "datasets" else ""
        return f"fetch it again: hf download {org}/{name} {inner} --revision {revision}{repo_type} --force-download"
    return "delete it and copy or save the model folder again (a download cut short, or a full disk while saving?)"


def _safetensors(error: BaseException, text: str) -> ConceptforgeError | None:
    if not _names(error) & _SAFETENSORS:
        return None
    inner = safetensors_os_error(error)
    if inner is not None:
        return _disk(inner) or StoreError(f"cannot read or write {inner.filename or 'a .safetensors file'}: {text}")
    path = _safetensors_file(error)
    return WeightsUnavailableError(
        f"{path or 'a .safetensors weights file'} is damaged or incomplete ({text}): {refetch_hint(path)}"
    )


def _raised_in(error: BaseException, package: str) -> bool:
    """Whether ``error`` was raised by code of ``package`` (its innermost traceback frame)."""
    tb = error.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = str(tb.tb_frame.f_globals.get("__name__", ""))
    return module == package or module.startswith(package + ".")


#: The Hub client's own advice in offline mode, which is wrong when this process (not the user)
#: switched offline; :func:`offline_fix` gives the advice that fits.
_UNSET_ADVICE = re.compile(r"[.:;]?\s*To disable it, please unset the `?HF_HUB_OFFLINE`? environment variable\.?", re.I)


#: The errors known by their class name (and its bases'), in the order they are tried: the kind of
#: our error and its one line from the library's own first line (the message reads the environment
#: only when the error happens: offline state, endpoint, timeouts).
_BY_NAME: tuple[tuple[set[str], type[ConceptforgeError], Callable[[str], str]], ...] = (
    (_CREDENTIALS, StoreError, lambda text: f"no credentials for the object store ({text}): {CREDENTIALS_HINT}"),
    (_ENDPOINT, StoreError, lambda text: f"cannot reach the object store ({text}): {ENDPOINT_HINT}"),
    (
        _STORE_REFUSED,
        StoreError,
        lambda text: f"the object store refused the request ({text}): check the bucket, the path and the credentials",
    ),
    (
        _HUB_NOT_CACHED,
        WeightsUnavailableError,
        lambda text: (
            f"not in the local cache and the Hub cannot be asked ({text}; {offline_reason()}): {offline_fix()}"
        ),
    ),
    (
        _HUB_ID,
        WeightsUnavailableError,
        lambda text: f"neither an existing local folder nor a valid Hub id ({text}): check the path",
    ),
    (
        _HUB,
        HubError,
        lambda text: f"the Hugging Face Hub refused the request ({text}): check the id, the revision and HF_TOKEN",
    ),
    (
        _TIMEOUT,
        HubError,
        lambda text: (
            f"{os.environ.get('HF_ENDPOINT') or 'the Hugging Face Hub'} did not answer within "
            f"{hub_timeouts()[0]:g} s ({text}): check HF_ENDPOINT and the network; {OFFLINE_HINT}"
        ),
    ),
)


def _one(error: BaseException) -> ConceptforgeError | None:
    if isinstance(error, ConceptforgeError):
        return error
    names = _names(error)
    text = _UNSET_ADVICE.sub("", one_line(error))
    disk = _disk(error) or _safetensors(error, text)
    if disk is not None:
        return disk
    if names & _RAY or (isinstance(error, ConnectionError) and _raised_in(error, "ray")):
        return ClusterError(f"Ray: {text}: check --ray-address, the cluster (`ray status` on its head) and its token")
    for known, kind, message in _BY_NAME:
        if names & known:
            return kind(message(text))
    if names & _NETWORK or isinstance(error, ConnectionError):
        if hub_offline():
            return HubError(f"{text}; {offline_reason()}: {offline_fix()}")
        return HubError(f"cannot connect to {os.environ.get('HF_ENDPOINT') or 'the network'} ({text}); {OFFLINE_HINT}")
    if names & _PARQUET and "parquet" in text.lower():
        return DataFormatError(f"a parquet file is damaged or not parquet ({text}): regenerate or reassemble it")
    if isinstance(error, FileNotFoundError) and error.filename:
        return DataNotFoundError(f"{error.filename} does not exist")
    if isinstance(error, OSError) and any(phrase in str(error) for phrase in _WEIGHTS_PHRASES):
        return WeightsUnavailableError(f"cannot load the model: {text}")
    return None


def looks_like_path(value: str) -> bool:
    """Whether a model name can only be a local path (``./x``, ``/x``, ``~/x``, ``a/b/c``), never a Hub id."""
    return value.startswith(("/", ".", "~")) or value.count("/") > 1 or os.sep in value.replace("/", "")


def _cached(repo_id: str) -> bool:
    """Whether the Hub cache holds a snapshot of the model ``repo_id`` (any revision, any file)."""
    from huggingface_hub import constants

    snapshots = os.path.join(constants.HF_HUB_CACHE, "models--" + repo_id.replace("/", "--"), "snapshots")
    try:
        return any(os.scandir(snapshots))
    except OSError:
        return False


def model_unavailable(model_id: str) -> str | None:
    """Why ``model_id`` cannot be loaded, known without asking any library, or None.

    Why one rule: each loader (transformers, diffusers, open_clip, the Hub client) used to explain a
    mistyped folder or an uncached model in its own words ("is not a valid model identifier",
    "Cannot find the requested files in the local cache", "FLUX.1-dev …"). A path that does not
    exist is "no such local folder"; a Hub id offline without a snapshot in the cache is "not in
    the cache".
    """
    if re.match(r"^https?://", model_id):  # a server's address: the served-model spelling names the model too
        return f"{model_id} is a URL; a served model is endpoint:NAME@{model_id} (NAME: the model the server serves)"
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", model_id):
        return f"{model_id} is a URL; models load from a local folder or a Hub id: copy it to a local folder first"
    path = os.path.expanduser(model_id)
    if os.path.isdir(path):
        return None
    if os.path.exists(path):
        return f"{model_id} is a file: pass a model folder or a Hub id"
    if looks_like_path(model_id):
        return f"no such local folder {model_id}"
    if hub_offline() and not _cached(model_id):
        reason = "HF_HUB_OFFLINE=1" if not _SWITCHED_OFFLINE else offline_reason()
        return f"{model_id} is not in the cache and {reason}: {offline_fix()}"
    return None


def require_model(model_id: str, flag: str) -> None:
    """Refuse, before a command writes anything, a model that cannot load (see :func:`model_unavailable`)."""
    problem = model_unavailable(model_id)
    if problem is not None:
        raise WeightsUnavailableError(f"{flag}: {problem}")


def weights_error(what: str, model_id: str, error: BaseException | None = None) -> WeightsUnavailableError:
    """The one line for a model that did not load: ``cannot load {what}: {why}``.

    The reason is :func:`model_unavailable`'s when it has one, else the known environment reason
    in ``error`` (:func:`translate`), else the library's first line.
    """
    reason = model_unavailable(model_id)
    if reason is None and error is not None:
        known = translate(error)
        reason = f"{model_id}: {known}" if known is not None else f"{model_id}: {one_line(error)}"
    return WeightsUnavailableError(f"cannot load {what}: {reason or model_id}")


def hub_failure(error: Exception, what: str) -> ConceptforgeError:
    """One line for a failed Hub call made to ``what`` (e.g. "read org/x@v1 on the Hub").

    The known environment reason (:func:`translate`) when there is one, else the error's first line.
    """
    known = translate(error)
    reason = str(known) if known is not None else f"{type(error).__name__}: {one_line(error, limit=200)}"
    return HubError(f"cannot {what}: {reason}")


def translate(error: BaseException) -> ConceptforgeError | None:
    """Our one-line error for a known environment error in ``error``'s chain, else None (a bug)."""
    if not isinstance(error, Exception):
        return None
    for link in _chain(error):  # a mute endpoint first: the Hub client wraps it in "not in the cache"
        if _names(link) & _TIMEOUT:
            return _one(link)
    for link in _chain(error):
        translated = _one(link)
        if translated is not None:
            return translated
    return None


def hub_offline() -> bool:
    """Whether this process works from the local cache only (``HF_HUB_OFFLINE``, set by the user
    or by :func:`go_offline_if_unreachable`)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def offline_reason() -> str:
    """Why the Hub is not asked, in the words that match who decided it.

    "unset HF_HUB_OFFLINE" is advice only for a user who set it: when this process switched
    itself offline (the endpoint did not answer) the cause is the network.
    """
    if _SWITCHED_OFFLINE:
        host, port = _endpoint()
        return f"the Hub ({host}:{port}) cannot be reached, so this run works offline"
    if hub_offline():
        return "offline mode (HF_HUB_OFFLINE=1)"
    return f"{os.environ.get('HF_ENDPOINT') or 'the Hub'} cannot be reached"


def offline_fix() -> str:
    """What to do about :func:`offline_reason`."""
    if hub_offline() and not _SWITCHED_OFFLINE:
        return "download it where there is network (or unset HF_HUB_OFFLINE), or pass a local folder"
    return "download it where there is network (`hf download …` fills the cache), or pass a local folder"


#: Set when :func:`go_offline_if_unreachable` switched this process offline (the user did not).
_SWITCHED_OFFLINE = False


def _endpoint() -> tuple[str, int]:
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    return url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)


_PROBED: dict[tuple[str, int], str] = {}
#: Seconds an open connection to the Hub may take to send its first bytes in the probe.
PROBE_ANSWER_TIMEOUT = 5.0


def _probe(host: str, port: int, scheme: str, timeout: float, answer_timeout: float) -> str:
    """``answers``, ``mute`` (the connection opens, nothing comes back) or ``unreachable``."""
    result = {"state": "unreachable"}

    def connect() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout) as sock:
                result["state"] = "mute"
                sock.settimeout(answer_timeout)
                if scheme == "https":
                    import ssl

                    context = ssl.create_default_context()
                    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # an answer, not trust
                    with context.wrap_socket(sock, server_hostname=host):
                        result["state"] = "answers"  # the server's half of the handshake arrived
                else:
                    sock.sendall(f"HEAD / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
                    if sock.recv(1):
                        result["state"] = "answers"
        except OSError:
            pass

    thread = threading.Thread(target=connect, daemon=True, name="hub-probe")
    thread.start()
    thread.join(timeout + answer_timeout + 0.5)
    return result["state"] if not thread.is_alive() else ("mute" if result["state"] == "mute" else "unreachable")


def probe_hub(timeout: float = 2.0, *, answer_timeout: float = PROBE_ANSWER_TIMEOUT) -> bool:
    """Whether the Hub endpoint answers: a TCP connection within ``timeout`` seconds, then its
    first bytes (an HTTP reply, a TLS handshake) within ``answer_timeout``.

    Run in a thread so that a hanging name lookup is bounded too. An endpoint that accepts the
    connection and never answers (a stuck proxy or mirror) counts as unreachable: the Hub client
    would otherwise retry each file it looks for five times at 10 s each, for many minutes. The
    answer is kept per endpoint for the life of the process (a library caller probes once).
    """
    host, port = _endpoint()
    if (host, port) not in _PROBED:
        scheme = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").scheme
        _PROBED[(host, port)] = _probe(host, port, scheme, timeout, answer_timeout)
    return _PROBED[(host, port)] == "answers"


def go_offline_if_unreachable(*, timeout: float = 2.0) -> bool:
    """Switch this process to offline mode (cache only) when the Hub endpoint does not answer.

    Does nothing when ``HF_HUB_OFFLINE`` is set either way. Returns True when it switched. Why:
    without it, the Hub client retries every request (25 s to 5 minutes, each warning printed
    twice) before failing with a message about something else.
    """
    if "HF_HUB_OFFLINE" in os.environ:
        return False
    if probe_hub(timeout):
        return False
    global _SWITCHED_OFFLINE
    host, port = _endpoint()
    os.environ["HF_HUB_OFFLINE"] = "1"
    _SWITCHED_OFFLINE = True
    _set_library_offline()
    how = "accepts connections but does not answer" if _PROBED.get((host, port)) == "mute" else "cannot be reached"
    logger.warning(
        "the Hugging Face Hub (%s:%d) %s: working offline, from the local cache only "
        "(set HF_HUB_OFFLINE=1 to skip this check)",
        host,
        port,
        how,
    )
    return True


def _set_library_offline() -> None:
    """Libraries read HF_HUB_OFFLINE at import: tell the ones already imported too."""
    import sys

    if "huggingface_hub" in sys.modules:
        import huggingface_hub.constants

        huggingface_hub.constants.HF_HUB_OFFLINE = True
    if "datasets" in sys.modules:
        import datasets.config

        datasets.config.HF_HUB_OFFLINE = True
        datasets.config.HF_DATASETS_OFFLINE = True
    if "transformers" in sys.modules:
        try:
            import transformers.utils.hub as transformers_hub

            transformers_hub._is_offline_mode = True  # transformers < 4.45 cached the flag here
        except (ImportError, AttributeError):
            pass


#: Seconds a Hub request may wait for the next bytes of an answer. Reads use the Hub client's own
#: ``HF_HUB_DOWNLOAD_TIMEOUT`` (default 10 s, the value it already uses for file downloads);
#: writes (a commit the server must process) get at least :data:`WRITE_TIMEOUT`.
WRITE_TIMEOUT = 60.0
HUB_CONNECT_TIMEOUT = 10.0


def hub_timeouts() -> tuple[float, float]:
    """(read, write) bounds in seconds for one Hub request, from ``HF_HUB_DOWNLOAD_TIMEOUT``."""
    try:
        read = float(os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT") or 10)
    except ValueError:
        read = 10.0
    read = read if read > 0 else 10.0
    return read, max(read, WRITE_TIMEOUT)


def _bounded(request) -> None:
    """An ``httpx2`` request hook: no timeout left unset, none longer than the bounds.

    The Hub client's API calls pass ``timeout=None`` (wait for ever) and ``datasets`` passes 100 s;
    the bound is per read (seconds between two pieces of the answer), not per download.
    """
    read, write = hub_timeouts()
    limit = read if request.method in {"GET", "HEAD", "OPTIONS"} else write
    bounds = {"connect": HUB_CONNECT_TIMEOUT, "read": limit, "write": limit, "pool": limit}
    current = dict(request.extensions.get("timeout") or {})
    request.extensions = {
        **request.extensions,
        "timeout": {
            key: bound if current.get(key) is None else min(current[key], bound) for key, bound in bounds.items()
        },
    }


async def _bounded_async(request) -> None:
    _bounded(request)


_BOUND = False


def bound_hub_timeouts() -> None:
    """Give every request of the Hub client (and of ``datasets``, which shares it) a timeout.

    Why: ``huggingface_hub``'s client is built with ``timeout=None`` and most ``HfApi`` calls
    pass none, so an endpoint that accepts the connection and never answers (a dead proxy, a
    stuck mirror) hangs ``publish``, ``verify``, ``diff`` and ``evaluate --dataset`` for ever,
    silently, and the TCP probe above cannot tell. A client factory the caller installed
    already is kept as it is. Idempotent; imports ``huggingface_hub`` (~0.1 s).
    """
    global _BOUND
    if _BOUND:
        return
    from huggingface_hub.utils import _http

    if getattr(_http, "_GLOBAL_CLIENT_FACTORY", None) is _http.default_client_factory:

        def client_factory():
            client = _http.default_client_factory()
            client.event_hooks = {**client.event_hooks, "request": [*client.event_hooks["request"], _bounded]}
            return client

        _http.set_client_factory(client_factory)
    if getattr(_http, "_GLOBAL_ASYNC_CLIENT_FACTORY", None) is _http.default_async_client_factory:

        def async_client_factory():
            client = _http.default_async_client_factory()
            client.event_hooks = {
                **client.event_hooks,
                "request": [*client.event_hooks["request"], _bounded_async],
            }
            return client

        _http.set_async_client_factory(async_client_factory)
    _BOUND = True
