"""SUB's scores: S+ and S− per image, their tallies and the report (SUB paper §5.4–5.6,
Appendix F; the rules are explained in :mod:`conceptforge.loaders.sub.protocol`).

Why apart from the evaluation: scoring is pure (predictions in, numbers out) and is tested
against numbers worked out by hand; running the models is :mod:`conceptforge.loaders.sub.protocol`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from conceptforge.cub import CBM_MIN_CLASS_COUNT, CubMetadata, attribute_group
from conceptforge.errors import DataNotFoundError, InvalidArgumentError
from conceptforge.loaders.harness.reports import markdown_table, pct

S_MINUS_RULES = ("paper", "any-original")
S_MINUS_TEXT = {
    "paper": "S− = the bird's class-wise CBM (112-attribute) label of the group, target 0 (paper App. F)",
    "any-original": "S− = none of the bird's original attributes of the group detected (conceptforge v1)",
    "release": "S− = the class's value of the group by the release spec's presence rule not detected",
}


@dataclass(frozen=True)
class SubItem:
    """One SUB image with its S+ attribute and S− attribute(s), all in ``has_<group>::<value>`` form."""

    image: Any
    bird: str
    attribute: str
    removed: tuple[str, ...] = ()

    @property
    def group(self) -> str:
        return attribute_group(self.attribute)


@dataclass
class SubItemScore:
    bird: str
    attribute: str
    removed: list[str]
    prediction: list[str]  # attributes predicted present (VLM: at most one; [] = "none")
    s_plus: bool | None  # None = not scored
    s_minus: bool | None
    chance_plus: float | None
    chance_minus: float | None


@dataclass
class Tally:
    plus_correct: int = 0
    plus_total: int = 0
    minus_correct: int = 0
    minus_total: int = 0
    chance_plus_sum: float = 0.0
    chance_minus_sum: float = 0.0

    def add(self, result: SubItemScore) -> None:
        if result.s_plus is not None:
            self.plus_total += 1
            self.plus_correct += int(result.s_plus)
            self.chance_plus_sum += result.chance_plus or 0.0
        if result.s_minus is not None:
            self.minus_total += 1
            self.minus_correct += int(result.s_minus)
            self.chance_minus_sum += result.chance_minus or 0.0

    @staticmethod
    def _ratio(a: float, b: int) -> float:
        return a / b if b else float("nan")

    def summary(self) -> dict[str, float | int]:
        return {
            "s_plus": self._ratio(self.plus_correct, self.plus_total),
            "s_minus": self._ratio(self.minus_correct, self.minus_total),
            "chance_s_plus": self._ratio(self.chance_plus_sum, self.plus_total),
            "chance_s_minus": self._ratio(self.chance_minus_sum, self.minus_total),
            "n_s_plus": self.plus_total,
            "n_s_minus": self.minus_total,
        }


@dataclass
class SubReport:
    """S+/S− accuracies, chance baselines and per-attribute / per-bird breakdowns."""

    kind: str  # "vlm" or "cbm"
    model: str
    revision: str
    summary: dict[str, float | int]
    per_attribute: dict[str, dict[str, float | int]]
    per_bird: dict[str, dict[str, float | int]]
    items: list[SubItemScore] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def s_plus(self) -> float:
        return float(self.summary["s_plus"])

    @property
    def s_minus(self) -> float:
        return float(self.summary["s_minus"])

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return data

    def format(self) -> str:
        s = self.summary
        rule = self.settings.get("s_minus")
        title = f"SUB, {self.kind.upper()} {self.model}: {S_MINUS_TEXT.get(rule, rule)}\n\n" if rule else ""
        head = title + markdown_table(
            ["", "S+", "S−", "n(S+)", "n(S−)"],
            [
                ["Random chance", pct(s["chance_s_plus"]), pct(s["chance_s_minus"]), s["n_s_plus"], s["n_s_minus"]],
                [f"{self.model} ({self.kind})", pct(s["s_plus"]), pct(s["s_minus"]), s["n_s_plus"], s["n_s_minus"]],
            ],
        )

        def breakdown(title: str, table: dict[str, dict[str, float | int]]) -> str:
            rows = [
                [
                    key,
                    pct(v["s_plus"]),
                    pct(v["chance_s_plus"]),
                    pct(v["s_minus"]),
                    pct(v["chance_s_minus"]),
                    v["n_s_plus"],
                ]
                for key, v in sorted(table.items())
            ]
            return f"{title}\n\n" + markdown_table([title.split()[1], "S+", "chance", "S−", "chance", "n"], rows)

        return "\n\n".join([head, breakdown("Per attribute", self.per_attribute), breakdown("Per bird", self.per_bird)])


def build_report(
    kind: str, model: str, revision: str, results: Sequence[SubItemScore], settings: dict | None = None
) -> SubReport:
    total, per_attribute, per_bird = Tally(), defaultdict(Tally), defaultdict(Tally)
    for result in results:
        total.add(result)
        per_attribute[result.attribute].add(result)
        per_bird[result.bird].add(result)
    return SubReport(
        kind=kind,
        model=model,
        revision=revision,
        summary=total.summary(),
        per_attribute={k: v.summary() for k, v in per_attribute.items()},
        per_bird={k: v.summary() for k, v in per_bird.items()},
        items=list(results),
        settings=dict(settings or {}),
    )


def s_minus_targets(
    items: Sequence[SubItem],
    cub: CubMetadata | None,
    *,
    rule: str = "paper",
    cbm_min_classes: int = CBM_MIN_CLASS_COUNT,
) -> list[list[str]]:
    """The attribute(s) each item's S− checks (empty: S− not scored for that item).

    ``"paper"``: the first (CUB order) attribute of the S+ group, other than S+, present in the
    bird's class-wise labels within the CBM subset (attributes present in >= ``cbm_min_classes``
    classes; 10 gives Koh et al.'s 112). ``"any-original"``: ``item.removed`` within the group.
    """
    if rule not in S_MINUS_RULES:
        raise InvalidArgumentError(f"unknown S- rule {rule!r} (choose from {', '.join(S_MINUS_RULES)})")
    if rule == "any-original" or getattr(cub, "s_minus_from_release", False):  # a spec's release: its own S-
        return [[r for r in item.removed if attribute_group(r) == item.group and r != item.attribute] for item in items]
    if cub is None or cub.class_labels is None:
        raise DataNotFoundError(
            "S- (paper rule) needs CUB's class-level labels: pass a CUB directory with image attribute labels"
        )
    subset = set(cub.cbm_attributes(cbm_min_classes))
    targets = []
    for item in items:
        labelled = cub.class_attributes(item.bird) & subset
        present = [a for a in cub.group_attributes(item.group) if a in labelled and a != item.attribute]
        targets.append(present[:1])  # group_attributes are in CUB's attribute order
    return targets


def score_vlm_predictions(
    items: Sequence[SubItem],
    predictions: Sequence[str | None],
    cub: CubMetadata,
    *,
    s_minus: str = "paper",
    cbm_min_classes: int = CBM_MIN_CLASS_COUNT,
) -> list[SubItemScore]:
    """Score one within-group choice per image (``None`` = the "none" option), Appendix F chance."""
    if len(items) != len(predictions):
        raise ValueError("one prediction per item")
    targets = s_minus_targets(items, cub, rule=s_minus, cbm_min_classes=cbm_min_classes)
    results = []
    for item, predicted, removed in zip(items, predictions, targets):
        options = len(cub.groups[item.group]) + 1  # + "none"
        results.append(
            SubItemScore(
                bird=item.bird,
                attribute=item.attribute,
                removed=removed,
                prediction=[predicted] if predicted else [],
                s_plus=predicted == item.attribute,
                s_minus=(predicted not in removed) if removed else None,
                chance_plus=1.0 / options,
                chance_minus=(1.0 - len(removed) / options) if removed else None,
            )
        )
    return results


def score_cbm_predictions(
    items: Sequence[SubItem],
    present: np.ndarray,
    concept_names: Sequence[str],
    *,
    cub: CubMetadata | None = None,
    s_minus: str = "paper",
    cbm_min_classes: int = CBM_MIN_CLASS_COUNT,
) -> list[SubItemScore]:
    """Score binary concept predictions ``present`` [N, C] over ``concept_names``; chance is 50%.

    S− needs ``cub`` under the paper rule; an S− attribute outside the CBM's outputs is not scored.
    """
    present = np.asarray(present, dtype=bool)
    index = {name: i for i, name in enumerate(concept_names)}
    if present.shape != (len(items), len(concept_names)):
        raise InvalidArgumentError(
            f"CBM predictions have shape {present.shape}, expected {(len(items), len(concept_names))}"
        )
    targets = s_minus_targets(items, cub, rule=s_minus, cbm_min_classes=cbm_min_classes)
    results = []
    for row, item, wanted in zip(present, items, targets):
        removed = [r for r in wanted if r in index and r != item.attribute]
        plus = bool(row[index[item.attribute]]) if item.attribute in index else None
        minus = (not any(row[index[r]] for r in removed)) if removed else None
        results.append(
            SubItemScore(
                bird=item.bird,
                attribute=item.attribute,
                removed=removed,
                prediction=[
                    concept_names[j] for j in np.flatnonzero(row) if attribute_group(concept_names[j]) == item.group
                ],
                s_plus=plus,
                s_minus=minus,
                chance_plus=0.5 if plus is not None else None,
                chance_minus=0.5 if minus is not None else None,
            )
        )
    return results
