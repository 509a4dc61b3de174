"""Turn stored answers into the papers' numbers and keep/drop decisions.

- sub-faithfulness (SUB §4.3, §5.2): per-attribute and per-pair scores with yes = 1,
  somewhat = 0.5, no = 0; the share of "yes"; per-bird faithfulness (Fig. 9). Rule: drop an
  attribute whose "yes" share on the attribute question is below 90% across all reference birds;
  drop a bird–attribute pair whose attribute score is low, whose bird score is low (the edit
  changed more than the target attribute), or whose reference bird already shows the target
  (S+ = S−). The paper gives no numbers for "low"; ours are :class:`Rules` fields (0.5 by default).
- sub-attribute (SUB §5.3, Tables 1–2 "Human" row): S+ accuracy = share of answers naming the
  substituted value; S− accuracy = share of answers not naming the removed value (where the
  reference bird has one in that group).
- conceptbed-* (ConceptBed §4.2, Table 3): mean 1–5 rating per item, learner, concept and
  category, and Pearson's r between a metric and the human scores at the level the metric's keys
  name (items, learners, concepts, …).
- All studies: inter-annotator agreement (Krippendorff's alpha + percent agreement).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError
from conceptforge.filters.annotation.db import Annotation
from conceptforge.filters.annotation.stats import agreement_report, pearson
from conceptforge.filters.annotation.studies import ANSWER_SCORES, Study, split_attribute


@dataclass(frozen=True)
class Rules:
    """Thresholds that turn scores into keep/drop decisions (see the module docstring)."""

    min_attribute_yes: float = 0.9  # SUB: attributes need >= 90% "yes"
    min_pair_attribute: float = 0.5  # SUB pairs: mean attribute score
    min_pair_bird: float = 0.5  # SUB pairs: mean bird-faithfulness score
    keep_unvalidated: bool = False  # SUB faithfulness: keep attributes nobody annotated
    min_pair_accuracy: float | None = None  # sub-attribute: drop pairs with lower S+ accuracy
    min_item_score: float | None = None  # conceptbed: drop items with a lower mean rating
    annotated_only: bool = False  # keep only annotated rows (all studies but sub-faithfulness)


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _rate(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def pair_key(row: Mapping[str, Any]) -> str:
    return f"{row['bird']}|{row['attribute']}"


# --------------------------------------------------------------------------------------------
# sub-faithfulness
# --------------------------------------------------------------------------------------------
def _faithfulness_summary(answers: list[dict[str, Any]], items: set[str]) -> dict[str, Any]:
    attribute = [ANSWER_SCORES[a["attribute"]] for a in answers]
    bird = [ANSWER_SCORES[a["bird"]] for a in answers]
    return {
        "items": len(items),
        "answers": len(answers),
        "attribute_score": _mean(attribute),
        "attribute_yes": _rate([a["attribute"] == "yes" for a in answers]),
        "bird_score": _mean(bird),
        "bird_yes": _rate([a["bird"] == "yes" for a in answers]),
    }


def _sub_faithfulness(rows, annotations, rules: Rules) -> dict[str, Any]:
    by = {"attribute": defaultdict(list), "pair": defaultdict(list), "bird": defaultdict(list)}
    items = {"attribute": defaultdict(set), "pair": defaultdict(set), "bird": defaultdict(set)}
    per_item: dict[str, list[dict]] = defaultdict(list)
    for ann in annotations:
        row = rows[ann.item_id]
        for level, key in (("attribute", row["attribute"]), ("pair", pair_key(row)), ("bird", row["bird"])):
            by[level][key].append(ann.answers)
            items[level][key].add(ann.item_id)
        per_item[ann.item_id].append(ann.answers)

    attributes: dict[str, Any] = {}
    for attribute in sorted({str(r["attribute"]) for r in rows.values()}):
        summary = _faithfulness_summary(by["attribute"][attribute], items["attribute"][attribute])
        if not summary["answers"]:
            kept, reason = rules.keep_unvalidated, "not annotated"
        elif summary["attribute_yes"] < rules.min_attribute_yes:
            kept, reason = False, f"'yes' share {summary['attribute_yes']:.3f} < {rules.min_attribute_yes}"
        else:
            kept, reason = True, ""
        attributes[attribute] = {**summary, "kept": kept, "reason": reason}

    pairs: dict[str, Any] = {}
    pair_rows = {}
    for row in rows.values():
        pair_rows.setdefault(pair_key(row), row)
    for key in sorted(pair_rows):
        row = pair_rows[key]
        summary = _faithfulness_summary(by["pair"][key], items["pair"][key])
        kept, reason = True, ""
        if not attributes[str(row["attribute"])]["kept"]:
            kept, reason = False, "attribute dropped"
        elif row["attribute"] == row["removed_attribute"]:
            kept, reason = False, "reference bird already shows the target attribute (S+ = S-)"
        elif summary["answers"] and summary["attribute_score"] < rules.min_pair_attribute:
            kept, reason = (
                False,
                f"low attribute accuracy {summary['attribute_score']:.3f} < {rules.min_pair_attribute}",
            )
        elif summary["answers"] and summary["bird_score"] < rules.min_pair_bird:
            kept, reason = (
                False,
                f"excessive modification: bird score {summary['bird_score']:.3f} < {rules.min_pair_bird}",
            )
        pairs[key] = {"bird": row["bird"], "attribute": row["attribute"], **summary, "kept": kept, "reason": reason}

    birds = {bird: _faithfulness_summary(by["bird"][bird], items["bird"][bird]) for bird in sorted(by["bird"])}
    all_answers = [a.answers for a in annotations]
    scored_items = {
        item_id: {
            "answers": len(answers),
            "attribute_score": _mean([ANSWER_SCORES[a["attribute"]] for a in answers]),
            "bird_score": _mean([ANSWER_SCORES[a["bird"]] for a in answers]),
        }
        for item_id, answers in sorted(per_item.items())
    }
    return {
        "overall": _faithfulness_summary(all_answers, {a.item_id for a in annotations}),
        "attributes": attributes,
        "pairs": pairs,
        "birds": birds,
        "items": scored_items,
        "kept_attributes": [a for a, v in attributes.items() if v["kept"]],
        "dropped_attributes": {a: v["reason"] for a, v in attributes.items() if not v["kept"]},
        "kept_pairs": [p for p, v in pairs.items() if v["kept"]],
        "dropped_pairs": {p: v["reason"] for p, v in pairs.items() if not v["kept"]},
        "agreement": {
            q: agreement_report(
                {i: [ANSWER_SCORES[a[q]] for a in answers] for i, answers in per_item.items()}, metric="ordinal"
            )
            for q in ("attribute", "bird")
        },
    }


# --------------------------------------------------------------------------------------------
# sub-attribute
# --------------------------------------------------------------------------------------------
def _attribute_judgement(row: Mapping[str, Any], chosen: str) -> tuple[bool, bool | None]:
    """(S+ correct, S− correct or None when the bird has no removed value in this group)."""
    removed_group, removed_value = split_attribute(str(row.get("removed_attribute") or ""))
    splus = chosen == row["value"]
    if not removed_value or removed_group != row["group"] or removed_value == row["value"]:
        return splus, None
    return splus, chosen != removed_value


def _accuracy_summary(judgements: list[tuple[bool, bool | None]], items: set[str]) -> dict[str, Any]:
    sminus = [s for _, s in judgements if s is not None]
    return {
        "items": len(items),
        "answers": len(judgements),
        "splus_accuracy": _rate([p for p, _ in judgements]),
        "sminus_accuracy": _rate(sminus),
        "sminus_answers": len(sminus),
    }


def _sub_attribute(rows, annotations, rules: Rules) -> dict[str, Any]:
    levels = ("attribute", "pair", "bird", "item")
    judged = {level: defaultdict(list) for level in levels}
    items = {level: defaultdict(set) for level in levels}
    chosen_by_attribute: dict[str, Counter] = defaultdict(Counter)
    per_item_values: dict[str, list[str]] = defaultdict(list)
    all_judgements = []
    for ann in annotations:
        row = rows[ann.item_id]
        chosen = ann.answers["value"]
        judgement = _attribute_judgement(row, chosen)
        all_judgements.append(judgement)
        for level, key in (
            ("attribute", row["attribute"]),
            ("pair", pair_key(row)),
            ("bird", row["bird"]),
            ("item", ann.item_id),
        ):
            judged[level][key].append(judgement)
            items[level][key].add(ann.item_id)
        chosen_by_attribute[row["attribute"]][chosen] += 1
        per_item_values[ann.item_id].append(chosen)

    def table(level: str) -> dict[str, Any]:
        return {key: _accuracy_summary(judged[level][key], items[level][key]) for key in sorted(judged[level])}

    pairs = table("pair")
    pair_rows = {}
    for row in rows.values():
        pair_rows.setdefault(pair_key(row), row)
    dropped = {}
    for key, summary in pairs.items():
        if rules.min_pair_accuracy is not None and summary["splus_accuracy"] < rules.min_pair_accuracy:
            dropped[key] = f"human S+ accuracy {summary['splus_accuracy']:.3f} < {rules.min_pair_accuracy}"
    if rules.annotated_only:
        for key in pair_rows:
            if key not in pairs:
                dropped[key] = "not annotated"
    for key, summary in pairs.items():
        summary["kept"] = key not in dropped
    overall = _accuracy_summary(all_judgements, {a.item_id for a in annotations})
    percent = lambda share: None if share is None else 100.0 * share  # noqa: E731
    return {
        # Table 1 / Table 2 "Human" row, in percent
        "human": {"splus": percent(overall["splus_accuracy"]), "sminus": percent(overall["sminus_accuracy"])},
        "overall": overall,
        "attributes": {
            **{
                k: {**v, "answer_counts": dict(sorted(chosen_by_attribute[k].items()))}
                for k, v in table("attribute").items()
            }
        },
        "pairs": pairs,
        "birds": table("bird"),
        "items": table("item"),
        "dropped_pairs": dict(sorted(dropped.items())),
        "agreement": {"value": agreement_report(per_item_values, metric="nominal")},
    }


# --------------------------------------------------------------------------------------------
# ConceptBed ratings
# --------------------------------------------------------------------------------------------
def _levels(study: Study) -> dict[str, Any]:
    levels = {
        "learner": lambda r: str(r["learner"]),
        "concept": lambda r: str(r["concept"]),
        "learner|concept": lambda r: f"{r['learner']}|{r['concept']}",
    }
    if study.name == "conceptbed-composition":
        levels["category"] = lambda r: str(r["category"])
        levels["learner|category"] = lambda r: f"{r['learner']}|{r['category']}"
    return levels


def _rating_summary(values: list[int], items: set[str]) -> dict[str, Any]:
    return {"items": len(items), "answers": len(values), "mean_rating": _mean([float(v) for v in values])}


def _correlate(name: str, metric: Mapping[str, float], tables: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Pearson's r between ``metric`` and the mean human rating at the level its keys name."""
    best_level, best_keys = None, []
    for level, table in tables.items():
        keys = sorted(k for k in metric if k in table and table[k]["mean_rating"] is not None)
        if len(keys) > len(best_keys):
            best_level, best_keys = level, keys
    if len(best_keys) < 2:
        raise DataFormatError(
            f"metric {name}: its keys match fewer than two annotated items, learners, concepts or categories "
            f"(levels: {', '.join(tables)}); keys look like {sorted(metric)[:3]}"
        )
    xs = [float(metric[k]) for k in best_keys]
    ys = [tables[best_level][k]["mean_rating"] for k in best_keys]
    return {
        "metric": name,
        "level": best_level,
        "n": len(best_keys),
        "pearson": pearson(xs, ys),
        "unmatched_keys": len(metric) - len(best_keys),
        "values": {k: {"metric": x, "human": y} for k, x, y in zip(best_keys, xs, ys)},
    }


