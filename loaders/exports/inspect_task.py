"""The inspect-ai export: one task module, a ``@task`` per leaderboard id of every choice set.

Why one module per release: ``inspect eval conceptforge_tasks.py@<task> --model <provider>`` runs
it with any of inspect's providers; each ``@task`` is named by the id the release's ``eval.yaml``
lists for ``--eval-framework inspect-ai`` and that ``evaluate --push-results`` files by-answer
results under (:func:`conceptforge.loaders.harness.push_results.by_answer_task_id`), so a value
from inspect and one from conceptforge land on the same leaderboard row. The dataset is the
release read from the Hub at its tag (``datasets.load_dataset(repo, config, revision=tag)``),
the image and our prompt in one user turn; the solver generates greedily (temperature 0); the
scorer parses with our parser and reports accuracy (S+ for SUB, with S− as a second metric).
We do not use inspect's ``multiple_choice()`` solver: it writes its own prompt ("ANSWER: $LETTER")
and shuffles nothing we could match byte for byte.
"""

from __future__ import annotations

from conceptforge.loaders.exports.runtime import RUNTIME, ExportInfo, parser_source

INSPECT_FOLDER = "exports/inspect-ai"
MODULE = f"{INSPECT_FOLDER}/conceptforge_tasks.py"

_HEAD = '''"""inspect-ai tasks of {pretty} ({repo_id} at tag {tag}), by conceptforge's by-answer protocol.

Run one with any provider, e.g.:

    inspect eval conceptforge_tasks.py@{first} --model openai/gpt-4o

Tasks: {tasks}.
"""

import base64
import io

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageUser, ContentImage, ContentText, GenerateConfig
from inspect_ai.scorer import CORRECT, INCORRECT, Score, accuracy, metric, scorer, stderr
from inspect_ai.solver import generate

REPO_ID = {repo_id!r}
TAG = {tag!r}
CONCEPTFORGE_VERSION = {version!r}
MAX_NEW_TOKENS = {max_new_tokens}
#: set name -> (config or None, split, whether it is SUB (S+ and S-))
SETS = {sets!r}
'''

_BODY = '''

def _data_uri(image):
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def choice_dataset(name):
    """The set's samples: the release's rows at TAG, each with its item's prompt and answer letter."""
    from datasets import load_dataset

    config, split, _ = SETS[name]
    path, revision = release_source()  # the Hub at TAG, or the local copy $CONCEPTFORGE_RELEASE_DIR names
    rows = load_dataset(path, config, split=split, revision=revision)
    samples = []
    for item in load_items(name):
        image = rows[item["row"]]["image"]
        content = [ContentImage(image=_data_uri(image)), ContentText(text=item["prompt"])]
        samples.append(
            Sample(
                id=item["item_id"],
                input=[ChatMessageUser(content=content)],
                target=item["answer"],
                metadata={"item": item, "category": item["category"], "row": item["row"]},
            )
        )
    return MemoryDataset(samples, name=name, location=f"{REPO_ID}@{TAG}")


@metric
def s_minus():
    """SUB's S-: the mean over the images S- scores."""

    def compute(scores):
        found = [(getattr(s, "score", s).metadata or {}).get("s_minus") for s in scores]  # Score or SampleScore
        kept = [float(value) for value in found if value is not None]
        return sum(kept) / len(kept) if kept else float("nan")

    return compute


async def _score(state, target):
    item = state.metadata["item"]
    answer = state.output.completion if state.output else ""
    scores = score_answer(item, answer)
    return Score(
        value=CORRECT if scores["correct"] else INCORRECT,
        answer=scores["parsed"] or "",
        explanation=answer,
        metadata={"parsed": scores["parsed"], "s_minus": scores.get("s_minus")},
    )


@scorer(metrics=[accuracy(), stderr()])
def choice_by_answer():
    """Accuracy of the parsed letter (unparsed answers are wrong)."""
    return _score


@scorer(metrics=[accuracy(), stderr(), s_minus()])
def sub_by_answer():
    """S+ (accuracy of the parsed letter) and S- (the S- letters avoided)."""
    return _score


def choice_task(name, max_new_tokens=MAX_NEW_TOKENS):
    _, _, is_sub = SETS[name]
    return Task(
        dataset=choice_dataset(name),
        solver=generate(),
        scorer=sub_by_answer() if is_sub else choice_by_answer(),
        config=GenerateConfig(temperature=0.0, max_tokens=max_new_tokens),
        metadata={"release": REPO_ID, "tag": TAG, "conceptforge": CONCEPTFORGE_VERSION, "set": name},
    )
'''

_TASK = '''

@task
def {task_id}(max_new_tokens: int = MAX_NEW_TOKENS):
    """{metric} of {name} ({repo_id} at {tag})."""
    return choice_task({name!r}, max_new_tokens)
'''


def inspect_files(choice_sets, info: ExportInfo, *, max_new_tokens: int) -> dict[str, bytes]:
    """``exports/inspect-ai/conceptforge_tasks.py``: every set's tasks in one module."""
    sets = {s.name: (s.named_config if s.named_config else None, s.split, bool(s.s_minus)) for s in choice_sets}
    ids = [(task_id, metric, s) for s in choice_sets for task_id, metric in s.task_ids()]
    text = info.header()
    text += _HEAD.format(
        pretty=info.pretty_name or info.repo_id,
        repo_id=info.repo_id,
        tag=info.tag,
        version=info.conceptforge_version,
        max_new_tokens=max_new_tokens,
        sets=sets,
        first=ids[0][0],
        tasks=", ".join(task_id for task_id, _, _ in ids),
    )
    text += RUNTIME + _BODY
    for task_id, metric, choice_set in ids:
        text += _TASK.format(task_id=task_id, metric=metric, name=choice_set.name, repo_id=info.repo_id, tag=info.tag)
    text += "\n\n# --- the answer parser of conceptforge.loaders.harness.by_answer, copied verbatim ---\n"
    text += "import re  # noqa: E402\nfrom collections.abc import Sequence  # noqa: E402,F401\n\n" + parser_source()
    return {MODULE: text.encode("utf-8")}
