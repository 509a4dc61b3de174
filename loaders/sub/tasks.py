"""The SUB tasks of ``conceptforge evaluate`` (the task table), next to the SUB protocol (``sub.py``).

Each image gives one sample row for S+ (``side`` "S+": was the substituted attribute chosen /
detected?) and, where the S− rule scores it, one for S− (``side`` "S-": was "that attribute"
avoided?); ``value`` is 1.0/0.0 and ``chance`` the row's Appendix F chance, so S+, S−, their
chance levels and every breakdown are means over rows. Grouping columns: ``attribute_group``,
``bird``, ``attribute`` (the S+ attribute), ``side``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conceptforge import argtypes
from conceptforge.errors import DataFormatError, DataNotFoundError
from conceptforge.loaders.harness.allowed_tokens import (
    LOW_ALLOWED_MASS,
    NO_ALLOWED_ANSWER,
    NO_ALLOWED_MASS,
    low_allowed_mass_metric,
    no_allowed_mass,
)
from conceptforge.loaders.harness.by_answer import (
    BY_ANSWER_COLUMNS,
    NO_ANSWER,
    UNPARSED_ANSWERS,
    is_by_answer,
    unparsed_metric,
)
from conceptforge.loaders.harness.sample_columns import ALLOWED_MASS_COLUMN
from conceptforge.loaders.harness.task import (
    ANSWER_TEXT,
    CHOOSE,
    CONCEPTS,
    EMBED,
    MATCH,
    Metric,
    Option,
    Task,
    TaskContext,
    TaskOutcome,
    by_answer_option,
    check_by_answer,
    choice,
    template,
    text,
)
from conceptforge.loaders.harness.units import PERCENT, MetricSpec
from conceptforge.loaders.sub import breakdowns

logger = logging.getLogger(__name__)

COLUMNS = (
    ("attribute_group", "string"),
    ("bird", "string"),
    ("attribute", "string"),
    ("side", "string"),
    ("chance", "float64"),
    (ALLOWED_MASS_COLUMN, "float64"),
    *BY_ANSWER_COLUMNS,  # sub-vlm by answer: the raw answer, the parsed letter, the parsed flag
)


def _rows(
    task: str, index: int, item: Any, candidates: list[str], scores: list[float], detected: list[str], result: Any
) -> list[dict[str, Any]]:
    """The S+ row and (if scored) the S− row of one image, from the protocol's ``SubItemScore``."""
    base = {
        "task": task,
        "candidates": candidates,
        "scores": scores,
        "prediction": ";".join(detected) or "none",
        "attribute_group": item.group,
        "bird": item.bird,
        "attribute": item.attribute,
        ALLOWED_MASS_COLUMN: None,  # sub-vlm by choose/match sets it; embeddings and CBMs have no answer tokens
        **NO_ANSWER,  # sub-vlm by answer sets them
    }
    rows = []
    if result.s_plus is not None:
        rows.append(
            {
                **base,
                "item_id": f"{index}/S+",
                "label": item.attribute,
                "correct": bool(result.s_plus),
                "value": float(result.s_plus),
                "side": "S+",
                "chance": result.chance_plus,
            }
        )
    if result.s_minus is not None:
        rows.append(
            {
                **base,
                "item_id": f"{index}/S-",
                "label": ";".join(result.removed),
                "correct": bool(result.s_minus),
                "value": float(result.s_minus),
                "side": "S-",
                "chance": result.chance_minus,
            }
        )
    return rows