def _conceptbed(
    study: Study, rows, annotations, rules: Rules, metrics: Mapping[str, Mapping[str, float]]
) -> dict[str, Any]:
    levels = _levels(study)
    ratings = {level: defaultdict(list) for level in ["item", *levels]}
    items = {level: defaultdict(set) for level in ["item", *levels]}
    for ann in annotations:
        row = rows[ann.item_id]
        ratings["item"][ann.item_id].append(ann.answers["rating"])
        items["item"][ann.item_id].add(ann.item_id)
        for level, key_of in levels.items():
            ratings[level][key_of(row)].append(ann.answers["rating"])
            items[level][key_of(row)].add(ann.item_id)
    tables = {
        level: {k: _rating_summary(ratings[level][k], items[level][k]) for k in sorted(ratings[level])}
        for level in ratings
    }
    dropped = {}
    for item_id, summary in tables["item"].items():
        if rules.min_item_score is not None and summary["mean_rating"] < rules.min_item_score:
            dropped[item_id] = f"mean rating {summary['mean_rating']:.2f} < {rules.min_item_score}"
    all_ratings = [a.answers["rating"] for a in annotations]
    return {
        "overall": _rating_summary(all_ratings, {a.item_id for a in annotations}),
        "learners": tables["learner"],
        "concepts": tables["concept"],
        "learner_concepts": tables["learner|concept"],
        **(
            {"categories": tables["category"], "learner_categories": tables["learner|category"]}
            if "category" in tables
            else {}
        ),
        "items": tables["item"],
        "dropped_items": dropped,
        "correlations": [_correlate(name, metric, tables) for name, metric in metrics.items()],
        "agreement": {"rating": agreement_report(ratings["item"], metric="ordinal")},
    }


