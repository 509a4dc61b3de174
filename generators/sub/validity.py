"""SUB's validity report (cards.validity): blind baselines over the options, and the S+/S- check.

SUB is scored per image over the options of the substituted attribute's group (a VLM picks one
of the group's values or "none"; a CBM detects attributes): S+ is right when the pick is the
substituted value, S- when it is not the bird's own class-level value (the removed attribute,
counted where the bird has one in that group, as the sub-attribute study does). Blind
baselines, from the rows alone:

- *label majority*: always the most frequent S+ attribute of the split (33-way `attr_label`);
- *group prior*: within the image's group, always the value that is S+ most often in the split
  (what a guesser knowing the option list and the label frequencies picks; ties split evenly);
- *always "none"*: never names an attribute: 0 on S+, and every S- counts as avoided.

Both fitted baselines are fitted on the split they score (SUB ships one split): an upper bound
for a blind guesser that knows the label distribution.

There is no train split to hold compositions out of; what makes SUB's pairs new is that S+ is not
the bird's own attribute, so the held-out part counts the rows whose S+ equals their S-.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from conceptforge.cards.validity import baseline_row, held_out_row, majority_accuracy, not_applicable, validity_report

SUB_LEGEND = {
    "label majority": "always the split's most frequent S+ attribute (ties split evenly)",
    "group prior": "within the image's attribute group, always the value that is S+ most often in the split; "
    "its S- accuracy is shown beside it",
    'always "none"': "never names an attribute (S+ 0; every S- counts as avoided)",
}
SUB_BASELINE_NOTE = (
    "None of these looks at the image; the fitted ones are fitted on the split they score (an upper bound for "
    "a blind guesser). S- is counted on rows whose bird has a class-level value in the substituted group. "
    "Chance over each group's CUB options is reported by `conceptforge evaluate sub` (it needs CUB)."
)
SUB_HELD_OUT_NOTE = (
    "SUB ships one evaluation split, so no composition can leak into a training split. Its pairs are new "
    "because S+ differs from the bird's own (class-level) attribute of the group; `found` counts rows where "
    "they are equal (such an image tests nothing: the human-study rule drops S+ = S- pairs); `held-out "
    "compositions` counts the bird–attribute pairs checked."
)
SUB_NO_HUMANS = (
    "no human annotation in this dataset; `conceptforge annotate DIR --study sub-faithfulness` (or "
    "`sub-attribute`) and `--apply` add the agreement between the VQA filter and people"
)


def _removed_value(row: Mapping[str, Any]) -> str | None:
    """The bird's own value of the row's group (S-), or None when it has none there."""
    removed = str(row.get("removed_attribute") or "")
    if not removed:
        return None
    group, _, value = removed.partition("::")  # CUB's has_<group>::<value> or a spec's group::value
    return value if group == row.get("group") and value else None


def split_validity(rows: Iterable[Mapping[str, Any]], *, split: str, config: str = "default") -> dict[str, Any]:
    """One pass over a split's rows (``bird``, ``group``, ``value``, ``attribute``,
    ``removed_attribute``): its three baseline rows and its S+ = S- check."""
    labels: Counter = Counter()
    by_group: dict[str, Counter] = defaultdict(Counter)
    minus: dict[str, Counter] = defaultdict(Counter)  # group -> removed value -> rows scored on S-
    pairs: set[tuple[str, str]] = set()
    n = n_minus = same = 0
    for row in rows:
        if not row.get("attribute"):  # reference-bird selection candidates: no S+
            continue
        n += 1
        labels[str(row["attribute"])] += 1
        by_group[str(row["group"])][str(row["value"])] += 1
        pairs.add((str(row.get("bird")), str(row["attribute"])))
        removed = _removed_value(row)
        if removed == row["value"]:
            same += 1
        elif removed is not None:
            minus[str(row["group"])][removed] += 1
            n_minus += 1
    plus_credit = minus_credit = 0.0
    for group, counts in by_group.items():
        top = max(counts.values())
        tied = [value for value, count in counts.items() if count == top]
        plus_credit += sum(counts[v] for v in tied) / len(tied)
        # S- is avoided unless the guess is the bird's removed value
        minus_credit += sum(sum(c for r, c in minus[group].items() if r != v) for v in tied) / len(tied)
    baselines = [
        baseline_row(
            config=config, split=split, baseline="label majority", accuracy=majority_accuracy(labels, labels), n=n
        ),
        baseline_row(
            config=config,
            split=split,
            baseline="group prior",
            accuracy=plus_credit / n if n else None,
            n=n,
            s_minus=minus_credit / n_minus if n_minus else None,
            n_minus=n_minus,
        ),
        baseline_row(
            config=config,
            split=split,
            baseline='always "none"',
            accuracy=0.0 if n else None,
            n=n,
            s_minus=1.0 if n_minus else None,
            n_minus=n_minus,
        ),
    ]
    check = held_out_row(
        config=config,
        check=f"{split} rows whose S+ is the bird's own attribute (S+ = S-)",
        checked=n,
        held_out=len(pairs),
        found=same,
    )
    return {"baselines": baselines, "held_out": [check]}


def sub_validity(
    rows_by_split: Mapping[str, Iterable[Mapping[str, Any]]], *, agreement: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The report of a SUB dataset (candidates, filtered or human-validated): ``rows_by_split``
    maps each split to an iterable of its rows (read once)."""
    baselines, checks = [], []
    for split, rows in rows_by_split.items():
        part = split_validity(rows, split=split)
        baselines += part["baselines"]
        checks += part["held_out"]
    return validity_report(
        blind_baselines={"rows": baselines, "legend": SUB_LEGEND, "note": SUB_BASELINE_NOTE},
        held_out={"rows": checks, "note": SUB_HELD_OUT_NOTE},
        agreement=agreement or not_applicable(SUB_NO_HUMANS),
    )
