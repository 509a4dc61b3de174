"""User-facing errors, by kind.

Every error caused by the user's input or environment is a :class:`ConceptforgeError` carrying
one line that says what is wrong and how to fix it; the command line prints exactly that line and
exits 2. Anything else is a bug and keeps its traceback.

Each kind also subclasses the matching builtin, so a library caller can catch by kind without
knowing this module: a missing ``--cub-dir`` is a ``FileNotFoundError``, a bad spec a
``ValueError``, a missing optional package an ``ImportError``. The tree::

    ConceptforgeError
    ├── InvalidArgumentError (ValueError)      a parameter or flag value, or a combination of them
    │   ├── BadRequest (annotation server)     a request the annotation app cannot serve
    │   └── OracleError                        a classifier oracle and its target classes do not match
    ├── SpecError (ValueError)                 a spec/config file the caller wrote is malformed
    ├── DataFormatError (ValueError)           a dataset or data folder exists but has the wrong content
    ├── DataNotFoundError (FileNotFoundError)  a file, folder, dataset or split is missing
    ├── WeightsUnavailableError (OSError)      model weights cannot be loaded (not cached, not a model)
    ├── DeviceUnavailableError (RuntimeError)  the requested device (a CUDA GPU) is not there
    ├── DependencyMissingError (ImportError)   an optional package (bpy, scikit-learn …) is missing
    ├── HubError (OSError)                     a Hugging Face Hub request failed (network, auth, repo)
    │   └── PublishError                       a release cannot be made as asked (version taken …)
    ├── ClusterError (ConnectionError)         a compute cluster (Ray) cannot be reached or refused us
    ├── EndpointError (ConnectionError)        a model server (OpenAI-compatible endpoint) failed us
    │   ├── EndpointUnreachableError           cannot connect, or no answer within the timeout
    │   ├── EndpointAuthError                  the key was refused (401/403)
    │   ├── ModelNotServedError                the server does not serve the model asked for
    │   ├── EndpointRateLimitedError           still 429 after every retry
    │   ├── EndpointServerError                still 5xx after every retry
    │   ├── EndpointRequestError               the server refused the request itself (400, 422)
    │   └── EndpointResponseError              an answer that is not a chat completion
    ├── StoreError (RuntimeError)              an output folder or item store conflicts with the run
    │   └── AlreadyAnswered (annotation db)    an annotator answered this item before
    └── ItemError (RuntimeError)               one work item cannot be made (retried, then recorded as failed)
        └── PlacementError                     a binding scene found no valid object placement

``BadRequest``, ``AlreadyAnswered``, ``OracleError`` and ``PlacementError`` live beside the code
that raises them and subclass the kinds above.
"""

from __future__ import annotations

__all__ = [
    "ConceptforgeError",
    "InvalidArgumentError",
    "SpecError",
    "DataFormatError",
    "DataNotFoundError",
    "WeightsUnavailableError",
    "DeviceUnavailableError",
    "DependencyMissingError",
    "HubError",
    "PublishError",
    "ClusterError",
    "EndpointError",
    "EndpointUnreachableError",
    "EndpointAuthError",
    "ModelNotServedError",
    "EndpointRateLimitedError",
    "EndpointServerError",
    "EndpointRequestError",
    "EndpointResponseError",
    "StoreError",
    "ItemError",
    "PermanentItemError",
    "one_line",
]
import re


class ConceptforgeError(Exception):
    """An error caused by the user's input or environment, with a one-line fix-it message."""

    exit_code: int = 2

    def __init__(self, message: str) -> None:
        # One line only: the CLI prints it verbatim.
        super().__init__(" ".join(str(message).split()))

    def __str__(self) -> str:
        # OSError and ImportError format their own args; keep the one line as given.
        return self.args[0] if self.args else ""


class InvalidArgumentError(ConceptforgeError, ValueError):
    """A value passed to a function or flag is invalid, or two options exclude each other.

    Why a kind: the fix is in the call itself (change the flag), never in files on disk.
    """


class SpecError(ConceptforgeError, ValueError):
    """A specification or configuration file (concept spec, candidate spec, templates) is malformed.

    Why a kind: the fix is to edit the file the user wrote, not the command.
    """


class DataFormatError(ConceptforgeError, ValueError):
    """A dataset, split or data folder exists but its content is not what the step expects.

    Why a kind: the data came from elsewhere (a download, an earlier step); the fix is to point at
    the right data or regenerate it.
    """


class DataNotFoundError(ConceptforgeError, FileNotFoundError):
    """A file, directory, dataset, split or column the step needs does not exist.

    Why a kind: callers often fall back (download, another path) on exactly this; as a
    ``FileNotFoundError`` it is caught by code that knows nothing of conceptforge.
    """


