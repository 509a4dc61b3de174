"""ConceptBed evaluation: oracle scores -> CCD, accuracy, mean max-softmax (MSP) and ECE.

CCD (ConceptBed paper, Eq. 3) over a set of concepts C, with oracle f and concept label y_c::

    CCD = -E_{c in C} [ E_{x_gen} f(y_c | x_gen) - E_{x_real} f(y_c | x_real) ]

0 means the generated images look to the oracle exactly like the real ones; positive means they
are less recognisable; negative, more. (The authors' released code computes gen - real, the
opposite sign; we follow the paper.) For compositions f is ViLT's confidence in "yes" to each
generated question and the real images are those the captions describe.

Aggregations (``CCD_AGGREGATIONS``). ``ccd`` is Eq. 3 (per-concept mean: each concept weighs the
same however many images it has) — the default and the number in every "CCD" column. The
authors' released scripts aggregate differently; both are reported beside it, with the paper's
sign (real − generated):

* ``ccd_pooled`` — ``get_uncertainty_objects.py``: the mean over *all* real images minus the mean
  over *all* generated images of the task (concepts weighted by their image counts);
* ``ccd_category_mean`` — ``get_uncertainty_composition.py``: pooled per composition category
  (relation, action, attribute, counting), then the plain mean of the categories present
  (composition and VQA tasks only; NaN elsewhere).

Scoring (running oracles) and reporting (tables) are separate: scores are plain records that can
be saved as JSONL and re-reported without the models, and the metric functions are pure numpy.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from conceptforge.errors import DataFormatError, InvalidArgumentError

# The record format lives with the oracles that write it; re-exported so reports read one module.
from conceptforge.filters.conceptbed.records import (  # noqa: F401
    ORIGINAL,
    ScoreRecord,
    claim_scores_file,
    load_records,
    save_records,
)
from conceptforge.generators.conceptbed.composition import CATEGORIES

logger = logging.getLogger(__name__)

TASKS = ("style", "object", "cub", "composition", "vqa")
TASK_TITLES = {
    "style": "Domain (PACS)",
    "object": "Objects (ImageNet)",
    "cub": "Fine-grained (CUB, object-level)",
    "composition": "Composition (concept oracle)",
    "vqa": "Composition (VQA)",
}
TABLE2_ORDER = ("relation", "action", "attribute", "counting")  # Table 2's column order of CATEGORIES
assert set(TABLE2_ORDER) == set(CATEGORIES)
DEFAULT_ECE_BINS = 15
CCD_AGGREGATIONS = {
    "ccd": "per-concept mean, paper Eq. 3",
    "ccd_pooled": "all images pooled, authors' objects script",
    "ccd_category_mean": "pooled per category, mean of categories, authors' composition script",
}


# ---------------------------------------------------------------------------------------------
# Metrics


def expected_calibration_error(
    confidence: Sequence[float], correct: Sequence[bool], *, n_bins: int = DEFAULT_ECE_BINS
) -> float:
    """ECE (Naeini et al. 2015): sum over equal-width confidence bins of |B|/n * |acc(B) - conf(B)|.

    Bins are (k/n_bins, (k+1)/n_bins], the first one also holding 0.
    """
    conf = np.asarray(confidence, dtype=np.float64)
    hits = np.asarray(correct, dtype=np.float64)
    if conf.shape != hits.shape:
        raise ValueError("confidence and correct must have the same length")
    if conf.size == 0:
        return float("nan")
    bins = np.clip(np.ceil(conf * n_bins).astype(int) - 1, 0, n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        mask = bins == b
        if mask.any():
            total += mask.sum() / conf.size * abs(hits[mask].mean() - conf[mask].mean())
    return float(total)


def concept_confidence_deviation(
    generated: Mapping[str, Sequence[float]], real: Mapping[str, Sequence[float]]
) -> float:
    """CCD = -mean_c( mean(generated[c]) - mean(real[c]) ) over the concepts in ``generated``.

    ``generated``/``real`` map a concept to the oracle's target-class probabilities f(y_c | x).
    """
    concepts = [c for c in sorted(generated) if len(generated[c])]
    if not concepts:
        return float("nan")
    missing = [c for c in concepts if c not in real or not len(real[c])]
    if missing:
        raise DataFormatError(f"no real-image scores for concept(s) {', '.join(missing[:5])}: CCD needs both")
    deviations = [np.mean(real[c]) - np.mean(generated[c]) for c in concepts]
    return float(np.mean(deviations))


def pooled_ccd(generated: Sequence[float], real: Sequence[float]) -> float:
    """The authors' objects aggregation, paper sign: mean(real) − mean(generated), all pooled."""
    if not len(generated) or not len(real):
        return float("nan")
    return float(np.mean(real) - np.mean(generated))


def category_mean_ccd(per_category: Mapping[str, float]) -> float:
    """The authors' composition aggregation: the plain mean of per-category pooled CCDs."""
    values = [v for v in per_category.values() if v == v]
    return float(np.mean(values)) if values else float("nan")