# --------------------------------------------------------------------------------------------
def compute_results(
    study: Study,
    rows: Mapping[str, Mapping[str, Any]],
    annotations: Iterable[Annotation],
    *,
    config: Mapping[str, Any],
    sample: list[tuple[str, str]],
    rules: Rules = Rules(),
    metrics: Mapping[str, Mapping[str, float]] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The full results document (what ``--export`` writes and ``--apply`` reads)."""
    annotations = [a for a in annotations if a.item_id in rows]
    if study.name == "sub-faithfulness":
        body = _sub_faithfulness(rows, annotations, rules)
    elif study.name == "sub-attribute":
        body = _sub_attribute(rows, annotations, rules)
    else:
        body = _conceptbed(study, rows, annotations, rules, metrics or {})
    per_annotator = Counter(a.annotator for a in annotations)
    sample_ids = {item_id for item_id, _ in sample}
    annotated = {a.item_id for a in annotations}
    return {
        "study": study.name,
        "config": dict(config),
        "rules": asdict(rules),
        **dict(extra or {}),
        "progress": {
            "sample_items": len(sample_ids),
            "annotated_items": len(annotated & sample_ids),
            "answers": len(annotations),
            "annotators": dict(sorted(per_annotator.items())),
            "complete_annotators": sorted(a for a, n in per_annotator.items() if n >= len(sample_ids)),
        },
        **body,
        "annotations": [
            {
                "annotator": a.annotator,
                "item_id": a.item_id,
                "answers": a.answers,
                "answered_at": a.answered_at,
                "elapsed_ms": a.elapsed_ms,
            }
            for a in annotations
        ],
    }


def load_metric(spec: str, rows: Mapping[str, Mapping[str, Any]]) -> tuple[str, dict[str, float]]:
    """``NAME=FILE.json`` (an object of key -> number) or ``COLUMN`` (a numeric dataset column)."""
    if "=" in spec:
        name, path = spec.split("=", 1)
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise DataNotFoundError(f"cannot read metric file {path}: {error}") from None
        if not isinstance(data, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in data.values()
        ):
            raise DataFormatError(f"metric file {path} must be a JSON object mapping keys to numbers")
        return name, {str(k): float(v) for k, v in data.items()}
    values = {}
    for item_id, row in rows.items():
        if spec not in row:
            raise InvalidArgumentError(f"metric {spec!r} is neither NAME=FILE.json nor a column of the dataset")
        value = row[spec]
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
            values[item_id] = float(value)
    return spec, values


# --------------------------------------------------------------------------------------------
# Row decisions and per-row human columns (used by apply)
# --------------------------------------------------------------------------------------------
HUMAN_COLUMNS = {
    "sub-faithfulness": {
        "human_faithfulness_attribute": "float32",
        "human_faithfulness_bird": "float32",
        "human_faithfulness_n": "int32",
    },
    "sub-attribute": {"human_attribute_splus": "float32", "human_attribute_n": "int32"},
    "conceptbed-alignment": {"human_alignment": "float32", "human_alignment_n": "int32"},
    "conceptbed-composition": {"human_composition": "float32", "human_composition_n": "int32"},
}


def row_decision(results: Mapping[str, Any], row: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether ``row`` stays in the filtered dataset, and if not, why."""
    study = results["study"]
    rules = Rules(**results["rules"])
    if study == "sub-faithfulness":
        key = pair_key(row)
        if key in results["dropped_pairs"]:
            return False, results["dropped_pairs"][key]
        if key not in results["pairs"]:  # a row whose pair was unknown when the results were made
            return False, "pair not in the study"
        return True, ""
    if study == "sub-attribute":
        key = pair_key(row)
        return (False, results["dropped_pairs"][key]) if key in results["dropped_pairs"] else (True, "")
    item_id = row["item_id"]
    if item_id in results["dropped_items"]:
        return False, results["dropped_items"][item_id]
    if rules.annotated_only and item_id not in results["items"]:
        return False, "not annotated"
    return True, ""


def row_human_values(results: Mapping[str, Any], row: Mapping[str, Any]) -> dict[str, Any]:
    study = results["study"]
    item = results["items"].get(row["item_id"])
    if study == "sub-faithfulness":
        return {
            "human_faithfulness_attribute": item and item["attribute_score"],
            "human_faithfulness_bird": item and item["bird_score"],
            "human_faithfulness_n": item["answers"] if item else 0,
        }
    if study == "sub-attribute":
        return {
            "human_attribute_splus": item and item["splus_accuracy"],
            "human_attribute_n": item["answers"] if item else 0,
        }
    name = "human_alignment" if study == "conceptbed-alignment" else "human_composition"
    return {name: item and item["mean_rating"], f"{name}_n": item["answers"] if item else 0}


def summary_for_card(results: Mapping[str, Any]) -> dict[str, Any]:
    """The compact statistics the card shows (the full document is what --export writes)."""
    keep = (
        "study",
        "config",
        "rules",
        "progress",
        "overall",
        "human",
        "agreement",
        "group_values_source",
        "dropped_attributes",
        "dropped_pairs",
        "dropped_items",
    )
    summary = {k: results[k] for k in keep if k in results}
    if results["study"] == "sub-faithfulness":
        summary["attributes"] = {
            k: {f: v[f] for f in ("answers", "attribute_score", "attribute_yes", "bird_score", "kept")}
            for k, v in results["attributes"].items()
        }
    if results["study"] == "sub-attribute":
        summary["attributes"] = {
            k: {f: v[f] for f in ("answers", "splus_accuracy", "sminus_accuracy")}
            for k, v in results["attributes"].items()
        }
    if "learners" in results:
        summary["learners"] = results["learners"]
        summary["correlations"] = [
            {k: c[k] for k in ("metric", "level", "n", "pearson")} for c in results["correlations"]
        ]
    return summary