class WeightsUnavailableError(ConceptforgeError, OSError):
    """Model weights cannot be loaded: not in the local cache while offline, not a model folder,
    or of an unsupported architecture.

    Why a kind: ``transformers``/``diffusers`` report the same as ``OSError``; the fix is to
    download the weights or pass a local folder.
    """


class DeviceUnavailableError(ConceptforgeError, RuntimeError):
    """The requested accelerator is missing (e.g. ``--device cuda`` without a GPU) or too small.

    Why a kind: the same run works elsewhere; the fix is the machine or ``--device``/``--offload``.
    """


class DependencyMissingError(ConceptforgeError, ImportError):
    """An optional dependency (``bpy`` for Blender rendering, ``scikit-learn`` …) is not installed.

    Why a kind: the fix is one ``pip install`` that the message names.
    """


class HubError(ConceptforgeError, OSError):
    """A request to the Hugging Face Hub (or its local mirror) failed: network, token, repository.

    Why a kind: retrying, logging in or fixing ``HF_ENDPOINT`` helps; the data is fine.
    """


class PublishError(HubError):
    """The release cannot be published as asked (the version exists with other content, a file
    the card needs is missing from the directory).

    Why a kind: retrying cannot help; the user picks a new version or fixes the directory.
    """


class ClusterError(ConceptforgeError, ConnectionError):
    """A compute cluster the run was sent to (``--executor ray --ray-address``) cannot be reached,
    does not answer, or refused the connection (authentication).

    Why a kind: the fix is the address, the cluster or its credentials, not the data or the Hub
    (Ray raises a bare ``ConnectionError``, which used to read as a Hugging Face network error).
    """


class EndpointError(ConceptforgeError, ConnectionError):
    """A model server speaking the OpenAI API (vLLM, SGLang, a hosted provider) failed the run.

    Why a kind: the data and the code are fine; the fix is the server, its address, the key or
    the client's patience (``--endpoint-timeout``). Answers received before the failure stay in
    the response cache, so a rerun asks only for the rest.
    """


class EndpointUnreachableError(EndpointError):
    """The endpoint cannot be connected to, dropped every try, or did not answer within the timeout."""


class EndpointAuthError(EndpointError):
    """The endpoint refused the key (HTTP 401/403); the message names the variable, never the key."""


class ModelNotServedError(EndpointError):
    """The endpoint does not serve the model name asked for (HTTP 404, or absent from ``/v1/models``)."""


class EndpointRateLimitedError(EndpointError):
    """The endpoint still answered 429 (rate limited) after every retry."""


class EndpointServerError(EndpointError):
    """The endpoint still answered a server error (5xx) after every retry."""


class EndpointRequestError(EndpointError):
    """The endpoint refused the request as such (HTTP 400/422: a parameter it does not support)."""


class EndpointResponseError(EndpointError):
    """The endpoint answered something that is not a chat completion (not JSON, no choices)."""


class StoreError(ConceptforgeError, RuntimeError):
    """An output folder or item store conflicts with this run: it was made with other settings
    (resume conflict), is corrupt, or is locked by another run.

    Why a kind: the fix is a new ``--out`` or the original settings; nothing is overwritten.
    """


class ItemError(ConceptforgeError, RuntimeError):
    """One work item cannot be made: a scene with no valid placement, an image that came out NaN.

    Why a kind: the run engine retries such an item a few times and then records it as failed
    with this line, without stopping the shard (``conceptforge status`` lists it); other kinds of
    :class:`ConceptforgeError` are about the run itself and stop it. When every item a process
    tried failed, the run ends with this kind too (exit 2): the stage or a setting is at fault.
    """


class PermanentItemError(ItemError):
    """An item that a retry cannot make: a model whose weights file is damaged, a model that is
    not there. Recorded as failed at its first attempt.

    Why a kind: retrying a cut-short ``model.safetensors`` three times only printed the same
    library error three times (issue 45.8); the engine retries what may pass the next time (an
    out-of-memory, a hiccup of a server), not what is wrong on disk.
    """


_STACKTRACE_HINT = re.compile(
    r"\s*(Please check out the root cause in the stacktrace above|see the stack ?trace above)[^.]*\.?", re.IGNORECASE
)


def one_line(error: BaseException, *, limit: int = 500) -> str:
    """A library exception as one line for a :class:`ConceptforgeError` message.

    The first line of its message, without "check the stacktrace above" (a command line shows no
    stack trace); when the library hid the real reason behind that phrase, its cause is appended.
    """
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else type(error).__name__
    stripped = _STACKTRACE_HINT.sub("", text).strip()
    cause = error.__cause__ or error.__context__
    if stripped != text and cause is not None:
        cause_lines = str(cause).strip().splitlines()
        stripped = f"{stripped.rstrip('.')} ({type(cause).__name__}: {cause_lines[0] if cause_lines else ''})".replace(
            ": )", ")"
        )
    stripped = " ".join(stripped.split())
    return stripped if len(stripped) <= limit else stripped[: limit - 1] + "…"
