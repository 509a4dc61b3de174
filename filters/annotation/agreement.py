"""The "Agreement with people" part of a validity report (cards.validity), from a study's results.

Two comparisons, each as Krippendorff's alpha and percent agreement with 95% bootstrap intervals
over items (:func:`stats.bootstrap_interval`, 1000 resamples, seed 0):

- **between annotators**, per question: every item with two or more answers is a unit; alpha
  uses the study's level of measurement (nominal for the sub-attribute choice, ordinal for the
  yes/somewhat/no and 1-5 answers), percent agreement is the mean share of agreeing pairs;
- **automatic filter vs people** (SUB datasets that carry the VQA filter's ``vqa_answer``): each
  annotated item is a unit of two values, the filter's judgement and the people's (the most
  frequent human answer; items where humans tie are left out and counted).
  * ``sub-attribute``: the VQA answer (``Other`` read as ``none``) vs the value people picked;
  * ``sub-faithfulness``: "present" when the VQA answer is S+, vs "present" when the mean human
    score on the attribute question is at least 0.5 (yes 1, somewhat 0.5, no 0).

  On a VQA-filtered split every kept image's answer is S+, so the filter's side barely varies:
  alpha can be undefined or near 0 while percent agreement (the share of kept images people
  confirm) is the informative number. The card shows both.

ConceptBed studies have no automatic filter (its oracles are the evaluation, and the study's
Pearson r against a metric is in the filter statistics); their filter row is not applicable.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from conceptforge.cards.validity import not_applicable
from conceptforge.filters.annotation.stats import bootstrap_interval, krippendorff_alpha, percent_agreement
from conceptforge.filters.annotation.studies import ANSWER_SCORES, NONE_VALUE
from conceptforge.filters.vqa.questions import OTHER

#: (question, level of measurement, answer -> value) per study.
QUESTIONS: dict[str, tuple[tuple[str, str, Any], ...]] = {
    "sub-faithfulness": (
        ("attribute", "ordinal", ANSWER_SCORES.__getitem__),
        ("bird", "ordinal", ANSWER_SCORES.__getitem__),
    ),
    "sub-attribute": (("value", "nominal", str),),
    "conceptbed-alignment": (("rating", "ordinal", int),),
    "conceptbed-composition": (("rating", "ordinal", int),),
}
RESAMPLES = 1000


def _measured(comparison: str, units: Sequence[Sequence[Hashable]], metric: str, **extra: Any) -> dict[str, Any]:
    """One table row: alpha and percent agreement with their intervals over ``units``."""
    pairable = [list(u) for u in units if len(u) >= 2]

    def alpha(sample):
        return krippendorff_alpha(sample, metric=metric)

    row = {
        "comparison": comparison,
        "metric": metric,
        "items": len(pairable),
        "alpha": alpha(pairable),
        "alpha_ci": bootstrap_interval(pairable, alpha, resamples=RESAMPLES),
        "percent_agreement": percent_agreement(pairable),
        "percent_agreement_ci": bootstrap_interval(pairable, percent_agreement, resamples=RESAMPLES),
    }
    row.update(extra)
    return row


def _answers_by_item(results: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    by_item: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for annotation in results.get("annotations") or []:
        by_item[str(annotation["item_id"])].append(annotation["answers"])
    return dict(sorted(by_item.items()))


def annotator_rows(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Agreement between annotators, one row per question of the study."""
    by_item = _answers_by_item(results)
    rows = []
    for question, metric, value_of in QUESTIONS.get(results["study"], ()):
        units = [[value_of(a[question]) for a in answers] for answers in by_item.values()]
        rows.append(_measured(f"between annotators: {question}", units, metric))
    return rows


def _majority(values: Sequence[Hashable]) -> Hashable | None:
    counts = Counter(values).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    return counts[0][0]


def filter_row(results: Mapping[str, Any], rows: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """Agreement between the VQA filter and people (None when the study or the rows have no filter)."""
    study = results["study"]
    if study not in ("sub-faithfulness", "sub-attribute"):
        return None
    by_item = _answers_by_item(results)
    units, tied = [], 0
    for item_id, answers in by_item.items():
        row = rows.get(item_id) or {}
        answer = row.get("vqa_answer")
        if answer is None:
            continue
        if study == "sub-attribute":
            machine = NONE_VALUE if answer == OTHER else str(answer)
            people = _majority([str(a["value"]) for a in answers])
        else:
            machine = "present" if answer == row.get("value") else "absent"
            mean = sum(ANSWER_SCORES[a["attribute"]] for a in answers) / len(answers)
            people = "present" if mean >= 0.5 else "absent"
        if people is None:
            tied += 1
            continue
        units.append([machine, people])
    if not units and not tied:
        return None
    name = "VQA answer vs people's value" if study == "sub-attribute" else "VQA filter vs people: S+ present"
    return _measured(f"automatic filter vs people ({name})", units, "nominal", tied_items=tied)


def agreement_part(results: Mapping[str, Any], rows: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The validity report's agreement part for a dataset a study was applied to."""
    table = annotator_rows(results)
    machine = filter_row(results, rows)
    notes = [
        f"`{results['study']}` study: {len(results.get('annotations') or [])} answers on "
        f"{len(_answers_by_item(results))} items; 95% intervals are percentile bootstraps over items "
        f"({RESAMPLES} resamples, seed 0)."
    ]
    if machine is not None:
        table.append(machine)
        if machine.get("tied_items"):
            notes.append(f"{machine['tied_items']} item(s) where people tie are left out of the filter comparison.")
    else:
        notes.append(
            "No automatic-filter comparison: "
            + (
                "ConceptBed has no filter (its oracles are the evaluation; see the correlations in the statistics)."
                if results["study"].startswith("conceptbed")
                else "the annotated rows carry no VQA answer (`vqa_answer`): annotate the VQA-filtered SUB."
            )
        )
    if not table:
        return not_applicable("the study's results hold no answers")
    return {"applicable": True, "rows": table, "note": " ".join(notes)}
