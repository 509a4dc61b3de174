"""Carry a dataset's card metadata into the dataset derived from it (filter, human validation).

Why: each stage re-renders its card from its own ``DatasetMetadata``. A consuming stage that
only knows its own columns and settings silently dropped what the producing stage documented:
the filtered SUB card had empty meanings for the generator's columns (``tdg_k``, ``model_id``,
``guidance_bird``…) and no word about the diffusion model, TDG schedule or seeds that made its
images; the human-validated card also lost every column meaning, the citation and the paper.
The end-to-end tests (tests/pipeline) caught it. The derived card now embeds the upstream card's
provenance under ``upstream`` and inherits the meanings of the columns it passes through.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from conceptforge.cards.card import DatasetMetadata, read_card_spec
from conceptforge.errors import ConceptforgeError

logger = logging.getLogger(__name__)


def read_upstream_metadata(directory: str | Path) -> DatasetMetadata | None:
    """The metadata the input dataset's card was rendered from; None for a foreign/hand-written card."""
    card = Path(directory) / "README.md"
    if not card.is_file():
        return None
    try:
        return read_card_spec(card.read_text(encoding="utf-8"))
    except (ConceptforgeError, ValueError, TypeError) as error:  # not a conceptforge card: nothing to inherit
        logger.info("input card %s carries no conceptforge metadata (%s); nothing inherited", card, error)
        return None


def inherited_column_docs(
    upstream: DatasetMetadata | None, own: Mapping[str, str], columns: Iterable[str]
) -> dict[str, str]:
    """Per column: this stage's meaning when it has one, else the upstream card's."""
    before = upstream.column_docs if upstream is not None else {}
    return {name: own.get(name) or before.get(name, "") for name in columns}


def upstream_provenance(upstream: DatasetMetadata | None, directory: str | Path) -> dict[str, Any]:
    """The input dataset's name, version and full provenance, to nest in the derived card's provenance."""
    entry: dict[str, Any] = {"dataset": Path(directory).name}
    if upstream is None:
        return entry
    entry["pretty_name"] = upstream.pretty_name
    if upstream.repo_id or upstream.version:
        entry["release"] = {"repo_id": upstream.repo_id, "version": upstream.version}
    entry["provenance"] = upstream.provenance
    return entry