def _one_row_per_image(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The S+ and S− rows of an image share its answer: count it once (item ids ``<index>/S±``)."""
    return list({str(r["item_id"]).split("/")[0]: r for r in rows}.values())


#: S+ and S- accuracy (shares of the S+ and S- samples), and what chance would score on them
S_METRICS = (MetricSpec("s_plus", PERCENT), MetricSpec("s_minus", PERCENT))
CHANCE_METRICS = (MetricSpec("chance_s_plus", PERCENT), MetricSpec("chance_s_minus", PERCENT))


def score_sub(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> dict[str, Metric]:
    plus = [r for r in rows if r["side"] == "S+"]
    minus = [r for r in rows if r["side"] == "S-"]

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else float("nan")

    metrics = {
        "s_plus": Metric(mean([r["value"] for r in plus]), None, len(plus)),
        "s_minus": Metric(mean([r["value"] for r in minus]), None, len(minus)),
    }
    if options.get("kind", "vlm") == "vlm":
        metrics["chance_s_plus"] = Metric(mean([r["chance"] for r in plus]), None, len(plus))
        metrics["chance_s_minus"] = Metric(mean([r["chance"] for r in minus]), None, len(minus))
        metrics.update(low_allowed_mass_metric(_one_row_per_image(rows), what="sub-vlm"))
        metrics.update(unparsed_metric(_one_row_per_image(rows)))
    return metrics


def _load(ctx: TaskContext):
    """The vocabulary (CUB's, or the release's spec's) and the items of the release."""
    from conceptforge.cub import load_cub
    from conceptforge.loaders.sub.protocol import load_sub
    from conceptforge.loaders.sub.spec_vocabulary import release_vocabulary
    from conceptforge.specs.release import release_spec_at

    cub = release_vocabulary(release_spec_at(ctx.dataset.repo, ctx.dataset.load_revision))
    if cub is None:  # the paper's release, or a spec over CUB: CUB's vocabulary
        cub = load_cub(ctx.cub_dir, need="votes")
    items = load_sub(ctx.dataset.repo, split=ctx.dataset.split or "test", revision=ctx.dataset.load_revision, cub=cub)
    if not items:
        raise DataFormatError(f"split {ctx.dataset.split!r} of {ctx.dataset.repo} is empty")
    return cub, items


def s_minus_used(cub: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The S- rule applied, as results record it: a spec's release has no CUB table, so its S- is the
    release's own ``removed_attribute`` ("release") whatever was asked, and no CBM subset (None)."""
    if getattr(cub, "s_minus_from_release", False):
        return {"s_minus": "release", "cbm_min_classes": None}
    return {"s_minus": options["s_minus"], "cbm_min_classes": options["cbm_min_classes"]}


def label_set(cub: Any) -> str:
    """The vocabulary the choices come from: CUB's 312 attributes, or the release spec's."""
    own = getattr(cub, "s_minus_from_release", False)
    return f"the spec {cub.name!r}'s {len(cub.attributes)} attributes" if own else "CUB 312 attributes"


def _group_scorer(ctx: TaskContext, cub: Any, groups: list[str], choices: dict[str, list[str | None]]):
    """(scorer, ``scores(items) -> one score list per item over its group's choices``, protocol)
    for the capability the model runs sub-vlm with."""
    from conceptforge.loaders.sub.protocol import attribute_prompt

    o = ctx.options
    template, none_prompt = o["template"], o["none_prompt"]
    domain = getattr(cub, "domain", None)
    if domain is not None:  # a spec's release: the default prompts name its domain, not the paper's bird
        template = template.replace("bird", domain) if "template" not in ctx.given else template
        none_prompt = none_prompt.replace("bird", domain) if "none_prompt" not in ctx.given else none_prompt
    prompts = {g: [attribute_prompt(a, template) if a else none_prompt for a in choices[g]] for g in groups}
    if ctx.capability == CHOOSE:  # the paper's multiple-choice question, "Other" as the none-option
        from conceptforge.cub import attribute_value
        from conceptforge.filters.vqa.questions import build_question

        chooser = ctx.session.chooser()
        asked = {"template": cub.question, "domain": cub.domain} if domain is not None else {}
        questions = {
            g: build_question(g, [attribute_value(a) for a in choices[g] if a], answer_hint=o["answer_hint"], **asked)
            for g in groups
        }

        def choose(chosen: list[Any]) -> list[tuple[list[float], float | None]]:
            answers = chooser.choose(
                [item.image for item in chosen], [questions[item.group] for item in chosen], batch_size=ctx.batch_size
            )
            return [(list(a.probs), a.raw_mass) for a in answers]

        return chooser, choose, "sub/vlm-choose"
    if ctx.capability == MATCH:
        matcher = ctx.session.matcher()

        def match(chosen: list[Any]) -> list[tuple[list[float], float | None]]:
            images, texts = [item.image for item in chosen], [prompts[item.group] for item in chosen]
            scores = matcher.match(images, texts, batch_size=ctx.batch_size)
            if not hasattr(matcher, "match_allowed_mass"):  # an ITM head: no answer tokens
                return [(s, None) for s in scores]
            masses = matcher.match_allowed_mass(images, texts, batch_size=ctx.batch_size)
            return [(s, min(m)) for s, m in zip(scores, masses)]  # the pair that said least yes/no

        return matcher, match, "sub/vlm-match"
    embedder = ctx.session.embedder()
    text = {g: embedder.embed_texts(prompts[g]) for g in groups}

    def embed(chosen: list[Any]) -> list[tuple[list[float], float | None]]:
        vectors = embedder.embed_images([item.image for item in chosen], batch_size=ctx.batch_size)
        return [
            ([float(s) for s in (text[item.group] @ vector).double()], None) for item, vector in zip(chosen, vectors)
        ]

    return embedder, embed, "sub/vlm-within-group"


def _wrong(result: Any) -> Any:
    """``result`` scored wrong on every side it is scored on, with no prediction: an unparsed
    answer, or choice scores that carried no probability at all (:func:`no_allowed_mass`)."""
    from dataclasses import replace

    return replace(
        result,
        prediction=[],
        s_plus=False if result.s_plus is not None else None,
        s_minus=False if result.s_minus is not None else None,
    )


def run_sub_vlm(ctx: TaskContext) -> TaskOutcome:
    from conceptforge.loaders.sub.scoring import build_report, score_vlm_predictions

    cub, items = _load(ctx)
    if ctx.capability == ANSWER_TEXT:
        return run_sub_by_answer(ctx, cub, items)
    o = ctx.options
    groups = sorted({item.group for item in items})
    choices: dict[str, list[str | None]] = {g: [*cub.groups[g], None] for g in groups}
    scorer, group_scores, protocol = _group_scorer(ctx, cub, groups, choices)

    def score(positions: list[int]) -> list[dict[str, Any]]:
        chosen = [items[p] for p in positions]
        out = []
        for position, item, (scores, allowed_mass) in zip(positions, chosen, group_scores(chosen)):
            best = max(range(len(scores)), key=lambda i: (scores[i], -i))  # first of tied maxima
            unanswered = no_allowed_mass(allowed_mass)
            predicted = None if unanswered else choices[item.group][best]
            (result,) = score_vlm_predictions(
                [item], [predicted], cub, s_minus=o["s_minus"], cbm_min_classes=o["cbm_min_classes"]
            )
            if unanswered:  # no option had any probability: no choice to credit (EP05)
                result = _wrong(result)
            rows = [
                {**row, ALLOWED_MASS_COLUMN: allowed_mass}
                for row in _rows(
                    "sub-vlm",
                    position,
                    item,
                    [a or "none" for a in choices[item.group]],
                    [float(s) for s in scores],
                    [predicted] if predicted else [],
                    result,
                )
            ]
            for row in rows:
                if unanswered:
                    row["prediction"] = NO_ALLOWED_ANSWER
            out.append({"rows": rows, "prediction": predicted, "unanswered": unanswered})
        return out

    done = ctx.samples.collect([str(i) for i in range(len(items))], score, chunk=ctx.batch_size)
    results = score_vlm_predictions(
        items, [d["prediction"] for d in done], cub, s_minus=o["s_minus"], cbm_min_classes=o["cbm_min_classes"]
    )
    results = [_wrong(r) if d.get("unanswered") else r for r, d in zip(results, done)]
    by_choice = protocol == "sub/vlm-choose"
    report = build_report(
        "vlm",
        scorer.model_id,
        scorer.revision,
        results,
        {
            "capability": ctx.capability or EMBED,
            **(
                {"question": "SUB paper §4.2, options A) … Other", "answer_hint": o["answer_hint"]}
                if by_choice
                else {"template": o["template"], "none_prompt": o["none_prompt"]}
            ),
            **({"match": scorer.protocol} if protocol == "sub/vlm-match" else {}),
            "label_set": label_set(cub) + ", within group, + none" + (" ('Other')" if by_choice else ""),
            **s_minus_used(cub, o),
        },
    )
    metrics = _s_metrics(report)
    rows = [row for d in done for row in d["rows"]]
    metrics.update(low_allowed_mass_metric(_one_row_per_image(rows), what="sub-vlm"))
    return TaskOutcome(
        rows,
        "s_plus",
        metrics=metrics,
        protocol=protocol,
        variant=f"within-group + none by {ctx.capability or EMBED}; S- rule {s_minus_used(cub, o)['s_minus']}",
        details={"per_attribute": report.per_attribute, "per_bird": report.per_bird, "settings": report.settings},
        options_used=s_minus_used(cub, o),
        table=report.format(),
    )


def _s_metrics(report: Any) -> dict[str, Metric]:
    """S+, S− and their chance levels from a SUB report's summary, each over its own count."""
    s = report.summary
    return {
        name: Metric(float(s[name]), None, int(s["n_s_minus" if "minus" in name else "n_s_plus"]))
        for name in ("s_plus", "s_minus", "chance_s_plus", "chance_s_minus")
    }


def run_sub_by_answer(ctx: TaskContext, cub: Any, items: list[Any]) -> TaskOutcome:
    """sub/choose-by-answer: the model answers SUB's question (``by_answer.render_choice_prompt``:
    the paper's question, the group's values and "Other", lettered) in words; the parsed letter is
    the chosen attribute ("Other": none). S+ is right when it is the substituted attribute, S−
    when it is not "that attribute"; an unparsed answer is wrong on both sides."""
    from conceptforge.loaders.harness.by_answer import (
        DEFAULT_MAX_NEW_TOKENS,
        answer_scores,
        collect_choice_answers,
        sub_choice_items,
    )
    from conceptforge.loaders.sub.scoring import build_report, score_vlm_predictions

    o = ctx.options
    questions = list(sub_choice_items(items, cub.groups, domain=getattr(cub, "domain", None)))
    answerer = ctx.session.answerer()

    def record(position: int, question: Any, answer: Any) -> dict[str, Any]:
        item = items[position]
        index = answer.index
        key = None if index is None else question.option_keys[index]
        predicted = None if key in (None, "none") else key
        (result,) = score_vlm_predictions(
            [item], [predicted], cub, s_minus=o["s_minus"], cbm_min_classes=o["cbm_min_classes"]
        )
        if answer.letter is None:  # unparsed: wrong on every side it is scored on
            result = _wrong(result)
        rows = _rows(
            "sub-vlm",
            position,
            item,
            list(question.option_keys),
            answer_scores(len(question.options), index),
            [predicted] if predicted else [],
            result,
        )
        for row in rows:
            answer.mark(row)
        return {"rows": rows, "result": _result_json(result)}

    done = collect_choice_answers(ctx, answerer, questions, record, item_ids=[str(i) for i in range(len(items))])
    from conceptforge.loaders.sub.scoring import SubItemScore

    results = [SubItemScore(**d["result"]) for d in done]
    report = build_report(
        "vlm",
        answerer.model_id,
        answerer.revision,
        results,
        {
            "capability": ANSWER_TEXT,
            "question": "SUB paper §4.2 question stem, options lettered A. … Other on their own lines",
            "prompt": "by_answer.render_choice_prompt (lmms-eval / LLaVA layout)",
            "max_new_tokens": DEFAULT_MAX_NEW_TOKENS,
            "label_set": label_set(cub) + ", within group, + none ('Other')",
            **s_minus_used(cub, o),
        },
    )
    metrics = _s_metrics(report)
    rows = [row for d in done for row in d["rows"]]
    metrics.update(unparsed_metric(_one_row_per_image(rows)))
    unparsed = int(metrics["unparsed_answers"].value) if "unparsed_answers" in metrics else 0
    if unparsed:
        logger.warning("sub-vlm: %d of %d answers named no option (scored wrong)", unparsed, len(items))
    return TaskOutcome(
        rows,
        "s_plus",
        metrics=metrics,
        protocol="sub/choose-by-answer",
        variant=f"within-group + none by answer (parsed letter); S- rule {s_minus_used(cub, o)['s_minus']}",
        details={"per_attribute": report.per_attribute, "per_bird": report.per_bird, "settings": report.settings},
        options_used=s_minus_used(cub, o),
        table=report.format(),
    )


def _result_json(result: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(result)


def run_sub_cbm(ctx: TaskContext) -> TaskOutcome:
    import numpy as np
    import torch

    from conceptforge.loaders.harness.embeddings import load_pil
    from conceptforge.loaders.sub.cbm import cbm_concept_names
    from conceptforge.loaders.sub.scoring import build_report, score_cbm_predictions

    cub, items = _load(ctx)
    o = ctx.options
    if o["outputs"] not in ("logits", "probabilities"):
        raise DataFormatError(f"sub-cbm.outputs must be logits or probabilities, got {o['outputs']!r}")
    names = None
    if o["concept_names"]:
        path = Path(o["concept_names"])
        if not path.is_file():
            raise DataNotFoundError(f"concept_names file {path} does not exist")
        names = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    predict = ctx.session.concept_predictor()  # the cbm adapter: concepts(images) -> [B, C]
    state: dict[str, Any] = {}

    def score(positions: list[int]) -> list[dict[str, Any]]:
        out = []
        for start in range(0, len(positions), ctx.batch_size):
            chunk = positions[start : start + ctx.batch_size]
            output = predict([load_pil(items[p].image) for p in chunk])
            logits = torch.as_tensor(
                np.asarray(output.detach().cpu() if isinstance(output, torch.Tensor) else output), dtype=torch.float32
            )
            probabilities = torch.sigmoid(logits) if o["outputs"] == "logits" else logits
            concepts = state.setdefault("names", cbm_concept_names(logits.shape[1], cub, names))
            present = (probabilities >= o["threshold"]).numpy()
            results = score_cbm_predictions(
                [items[p] for p in chunk],
                present,
                concepts,
                cub=cub,
                s_minus=o["s_minus"],
                cbm_min_classes=o["cbm_min_classes"],
            )
            for position, row, probs, result in zip(chunk, present, probabilities, results):
                item = items[position]
                in_group = [j for j, c in enumerate(concepts) if c.startswith(item.group + "::")]
                out.append(
                    {
                        "rows": _rows(
                            "sub-cbm",
                            position,
                            item,
                            [concepts[j] for j in in_group],
                            [float(probs[j]) for j in in_group],
                            result.prediction,
                            result,
                        ),
                        "present": [concepts[j] for j in np.flatnonzero(row)],
                    }
                )
        return out

    done = ctx.samples.collect([str(i) for i in range(len(items))], score, chunk=ctx.batch_size)
    concepts = state.get("names") or cbm_concept_names(len(names) if names else len(cub.attributes), cub, names)
    index = {c: j for j, c in enumerate(concepts)}
    present = np.zeros((len(items), len(concepts)), dtype=bool)
    for i, d in enumerate(done):
        present[i, [index[c] for c in d["present"]]] = True
    results = score_cbm_predictions(
        items, present, concepts, cub=cub, s_minus=o["s_minus"], cbm_min_classes=o["cbm_min_classes"]
    )
    report = build_report(
        "cbm",
        ctx.model.id,
        "",
        results,
        {
            "threshold": o["threshold"],
            "outputs": o["outputs"],
            "rule": threshold_rule(o["outputs"], o["threshold"]),
            "num_concepts": len(concepts),
            **s_minus_used(cub, o),
        },
    )
    s = report.summary
    metrics = {
        "s_plus": Metric(float(s["s_plus"]), None, int(s["n_s_plus"])),
        "s_minus": Metric(float(s["s_minus"]), None, int(s["n_s_minus"])),
    }
    return TaskOutcome(
        [row for d in done for row in d["rows"]],
        "s_plus",
        metrics=metrics,
        variant=f"{threshold_rule(o['outputs'], o['threshold'])}; S- rule {s_minus_used(cub, o)['s_minus']}",
        details={"per_attribute": report.per_attribute, "settings": report.settings},
        options_used=s_minus_used(cub, o),
        table=report.format(),
    )


def threshold_rule(outputs: str, threshold: float) -> str:
    """The detection rule that ran, as the results and tables name it: the threshold applies to a
    probability, so a CBM giving logits is read through a sigmoid first."""
    return f"{'sigmoid(logit)' if outputs == 'logits' else 'probability'} >= {threshold:g}"


def score_sub_cbm(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> dict[str, Metric]:
    return score_sub(rows, {**options, "kind": "cbm"})


# ----------------------------------------------------------------------------------- rescoring
def _check_sides(rows: Sequence[dict[str, Any]], detected: Any, chance: Any) -> str | None:
    """Each row's verdict from its own prediction and label: S+ is right when the label (the
    substituted attribute) is among the attributes predicted, S− when none of its label's (the
    bird's original attributes the rule checks) is. ``detected(row)``: the attributes the row's
    scores select, or a one-line problem; ``chance(row)``: the row's Appendix F chance."""
    for row in rows:
        item, side = row["item_id"], row["side"]
        if side not in ("S+", "S-") or not str(item).endswith(f"/{side}"):
            return f"row {item}: side {side!r} does not match its id (…/S+ or …/S-)"
        if len(list(row["scores"])) != len(list(row["candidates"])):
            return f"row {item}: {len(list(row['scores']))} scores for {len(list(row['candidates']))} candidates"
        found = detected(row)
        if isinstance(found, str):
            return f"row {item}: {found}"
        unanswered = no_allowed_mass(row.get(ALLOWED_MASS_COLUMN))
        if unanswered and row["prediction"] != NO_ALLOWED_ANSWER:
            return f"row {item}: allowed_mass 0 but prediction {row['prediction']!r}, not {NO_ALLOWED_ANSWER!r}"
        predicted = (
            set() if row["prediction"] in ("none", NO_ALLOWED_ANSWER) else set(str(row["prediction"]).split(";"))
        )
        if predicted != found:
            return f"row {item}: prediction {row['prediction']!r} but its scores select {';'.join(sorted(found)) or 'none'}"
        labels = set(str(row["label"]).split(";"))
        right = bool(labels & predicted) if side == "S+" else not labels & predicted
        right = right and not unanswered
        if row["correct"] is None or bool(row["correct"]) != right:
            return (
                f"row {item}: correct is {row['correct']} but {side} with prediction {row['prediction']!r} and label "
                f"{row['label']!r} is {'right' if right else 'wrong'}"
            )
        expected = chance(row)
        if row["chance"] is None or abs(float(row["chance"]) - expected) > 1e-9:
            return f"row {item}: chance {row['chance']} but its candidates give {expected:g}"
    return None


def check_sub_vlm_rows(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> str | None:
    """sub-vlm: the prediction is the top-scoring candidate (first of tied maxima; "none" the
    none-option), chance 1/options for S+ and 1 − |label|/options for S− (Appendix F).
    By-answer rows: :func:`check_sub_by_answer_rows`."""
    if is_by_answer(rows):
        return check_sub_by_answer_rows(rows, options)

    def detected(row: dict[str, Any]) -> set[str] | str:
        scores, candidates = list(row["scores"]), list(row["candidates"])
        if not scores:
            return "no scores"
        if no_allowed_mass(row.get(ALLOWED_MASS_COLUMN)):
            return set()  # nothing chosen: the row is wrong on both sides (checked below)
        best = candidates[max(range(len(scores)), key=lambda i: (scores[i], -i))]
        return set() if best == "none" else {best}

    def chance(row: dict[str, Any]) -> float:
        n = len(list(row["candidates"]))
        return 1.0 / n if row["side"] == "S+" else 1.0 - len(str(row["label"]).split(";")) / n

    return _check_sides(rows, detected, chance)


def check_sub_by_answer_rows(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> str | None:
    """sub/choose-by-answer: the parser, run again on each stored answer with the options SUB's
    question shows, gives the stored letter, flag, prediction and one-hot scores; a parsed row's
    verdict follows from its prediction and label as any sub-vlm row's; an unparsed row is wrong."""
    from conceptforge.cub import attribute_value, value_words
    from conceptforge.loaders.harness.by_answer import (
        PARSED_COLUMN,
        SUB_OTHER,
        SUB_OTHER_KEY,
        answer_scores,
        check_choice_row,
    )

    def shown(candidate: str) -> str:
        return SUB_OTHER if candidate == SUB_OTHER_KEY else value_words(attribute_value(candidate))

    parsed_rows = []
    for row in rows:
        item, candidates = row["item_id"], list(row["candidates"])
        if row.get(PARSED_COLUMN) is None:
            return f"row {item}: a by-answer file holds a row without its parsed flag"
        problem = check_choice_row(row, [shown(c) for c in candidates])
        if problem:
            return f"row {item}: {problem}"
        chosen = candidates.index(row["prediction"]) if row[PARSED_COLUMN] else None
        if [float(x) for x in row["scores"]] != answer_scores(len(candidates), chosen):
            return f"row {item}: scores {list(row['scores'])} are not the one-hot of its parsed answer"
        if row[PARSED_COLUMN]:
            parsed_rows.append(row)
        elif row["correct"] is not False:
            return f"row {item}: correct is {row['correct']} but an unparsed answer is scored wrong"
    return check_sub_vlm_rows([{**r, PARSED_COLUMN: None} for r in parsed_rows], options) if parsed_rows else None


def check_sub_cbm_rows(rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> str | None:
    """sub-cbm: the prediction is the group's concepts whose probability reaches the run's
    threshold (compared in float32, as the run compared them); chance 50%."""
    import numpy as np

    threshold = np.float32(options["threshold"])

    def detected(row: dict[str, Any]) -> set[str]:
        return {c for c, p in zip(row["candidates"], row["scores"]) if np.float32(p) >= threshold}

    return _check_sides(rows, detected, lambda row: 0.5)


# ----------------------------------------------------------------------------------- table
def _s_minus_options() -> tuple[Option, ...]:
    from conceptforge.cub import CBM_MIN_CLASS_COUNT
    from conceptforge.loaders.sub.scoring import S_MINUS_RULES

    return (
        Option(
            "s_minus",
            S_MINUS_RULES[0],
            choice(S_MINUS_RULES),
            "S- rule: paper = the bird's class-wise CBM label of the group must not be detected (App. F); "
            "any-original = right only if none of the bird's original attributes of the group is detected",
        ),
        Option(
            "cbm_min_classes",
            CBM_MIN_CLASS_COUNT,
            argtypes.positive_int,
            "CBM label subset for S-: attributes present (class level) in >= N classes (10: Koh et al.'s 112)",
        ),
    )


def _leaderboard(splits, options) -> list[tuple[str, str]]:
    """S+ and S- accuracy on each evaluated split (SUB ships one: ``test``)."""
    return [(metric, split) for split in splits for metric in ("s_plus", "s_minus")]


def tasks() -> list[Task]:
    """The SUB rows of the task table."""
    from conceptforge.filters.vqa.questions import DEFAULT_ANSWER_HINT
    from conceptforge.loaders.sub.protocol import ATTRIBUTE_TEMPLATE, NONE_TEMPLATE

    # Both tasks read the same release (the authors' SUB test split, with CUB for the attribute
    # names) into the same sample columns and report the same leaderboard metrics.
    shared: dict[str, Any] = dict(
        columns=COLUMNS,
        dataset="Jessica-bader/SUB",
        revision="main",
        split="test",
        needs=("cub_dir",),
        leaderboard=_leaderboard,
    )
    return [
        Task(
            "sub-vlm",
            "sub",
            "SUB S+/S- accuracy of a VLM over CUB's within-group attributes + none (SUB paper Table 2): "
            "prompt similarity, the paper's multiple-choice question (generative VLMs), or pair scores",
            (EMBED, CHOOSE, MATCH, ANSWER_TEXT),
            "sub/vlm-within-group",
            run_sub_vlm,
            score_sub,
            **shared,
            release_spec_provides=("cub_dir",),  # a release made from a user's spec carries its vocabulary
            check_rows=check_sub_vlm_rows,
            check_options=check_by_answer,
            protocols=(
                (EMBED, "sub/vlm-within-group: argmax cosine over the group's prompts + none (paper Appendix F)"),
                (CHOOSE, "sub/vlm-choose: the paper's question, options A) … Other, option-letter probabilities"),
                (MATCH, "sub/vlm-match: argmax pair score over the group's prompts + none (ours)"),
                (
                    ANSWER_TEXT,
                    "sub/choose-by-answer: the question, options A. … Other, answered in words, letter parsed",
                ),
            ),
            options=(
                Option(
                    "template",
                    ATTRIBUTE_TEMPLATE,
                    template(allowed={"group", "value"}, required={"value"}),
                    "VLM attribute prompt, with {value} (and {group}) (embed, match)",
                ),
                Option(
                    "none_prompt",
                    NONE_TEMPLATE,
                    text(required=True, name="prompt"),
                    "VLM prompt of the 'none' option (embed, match)",
                ),
                Option(
                    "answer_hint",
                    DEFAULT_ANSWER_HINT,
                    text(multiline=True, name="prompt"),
                    "line after the multiple-choice question (choose; '' = the paper's text only)",
                ),
                by_answer_option("sub/choose-by-answer, the question answered in words, its letter parsed"),
                *_s_minus_options(),
            ),
            breakdowns=breakdowns.SUB,
            metrics=(*S_METRICS, *CHANCE_METRICS, LOW_ALLOWED_MASS, NO_ALLOWED_MASS, UNPARSED_ANSWERS),
        ),
        Task(
            "sub-cbm",
            "sub",
            "SUB S+/S- accuracy of a concept-bottleneck model (SUB paper Table 1)",
            (CONCEPTS,),
            "sub/cbm-threshold",
            run_sub_cbm,
            score_sub_cbm,
            **shared,
            release_spec_provides=("cub_dir",),  # a CBM over the spec's attributes, in its order
            check_rows=check_sub_cbm_rows,
            options=(
                Option(
                    "threshold",
                    0.5,
                    argtypes.open_unit_interval,
                    "a concept is present when its probability (sigmoid(logit) for outputs=logits) >= threshold, "
                    "in (0, 1): a probability never exceeds 1, and 0 would mark every concept present",
                ),
                Option(
                    "outputs",
                    "logits",
                    choice(("logits", "probabilities")),
                    "what the CBM outputs: logits (sigmoid first) or probabilities",
                ),
                Option(
                    "concept_names",
                    "",
                    argtypes.Optional(argtypes.existing_file.as_text(), words=("",), empty=""),
                    "file with one CUB attribute per line, the CBM's output order "
                    "(default: CUB's 312 or the 112-attribute subset, by output size)",
                ),
                *_s_minus_options(),
            ),
            breakdowns=breakdowns.SUB,
            metrics=S_METRICS,
        ),
    ]
