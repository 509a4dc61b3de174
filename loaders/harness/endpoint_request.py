"""What a chat request is, how it is keyed in the response cache, and how a failure is read.

Why apart from :mod:`conceptforge.loaders.harness.endpoint_client`: the settings, the request and
its cache key are plain data that the adapters and the cache use without the client's threads;
the readers of a failure (a refused connection, an unknown host, a ``Retry-After`` header) are
pure functions of an exception or headers, tested on their own.
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import hashlib
import json
import socket
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from conceptforge.errors import InvalidArgumentError

#: Flags named in the error lines (the command line spells them so).
TIMEOUT_FLAG = "--endpoint-timeout"
BUDGET_FLAG = "--max-requests"
#: The cache key's layout version: a change of what goes into a key bumps it.
_KEY_VERSION = 1


class RequestBudgetError(InvalidArgumentError):
    """The requests a run still needs (those not in the cache) exceed ``--max-requests``."""


@dataclass(frozen=True)
class EndpointSettings:
    """What the user chose for the endpoint; recorded with the results, so it holds no key.

    ``api_key_env`` is the *name* of the environment variable holding the key (``None``: the
    server needs none). ``max_requests`` is the request budget of the run: ``None`` is unlimited.
    """

    base_url: str
    model: str
    api_key_env: str | None = None
    max_concurrency: int = 8
    max_retries: int = 6
    timeout_s: float = 120.0
    max_requests: int | None = None

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise InvalidArgumentError(f"endpoint URL {self.base_url!r} must start with http:// or https://")
        if not self.model:
            raise InvalidArgumentError("endpoint model name is empty; give the name the server serves")
        if self.max_concurrency < 1:
            raise InvalidArgumentError(f"endpoint concurrency must be at least 1, not {self.max_concurrency}")
        if self.max_retries < 0:
            raise InvalidArgumentError(f"endpoint retries must be 0 or more, not {self.max_retries}")
        if not self.timeout_s > 0:
            raise InvalidArgumentError(f"{TIMEOUT_FLAG} must be positive, not {self.timeout_s}")
        if self.max_requests is not None and self.max_requests < 0:
            raise InvalidArgumentError(f"{BUDGET_FLAG} must be 0 or more, not {self.max_requests}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completions call, fully determined: what is sent, and (hashed) its cache key.

    ``messages`` are OpenAI messages; images go in as ``data:`` URLs. ``extra_body`` holds
    server-specific parameters as pairs, e.g. ``(("logprob_token_ids", (1, 2)),)`` for vLLM.
    """

    messages: tuple[dict, ...]
    max_tokens: int = 1
    temperature: float = 0.0
    seed: int | None = 0
    logprobs: bool = False
    top_logprobs: int | None = None
    extra_body: tuple[tuple[str, Any], ...] = ()

    def settings(self) -> dict[str, Any]:
        """The sampling settings, for the results (what was asked, besides the messages)."""
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "logprobs": self.logprobs,
            "top_logprobs": self.top_logprobs,
            "extra_body": _jsonable(dict(self.extra_body)),
        }


@dataclass
class EndpointUsage:
    """What a run cost: ``requests`` answered by the server, ``attempts`` HTTP calls including
    ``retries``, ``cache_hits`` distinct requests answered from the cache that this client did not
    send itself (an earlier run's answers, or another process's on the same cache; reading this
    run's own answers again is no hit), and the tokens the server reported for the requests it
    answered (cached answers cost nothing and are not counted)."""

    requests: int = 0
    attempts: int = 0
    retries: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: EndpointUsage) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _image_digest(url: str) -> str:
    """A ``data:`` URL as the hash of its decoded bytes (the key must not hold megabytes of base64,
    and two encodings of the same bytes are the same image)."""
    head, _, payload = url.partition(",")
    if not head.startswith("data:") or not head.endswith(";base64"):
        return url
    try:
        raw = base64.b64decode(payload, validate=False)
    except (binascii.Error, ValueError):
        return url
    mime = head[len("data:") : -len(";base64")]
    return f"data:{mime};sha256={hashlib.sha256(raw).hexdigest()}"


def _messages_for_key(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "url" and isinstance(v, str) and v.startswith("data:"):
                out[k] = _image_digest(v)
            else:
                out[str(k)] = _messages_for_key(v)
        return out
    if isinstance(value, list | tuple):
        return [_messages_for_key(v) for v in value]
    return value


def request_key(endpoint_key: dict[str, Any], request: ChatRequest) -> str:
    """The cache key of ``request`` sent to the endpoint whose stable identity is ``endpoint_key``."""
    payload = {
        "version": _KEY_VERSION,
        "endpoint": endpoint_key,
        "messages": _messages_for_key(list(request.messages)),
        **request.settings(),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


#: Why a connection could not be opened (:func:`_connect_failure`); neither is retried.
REFUSED = "refused"
NO_HOST = "no-host"


def _connect_failure(error: BaseException) -> str | None:
    """:data:`REFUSED` (nothing listens at the port) or :data:`NO_HOST` (the host name has no
    address) when that is what an ``openai.APIConnectionError`` wraps (httpx keeps the socket's
    error in the cause chain); ``None`` for a dropped connection or a timeout, which may pass."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError):
            return REFUSED
        if isinstance(cause, socket.gaierror):
            return NO_HOST
        cause = cause.__cause__ or cause.__context__
    return None


def _listed(names: Sequence[str], limit: int = 20) -> str:
    """Served model names for an error line: a hosted provider serves a hundred; show ``limit``."""
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} … ({len(names)} in all)"


def _retry_after(headers: Any) -> float | None:
    """Seconds a ``retry-after-ms`` / ``Retry-After`` header asks for (a number or an HTTP date)."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / divisor)
        except ValueError:
            parsed = email.utils.parsedate_tz(value)
            if parsed is not None:
                return max(0.0, email.utils.mktime_tz(parsed) - time.time())
    return None
