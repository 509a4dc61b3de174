"""ConceptBed score records: one oracle judgement per image (or per image and question).

Why a module of its own: the oracles (this package) write these records and the CCD / accuracy /
ECE reports (:mod:`conceptforge.loaders.conceptbed.metrics`) read them, possibly much later and without
the models. Keeping the record format here, below both, lets scoring and reporting depend on it
without depending on each other.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from conceptforge.errors import DataFormatError, DataNotFoundError
from conceptforge.serialization import atomic_write_bytes

ORIGINAL = "original"  # the ``source`` of real (not generated) images


@dataclass
class ScoreRecord:
    """One oracle judgement: an image (and, for VQA, one question about it)."""

    source: str  # learner name, or "original" for real images
    task: str  # style | object | cub | composition | vqa
    concept: str
    target_prob: float  # f(y_c | x): probability of the true concept / of "yes"
    max_prob: float  # maximum softmax probability
    correct: bool  # argmax == true concept / "yes"
    categories: tuple[str, ...] = ()
    item_id: str = ""
    question: str = ""


#: Fields every saved score line holds: a JSON-lines file whose first line has them is ours to replace.
RECORD_KEYS = ("source", "task", "concept", "target_prob", "max_prob", "correct")


def claim_scores_file(path: str | Path, *, flag: str = "--save-scores") -> Path:
    """Refuse (before any model loads) a scores file that exists and is not saved scores of ours."""
    from conceptforge.output import claim_files, json_with_keys

    claim_files([path], flag=flag, ours=json_with_keys(*RECORD_KEYS, lines=True))
    return Path(path)


def save_records(path: str | Path, records: Iterable[ScoreRecord]) -> None:
    claim_scores_file(path)
    lines = [json.dumps({**asdict(r), "categories": list(r.categories)}, sort_keys=True) for r in records]
    atomic_write_bytes(Path(path), ("\n".join(lines) + "\n").encode("utf-8"))


def load_records(path: str | Path) -> list[ScoreRecord]:
    records = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataNotFoundError(f"scores file {path} does not exist") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                raw = json.loads(line)
                raw["categories"] = tuple(raw.get("categories", ()))
                records.append(ScoreRecord(**raw))
            except (json.JSONDecodeError, TypeError) as error:
                raise DataFormatError(f"{path}:{number}: not a score record ({error})") from None
    return records
