"""Rebuild a released dataset's stage from its ``provenance.json``: the shared types, and the
lookup of each generator's own rebuild (``generators/<benchmark>/rebuild.py``).

Why: ``verify`` must regenerate items through the *same* stage code that made them
(``make_item``/``process_batch`` and the assembler's row function). Each adapter turns one config
entry of the record (:mod:`cards.run_record`) back into that stage, says which comparison rule
applies (bytes, or a PSNR tolerance where the bytes depend on the hardware) and which weights it
needs. Binding's adapter is the generator's own ``build_stage(config)``; SUB's and ConceptBed's
rebuild the stage from the record by hand, because the record gives what their stage configs do
not take (a weights folder in place of the recorded model id; ConceptBed's processed captions).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conceptforge.cards.provenance import local_fingerprint, strip_local_path
from conceptforge.cards.release_source import ReleaseFiles
from conceptforge.engine.runner import Stage
from conceptforge.engine.store import ItemStore
from conceptforge.errors import InvalidArgumentError, WeightsUnavailableError

logger = logging.getLogger(__name__)

#: PSNR (dB) two renders of the same item must reach where the bytes depend on the hardware.
TOLERANCE_PSNR = 40.0
#: ... and in every WINDOW x WINDOW window: hardware noise is spread over the image, an edit is
#: local. A 2x2-pixel edit of a 32-px image by 40 levels keeps the whole image at 40.2 dB but
#: brings its 8x8 window to 28 dB; noise that keeps the whole image at 40 dB leaves every window
#: near 40 dB, so 10 dB of margin tells the two apart.
TOLERANCE_WINDOW = 8
TOLERANCE_WINDOW_PSNR = 30.0


@dataclass(frozen=True)
class Rule:
    """How a regenerated row is compared with the released one.

    ``min_psnr`` None: images byte for byte. Otherwise images must reach ``min_psnr`` dB over the
    whole image and ``min_window_psnr`` dB in every ``window``×``window`` window (identical images
    count as infinite), and every other column must still be equal.
    """

    name: str
    why: str
    min_psnr: float | None = None
    min_window_psnr: float | None = None
    window: int = TOLERANCE_WINDOW

    def describe(self) -> str:
        return f"{self.name} ({self.why})"


EXACT = Rule("byte-identical images, equal metadata", "deterministic on the kind of machine that made it")


def tolerance(why: str) -> Rule:
    return Rule(
        f"images PSNR >= {TOLERANCE_PSNR:g} dB and >= {TOLERANCE_WINDOW_PSNR:g} dB in every "
        f"{TOLERANCE_WINDOW}x{TOLERANCE_WINDOW} window, equal metadata",
        why,
        TOLERANCE_PSNR,
        TOLERANCE_WINDOW_PSNR,
    )


@dataclass
class Rebuilt:
    """One config's stage as it made the release, and how to turn its store into released rows."""

    stage: Stage
    rows: Callable[[ItemStore, str], Iterator[dict[str, Any]]]
    rule: Rule
    #: Columns holding a local path (compared with the folder part elided, as cards publish them).
    path_columns: tuple[str, ...] = ()
    #: Columns holding a model revision: a released ``local`` (how a local folder was spelled before
    #: it was fingerprinted) matches a regenerated ``local-sha256:…`` (the folder given with --weights
    #: was checked against the recorded fingerprint already).
    revision_columns: tuple[str, ...] = ()
    close: Callable[[], None] = field(default=lambda: None)


def weight_location(role: str, recorded: Mapping[str, Any], weights: Mapping[str, str]) -> str:
    """Where the weights of ``role`` are: ``--weights ROLE=PATH``, else the recorded Hub id.

    A recorded local folder (``.../tiny-flux``) cannot be found on another machine: one line says
    which weights are missing. A given folder must have the recorded fingerprint.
    """
    model_id, revision = str(recorded.get("id", "")), str(recorded.get("revision", ""))
    given = weights.get(role)
    if given is not None:
        path = Path(given).expanduser()
        if not path.is_dir():
            raise WeightsUnavailableError(f"--weights {role}={given} is not a folder")
        if revision.startswith("local-sha256:") and local_fingerprint(path) != revision:
            raise WeightsUnavailableError(
                f"--weights {role}={given} is not the model the card names ({model_id}, {revision}; this folder is "
                f"{local_fingerprint(path)})"
            )
        return str(path)
    if model_id.startswith(".../") or revision.startswith("local-sha256:"):
        raise WeightsUnavailableError(
            f"missing weights: {role} model {model_id} ({revision}) was a local folder; pass --weights {role}=PATH"
        )
    return model_id


#: The module name a generator package declares its rebuild in: ``GENERATOR`` (the name its
#: provenance records) and ``rebuild(entry, weights, device, out) -> Rebuilt``. A rebuild that
#: needs files the release carries besides its rows (binding: a spec's ``.blend`` files, whose
#: recorded paths point into the machine that made it) also takes a keyword ``release``: the
#: :class:`~conceptforge.cards.release_source.ReleaseFiles` being verified.
REBUILD_MODULE = "rebuild"


def rebuilders() -> dict[str, Callable[[Mapping[str, Any], Mapping[str, str], str | None, Path], Rebuilt]]:
    """Every generator's rebuild, by the generator name its provenance records, found in
    ``generators/<benchmark>/rebuild.py`` (no central list: conceptforge.discovery)."""
    from conceptforge.discovery import benchmark_modules

    return {module.GENERATOR: module.rebuild for module in benchmark_modules("conceptforge.generators", REBUILD_MODULE)}


def rebuild_config(
    generator: str,
    entry: Mapping[str, Any],
    *,
    weights: Mapping[str, str],
    out: Path,
    device: str | None = None,
    release: ReleaseFiles | None = None,
) -> Rebuilt:
    """The stage of one config of a release (see module docstring); ``out`` is the temporary run
    folder the stage will write its store to (``out/.work``); ``release`` is handed to a rebuild
    that takes it (see REBUILD_MODULE)."""
    known = rebuilders()
    adapter = known.get(generator)
    if adapter is None:
        raise InvalidArgumentError(
            f"cannot regenerate a {generator!r} dataset: verify knows {', '.join(sorted(known))}"
        )
    if "rebuild" not in entry:
        raise InvalidArgumentError("the provenance record has no rebuild section for this config")
    if release is not None and "release" in inspect.signature(adapter).parameters:
        return adapter(entry, weights, device, out, release=release)
    return adapter(entry, weights, device, out)


def elide(value: Any) -> Any:
    """A path column's value as a card would publish it."""
    return strip_local_path(value) if isinstance(value, str) else value
