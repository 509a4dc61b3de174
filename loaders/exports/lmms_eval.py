"""The lmms-eval export: one task folder per choice set (``<set>.yaml`` + ``utils.py``).

Why this shape: an lmms-eval task outside its package is a folder of a YAML and the ``utils.py``
its ``!function`` entries name, loaded with ``lmms-eval --include_path DIR``. The YAML loads the
release from the Hub at its tag (``dataset_path``, ``dataset_kwargs.revision``), or offline from a
local copy that ``$CONCEPTFORGE_RELEASE_DIR`` names (both values are read from ``utils.py`` through
lmms-eval's ``!function``, which returns any attribute of the module), generates greedily
(``output_type: generate_until``, temperature 0) and scores with ``process_results``; the prompt,
letters and answer key come from the release's items file and the parser is ours
(:mod:`conceptforge.loaders.exports.runtime`), so its numbers are our by-answer numbers.
"""

from __future__ import annotations

from conceptforge.loaders.exports.runtime import RUNTIME, ExportInfo, parser_source

LMMS_EVAL_FOLDER = "exports/lmms-eval"

_UTILS = '''

SET = {name!r}
REPO_ID = {repo_id!r}
TAG = {tag!r}
CONCEPTFORGE_VERSION = {version!r}
ROW = "cf_row"
{runtime}

def __getattr__(name):
    """The yaml's ``dataset_path`` and ``revision`` (``!function utils.DATASET_PATH``, which lmms-eval
    resolves by reading this attribute): the local copy $CONCEPTFORGE_RELEASE_DIR names, else the
    release on the Hub at TAG (:func:`release_source`), worked out when lmms-eval asks."""
    if name == "DATASET_PATH":
        return release_source()[0]
    if name == "DATASET_REVISION":
        return release_source()[1]
    raise AttributeError(name)


def process_docs(dataset):
    """Each row keeps its position in the split: the item it answers."""
    return dataset.add_column(ROW, list(range(len(dataset))))


def _item(doc):
    items = load_items(SET)
    item = items[doc[ROW]]
    if item["row"] != doc[ROW]:
        raise ValueError(f"{{SET}}: items file and split rows disagree at row {{doc[ROW]}}")
    return item


def doc_to_visual(doc):
    return [doc["image"].convert("RGB")]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return _item(doc)["prompt"]


def doc_to_target(doc):
    return _item(doc)["answer"]


def process_results(doc, results):
    scores = score_answer(_item(doc), results[0] if results else "")
{results}


def scored_mean(values):
    """Mean over the items a metric scores (S- leaves some out)."""
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else float("nan")


# --- the answer parser of conceptforge.loaders.harness.by_answer, copied verbatim ---
import re  # noqa: E402
from collections.abc import Sequence  # noqa: E402,F401

{parser}'''

_SUB_RESULTS = """    return {"s_plus": float(scores["correct"]), "s_minus": None if scores["s_minus"] is None else float(scores["s_minus"])}"""
_BINDING_RESULTS = """    return {"accuracy": float(scores["correct"])}"""


def _yaml(choice_set, info: ExportInfo, max_new_tokens: int) -> str:
    metrics = ("s_plus", "s_minus") if choice_set.s_minus else ("accuracy",)
    lines = [
        info.header().rstrip(),
        f"# Run: lmms-eval --model <model> --model_args <args> --tasks {choice_set.name} --include_path <this folder>",
        f"task: {choice_set.name}",
        f"# dataset_path is {info.repo_id} at revision {info.tag} on the Hub, or the local copy of the release",
        "# that $CONCEPTFORGE_RELEASE_DIR names (offline runs: docs/publishing.md, 'Harness exports').",
        "dataset_path: !function utils.DATASET_PATH",
        *([f"dataset_name: {choice_set.config}"] if choice_set.named_config else []),
        "dataset_kwargs:",
        "  revision: !function utils.DATASET_REVISION",
        f"test_split: {choice_set.split}",
        "output_type: generate_until",
        "process_docs: !function utils.process_docs",
        "doc_to_visual: !function utils.doc_to_visual",
        "doc_to_text: !function utils.doc_to_text",
        "doc_to_target: !function utils.doc_to_target",
        "process_results: !function utils.process_results",
        "generation_kwargs:",
        f"  max_new_tokens: {max_new_tokens}",
        "  temperature: 0",
        "  do_sample: false",
        "metric_list:",
    ]
    for metric in metrics:
        lines += [
            f"  - metric: {metric}",
            "    aggregation: !function utils.scored_mean",
            "    higher_is_better: true",
        ]
    lines += ["metadata:", "  version: 1", f"  conceptforge: {info.conceptforge_version}", ""]
    return "\n".join(lines)


def lmms_eval_files(choice_sets, info: ExportInfo, *, max_new_tokens: int) -> dict[str, bytes]:
    """``exports/lmms-eval/<set>/{<set>.yaml,utils.py}`` for every set."""
    files = {}
    parser = parser_source()
    for choice_set in choice_sets:
        folder = f"{LMMS_EVAL_FOLDER}/{choice_set.name}"
        utils = info.header() + _UTILS.format(
            name=choice_set.name,
            repo_id=info.repo_id,
            tag=info.tag,
            version=info.conceptforge_version,
            runtime=RUNTIME,
            results=_SUB_RESULTS if choice_set.s_minus else _BINDING_RESULTS,
            parser=parser,
        )
        files[f"{folder}/{choice_set.name}.yaml"] = _yaml(choice_set, info, max_new_tokens).encode("utf-8")
        files[f"{folder}/utils.py"] = utils.encode("utf-8")
    return files
