"""``--model`` naming a served model: the spelling, the provider shortcuts, and what the server says.

One spelling for any server speaking the OpenAI chat-completions API (vLLM, SGLang, TGI,
``transformers serve``, Ollama, a hosted provider):

* ``endpoint:SERVED_NAME@BASE_URL``, e.g. ``endpoint:Qwen/Qwen2-VL-7B-Instruct@http://gpu1:8000/v1``;
  the key, if the server wants one, is read from ``$CONCEPTFORGE_ENDPOINT_KEY``.
* ``PROVIDER:SERVED_NAME`` for a provider that documents an OpenAI-compatible endpoint
  (:data:`PROVIDERS`: its base URL and the environment variable its key is read from), e.g.
  ``openai:gpt-4o``, ``gemini:gemini-2.5-flash``, ``openrouter:qwen/qwen2.5-vl-72b-instruct``.

The spelling itself lives in :mod:`conceptforge.endpoint_spec` (re-exported here), so that layers
below the harness can tell a served model apart without importing it.

Keys come from environment variables only: the variable's *name* is recorded, never its value.

What the model *is* comes from the server, not from the spelling: :func:`~conceptforge.loaders.harness.model_ref.resolve_endpoint` asks
``/v1/models`` (served name, ``root``, owner, dates, any revision field) and sends one tiny text
request to learn whether the server returns token log-probabilities at all and, where a tokenizer
for the served model can be loaded (the entry's ``root``, else the served name), whether it returns
the exact log-probabilities of named token ids (vLLM's ``logprob_token_ids``). The result's
``sha`` is ``endpoint-sha256:…``, a digest of the stable part of that identity and of the
probability mode, so the sample cache and the results name exactly what answered.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from conceptforge.endpoint_spec import GENERIC as GENERIC
from conceptforge.endpoint_spec import GENERIC_KEY_ENV as GENERIC_KEY_ENV
from conceptforge.endpoint_spec import PROVIDERS as PROVIDERS
from conceptforge.endpoint_spec import EndpointSpec as EndpointSpec
from conceptforge.endpoint_spec import Provider as Provider
from conceptforge.endpoint_spec import is_endpoint_spec as is_endpoint_spec
from conceptforge.endpoint_spec import parse_endpoint_spec as parse_endpoint_spec
from conceptforge.errors import EndpointRequestError

logger = logging.getLogger(__name__)

TOKEN_ID_PREFIX = "token_id:"  # vLLM's return_tokens_as_token_ids spelling

#: How an endpoint gives probabilities (part of the model's fingerprint: the numbers differ).
TOKEN_IDS = "token-ids"  # exact log-probabilities of named token ids (vLLM logprob_token_ids)
TOP_LOGPROBS = "top-logprobs"  # the top-20 alternatives, matched by token text
NO_LOGPROBS = "none"  # no log-probabilities: by-answer protocols only
TOP_K = 20  # OpenAI's cap on top_logprobs, and vLLM's default --max-logprobs


@dataclass(frozen=True)
class EndpointOptions:
    """The client settings a run chose (``--endpoint-concurrency``, ``--endpoint-timeout``,
    ``--max-requests``); recorded with the model in the results."""

    concurrency: int = 8
    timeout_s: float = 120.0
    max_requests: int | None = None
    retries: int = 6


def settings_of(spec: EndpointSpec, options: EndpointOptions) -> Any:
    """The client's :class:`EndpointSettings`; a generic endpoint sends its key only when it is set."""
    import os

    from conceptforge.loaders.harness.endpoint_client import EndpointSettings

    key_env = spec.key_env
    if spec.provider == GENERIC and not os.environ.get(GENERIC_KEY_ENV):
        key_env = None  # a local vLLM without --api-key wants none
    return EndpointSettings(
        base_url=spec.base_url,
        model=spec.model,
        api_key_env=key_env,
        max_concurrency=options.concurrency,
        max_retries=options.retries,
        timeout_s=options.timeout_s,
        max_requests=options.max_requests,
    )


