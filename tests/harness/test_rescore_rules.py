"""``--from-predictions`` refuses rows that contradict themselves or the schema, for every task kind.

Each samples folder here is written by hand, with the writer ``conceptforge evaluate`` uses
(``write_run_samples``), from rows whose numbers are worked out below (which candidate tops its
scores, which verdict a prediction and label give). The clean folder rescores (exit 0, the
metric by hand); each edit — a verdict that its prediction and label contradict, a repeated
``item_id``, a file without the rows its main metric needs, a value its scores contradict — is one
``error:`` line naming the file, the row and the rule, exit 2, and no results file. Before these
rules, every such edit rescored with exit 0 (S+ 37.50 for 25.00, a row counted twice).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from conceptforge.commands import main
from conceptforge.loaders.harness.registry import get_task
from conceptforge.loaders.harness.runner import RESULTS_FORMAT
from conceptforge.loaders.harness.samples import write_run_samples


def _folder(directory: Path, task_name: str, rows: list[dict], main_metric: str, options: dict | None = None) -> Path:
    """A samples folder of one task, as a run writes it (its record and the run's header)."""
    import conceptforge

    task = get_task(task_name)
    options = {**task.option_defaults(), **(options or {})}
    # a run writes every column of its task, null where its protocol has none (allowed_mass of an
    # embedding run, the by-answer columns of a probability run): so do the hand-written rows
    rows = [{**{name: None for name, _ in task.columns}, **row} for row in rows]
    record = {
        "task": task.name,
        "benchmark": task.benchmark,
        "protocol": task.protocol,
        "adapter": "clip",
        "variant": "hand-written rows",
        "dataset": {"repo": "org/data", "revision": "v1", "sha": "a" * 40, "source": "hub", "config": None},
        "options": {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()},
        "seeds": [],
        "main_metric": main_metric,
        "metrics": {},
        "details": {},
        "table": "",
        "seconds": 1.0,
    }
    payload = {
        "format": RESULTS_FORMAT,
        "conceptforge_version": conceptforge.__version__,
        "created": "2026-11-28T00:00:00Z",
        "model": {"id": "org/model", "kind": "clip", "source": "hub", "revision": None, "sha": "b" * 40},
        "settings": {"device": "cpu", "dtype": None, "batch_size": 8},
        "tasks": [record],
        "skipped": [],
    }
    write_run_samples(directory, payload, {task.name: (rows, task.columns)})
    return directory


def _rescore(folder: Path, out: Path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(["evaluate", "--from-predictions", str(folder), "--output", str(out)])
    return status, err.getvalue()


def _refused(tmp_path: Path, name: str, task: str, rows: list[dict], main_metric: str, *expected: str, **kw) -> None:
    folder = _folder(tmp_path / f"{name}.samples", task, rows, main_metric, **kw)
    out = tmp_path / f"{name}.json"
    status, err = _rescore(folder, out)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith(f"error: {folder / (task + '.parquet')}: "), err
    for text in expected:
        assert text in lines[0], lines[0]
    assert not out.exists() and not out.with_suffix(".md").exists()


def _accepted(tmp_path: Path, name: str, task: str, rows: list[dict], main_metric: str, **kw) -> dict:
    folder = _folder(tmp_path / f"{name}.samples", task, rows, main_metric, **kw)
    status, err = _rescore(folder, tmp_path / f"{name}.json")
    assert status == 0, err
    return json.loads((tmp_path / f"{name}.json").read_text())["tasks"][0]["metrics"]


def _edited(rows: list[dict], index: int, **changes) -> list[dict]:
    return [({**row, **changes} if i == index else dict(row)) for i, row in enumerate(rows)]


# ----------------------------------------------------------------------------------- SUB
GROUP = ["has_crown_color::red", "has_crown_color::blue", "has_crown_color::black", "none"]


def _sub_vlm_rows() -> list[dict]:
    """8 images whose S+ attribute is red; the model's top candidate is red for images 0 and 1
    only (S+ = 2/8 = 25.00), blue for 2-5, none for 6-7. Chance 1/4 (three attributes + none)."""
    rows = []
    for i in range(8):
        top = 0 if i < 2 else 1 if i < 6 else 3
        scores = [0.1, 0.2, 0.05, 0.15]
        scores[top] = 0.9
        predicted = GROUP[top]
        rows.append(
            {
                "task": "sub-vlm",
                "item_id": f"{i}/S+",
                "candidates": GROUP,
                "scores": scores,
                "prediction": predicted,
                "label": "has_crown_color::red",
                "correct": predicted == "has_crown_color::red",
                "value": float(predicted == "has_crown_color::red"),
                "attribute_group": "has_crown_color",
                "bird": f"bird{i}",
                "attribute": "has_crown_color::red",
                "side": "S+",
                "chance": 0.25,
            }
        )
    return rows


def test_sub_rows_are_checked_against_their_prediction_and_label(tmp_path):
    rows = _sub_vlm_rows()
    assert _accepted(tmp_path, "clean", "sub-vlm", rows, "s_plus")["s_plus"]["value"] == 0.25
    # the row: image 2 chose blue, but says it was right (S+ would read 3/8 = 37.50)
    lied = _edited(rows, 2, correct=True, value=1.0)
    _refused(tmp_path, "lied", "sub-vlm", lied, "s_plus", "row 2/S+: correct is True", "label 'has_crown_color::red'")
    # a prediction its scores do not select
    moved = _edited(rows, 3, prediction="has_crown_color::red", correct=True, value=1.0)
    _refused(tmp_path, "moved", "sub-vlm", moved, "s_plus", "row 3/S+: prediction 'has_crown_color::red'")
    _refused(tmp_path, "twice", "sub-vlm", [*rows, rows[0]], "s_plus", "row 0/S+: item_id appears twice")
    _refused(tmp_path, "chance", "sub-vlm", _edited(rows, 4, chance=0.5), "s_plus", "row 4/S+: chance 0.5")


def test_sub_cbm_rows_follow_the_runs_threshold(tmp_path):
    """A CBM row: the group's probabilities; detected = those >= the run's threshold (0.5)."""
    probabilities = [0.7, 0.6, 0.1]  # red and blue detected: S+ right, S- (label blue) wrong
    base = {
        "task": "sub-cbm",
        "candidates": GROUP[:3],
        "scores": probabilities,
        "prediction": "has_crown_color::red;has_crown_color::blue",
        "attribute_group": "has_crown_color",
        "bird": "bird0",
        "attribute": "has_crown_color::red",
        "chance": 0.5,
    }
    plus = {**base, "item_id": "0/S+", "label": "has_crown_color::red", "correct": True, "value": 1.0, "side": "S+"}
    minus = {**base, "item_id": "0/S-", "label": "has_crown_color::blue", "correct": False, "value": 0.0, "side": "S-"}
    metrics = _accepted(tmp_path, "cbm", "sub-cbm", [plus, minus], "s_plus")
    assert (metrics["s_plus"]["value"], metrics["s_minus"]["value"]) == (1.0, 0.0)
    # the same rows under threshold 0.65: only red is detected, so the prediction contradicts them
    _refused(tmp_path, "cbm65", "sub-cbm", [plus, minus], "s_plus", "row 0/S+: prediction", options={"threshold": 0.65})
    _refused(tmp_path, "cbm-minus", "sub-cbm", [plus, {**minus, "correct": True, "value": 1.0}], "s_plus", "row 0/S-")


# ----------------------------------------------------------------------------------- binding
def _binding_rows(task: str = "binding-clip", prefix: str = "", extra: dict | None = None) -> list[dict]:
    """Two images per split; candidates in stored order, the true one at ``label_index`` 0.
    Scores put the true label on top for the first image of each split and a distractor for the
    second (accuracy 1/2 per split); ties are not used, so each credit is 1 or 0."""
    candidates = ["red cube", "blue cube", "red sphere", "blue sphere", "green cube"]
    rows = []
    for split in ("train", "val", "gen"):
        for i, top in enumerate((0, 2)):
            scores = [0.1, 0.2, 0.3, 0.15, 0.05]
            scores[top] = 0.9
            rows.append(
                {
                    "task": task,
                    "item_id": f"{prefix}{split}/{i}",
                    "candidates": candidates,
                    "scores": scores,
                    "prediction": candidates[top],
                    "label": "red cube",
                    "correct": top == 0,
                    "value": float(top == 0),
                    "dataset": "org/data",
                    "split": split,
                    "relation": None,
                    "swap_kind": "random",
                    "label_index": 0,
                    "candidate_kinds": ["true", "random", "random", "random", "random"],
                    **(extra or {}),
                }
            )
    return rows


def test_binding_rows_and_the_splits_the_main_metric_needs(tmp_path):
    rows = _binding_rows()
    assert _accepted(tmp_path, "clean", "binding-clip", rows, "gen_accuracy")["gen_accuracy"]["value"] == 0.5
    # the file: no gen rows, yet the run's table and main metric are the gen split's
    no_gen = [r for r in rows if r["split"] != "gen"]
    _refused(tmp_path, "no-gen", "binding-clip", no_gen, "gen_accuracy", "no row gives the run's main metric")
    _refused(tmp_path, "twice", "binding-clip", [*rows, rows[-1]], "gen_accuracy", "row gen/1: item_id appears twice")
    wrong_label = _edited(rows, 4, label="green cube")
    _refused(tmp_path, "label", "binding-clip", wrong_label, "gen_accuracy", "row gen/0: label 'green cube'")
    odd_split = _edited(rows, 0, split="test")
    _refused(tmp_path, "split", "binding-clip", odd_split, "gen_accuracy", "row train/0: split 'test'")


def test_binding_by_answer_rows_are_checked_against_their_answers(tmp_path):
    """binding/choose-by-answer rows: the first image answered "A" (the true caption, one-hot
    scores), the second "I am not sure" (unparsed: wrong, its scores 1 on every distractor)."""
    rows = []
    for row in _binding_rows():
        first = row["item_id"].endswith("/0")
        answer = "A" if first else "I am not sure"
        rows.append(
            {
                **row,
                "scores": [1.0, 0.0, 0.0, 0.0, 0.0] if first else [0.0, 1.0, 1.0, 1.0, 1.0],
                "prediction": "red cube" if first else "(unparsed)",
                "answer": answer,
                "parsed_answer": "A" if first else None,
                "parsed": first,
            }
        )
    metrics = _accepted(tmp_path, "clean", "binding-clip", rows, "gen_accuracy")
    assert metrics["gen_accuracy"]["value"] == 0.5
    assert (metrics["unparsed_answers"]["value"], metrics["unparsed_answers"]["n"]) == (3, 6)
    scored_right = _edited(rows, 5, correct=True, value=1.0)
    _refused(tmp_path, "unparsed-right", "binding-clip", scored_right, "gen_accuracy", "row gen/1", "not parsed")
    other_letter = _edited(rows, 4, parsed_answer="B")
    _refused(tmp_path, "letter", "binding-clip", other_letter, "gen_accuracy", "row gen/0", "the parser reads 'A'")


def test_binding_cdsm_rows_cover_every_model_and_seed_of_the_run(tmp_path):
    options = {"models": ("add",), "seeds": (0, 1)}
    rows = [
        row
        for seed in (0, 1)
        for row in _binding_rows("binding-cdsm", f"add/seed{seed}/", {"binding_model": "add", "seed": seed})
    ]
    metrics = _accepted(tmp_path, "cdsm", "binding-cdsm", rows, "add.gen_accuracy", options=options)
    assert (metrics["add.gen_accuracy"]["value"], metrics["add.gen_accuracy"]["stderr"]) == (0.5, 0.0)
    # seed 1's gen rows lost one image: that seed's accuracy would be over another set of images
    short = [r for r in rows if r["item_id"] != "add/seed1/gen/1"]
    _refused(
        tmp_path, "short", "binding-cdsm", short, "add.gen_accuracy", "model add seed 1: split gen", options=options
    )
    one_seed = [r for r in rows if r["seed"] == 0]
    _refused(tmp_path, "seed", "binding-cdsm", one_seed, "add.gen_accuracy", "seed 1", options=options)


# ----------------------------------------------------------------------------------- compmap
def _cub_rows() -> list[dict]:
    """A 2-way 1-shot setting of 2 episodes per row, and two full-shot test images per row
    (the first right, the second wrong)."""
    rows = []
    for row in ("prim", "oracle", "interv_full"):
        for episode, share in enumerate((0.5, 1.0)):
            rows.append(
                {
                    "task": "compmap-cub",
                    "item_id": f"2-way-1-shot/{row}/{episode}",
                    "candidates": [],
                    "scores": [],
                    "prediction": "",
                    "label": "",
                    "correct": None,
                    "value": share,
                    "n_way": 2,
                    "k_shot": 1,
                    "episode": episode,
                    "setting": "2-way-1-shot",
                    "row": row,
                    "classes": ["a", "b"],
                }
            )
        for image, guess in enumerate(("Albatross", "Tern")):
            rows.append(
                {
                    "task": "compmap-cub",
                    "item_id": f"full-shot/{row}/{image}",
                    "candidates": [],
                    "scores": [],
                    "prediction": guess,
                    "label": "Albatross",
                    "correct": guess == "Albatross",
                    "value": float(guess == "Albatross"),
                    "n_way": 200,
                    "k_shot": None,
                    "episode": 0,
                    "setting": "full-shot",
                    "row": row,
                    "classes": [],
                }
            )
    return rows


def test_compmap_cub_rows(tmp_path):
    rows = _cub_rows()
    metrics = _accepted(tmp_path, "cub", "compmap-cub", rows, "2-way-1-shot.prim")
    assert (metrics["2-way-1-shot.prim"]["value"], metrics["full-shot.oracle"]["value"]) == (0.75, 0.5)
    tern = next(i for i, r in enumerate(rows) if r["prediction"] == "Tern")
    lied = _edited(rows, tern, correct=True, value=1.0)
    _refused(tmp_path, "lied", "compmap-cub", lied, "2-way-1-shot.prim", "row full-shot/prim/1: correct is True")
    _refused(tmp_path, "twice", "compmap-cub", [*rows, rows[0]], "2-way-1-shot.prim", "item_id appears twice")
    no_oracle = [r for r in rows if not (r["setting"] == "2-way-1-shot" and r["row"] == "oracle")]
    _refused(
        tmp_path, "rows", "compmap-cub", no_oracle, "2-way-1-shot.prim", "setting 2-way-1-shot: none of row oracle"
    )


def _mit_rows() -> list[dict]:
    """Four test images in the closed world, per row: a seen pair (red apple) and an unseen one
    (old apple) scored; the label's pair tops the scores for images 0 and 2 only."""
    rows = []
    for row in ("prim", "oracle", "interv_full"):
        for i, (label, seen_score, unseen_score) in enumerate(
            [("red apple", 0.9, 0.2), ("red apple", 0.3, 0.8), ("old apple", 0.1, 0.7), ("old apple", 0.9, 0.4)]
        ):
            top = "red apple" if seen_score >= unseen_score else "old apple"
            rows.append(
                {
                    "task": "compmap-mit-states",
                    "item_id": f"closed/{row}/{i}",
                    "candidates": ["red apple", "old apple"],
                    "scores": [seen_score, unseen_score],
                    "prediction": top,
                    "label": label,
                    "correct": top == label,
                    "value": float(top == label),
                    "pair": label,
                    "attr": label.split()[0],
                    "obj": "apple",
                    "seen": label == "red apple",
                    "world": "closed",
                    "row": row,
                    "seen_top": [seen_score],
                    "unseen_top": [unseen_score],
                    "gt_score": seen_score if label == "red apple" else unseen_score,
                }
            )
    return rows


def test_compmap_mit_states_rows(tmp_path):
    rows = _mit_rows()
    _accepted(tmp_path, "mit", "compmap-mit-states", rows, "closed.prim.auc")
    flipped = _edited(rows, 1, prediction="red apple", correct=True, value=1.0)
    _refused(tmp_path, "top", "compmap-mit-states", flipped, "closed.prim.auc", "row closed/prim/1: prediction 'red")
    _refused(tmp_path, "twice", "compmap-mit-states", [*rows, rows[5]], "closed.prim.auc", "row closed/oracle/1")
    relabelled = _edited(rows, 0, label="old apple", correct=False, value=0.0)
    _refused(tmp_path, "pair", "compmap-mit-states", relabelled, "closed.prim.auc", "is not its pair 'red apple'")


# ----------------------------------------------------------------------------------- conceptbed
def _conceptbed_rows() -> list[dict]:
    """Two real images of concept 'cat' (style oracle scores 0.8 and 0.6: reference 0.7) and two
    generated ones (0.5 and 0.9): CCD terms 0.2 and -0.2, so the learner's CCD is 0."""

    def row(source: str, i: int, score: float, right: bool, value: float | None) -> dict:
        return {
            "task": "conceptbed-ccd",
            "item_id": f"{source}/style/{i}",
            "candidates": ["cat"],
            "scores": [score],
            "prediction": "cat" if right else "",
            "label": "cat",
            "correct": None,
            "value": value,
            "concept": "cat",
            "concept_category": "style",
            "source": source,
            "oracle_task": "style",
            "categories": [],
            "question": "",
            "record_id": str(i),
            "max_prob": max(score, 0.5),
            "oracle_correct": right,
        }

    return [
        row("original", 0, 0.8, True, 0.7 - 0.8),
        row("original", 1, 0.6, True, 0.7 - 0.6),
        row("learner", 0, 0.5, True, 0.7 - 0.5),
        row("learner", 1, 0.9, True, 0.7 - 0.9),
    ]


def test_conceptbed_rows(tmp_path):
    rows = _conceptbed_rows()
    metrics = _accepted(tmp_path, "ccd", "conceptbed-ccd", rows, "style.ccd")
    assert metrics["style.ccd"]["value"] == pytest.approx(0.0, abs=1e-12)
    edited = _edited(rows, 2, value=0.5)  # CCD would read 0.15
    _refused(tmp_path, "value", "conceptbed-ccd", edited, "style.ccd", "row learner/style/0: value 0.5")
    _refused(tmp_path, "twice", "conceptbed-ccd", [*rows, rows[3]], "style.ccd", "item_id appears twice")
    wrong = _edited(rows, 3, prediction="")
    _refused(tmp_path, "pred", "conceptbed-ccd", wrong, "style.ccd", "oracle_correct is True")


def test_every_task_has_its_own_row_rules():
    """A task added tomorrow declares how its rows are checked (``Task.check_rows``)."""
    from conceptforge.loaders.harness.registry import all_tasks

    unchecked: list[str] = [t.name for t in all_tasks().values() if not isinstance(t.check_rows, Callable)]
    assert unchecked == []