@dataclass
class Metrics:
    n: int
    accuracy: float
    msp: float
    ece: float
    ccd: float
    per_concept_ccd: dict[str, float] = field(default_factory=dict)
    ccd_pooled: float = float("nan")
    ccd_category_mean: float = float("nan")


def _by_concept(records: Iterable[ScoreRecord]) -> dict[str, list[float]]:
    grouped: dict[str, list[float]] = defaultdict(list)
    for record in records:
        grouped[record.concept].append(record.target_prob)
    return grouped


def compute_metrics(
    generated: Sequence[ScoreRecord], real: Sequence[ScoreRecord], *, n_bins: int = DEFAULT_ECE_BINS
) -> Metrics:
    """Accuracy, MSP, ECE of ``generated`` and its CCD against ``real`` (NaN CCD without real)."""
    if not generated:
        nan = float("nan")
        return Metrics(0, nan, nan, nan, nan)
    gen_c, real_c = _by_concept(generated), _by_concept(real)
    usable = {c: v for c, v in gen_c.items() if c in real_c}
    if len(usable) < len(gen_c):
        logger.warning("CCD over %d of %d concepts (others have no real-image scores)", len(usable), len(gen_c))
    ccd = concept_confidence_deviation(usable, real_c) if usable else float("nan")
    per_concept = {c: float(np.mean(real_c[c]) - np.mean(v)) for c, v in sorted(usable.items())}
    pooled = pooled_ccd([p for v in usable.values() for p in v], [p for c in usable for p in real_c[c]])
    return Metrics(
        n=len(generated),
        accuracy=float(np.mean([r.correct for r in generated])),
        msp=float(np.mean([r.max_prob for r in generated])),
        ece=expected_calibration_error([r.max_prob for r in generated], [r.correct for r in generated], n_bins=n_bins),
        ccd=ccd,
        per_concept_ccd=per_concept,
        ccd_pooled=pooled,
    )


def select(
    records: Iterable[ScoreRecord],
    *,
    source: str | None = None,
    tasks: Sequence[str] | None = None,
    category: str | None = None,
) -> list[ScoreRecord]:
    return [
        r
        for r in records
        if (source is None or r.source == source)
        and (tasks is None or r.task in tasks)
        and (category is None or category in r.categories)
    ]


def real_tasks(task: str) -> tuple[str, ...]:
    """Which real records a generated task is compared with.

    Composition images are judged by the concept oracle against the concept's real images (any
    kind); VQA answers against the same questions asked about the captions' real images.
    """
    return ("style", "object", "cub") if task == "composition" else (task,)


def evaluate(records: Sequence[ScoreRecord], *, n_bins: int = DEFAULT_ECE_BINS) -> dict[tuple[str, str, str], Metrics]:
    """Metrics per (source, task, category or ""); the original row compares real with real (CCD 0)."""
    results: dict[tuple[str, str, str], Metrics] = {}
    sources = sorted({r.source for r in records})
    for task in TASKS:
        real = select(records, source=ORIGINAL, tasks=real_tasks(task))
        for source in sources:
            generated = select(records, source=source, tasks=(task,))
            if source == ORIGINAL and task == "composition":
                # the "Original" row: the real images of the composed concepts against themselves
                composed = {r.concept for r in records if r.task == "composition"}
                generated = [r for r in real if r.concept in composed]
            if not generated:
                continue
            results[(source, task, "")] = compute_metrics(generated, real, n_bins=n_bins)
            if task not in ("composition", "vqa"):
                continue
            per_category = {}
            for category in TABLE2_ORDER:
                in_category = select(generated, category=category)
                if in_category:
                    reference = select(real, category=category) if task == "vqa" else real
                    results[(source, task, category)] = compute_metrics(in_category, reference, n_bins=n_bins)
                    per_category[category] = results[(source, task, category)].ccd_pooled
            results[(source, task, "")].ccd_category_mean = category_mean_ccd(per_category)
    return results


# ---------------------------------------------------------------------------------------------
# Tables


def _fmt(value: float, percent: bool = False) -> str:
    if value != value:  # NaN
        return "n/a"
    return f"{100 * value:.2f}%" if percent else f"{value:.4f}"


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _sources(results: Mapping[tuple[str, str, str], Metrics]) -> list[str]:
    names = sorted({s for s, _, _ in results if s != ORIGINAL})
    return names + ([ORIGINAL] if any(s == ORIGINAL for s, _, _ in results) else [])


def table1(results: Mapping[tuple[str, str, str], Metrics]) -> str:
    """Concept alignment CCD per task (paper Table 1)."""
    tasks = [t for t in ("style", "object", "cub", "composition") if any(k[1] == t for k in results)]
    rows = [
        [source] + [_fmt(results[(source, t, "")].ccd) if (source, t, "") in results else "-" for t in tasks]
        for source in _sources(results)
    ]
    return "Table 1: concept alignment, CCD (paper Eq. 3, per-concept mean; lower is better)\n\n" + _markdown(
        ["model"] + [TASK_TITLES[t] for t in tasks], rows
    )


