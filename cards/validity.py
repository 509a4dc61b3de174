"""A benchmark's validity report: blind baselines, held-out-composition checks, human agreement.

Why every card carries one: reviewers of a benchmark ask three questions before they trust its
numbers, and each has an answer that can be computed from the released rows:

1. **Can it be solved without the image?** Blind baselines (:func:`majority_accuracy`,
   :func:`prior_choice_accuracy`, :func:`consensus_choice_accuracy`) score the split with what a
   model that never looks at the picture could know: the label distribution, the candidate
   captions' prior, the wording of the candidates themselves. A blind baseline far above chance
   says the split leaks its answer through the text.
2. **Are held-out compositions really held out?** Counts of split-defining compositions found
   where the benchmark's spec says they must not be (a gen-split composition in a train
   picture), next to how many items were checked.
3. **Does the automatic filter agree with people, and people with each other?** Krippendorff's
   alpha and percent agreement with bootstrap intervals, where a human study was applied.

The generators compute the numbers (they know their rows: ``generators/<b>/validity.py``,
``filters/annotation/agreement.py``); this module holds the shared arithmetic, the JSON layout
stored in the card spec and ``provenance.json``, and the card's markdown. A part that does not
apply to a dataset says so with its reason instead of being left out.

Layout (``DatasetMetadata.validity``)::

    {"format": 1,
     "blind_baselines": {"applicable": true, "rows": [{"config", "split", "baseline", "accuracy",
                          "n", ...}], "legend": {baseline: what it knows}, "note": "..."},
     "held_out": {"applicable": true, "rows": [{"config", "check", "checked", "held_out",
                   "found"}], "note": "..."},
     "agreement": {"applicable": false, "reason": "..."}}
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

VALIDITY_FORMAT = 1
PARTS = ("blind_baselines", "held_out", "agreement")
PART_TITLES = {
    "blind_baselines": "Blind baselines",
    "held_out": "Held-out compositions",
    "agreement": "Agreement with people",
}
NOT_COMPUTED = (
    "_Not computed: the tool that made this dataset recorded no validity checks (blind baselines, "
    "held-out compositions, human agreement)._"
)


# -- the arithmetic ---------------------------------------------------------------------------
def majority_accuracy(fit: Mapping[Hashable, int], evaluated: Mapping[Hashable, int]) -> float | None:
    """Accuracy on ``evaluated`` (label -> count) of always answering the most frequent label of ``fit``.

    Ties in ``fit`` are split evenly: the result is the expected accuracy of picking one of the
    tied labels at random, so the number does not depend on an arbitrary tie-break. None when
    there is nothing to evaluate or nothing to fit.
    """
    total = sum(evaluated.values())
    if not total or not fit:
        return None
    top = max(fit.values())
    tied = [label for label, count in fit.items() if count == top]
    return sum(evaluated.get(label, 0) for label in tied) / len(tied) / total


def _tied_credit(scores: Sequence[float], true_index: int) -> float:
    """1/k when the true candidate is among the k best-scored candidates, else 0."""
    top = max(scores)
    tied = [i for i, score in enumerate(scores) if score == top]
    return 1.0 / len(tied) if true_index in tied else 0.0


def prior_choice_accuracy(
    prior: Mapping[str, float], items: Iterable[tuple[Sequence[str], int]]
) -> tuple[float | None, int]:
    """(expected accuracy, n) of picking, among each item's candidates, the one with the highest prior.

    ``items`` are ``(candidates, index of the true one)``; ``prior`` maps a candidate's text to a
    score (e.g. how often it was the true caption in train; unseen texts score 0). Ties are
    split evenly (:func:`_tied_credit`).
    """
    credit, n = 0.0, 0
    for candidates, true_index in items:
        credit += _tied_credit([float(prior.get(c, 0.0)) for c in candidates], true_index)
        n += 1
    return (credit / n if n else None), n


def consensus_scores(candidates: Sequence[str]) -> list[int]:
    """Per candidate: how many (other candidate, word position) pairs share its word there.

    Distractors built by changing one part of the true caption (swap an attribute, the relation,
    one object) leave the true caption as the one that shares most words, position by position,
    with the others: a text-only guesser that picks the highest score needs no image at all.
    Candidates are split on whitespace; only candidates with as many words are compared.
    """
    words = [c.split() for c in candidates]
    scores = []
    for i, mine in enumerate(words):
        score = 0
        for j, theirs in enumerate(words):
            if i != j and len(theirs) == len(mine):
                score += sum(a == b for a, b in zip(mine, theirs))
        scores.append(score)
    return scores


def consensus_choice_accuracy(items: Iterable[tuple[Sequence[str], int]]) -> tuple[float | None, int]:
    """(expected accuracy, n) of picking the candidate with the highest :func:`consensus_scores`."""
    credit, n = 0.0, 0
    for candidates, true_index in items:
        credit += _tied_credit(consensus_scores(candidates), true_index)
        n += 1
    return (credit / n if n else None), n


def chance_accuracy(sizes: Iterable[int]) -> tuple[float | None, int]:
    """(mean of 1/number of options, n): the expected accuracy of a uniform random guess."""
    sizes = [s for s in sizes if s > 0]
    return (sum(1.0 / s for s in sizes) / len(sizes) if sizes else None), len(sizes)


# -- building the report ----------------------------------------------------------------------
def not_applicable(reason: str) -> dict[str, Any]:
    """A part that does not apply to a dataset, with the reason the card shows."""
    return {"applicable": False, "reason": reason}


def baseline_row(
    *, split: str, baseline: str, accuracy: float | None, n: int, config: str = "default", **extra: Any
) -> dict[str, Any]:
    row = {"config": config, "split": split, "baseline": baseline, "accuracy": accuracy, "n": n}
    row.update(extra)
    return row


def held_out_row(*, check: str, checked: int, held_out: int, found: int, config: str = "default") -> dict[str, Any]:
    """One check: ``checked`` items looked at, ``held_out`` compositions looked for, ``found`` violations."""
    return {"config": config, "check": check, "checked": checked, "held_out": held_out, "found": found}


def held_out_leaks(validity: Mapping[str, Any] | None) -> list[str]:
    """One line per held-out check that found items it should not have (``found`` > 0): a
    composition the spec holds out appears where it must not, so that split's number measures
    something seen in training. Empty when every check found none (or none applies)."""
    part = (validity or {}).get("held_out") or {}
    if not part.get("applicable", True):
        return []
    lines = []
    for row in part.get("rows") or []:
        if int(row.get("found") or 0) > 0:
            where = "" if row.get("config", "default") == "default" else f"config {row['config']}: "
            lines.append(f"{where}{row['check']}: {row['found']} of {row['checked']} items hold a held-out composition")
    return lines


def validity_report(
    *, blind_baselines: Mapping[str, Any], held_out: Mapping[str, Any], agreement: Mapping[str, Any]
) -> dict[str, Any]:
    """The whole report (every part present: applicable with rows, or not with a reason)."""
    report: dict[str, Any] = {"format": VALIDITY_FORMAT}
    for name, part in (("blind_baselines", blind_baselines), ("held_out", held_out), ("agreement", agreement)):
        part = dict(part)
        part.setdefault("applicable", True)
        report[name] = part
    return report


# -- the card's section -----------------------------------------------------------------------
def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _percent(value: Any) -> str:
    return "–" if value is None else f"{100 * float(value):.1f}%"


def _number(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{float(value):.{digits}f}"


def _interval(part: Mapping[str, Any], key: str, percent: bool) -> str:
    value = part.get(key)
    low, high = (part.get(f"{key}_ci") or [None, None])[:2]
    show = _percent if percent else _number
    text = show(value)
    if value is not None and low is not None and high is not None:
        text += f" ({show(low)} – {show(high)})"
    return text


def _baselines_markdown(part: Mapping[str, Any]) -> list[str]:
    rows = part.get("rows") or []
    configs = sorted({r.get("config", "default") for r in rows}) != ["default"]
    head = ("| config " if configs else "") + "| split | baseline | accuracy | n |"
    lines = [head, ("| --- " if configs else "") + "| --- | --- | ---: | ---: |"]
    for row in rows:
        extra = "".join(f"; {key} {_percent(row[key])}" for key in ("s_minus",) if row.get(key) is not None)
        lines.append(
            (f"| {_cell(row['config'])} " if configs else "")
            + f"| {_cell(row['split'])} | {_cell(row['baseline'])} | {_percent(row['accuracy'])}{extra} | {row['n']} |"
        )
    lines.append("")
    for name, meaning in (part.get("legend") or {}).items():
        lines.append(f"- **{_cell(name)}**: {meaning}")
    if part.get("legend"):
        lines.append("")
    return lines


def _held_out_markdown(part: Mapping[str, Any]) -> list[str]:
    rows = part.get("rows") or []
    configs = sorted({r.get("config", "default") for r in rows}) != ["default"]
    lines = [
        ("| config " if configs else "") + "| check | items checked | held-out compositions | found |",
        ("| --- " if configs else "") + "| --- | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            (f"| {_cell(row['config'])} " if configs else "")
            + f"| {_cell(row['check'])} | {row['checked']} | {row['held_out']} | {row['found']} |"
        )
    return lines + [""]


def _agreement_markdown(part: Mapping[str, Any]) -> list[str]:
    lines = [
        "| comparison | items | Krippendorff's α (95% CI) | percent agreement (95% CI) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for row in part.get("rows") or []:
        lines.append(
            f"| {_cell(row['comparison'])} | {row.get('items', 0)} | {_interval(row, 'alpha', False)} | "
            f"{_interval(row, 'percent_agreement', True)} |"
        )
    return lines + [""]


RENDERERS = {"blind_baselines": _baselines_markdown, "held_out": _held_out_markdown, "agreement": _agreement_markdown}


def validity_markdown(validity: Mapping[str, Any] | None) -> list[str]:
    """The card's "Validity" section body (a placeholder when nothing was computed)."""
    if not validity:
        return [NOT_COMPUTED, ""]
    lines: list[str] = []
    for name in PARTS:
        part = validity.get(name) or not_applicable("not computed for this dataset")
        lines += [f"### {PART_TITLES[name]}", ""]
        if not part.get("applicable", True):
            lines += [f"Not applicable: {part.get('reason', 'no reason recorded')}", ""]
            continue
        if part.get("note"):
            lines += [str(part["note"]).strip(), ""]
        lines += RENDERERS[name](part)
    return lines
