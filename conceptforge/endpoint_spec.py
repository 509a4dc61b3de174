"""How ``--model`` (and the SUB filter's ``--vqa-model``) spells a served model, and nothing more.

Why a core module: every layer must tell a served model from a Hub id or a folder before it loads
anything (``evaluate``, ``--dry-run``'s costs, ``filter sub``), while only the harness talks to
servers (:mod:`conceptforge.loaders.harness.endpoint_model`). The spelling is plain text rules:

* ``endpoint:SERVED_NAME@BASE_URL``, the key (if any) read from ``$CONCEPTFORGE_ENDPOINT_KEY``;
* ``PROVIDER:SERVED_NAME`` for a provider that documents an OpenAI-compatible endpoint
  (:data:`PROVIDERS`: its base URL and the environment variable its key is read from).
"""

from __future__ import annotations

from dataclasses import dataclass

from conceptforge.errors import InvalidArgumentError

#: The key variable of ``endpoint:NAME@URL`` (a vLLM/SGLang server started with ``--api-key``).
GENERIC_KEY_ENV = "CONCEPTFORGE_ENDPOINT_KEY"
GENERIC = "endpoint"


@dataclass(frozen=True)
class Provider:
    """A hosted provider's documented OpenAI-compatible base URL and the variable its key is in."""

    name: str
    base_url: str
    key_env: str


PROVIDERS = {
    p.name: p
    for p in (
        Provider("openai", "https://api.openai.com/v1", "OPENAI_API_KEY"),
        Provider("gemini", "https://generativelanguage.googleapis.com/v1beta/openai/", "GEMINI_API_KEY"),
        Provider("anthropic", "https://api.anthropic.com/v1/", "ANTHROPIC_API_KEY"),
        Provider("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        Provider("together", "https://api.together.xyz/v1", "TOGETHER_API_KEY"),
    )
}


@dataclass(frozen=True)
class EndpointSpec:
    """A parsed ``--model`` of a served model: provider (or ``endpoint``), served name, URL, key variable."""

    provider: str
    model: str
    base_url: str
    key_env: str | None

    @property
    def id(self) -> str:
        """The spelling written into results (no key in it, ever)."""
        if self.provider == GENERIC:
            return f"{GENERIC}:{self.model}@{self.base_url}"
        return f"{self.provider}:{self.model}"


def is_endpoint_spec(spec: str) -> bool:
    """Whether ``--model`` names a served model (checked before the CBM factory spelling)."""
    head, sep, _ = spec.partition(":")
    return bool(sep) and (head == GENERIC or head in PROVIDERS) and not spec.startswith(("http:", "https:"))


def parse_endpoint_spec(spec: str) -> EndpointSpec:
    """``endpoint:NAME@URL`` or ``PROVIDER:NAME`` -> :class:`EndpointSpec` (one-line errors)."""
    head, _, rest = spec.partition(":")
    if head == GENERIC:
        name, at, url = rest.rpartition("@")
        if at and name and url and "://" not in url:  # host:port/v1 as curl takes it
            raise InvalidArgumentError(
                f"--model {spec}: the base URL {url} has no scheme; write endpoint:{name}@http://{url}"
            )
        if not at or not name or not url.startswith(("http://", "https://")):
            raise InvalidArgumentError(
                f"--model {spec}: a served model is endpoint:SERVED_NAME@BASE_URL, "
                "e.g. endpoint:Qwen/Qwen2-VL-7B-Instruct@http://127.0.0.1:8000/v1"
            )
        return EndpointSpec(GENERIC, name, url.rstrip("/"), GENERIC_KEY_ENV)
    provider = PROVIDERS[head]
    if not rest:
        raise InvalidArgumentError(f"--model {spec}: name the served model, e.g. {head}:MODEL")
    return EndpointSpec(head, rest, provider.base_url, provider.key_env)


def check_provider(spec: str) -> None:
    """Refuse ``--model mistral:large``: a ``NAME:NAME`` spelling whose head is no provider we know
    and no module Python can find. Why here and not at load: the spelling is also a CBM factory's
    (``module:function``), and read as one it was skipped by every task as "a cbm model". A head
    with a dot (``mypkg.cbms:make``) or an importable module stays a CBM factory."""
    import importlib.util
    import os
    import re

    head, sep, name = spec.partition(":")
    if not sep or head == GENERIC or head in PROVIDERS or os.path.exists(spec):
        return
    if not re.fullmatch(r"[A-Za-z_]\w*", head) or "/" in spec or not name:
        return
    try:
        found = importlib.util.find_spec(head) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise InvalidArgumentError(
            f"--model {spec}: {head!r} is an unknown provider (known: {', '.join(PROVIDERS)}; any "
            f"OpenAI-compatible server is {GENERIC}:SERVED_NAME@BASE_URL), and no module {head} holds a CBM factory"
        )
