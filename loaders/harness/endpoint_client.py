"""A chat-completions client that survives real servers: vLLM, SGLang, hosted OpenAI-compatible APIs.

What it adds to the official ``openai`` client, and why:

* **Bounded concurrency with threads** over one ``openai.OpenAI`` client (its HTTP pool is
  thread-safe). Why threads rather than ``AsyncOpenAI``: the callers (adapters, the SUB filter)
  are synchronous, may run inside a notebook's event loop, and the work is waiting on the
  network, so the GIL costs nothing; a thread pool of ``max_concurrency`` workers is the whole
  scheduler and needs no loop management.
* **Our own retry loop** (the ``openai`` client runs with ``max_retries=0``). Why: the run must
  know how many retries happened (they are logged and counted in :attr:`EndpointClient.usage`),
  must stop retrying at once when a sibling request failed for good, and must turn the final
  failure into one line that names the fix. Backoff is exponential with jitter (0.5 s, 1 s, 2 s …
  up to 30 s); a ``Retry-After`` / ``retry-after-ms`` header on a 429 or 5xx is honoured as given
  (never shortened), up to :data:`MAX_RETRY_AFTER_S`; a timeout is retried at most
  :data:`MAX_TIMEOUT_RETRIES` times. Retries are not counted against ``--max-requests`` (the
  budget counts distinct requests answered).
* **A response cache** (:mod:`conceptforge.loaders.harness.endpoint_cache`) keyed by the endpoint's
  model identity and the full request, image bytes hashed: each answer is committed as it arrives,
  so a killed run resumes without re-asking, and an error is never cached. A request is *claimed*
  in the cache before it is sent, so two processes on one cache ask each distinct request once
  (the second waits for the first's answer; a dead owner's claim is taken over).
* **No retry of a wrong address**: a refused connection ("nothing listens at URL") or a host name
  that does not resolve is said at once; retries are for what passes (429, 5xx, drops, timeouts).
* **A request budget** (``--max-requests``): refused before the first request is sent when the
  requests missing from the cache are more than the budget left.
* **Keys from an environment variable only**: :class:`EndpointSettings` holds the variable's
  *name*; the key is read when the client is made and is scrubbed from every error line.

Deterministic settings (temperature 0, a seed) are part of every :class:`ChatRequest`, so they
are in the cache key and in what the caller records.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import random
import threading
import time
import urllib.parse
import warnings
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conceptforge.endpoint_spec import GENERIC_KEY_ENV
from conceptforge.errors import (
    DependencyMissingError,
    EndpointAuthError,
    EndpointError,
    EndpointRateLimitedError,
    EndpointRequestError,
    EndpointResponseError,
    EndpointServerError,
    EndpointUnreachableError,
    ModelNotServedError,
    one_line,
)
from conceptforge.loaders.harness.endpoint_cache import LEASE_S
from conceptforge.loaders.harness.endpoint_request import (
    BUDGET_FLAG,
    NO_HOST,
    REFUSED,
    TIMEOUT_FLAG,
    ChatRequest,
    EndpointSettings,
    EndpointUsage,
    RequestBudgetError,
    _connect_failure,
    _jsonable,
    _listed,
    _retry_after,
    request_key,
)

logger = logging.getLogger(__name__)

__all__ = [
    "ChatRequest",
    "EndpointClient",
    "EndpointSettings",
    "EndpointUsage",
    "RequestBudgetError",
    "request_key",
]

#: The longest ``Retry-After`` honoured; a server asking for more is given up on at once.
MAX_RETRY_AFTER_S = 300.0
#: 5xx statuses that say the route does not exist here (not a passing fault): never retried.
NOT_IMPLEMENTED = (501, 505)
#: Retries after a timeout, whatever ``max_retries`` says: a server silent for ``timeout_s`` three
#: times running is down or swamped, and six more waits of two minutes each would only delay the
#: one-line error (the answers so far are cached; a rerun resumes).
MAX_TIMEOUT_RETRIES = 2
#: How often a run waiting on another process's claims looks for their answers.
POLL_S = 0.25
#: How often the claims of requests in flight are renewed (a quarter of their lease).
LEASE_RENEW_S = LEASE_S / 4
INITIAL_BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0
#: Fields of a ``/v1/models`` entry that change on every call (vLLM: ``created`` is the time of
#: the request, ``permission`` holds fresh random ids): never part of the cache key.
_VOLATILE_MODEL_FIELDS = {"created", "permission", "object"}


@dataclass
class _Run:
    """One :meth:`EndpointClient.complete` in progress: the requests to get, the answers so far,
    the futures in flight (future -> key), keys other processes hold (``waiting``) and ours."""

    todo: dict[str, ChatRequest]
    found: dict[str, dict[str, Any]]
    local: EndpointUsage
    bar: Any
    pool: ThreadPoolExecutor
    pending: dict[Future, str] = field(default_factory=dict)
    waiting: list[str] = field(default_factory=list)
    claimed: set[str] = field(default_factory=set)
    told: bool = False  # the user was told we wait on another process's requests


@dataclass
class _Outcome:
    response: dict[str, Any]
    attempts: int
    usage: dict[str, int] = field(default_factory=dict)


class EndpointClient:
    """Chat completions from one endpoint model: concurrent, retried, cached, budgeted.

    ``cache_dir``: where ``endpoint_responses.sqlite`` lives (``None``: no cache on disk). One
    :meth:`complete` at a time per client (it runs its own worker threads); processes may share
    a cache folder. :attr:`usage` (an :class:`EndpointUsage`) totals the run; ``tag=`` on
    :meth:`complete` also totals it per task in :attr:`usage_by_tag`; :meth:`record` is what the
    results keep.
    """

    def __init__(self, settings: EndpointSettings, *, cache_dir: str | Path | None = None) -> None:
        try:
            import openai
        except ImportError:
            raise DependencyMissingError(
                "scoring an endpoint needs the openai client: pip install 'conceptforge[serve]'"
            ) from None
        from conceptforge.loaders.harness.endpoint_cache import ResponseCache

        self.settings = settings
        self._openai = openai
        key = None
        if settings.api_key_env:
            key = os.environ.get(settings.api_key_env)
            if not key:
                raise EndpointAuthError(
                    f"the environment variable {settings.api_key_env} (the endpoint's key) is not set or empty; "
                    "export it before the run"
                )
        self._secret = key
        # max_retries=0: our own loop retries (see the module docstring); the timeout is per try.
        self._client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=key or "EMPTY",
            max_retries=0,
            timeout=settings.timeout_s,
        )
        self._cache = ResponseCache(cache_dir) if cache_dir is not None else None
        self._identity: dict[str, Any] | None = None
        self._endpoint_key: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._seen: set[str] = set()  # keys answered to this client (sent or read back), counted once
        self.usage = EndpointUsage()
        self.usage_by_tag: dict[str, EndpointUsage] = {}

    # -- identity -------------------------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        """What the server says about the model, asked once: its ``/v1/models`` entry (``id``,
        ``created``, ``owned_by``, ``root``, any revision or fingerprint field) and, once a
        response was seen, its ``system_fingerprint``. Raises :class:`ModelNotServedError` when
        the model is not among those served."""
        if self._identity is None:
            entries = self._list_models()
            served = [str(entry.get("id")) for entry in entries]
            if entries and self.settings.model not in served:
                raise ModelNotServedError(
                    f"the endpoint {self.settings.base_url} does not serve the model {self.settings.model!r}; "
                    f"it serves: {_listed(served)} (give one of these names)"
                )
            entry = next((e for e in entries if e.get("id") == self.settings.model), {"id": self.settings.model})
            self._identity = {key: value for key, value in entry.items() if key not in ("permission", "object")}
            self._identity.setdefault("system_fingerprint", None)
            self._endpoint_key = {
                "base_url": self.settings.base_url.rstrip("/"),
                **{k: v for k, v in entry.items() if k not in _VOLATILE_MODEL_FIELDS},
            }
        return dict(self._identity)

    def _list_models(self) -> list[dict[str, Any]]:
        def call() -> list[dict[str, Any]]:
            listed = self._client.models.list().data
            with warnings.catch_warnings():  # a field of the wrong shape: pydantic's lines, not ours
                warnings.simplefilter("ignore", UserWarning)
                return [model.model_dump() for model in listed]

        try:
            return self._with_retries(call, what="GET /models")[0]
        except ModelNotServedError:
            # No /v1/models route (some providers): the model cannot be checked up front; the first
            # chat request will say whether it is served.
            logger.warning(
                "the endpoint %s has no /models route; the model name is not checked", self.settings.base_url
            )
            return []

    def endpoint_key(self) -> dict[str, Any]:
        """The stable part of :meth:`identity` that keys the cache (no per-call timestamps)."""
        self.identity()
        assert self._endpoint_key is not None
        return dict(self._endpoint_key)

    # -- planning ---------------------------------------------------------------------------

    def keys(self, requests: Sequence[ChatRequest]) -> list[str]:
        endpoint = self.endpoint_key()
        return [request_key(endpoint, request) for request in requests]

    def plan(self, requests: Sequence[ChatRequest]) -> int:
        """How many requests the server would be sent for ``requests`` (distinct, not cached)."""
        keys = self.keys(requests)
        found = self._cache.get_many(keys) if self._cache else {}
        return len({key for key in keys if key not in found})

    def check_budget(self, needed: int) -> None:
        """Refuse, before anything is sent, a plan of ``needed`` requests beyond the budget left."""
        budget = self.settings.max_requests
        if budget is None:
            return
        left = budget - self.usage.requests
        if needed > left:
            spent = f" ({self.usage.requests} already sent)" if self.usage.requests else ""
            raise RequestBudgetError(
                f"this run needs {needed} requests not in the endpoint cache, more than {BUDGET_FLAG} {budget} "
                f"allows{spent}; raise {BUDGET_FLAG} or score fewer items"
            )

    # -- completions ------------------------------------------------------------------------

    def complete(
        self, requests: Sequence[ChatRequest], *, desc: str = "", tag: str | None = None
    ) -> list[dict[str, Any]]:
        """The raw responses (``ChatCompletion.model_dump()``) of ``requests``, in their order.

        Cached answers are read back; the rest are claimed in the cache (another process on the
        same cache then waits for our answer rather than asking again, and we for its) and sent
        ``max_concurrency`` at a time, each committed to the cache as it arrives. ``tag`` (a task
        name) also counts the usage under :attr:`usage_by_tag`. Raises an
        :class:`~conceptforge.errors.EndpointError` (after the retries) or
        :class:`RequestBudgetError` (before sending anything).
        """
        from conceptforge.progress import tqdm

        if not requests:
            return []
        keys = self.keys(requests)
        found = self._cache.get_many(keys) if self._cache else {}
        todo: dict[str, ChatRequest] = {}
        for key, request in zip(keys, requests):
            if key not in found and key not in todo:
                todo[key] = request
        self.check_budget(len(todo))
        local = EndpointUsage()
        self._count_hits(found, local)
        if todo:
            logger.info(
                "%s: %d requests to %s (%d from the cache)",
                desc or "endpoint",
                len(todo),
                self.settings.base_url,
                local.cache_hits,
            )
        self._stop.clear()
        try:
            with (
                ThreadPoolExecutor(max_workers=self.settings.max_concurrency, thread_name_prefix="endpoint") as pool,
                tqdm(total=len(todo), desc=desc or "endpoint requests", unit="req", disable=not todo) as bar,
            ):
                run = _Run(todo=todo, found=found, local=local, bar=bar, pool=pool)
                try:
                    self._drive(run)
                except BaseException as error:
                    # A request failed for good, or Ctrl-C: nothing new starts, requests in flight
                    # stop retrying, and what was answered is already committed.
                    self._stop.set()
                    for future in run.pending:
                        future.cancel()
                    if isinstance(error, Exception):
                        # Answers to the requests that were in flight are paid for: keep them too.
                        run.pending = {f: k for f, k in run.pending.items() if not f.cancelled()}
                        self._collect(run, keep_going=True)
                    raise
                finally:
                    if self._cache is not None:  # what we claimed and did not answer is free again
                        self._cache.release(run.claimed)
        finally:
            self.usage.add(local)
            if tag is not None:
                self.usage_by_tag.setdefault(tag, EndpointUsage()).add(local)
        responses = [copy.deepcopy(found[key]) for key in keys]
        if responses and self._identity is not None and self._identity.get("system_fingerprint") is None:
            self._identity["system_fingerprint"] = responses[0].get("system_fingerprint")
        return responses

    def _count_hits(self, answers: dict[str, dict[str, Any]], local: EndpointUsage) -> None:
        """Count as cache hits the answers this client neither sent nor read before: a fresh cache
        read back within the run (``match`` then its allowed mass) is no hit, and one answer read
        twice is one hit."""
        new = [key for key in answers if key not in self._seen]
        local.cache_hits += len(new)
        self._seen.update(new)

    def _drive(self, run: _Run) -> None:
        """Claim, send and collect until every request of ``run`` is answered: ours as they arrive,
        other processes' claims as their answers appear in the cache (or taken over when their
        owner died)."""
        order = list(run.todo)
        window = 2 * self.settings.max_concurrency  # claimed ahead: two processes share the work
        last_poll = last_renew = time.monotonic()
        while order or run.waiting or run.pending:
            room = window - len(run.pending)
            if order and room > 0:
                batch, order = order[:room], order[room:]
                self._claim_and_send(run, batch)
            if run.pending:
                self._collect(run, timeout=POLL_S)
            elif run.waiting and not order:
                self._stop.wait(POLL_S)
            now = time.monotonic()
            if self._cache is not None and now - last_renew >= LEASE_RENEW_S:
                self._cache.renew()
                last_renew = now
            if run.waiting and now - last_poll >= POLL_S:
                last_poll = now
                waiting, run.waiting = run.waiting, []
                self._claim_and_send(run, waiting)

    def _claim_and_send(self, run: _Run, keys: list[str]) -> None:
        """Claim ``keys``; send ours, read back those answered meanwhile, wait for the rest."""
        if self._cache is None:
            mine, answered, others = list(keys), {}, []
        else:
            claimed = self._cache.claim(keys)
            mine, answered, others = claimed.mine, claimed.answered, claimed.others
        run.claimed.update(mine)
        for key, response in answered.items():  # answered by another process on this cache
            run.found[key] = response
            run.bar.update(1)
        self._count_hits(answered, run.local)
        if others and not run.told:
            run.told = True
            logger.info(
                "another process on the cache %s is asking some of these requests: waiting for its answers "
                "instead of asking again",
                self._cache.path if self._cache is not None else "",
            )
        run.waiting.extend(others)
        for key in mine:
            run.pending[run.pool.submit(self._send, run.todo[key])] = key

    def _collect(self, run: _Run, *, keep_going: bool = False, timeout: float | None = None) -> None:
        """Commit each answer as its request finishes (the main thread owns the cache): all of
        ``run.pending``, or (``timeout``) those done within it. The first failure is raised, or
        with ``keep_going`` skipped (the caller is already raising one)."""
        while run.pending:
            done, _ = wait(run.pending, timeout=timeout, return_when=FIRST_COMPLETED)
            for future in done:
                key = run.pending.pop(future)
                error = future.exception()
                if error is not None:
                    if keep_going:
                        continue
                    raise error
                outcome: _Outcome = future.result()
                if self._cache is not None:
                    self._cache.put(key, outcome.response)
                run.claimed.discard(key)
                self._seen.add(key)
                run.found[key] = outcome.response
                local = run.local
                local.requests += 1
                local.attempts += outcome.attempts
                local.retries += outcome.attempts - 1
                local.prompt_tokens += outcome.usage.get("prompt_tokens") or 0
                local.completion_tokens += outcome.usage.get("completion_tokens") or 0
                run.bar.update(1)
            if timeout is not None:
                return

    def _send(self, request: ChatRequest) -> _Outcome:
        """One request, retried; runs in a worker thread."""
        body: dict[str, Any] = {
            "model": self.settings.model,
            "messages": [dict(message) for message in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if request.logprobs:
            body["logprobs"] = True
            if request.top_logprobs is not None:
                body["top_logprobs"] = request.top_logprobs
        if request.extra_body:
            body["extra_body"] = _jsonable(dict(request.extra_body))

        def call() -> dict[str, Any]:
            completion = self._client.chat.completions.create(**body)
            return self._check_response(completion)

        response, attempts = self._with_retries(call, what="chat completion")
        return _Outcome(response=response, attempts=attempts, usage=dict(response.get("usage") or {}))

    def _check_response(self, completion: Any) -> dict[str, Any]:
        dump = getattr(completion, "model_dump", None)
        with warnings.catch_warnings():
            # pydantic warns (three lines on stderr) when a field has the wrong shape, e.g. choices
            # that are an object; the line below says what is wrong, once.
            warnings.simplefilter("ignore", UserWarning)
            data = dump() if callable(dump) else None
        if not isinstance(data, dict):
            raise EndpointResponseError(
                f"the endpoint {self.settings.base_url} answered something that is not a chat completion "
                f"({type(completion).__name__}); is it an OpenAI-compatible /v1 URL?"
            )
        choices = data.get("choices")
        if choices and not isinstance(choices, list):
            raise EndpointResponseError(
                f"the endpoint {self.settings.base_url} answered a chat completion whose choices is "
                f"{'an object' if isinstance(choices, dict) else type(choices).__name__}, not a list; "
                "is it an OpenAI-compatible /v1 URL?"
            )
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            raise EndpointResponseError(
                f"the endpoint {self.settings.base_url} answered a chat completion without choices; "
                "is it an OpenAI-compatible /v1 URL?"
            )
        if choices[0].get("message") is None:
            raise EndpointResponseError(
                f"the endpoint {self.settings.base_url} answered a chat completion whose first choice has no message"
            )
        # Through JSON, as the cache stores it: a fresh answer and its cached copy are the same
        # value (a rerun's predictions are byte-identical).
        return json.loads(json.dumps(data, sort_keys=True, default=str))

    def _with_retries(self, call: Any, *, what: str) -> tuple[Any, int]:
        """``call()`` retried on 429, 5xx, dropped connections and timeouts; (result, attempts)."""
        openai = self._openai
        attempt = timeouts = 0
        while True:
            attempt += 1
            try:
                return call(), attempt
            except EndpointError:
                raise
            except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as error:
                if _connect_failure(error) is not None:
                    # Nobody listens, or the host has no address: no wait cures a wrong URL or a
                    # server that is not started, so it is said at once, not after six backoffs.
                    raise self._final_error(error, attempts=attempt, asked=None, what=what) from None
                status = getattr(error, "status_code", None)
                headers = getattr(getattr(error, "response", None), "headers", None)
                asked = _retry_after(headers)
                timeouts += isinstance(error, openai.APITimeoutError)
                retryable = (
                    not (asked is not None and asked > MAX_RETRY_AFTER_S)
                    and timeouts <= MAX_TIMEOUT_RETRIES
                    and status not in NOT_IMPLEMENTED
                )
                if attempt > self.settings.max_retries or not retryable or self._stop.is_set():
                    raise self._final_error(error, attempts=attempt, asked=asked, what=what) from None
                if asked is not None:
                    delay = asked
                else:
                    delay = min(INITIAL_BACKOFF_S * 2 ** (attempt - 1), MAX_BACKOFF_S) * (1 - 0.25 * random.random())
                logger.warning(
                    "endpoint %s: %s failed (%s), retry %d of %d in %.1f s",
                    self.settings.base_url,
                    what,
                    f"HTTP {status}" if status else type(error).__name__,
                    attempt,
                    self.settings.max_retries,
                    delay,
                )
                if self._stop.wait(delay):
                    raise self._final_error(error, attempts=attempt, asked=asked, what=what) from None
            except openai.APIStatusError as error:
                raise self._final_error(error, attempts=attempt, asked=None, what=what) from None
            except openai.APIResponseValidationError as error:
                raise EndpointResponseError(
                    self._scrub(f"the endpoint {self.settings.base_url} answered a malformed {what}: {one_line(error)}")
                ) from None
            except json.JSONDecodeError as error:  # a 200 that says JSON and is not
                raise EndpointResponseError(
                    self._scrub(f"the endpoint {self.settings.base_url} answered a malformed {what}: {one_line(error)}")
                ) from None

    def _final_error(
        self, error: Exception, *, attempts: int, asked: float | None, what: str = "chat completion"
    ) -> EndpointError:
        """The one-line error for a failure that retries did not (or cannot) cure."""
        openai = self._openai
        url = self.settings.base_url
        tries = f"{attempts} tr{'y' if attempts == 1 else 'ies'}"
        status = getattr(error, "status_code", None)
        detail = self._server_message(error)
        if isinstance(error, openai.APITimeoutError):
            message = (
                f"the endpoint {url} did not answer within {self.settings.timeout_s:g} s ({tries}); "
                f"check the server or raise {TIMEOUT_FLAG}"
            )
            return EndpointUnreachableError(self._scrub(message))
        if isinstance(error, openai.APIConnectionError):
            failure = _connect_failure(error)
            if failure == REFUSED:
                message = f"nothing listens at {url} (connection refused); start the server there or fix the URL"
                return EndpointUnreachableError(self._scrub(message))
            if failure == NO_HOST:
                host = urllib.parse.urlsplit(url).hostname or url
                message = f"cannot resolve host {host} of the endpoint {url}; fix the host name in the URL"
                return EndpointUnreachableError(self._scrub(message))
            cause = error.__cause__ or error.__context__
            reason = one_line(cause) if cause is not None else one_line(error)
            message = (
                f"the endpoint {url} dropped the connection ({reason}; {tries}); "
                "check the server's log, then rerun (answers so far are cached)"
            )
            return EndpointUnreachableError(self._scrub(message))
        if status in (401, 403):
            if self.settings.api_key_env:
                fix = f"the key in ${self.settings.api_key_env} was refused; set {self.settings.api_key_env} to a valid key"
            else:
                fix = (
                    f"no key was sent; export {GENERIC_KEY_ENV}=<the server's key> (the variable "
                    "endpoint:NAME@URL reads) and rerun"
                )
            return EndpointAuthError(self._scrub(f"the endpoint {url} answered HTTP {status}: {fix}{detail}"))
        if status == 404:
            served = self._served_names()
            listed = (
                f"; it serves: {_listed(served)}"
                if served
                else f"; is {url} the API root (vLLM, SGLang: ending in /v1)?"
            )
            return ModelNotServedError(
                self._scrub(
                    f"the endpoint {url} does not serve the model {self.settings.model!r} (HTTP 404{detail}){listed}"
                )
            )
        if status == 429:
            wait_note = f", last asked to wait {asked:g} s" if asked is not None else ""
            return EndpointRateLimitedError(
                self._scrub(
                    f"the endpoint {url} is still rate limiting (HTTP 429) after {tries}{wait_note}; "
                    "rerun later (answers so far are cached) or lower the concurrency"
                )
            )
        if status in NOT_IMPLEMENTED:
            # A plain web server (python -m http.server answers POST with 501): no retry cures it,
            # and it is no answer about a parameter (the probe reads those as "no log-probabilities").
            return EndpointResponseError(
                self._scrub(
                    f"the endpoint {url} does not implement the {what} route (HTTP {status}{detail}); "
                    "it is not an OpenAI-compatible server: give the API root of vLLM, SGLang or a provider "
                    "(e.g. http://HOST:8000/v1)"
                )
            )
        if status is not None and status >= 500:
            return EndpointServerError(
                self._scrub(
                    f"the endpoint {url} answered a server error (HTTP {status}{detail}) after {tries}; "
                    "check the server's log, then rerun (answers so far are cached)"
                )
            )
        return EndpointRequestError(
            self._scrub(
                f"the endpoint {url} refused the request (HTTP {status}{detail}); the server may not support it"
            )
        )

    def _served_names(self) -> list[str]:
        try:
            return [model.id for model in self._client.models.list().data]
        except Exception:  # noqa: BLE001 - only to enrich an error line
            return []

    @staticmethod
    def _server_message(error: Exception) -> str:
        body = getattr(error, "body", None)
        message = None
        if isinstance(body, dict):
            inner = body.get("error", body)
            message = inner.get("message") if isinstance(inner, dict) else inner
            message = message if isinstance(message, str) else body.get("message")
        if not message:
            return ""
        text = " ".join(str(message).split())
        return f": {text[:200]}"

    def _scrub(self, text: str) -> str:
        """The key never appears in an error line, even if a server echoes it back."""
        text = " ".join(text.split())
        if self._secret:
            text = text.replace(self._secret, "***")
        return text

    def record(self) -> dict[str, Any]:
        """What the results keep about the endpoint: the settings (no key), the server's identity
        of the model and the usage so far, in total and per tag."""
        return {
            "settings": self.settings.to_dict(),
            "identity": self.identity(),
            "usage": self.usage.to_dict(),
            "usage_by_tag": {tag: usage.to_dict() for tag, usage in sorted(self.usage_by_tag.items())},
        }

    def close(self) -> None:
        self._stop.set()
        self._client.close()
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    def __enter__(self) -> EndpointClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
