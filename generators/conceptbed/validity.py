"""ConceptBed's validity report (cards.validity): what a blind guesser gets, and what does not apply.

ConceptBed scores a concept learner's generated images with oracles: a concept classifier on
the ``concept`` split and yes/no VQA questions on the ``composition`` split (CCD compares each
with the same oracle on real images). Blind baselines, from the rows alone:

- *concept majority*: always the split's most frequent concept (what a classifier oracle scores
  for a guesser that ignores the image; fitted on the split itself, ties split evenly);
- *always "yes"* (composition split): every question is generated from the caption's nouns and
  its expected answer is "yes" by construction, so answering "yes" without looking scores 100%
  of the questions. This is why ConceptBed reports CCD against real images rather than raw VQA
  accuracy; the row states the number of questions it covers.

There is no training split (the learners train on reference images that are not part of the
dataset), so no composition can leak into one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from conceptforge.cards.validity import baseline_row, majority_accuracy, not_applicable, validity_report

CONCEPTBED_LEGEND = {
    "concept majority": "always the split's most frequent concept (fitted on the split itself; ties split evenly)",
    'always "yes"': "answers every composition question 'yes' without the image; the questions' expected "
    "answer is 'yes' by construction, so this is 100% of them",
}
CONCEPTBED_BASELINE_NOTE = (
    "None of these looks at the image. Raw VQA accuracy on the composition split is therefore not a measure "
    "of composition: ConceptBed's CCD compares the oracle on generated images with the same oracle on real "
    "images."
)
CONCEPTBED_HELD_OUT_REASON = (
    "ConceptBed has no training split: the `concept` and `composition` splits both hold one learner's "
    "generated images, and the learners train on reference images that are not part of this dataset"
)
CONCEPTBED_NO_HUMANS = (
    "no human annotation in this dataset and no automatic filter; `conceptforge annotate DIR --study "
    "conceptbed-alignment` (or `conceptbed-composition`) and `--apply` add the agreement between annotators"
)


def conceptbed_validity(
    rows_by_split: Mapping[str, Iterable[Mapping[str, Any]]], *, agreement: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The report from each split's rows (``concept`` and ``questions``), one pass per split."""
    rows_out = []
    for split, rows in rows_by_split.items():
        concepts: Counter = Counter()
        questions = 0
        for row in rows:
            concepts[str(row["concept"])] += 1
            questions += len(row.get("questions") or [])
        n = sum(concepts.values())
        rows_out.append(
            baseline_row(split=split, baseline="concept majority", accuracy=majority_accuracy(concepts, concepts), n=n)
        )
        if questions:
            rows_out.append(baseline_row(split=split, baseline='always "yes"', accuracy=1.0, n=questions))
    return validity_report(
        blind_baselines={"rows": rows_out, "legend": CONCEPTBED_LEGEND, "note": CONCEPTBED_BASELINE_NOTE},
        held_out=not_applicable(CONCEPTBED_HELD_OUT_REASON),
        agreement=agreement or not_applicable(CONCEPTBED_NO_HUMANS),
    )
