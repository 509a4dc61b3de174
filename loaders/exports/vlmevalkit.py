"""The VLMEvalKit export: the TSV its custom multiple-choice dataset reads, one per choice set.

Why a TSV: VLMEvalKit runs a dataset it does not know when ``$LMUData/<Name>.tsv`` exists with
``index``, ``image`` (base64), ``question`` and lettered option columns ``A``, ``B``, …, plus
``answer`` and optional ``category`` (``run.py --data <Name>`` then builds ``CustomMCQDataset``).
Option columns a set's item does not have stay empty (VLMEvalKit reads them as absent). Extra
columns ``item_id`` and ``row`` let its predictions be joined back to our samples.

Prompt: VLMEvalKit's LLaVA-family models build exactly our prompt from these columns (question,
``A. option`` lines, "Answer with the option's letter from the given choices directly."); models
that use the dataset's default prompt ("Question: … Options: … Please select the correct answer
from the options above.") are asked other bytes, so their numbers are comparable to ours only
loosely (docs/evaluation-exports.md).
"""

from __future__ import annotations

import base64
import csv
import io

from conceptforge.loaders.exports.runtime import ExportInfo

VLMEVALKIT_FOLDER = "exports/vlmevalkit"


def _image_base64(image) -> str:
    """The row's image as base64 PNG (decoded, RGB: what every other path hands the model)."""
    from PIL import Image

    if isinstance(image, dict):
        data = image.get("bytes")
        if data is None and image.get("path"):
            with open(image["path"], "rb") as handle:
                data = handle.read()
        picture = Image.open(io.BytesIO(data))
    else:
        picture = image
    buffer = io.BytesIO()
    picture.convert("RGB").save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def dataset_name(choice_set) -> str:
    """The VLMEvalKit dataset name (the TSV's stem): ``Conceptforge_<set>``."""
    return f"Conceptforge_{choice_set.name}"


def tsv_bytes(choice_set) -> bytes:
    """The TSV of one set (tab-separated, a header line, one row per item)."""
    width = max(len(item.options) for item in choice_set.items)
    letters = [chr(ord("A") + i) for i in range(width)]
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(["index", "image", "question", *letters, "answer", "category", "item_id", "row"])
    for index, (item, row) in enumerate(zip(choice_set.items, choice_set.rows)):
        options = list(item.options) + [""] * (width - len(item.options))
        writer.writerow(
            [
                index,
                _image_base64(item.image),
                item.question,
                *options,
                item.answer_letter,
                item.category,
                item.item_id,
                row,
            ]
        )
    return buffer.getvalue().encode("utf-8")


def _readme(choice_sets, info: ExportInfo) -> str:
    names = [dataset_name(s) for s in choice_sets]
    lines = [
        f"# VLMEvalKit export of {info.pretty_name or info.repo_id}",
        "",
        f"Written by conceptforge {info.conceptforge_version} for the release `{info.repo_id}` at tag `{info.tag}`.",
        "One TSV per multiple-choice set, in VLMEvalKit's custom MCQ format (`index`, base64 `image`, `question`,",
        "option columns `A`, `B`, …, `answer`, `category`; `item_id` and `row` join predictions back to the release).",
        "",
        "Registration (VLMEvalKit's documented way for a custom MCQ benchmark): copy the TSV into `$LMUData`",
        "(default `~/LMUData`) and name it on the command line; `run.py` builds `CustomMCQDataset` for a",
        "`.tsv` it does not know that has `A` and `B` columns and an `image` column:",
        "",
        "```bash",
        f"hf download {info.repo_id} --repo-type dataset --revision {info.tag} --include 'exports/vlmevalkit/*' --local-dir .",
        'cp exports/vlmevalkit/*.tsv "${LMUData:-$HOME/LMUData}/"',
        f"python run.py --data {names[0]} --model llava_v1.5_7b",
        "```",
        "",
        "Sets: " + ", ".join(f"`{n}`" for n in names) + ".",
        "",
        "The prompt is conceptforge's by-answer prompt for VLMEvalKit's LLaVA-family models (they build",
        'question, `A. option` lines, "Answer with the option\'s letter from the given choices directly.");',
        "other models use VLMEvalKit's default MCQ prompt. VLMEvalKit scores accuracy (S+ for SUB);",
        "SUB's S- needs the `s_minus_letters` of `exports/items/<set>.jsonl` (see docs/evaluation.md).",
        "",
    ]
    return "\n".join(lines)


def vlmevalkit_files(choice_sets, info: ExportInfo) -> dict[str, bytes]:
    """``exports/vlmevalkit/<Name>.tsv`` per set and the README naming the registration."""
    files = {f"{VLMEVALKIT_FOLDER}/{dataset_name(s)}.tsv": tsv_bytes(s) for s in choice_sets}
    files[f"{VLMEVALKIT_FOLDER}/README.md"] = _readme(choice_sets, info).encode("utf-8")
    return files