def table2(results: Mapping[tuple[str, str, str], Metrics]) -> str:
    """Compositional reasoning per category: VQA accuracy and CCD (paper Table 2, without CLIP)."""
    categories = [c for c in TABLE2_ORDER if any(k[1] == "vqa" and k[2] == c for k in results)]
    header = ["model"] + [f"{c} {m}" for c in categories for m in ("Acc.", "CCD")]
    rows = []
    for source in _sources(results):
        row = [source]
        for c in categories:
            m = results.get((source, "vqa", c))
            row += [_fmt(m.accuracy, percent=True), _fmt(m.ccd)] if m else ["-", "-"]
        rows.append(row)
    return "Table 2: compositional reasoning (ViLT yes/no questions)\n\n" + _markdown(header, rows)


def table2_concept(results: Mapping[tuple[str, str, str], Metrics]) -> str:
    """Concept alignment of composition images per category (the concept oracle's CCD)."""
    categories = [c for c in TABLE2_ORDER if any(k[1] == "composition" and k[2] == c for k in results)]
    rows = []
    for source in _sources(results):
        if source == ORIGINAL:
            continue
        rows.append(
            [source]
            + [
                _fmt(results[(source, "composition", c)].ccd) if (source, "composition", c) in results else "-"
                for c in categories
            ]
        )
    return "Concept alignment on composite prompts per category, CCD\n\n" + _markdown(
        ["model"] + list(categories), rows
    )


def ccd_aggregation_table(results: Mapping[tuple[str, str, str], Metrics]) -> str:
    """Eq. 3 beside the authors' two aggregations, per learner and task (same sign)."""
    tasks = [t for t in TASKS if any(k[1] == t and not k[2] for k in results)]
    header = ["model", "task", *[f"{name} ({text})" for name, text in CCD_AGGREGATIONS.items()]]
    rows = []
    for source in _sources(results):
        for t in tasks:
            m = results.get((source, t, ""))
            if m:
                rows.append([source, t, _fmt(m.ccd), _fmt(m.ccd_pooled), _fmt(m.ccd_category_mean)])
    return (
        "CCD aggregations (paper sign: real − generated; 'ccd' is the paper's and the one in Tables 1, 2, 7)\n\n"
        + _markdown(header, rows)
    )


def results_to_json(results: Mapping[tuple[str, str, str], Metrics]) -> dict:
    """JSON-ready results: one entry per (source, task, category) naming each CCD aggregation."""
    rows = []
    for (source, task, category), m in sorted(results.items()):
        rows.append({"source": source, "task": task, "category": category or None, **asdict(m)})
    return {"ccd_sign": "real - generated (paper Eq. 3)", "ccd_aggregations": dict(CCD_AGGREGATIONS), "results": rows}


def table7(results: Mapping[tuple[str, str, str], Metrics], task: str) -> str:
    """Accuracy, MSP, ECE and CCD for one task (paper Table 7)."""
    rows = []
    for source in _sources(results):
        m = results.get((source, task, ""))
        if m:
            rows.append([source, _fmt(m.accuracy, percent=True), _fmt(m.msp), _fmt(m.ece), _fmt(m.ccd), str(m.n)])
    return f"Table 7 ({TASK_TITLES[task]}): confidence measures\n\n" + _markdown(
        ["model", "Accuracy", "MSP", "ECE", "CCD (Eq. 3)", "n"], rows
    )


def per_concept_table(results: Mapping[tuple[str, str, str], Metrics], task: str) -> str:
    sources = [s for s in _sources(results) if (s, task, "") in results and s != ORIGINAL]
    concepts = sorted({c for s in sources for c in results[(s, task, "")].per_concept_ccd})
    rows = [
        [c] + [_fmt(results[(s, task, "")].per_concept_ccd.get(c, float("nan"))) for s in sources] for c in concepts
    ]
    return f"Per-concept CCD ({TASK_TITLES[task]})\n\n" + _markdown(["concept"] + sources, rows)


def report(
    records: Sequence[ScoreRecord],
    *,
    per_concept: bool = False,
    n_bins: int = DEFAULT_ECE_BINS,
    results: Mapping[tuple[str, str, str], Metrics] | None = None,
) -> str:
    results = evaluate(records, n_bins=n_bins) if results is None else results
    if not results:
        raise InvalidArgumentError("no scores to report")
    parts = [table1(results), ccd_aggregation_table(results)]
    if any(k[1] == "vqa" and k[2] for k in results):
        parts.append(table2(results))
    if any(k[1] == "composition" and k[2] for k in results):
        parts.append(table2_concept(results))
    for task in TASKS:
        if any(k[1] == task for k in results):
            parts.append(table7(results, task))
            if per_concept:
                parts.append(per_concept_table(results, task))
    return "\n\n".join(parts) + "\n"
