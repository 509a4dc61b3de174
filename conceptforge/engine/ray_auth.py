"""Ray's token authentication for ``--ray-address`` (Ray 2.52 and later).

Why: ``ray start --head`` turns token authentication on whenever a token exists (``ray
get-auth-token --generate`` writes ``~/.ray/auth_token``; Ray 2.59+ does it by default), and then
every client must present that token. Ray's own driver picks the token up only for
``address="auto"``: a driver given an explicit ``HOST:PORT`` (our ``--ray-address``) presents
none unless ``RAY_AUTH_MODE=token`` is in its environment, and was refused after ~28 s of
retries with "Ray refused the connection", the cause (``InvalidAuthToken``) only in Ray's own
warnings (issue 45.8).

What we do, as Ray documents it (docs.ray.io, "Ray token authentication"): when
``RAY_AUTH_MODE`` is not set and a token is available where Ray looks for one (``RAY_AUTH_TOKEN``,
``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``), this process presents it, as Ray does for
``auto``; a ``RAY_AUTH_MODE`` the user set is left alone. Then one cheap call to the cluster's
GCS tells whether it accepts us: a refused token is one line naming the cause and the fix, at
once. Ray before 2.52 has no token authentication: nothing is done.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from conceptforge.errors import ClusterError

logger = logging.getLogger(__name__)

AUTH_MODE_ENV = "RAY_AUTH_MODE"
#: Seconds the authentication probe may take (a GCS that does not answer is found by ray.init's bound).
AUTH_PROBE_TIMEOUT = 10.0


def token_source() -> str | None:
    """Where Ray would read this process's token from, or None when there is none."""
    if os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return "RAY_AUTH_TOKEN"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        return f"RAY_AUTH_TOKEN_PATH ({path})"
    default = Path.home() / ".ray" / "auth_token"
    return str(default) if default.is_file() else None


def present_token() -> str | None:
    """Present the available token to the cluster (``RAY_AUTH_MODE=token`` for this process) when
    the user set no mode; returns where the token comes from, or None when nothing was changed."""
    if os.environ.get(AUTH_MODE_ENV) is not None:
        return None  # the user's choice, as Ray respects it
    source = token_source()
    if source is None:
        return None
    try:
        from ray._private.authentication import authentication_token_setup as setup
    except ImportError:  # Ray < 2.52: no token authentication
        return None
    quiet = _Quiet()
    setup.logger.addFilter(quiet)
    try:
        # Ray's own step for address="auto": sets RAY_AUTH_MODE=token and refreshes its config
        setup.maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    finally:
        setup.logger.removeFilter(quiet)
    logger.info("Ray: presenting the token authentication token from %s", source)
    return source


class _Quiet(logging.Filter):
    """Ray's "token authentication is enabled for this Ray cluster" is about starting a cluster."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Token authentication is enabled" not in record.getMessage()


def check_token(address: str, host: str, port: int) -> None:
    """Ask the cluster's GCS at ``host:port`` one question: a refused token is a :class:`ClusterError`
    naming the cause, in about a second instead of ray.init's ~28 s of retries."""
    try:
        from ray._raylet import GcsClient
    except ImportError:
        return
    outcome: dict[str, BaseException | None] = {}

    def probe() -> None:
        try:
            GcsClient(address=f"{host}:{port}").internal_kv_get(b"conceptforge-probe", namespace=None, timeout=5)
            outcome["error"] = None
        except Exception as error:  # handed to the caller
            outcome["error"] = error

    thread = threading.Thread(target=probe, daemon=True, name="ray-auth-probe")
    thread.start()
    thread.join(AUTH_PROBE_TIMEOUT)
    error = outcome.get("error")
    if error is None or type(error).__name__ != "AuthenticationError":
        return  # accepted, or another problem that ray.init reports within its own bound
    mode = os.environ.get(AUTH_MODE_ENV)
    source = token_source()
    if mode is not None and mode.lower() != "token":
        had = f"this process has {AUTH_MODE_ENV}={mode}"
    elif source is None:
        had = "this process has no token"
    else:
        had = f"the token from {source} is not the cluster's"
    raise ClusterError(
        f"--ray-address {address}: the Ray cluster uses token authentication and refused this process ({had}): "
        "copy the head node's ~/.ray/auth_token to ~/.ray/auth_token here, or set RAY_AUTH_TOKEN (or "
        f"RAY_AUTH_TOKEN_PATH) to it{' and unset ' + AUTH_MODE_ENV if mode and mode.lower() != 'token' else ''} "
        "(docs/cluster.md, Ray token authentication)"
    )
