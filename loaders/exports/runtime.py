"""The code every harness export carries: the items file reader, the answer parser, the scoring.

Why generated from our own source: the exports run inside lmms-eval's or inspect-ai's process,
where conceptforge is usually not installed, yet they must read answers by *our* rules byte for
byte. So the parser is not re-typed: :func:`parser_source` copies the parser section of
:mod:`conceptforge.loaders.harness.by_answer` (from its first parser constant to the end of
``parse_choice``) into each export, and a test checks the copy parses a table of answers as the
library does. The items (prompt, letters, answer, S− letters) are in ``exports/items/<set>.jsonl``
beside the exports, read next to the module or from the Hub at the release's tag.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass

from conceptforge.errors import ConceptforgeError

ITEMS_DIR = "exports/items"
EXPORTS_DIR = "exports"
_PARSER_START = "_MARKDOWN = "
_PARSER_END = "\ndef parse_yes_no"


@dataclass(frozen=True)
class ExportInfo:
    """What every export names: the release (Hub repo id), its tag and the conceptforge that wrote it."""

    repo_id: str
    tag: str
    conceptforge_version: str
    pretty_name: str = ""

    def header(self, comment: str = "#") -> str:
        return (
            f"{comment} Written by conceptforge {self.conceptforge_version} for the release {self.repo_id} at tag "
            f"{self.tag}.\n{comment} The by-answer protocol of `conceptforge evaluate` (docs/evaluation.md): the same "
            "prompt, letters, answer key and answer parser.\n"
        )


def parser_source() -> str:
    """The parser section of ``by_answer.py`` (constants, helpers, ``parse_choice``), verbatim."""
    from conceptforge.loaders.harness import by_answer

    text = inspect.getsource(by_answer)
    start, end = text.find(_PARSER_START), text.find(_PARSER_END)
    if start < 0 or end < start:
        raise ConceptforgeError("by_answer.py's parser section moved: update loaders/exports/runtime.py's markers")
    return text[start:end].rstrip() + "\n"


def items_lines(choice_set) -> bytes:
    """``exports/items/<set>.jsonl``: one JSON line per item, in the split's row order."""
    from conceptforge.loaders.harness.by_answer import render_choice_prompt

    lines = []
    for index, (item, row) in enumerate(zip(choice_set.items, choice_set.rows)):
        record = {
            "row": row,
            "item_id": item.item_id,
            "question": item.question,
            "options": list(item.options),
            "letters": list(item.letters),
            "answer": item.answer_letter,
            "category": item.category,
            "prompt": render_choice_prompt(item),
        }
        if choice_set.s_minus:
            minus = choice_set.s_minus[index]
            record["s_minus_letters"] = None if minus is None else list(minus)
        lines.append(json.dumps(record, ensure_ascii=False))
    return ("\n".join(lines) + "\n").encode("utf-8")


RUNTIME = '''
import json
import logging
import os
import socket
import sys
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlparse

#: A local copy of the release (offline runs): `hf download REPO_ID --repo-type dataset --revision TAG
#: --local-dir DIR`, then RELEASE_DIR_ENV=DIR. Without it the rows are read from the Hub at TAG.
RELEASE_DIR_ENV = "CONCEPTFORGE_RELEASE_DIR"


def _local_copy():
    """The folder RELEASE_DIR_ENV names (checked: a copy of the release), or None when it is unset."""
    given = os.environ.get(RELEASE_DIR_ENV, "").strip()
    if not given:
        return None
    folder = Path(given).expanduser().resolve()
    if not (folder / "README.md").is_file() or not (folder / "data").is_dir():
        raise FileNotFoundError(
            f"{RELEASE_DIR_ENV}={given} is not a copy of {REPO_ID} at {TAG} (it needs README.md and data/): "
            f"hf download {REPO_ID} --repo-type dataset --revision {TAG} --local-dir {given}"
        )
    return folder


def _say_if_unreachable():
    """One line naming the Hub the rows come from when it cannot be reached (before the harness's
    own retries end in a bare connection error), and how to run from a local copy instead."""
    endpoint = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        reason = "offline mode (HF_HUB_OFFLINE) is on: only the datasets cache is read"
    else:
        url = urlparse(endpoint)
        try:
            socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), 5).close()
            return
        except OSError as error:
            reason = f"nothing answers at {endpoint}: {type(error).__name__}: {error}"
    logging.getLogger("conceptforge.export").warning(
        f"{REPO_ID} at tag {TAG} is read from {endpoint}, which cannot be reached ({reason}); to run offline, "
        f"copy the release (hf download {REPO_ID} --repo-type dataset --revision {TAG} --local-dir DIR) and set "
        f"{RELEASE_DIR_ENV}=DIR"
    )


def release_source():
    """(path, revision) for datasets.load_dataset: the local copy RELEASE_DIR_ENV names (no
    revision: the folder holds the tag's files), else the Hub at TAG. Worked out once a process."""
    known = sys.__dict__.setdefault("_conceptforge_release_sources", {})
    key = (REPO_ID, TAG, os.environ.get(RELEASE_DIR_ENV, ""))
    if key not in known:
        folder = _local_copy()
        if folder is None:
            _say_if_unreachable()
        known[key] = (REPO_ID, TAG) if folder is None else (str(folder), None)
    return known[key]


@lru_cache(maxsize=None)
def load_items(name):
    """The items of a set: exports/items/<name>.jsonl next to this file or in the local copy of the
    release, else from the Hub at TAG."""
    here = Path(__file__).resolve().parent
    local = _local_copy()
    for folder in (here, *here.parents[:3], *([local / "exports"] if local is not None else [])):
        path = folder / "items" / f"{name}.jsonl"
        if path.is_file():
            break
    else:
        from huggingface_hub import hf_hub_download

        path = Path(
            hf_hub_download(REPO_ID, f"exports/items/{name}.jsonl", repo_type="dataset", revision=TAG)
        )
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def score_answer(item, answer):
    """Our by-answer scoring: the parsed letter (None: unparsed, scored wrong), whether it is the
    answer, and for SUB whether it avoids the S- letters (None where S- does not score the image)."""
    letter = parse_choice(answer, item["letters"], item["options"])
    scores = {"parsed": letter, "correct": letter is not None and letter == item["answer"]}
    if "s_minus_letters" in item:
        minus = item["s_minus_letters"]
        scores["s_minus"] = None if minus is None else (letter is not None and letter not in minus)
    return scores
'''