def load_tokenizer(identity: dict[str, Any], model: str) -> Any | None:
    """The served model's tokenizer, where one loads from its ``root`` or its served name (vLLM
    serves a Hub id or a folder under that name); ``None`` for a hosted model (no token ids)."""
    from transformers import AutoTokenizer

    for source in dict.fromkeys(s for s in (identity.get("root"), model) if s):
        try:
            return AutoTokenizer.from_pretrained(str(source))
        except Exception as error:  # noqa: BLE001 - a hosted model's name is no tokenizer: say so, go on
            logger.info("no tokenizer for the served model from %s (%s)", source, type(error).__name__)
    return None


def _probe(client: Any, extra: tuple = (), top: int | None = 1) -> dict[str, Any] | None:
    """One tiny text request asking for log-probabilities; ``None`` when the server refuses them."""
    from conceptforge.loaders.harness.endpoint_client import ChatRequest

    request = ChatRequest(
        messages=({"role": "user", "content": "Answer yes or no: is the sky blue?"},),
        max_tokens=1,
        logprobs=True,
        top_logprobs=top,
        extra_body=extra,
    )
    try:
        (response,) = client.complete([request], desc="endpoint probe")
    except EndpointRequestError as error:
        logger.info("the endpoint refuses log-probabilities: %s", error)
        return None
    logprobs = (response["choices"][0].get("logprobs") or {}).get("content")
    return response if logprobs else None


def returned_token_ids(entry: dict[str, Any]) -> dict[int, float]:
    """``{token id: log-probability}`` of a response position written with token ids (the chosen
    token and its ``top_logprobs``)."""
    out: dict[int, float] = {}
    for item in [entry, *(entry.get("top_logprobs") or [])]:
        token = str(item.get("token", ""))
        if token.startswith(TOKEN_ID_PREFIX) and item.get("logprob") is not None:
            out[int(token[len(TOKEN_ID_PREFIX) :])] = float(item["logprob"])
    return out


def token_ids_honoured(response: dict[str, Any] | None, ids: list[int]) -> bool:
    """Whether a response to ``logprob_token_ids=ids`` (with ``return_tokens_as_token_ids``) gave
    every named id's log-probability."""
    if response is None:
        return False
    content = (response["choices"][0].get("logprobs") or {}).get("content") or []
    return bool(content) and set(ids) <= set(returned_token_ids(content[0]))


def probability_mode(client: Any, tokenizer: Any | None) -> str:
    """:data:`TOKEN_IDS`, :data:`TOP_LOGPROBS` or :data:`NO_LOGPROBS` for this server (asked once)."""
    if _probe(client, top=1) is None:
        return NO_LOGPROBS
    if tokenizer is not None:
        ids = [int(t) for t in tokenizer.encode("Yes", add_special_tokens=False)[:1]]
        ids += [int(t) for t in tokenizer.encode("No", add_special_tokens=False)[:1]]
        extra = (("logprob_token_ids", tuple(ids)), ("return_tokens_as_token_ids", True))
        if token_ids_honoured(_probe(client, extra, top=None), ids):
            return TOKEN_IDS
        logger.info("the endpoint ignores logprob_token_ids: probabilities from top_logprobs (top %d)", TOP_K)
    return TOP_LOGPROBS


#: Identity fields that change while the same weights are served: vLLM's ``created`` (the time of
#: the request), ``transformers serve``'s ``status`` (loaded/unloaded), the per-response fingerprint.
VOLATILE_IDENTITY = frozenset({"created", "system_fingerprint", "status"})


def fingerprint(identity: dict[str, Any], mode: str) -> str:
    """``endpoint-sha256:…`` of the identity's stable fields and the probability mode (the
    :data:`VOLATILE_IDENTITY` fields are recorded, not fingerprinted)."""
    stable = {k: v for k, v in identity.items() if k not in VOLATILE_IDENTITY and v is not None}
    text = json.dumps({"identity": stable, "probabilities": mode}, sort_keys=True, default=str)
    return "endpoint-sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]
