"""Per-sample predictions, ``--from-predictions`` and the resumable per-sample cache, on tiny runs.

Every task of ``conceptforge evaluate`` writes ``<results stem>.samples/<task>.parquet`` (schema in
docs/evaluation-results.md); rescoring that folder without the model must rebuild the results file byte
for byte, and a run that died half way must, when rerun, score only the items the cache lacks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conceptforge.commands import main
from conceptforge.loaders.binding.scoring import adj_noun_error
from tests.evaluation_fixtures import binding_and_sub_argv, compmap_argv

COMMON = {
    "task": "string",
    "item_id": "string",
    "candidates": "list<element: string>",
    "scores": "list<element: double>",
    "prediction": "string",
    "label": "string",
    "correct": "bool",
    "value": "double",
}
GROUPS = {
    "binding-clip": ("dataset", "split", "relation", "swap_kind"),
    "binding-cdsm": ("dataset", "split", "relation", "swap_kind"),
    "sub-vlm": ("attribute_group", "bird", "attribute", "side"),
    "sub-cbm": ("attribute_group", "bird", "attribute", "side"),
    "compmap-cub": ("n_way", "k_shot", "episode"),
    "compmap-mit-states": ("pair", "attr", "obj", "seen"),
}


def _check_samples(folder: Path, results: dict) -> dict[str, list[dict]]:
    """Every task has a parquet file with the contract's columns, unique item ids, and the
    model/dataset revisions in its metadata; returns the rows per task."""
    import pyarrow.parquet as pq

    rows = {}
    for task in results["tasks"]:
        table = pq.read_table(folder / f"{task['task']}.parquet")
        types = {field.name: str(field.type) for field in table.schema}
        assert {name: types.get(name) for name in COMMON} == COMMON, task["task"]
        assert set(GROUPS[task["task"]]) <= set(types), task["task"]
        meta = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
        assert meta["model"] == results["model"]["id"] and meta["model_revision"] == results["model"]["sha"]
        assert meta["dataset_revision"] == task["dataset"]["sha"]
        part = table.to_pylist()
        assert part and len({r["item_id"] for r in part}) == len(part) and {r["task"] for r in part} == {task["task"]}
        rows[task["task"]] = part
    return rows


def _rescore_equals(out: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.json"
    assert (
        main(["evaluate", "--from-predictions", str(out.with_name(out.stem + ".samples")), "--output", str(again)]) == 0
    )
    assert again.read_text() == out.read_text()  # byte for byte: every metric recomputed from the rows
    # The reports differ only in where each links its own charts folder.
    again_md = again.with_suffix(".md").read_text().replace("again.charts", f"{out.stem}.charts")
    assert again_md == out.with_suffix(".md").read_text()


def test_binding_and_sub_samples_and_rescoring(tiny_clip_dir, single_object_dir, sub_dir, fake_cub, tmp_path, capsys):
    argv, out = binding_and_sub_argv(tiny_clip_dir, single_object_dir, sub_dir, fake_cub, tmp_path)
    assert main(argv) == 0
    assert f"samples: {tmp_path / 'run.samples'}/" in capsys.readouterr().out
    results = json.loads(out.read_text())
    rows = _check_samples(tmp_path / "run.samples", results)
    clip, cdsm, sub = results["tasks"]
    # binding: the accuracy of a split is the mean credit of its rows; a row's credit is the share
    # of the top score the true label holds (1/k when k candidates tie at the top)
    gen = [r for r in rows["binding-clip"] if r["split"] == "gen"]
    assert clip["metrics"]["gen_accuracy"]["value"] == pytest.approx(sum(r["value"] for r in gen) / len(gen))
    for r in gen:
        top = max(r["scores"])
        tied = [c for c, s in zip(r["candidates"], r["scores"]) if s >= top - 1e-6 - 1e-5 * abs(top)]
        assert r["value"] == pytest.approx(1 / len(tied) if r["label"] in tied else 0.0)
        assert r["relation"] is None and r["label"] == r["candidates"][r["label_index"]]
    # CDSMs: one row per image, model and seed; mean ± s.e. over the seeds' accuracies
    per_seed = [
        sum(
            r["value"]
            for r in rows["binding-cdsm"]
            if (r["binding_model"], r["seed"], r["split"]) == ("mult", s, "val")
        )
        / len(single_object_rows_of(single_object_dir, "val"))
        for s in (0, 1)
    ]
    mean = sum(per_seed) / 2
    assert cdsm["metrics"]["mult.val_accuracy"]["value"] == pytest.approx(mean)
    assert cdsm["metrics"]["mult.val_accuracy"]["stderr"] == pytest.approx(abs(per_seed[0] - per_seed[1]) / 2)
    # SUB: S+ and S- rows, each 1.0/0.0, and the Appendix F chance per row
    plus = [r for r in rows["sub-vlm"] if r["side"] == "S+"]
    assert sub["metrics"]["s_plus"]["n"] == len(plus) == 8
    assert sub["metrics"]["s_plus"]["value"] == sum(r["value"] for r in plus) / 8
    assert all(
        r["correct"] == (r["prediction"] == r["label"]) and r["chance"] == 1 / len(r["candidates"]) for r in plus
    )
    # every metric says how many samples (or seeds) it is over; binding records the config it read
    assert [m["n"] for m in clip["metrics"].values()] == [
        len([r for r in rows["binding-clip"] if r["split"] == split]) for split in ("train", "val", "gen")
    ]
    assert {m["n"] for m in cdsm["metrics"].values()} == {2}  # two seeds
    assert all(m["n"] is not None for task in results["tasks"] for m in task["metrics"].values())
    assert clip["dataset"]["config"] == cdsm["dataset"]["config"] == "default"  # a one-config folder
    _rescore_equals(out, tmp_path)
    _rescoring_checks_values_and_recomputes_details(out, tmp_path)


def _edit_samples(path: Path, edit) -> None:
    """Rewrite a samples file after ``edit(rows)`` (schema and metadata kept)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    rows = table.to_pylist()
    edit(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)


def _rescoring_checks_values_and_recomputes_details(out: Path, tmp_path: Path) -> None:
    import shutil

    from conceptforge.loaders.binding.scoring import error_breakdown
    from conceptforge.loaders.binding.task_rows import rows_as_split

    # a value its own scores contradict: one line, nothing written
    edited = tmp_path / "edited.samples"
    shutil.copytree(out.with_name(out.stem + ".samples"), edited)
    wrong = {}

    def lie(rows):
        row = next(r for r in rows if r["split"] == "gen" and r["value"] == 0.0)
        row["value"], row["correct"] = 1.0, True
        wrong["id"] = row["item_id"]

    _edit_samples(edited / "binding-clip.parquet", lie)
    target = tmp_path / "lied.json"
    assert main(["evaluate", "--from-predictions", str(edited), "--output", str(target)]) == 2
    assert not target.exists()
    from conceptforge.errors import DataFormatError
    from conceptforge.loaders.harness.rescore import rescore

    with pytest.raises(DataFormatError) as raised:
        rescore(edited)
    assert str(raised.value) == (
        f"{edited / 'binding-clip.parquet'}: row {wrong['id']}: value 1.0 but its scores give the true label a credit "
        "of 0 (the per-sample file was edited or not written by conceptforge evaluate); rescore only files that "
        "evaluate wrote"
    )

    # scores changed consistently (another candidate now on top): the error breakdown follows the rows
    moved = tmp_path / "moved.samples"
    shutil.copytree(out.with_name(out.stem + ".samples"), moved)

    def move(rows):
        for row in [r for r in rows if r["split"] == "gen" and r["value"] == 1.0]:
            others = [j for j in range(len(row["candidates"])) if j != row["label_index"]]
            # a distractor whose error type is not "Both" where there is one, so that the new
            # breakdown cannot equal the stale one by chance
            other = next((j for j in others if adj_noun_error(row["label"], row["candidates"][j]) != "Both"), others[0])
            row["scores"] = [s + (10.0 if j == other else 0.0) for j, s in enumerate(row["scores"])]
            row["value"], row["correct"], row["prediction"] = 0.0, False, row["candidates"][other]

    _edit_samples(moved / "binding-clip.parquet", move)
    rescored = tmp_path / "moved.json"
    assert main(["evaluate", "--from-predictions", str(moved), "--output", str(rescored)]) == 0
    clip = json.loads(rescored.read_text())["tasks"][0]
    original = json.loads(out.read_text())["tasks"][0]
    import pyarrow.parquet as pq

    gen = [r for r in pq.read_table(moved / "binding-clip.parquet").to_pylist() if r["split"] == "gen"]
    split, scores = rows_as_split(gen, "gen")
    expected = error_breakdown(scores, split)
    assert clip["metrics"]["gen_accuracy"]["value"] == 0.0
    assert {k: v[0] for k, v in clip["details"]["error_breakdown"].items()} == pytest.approx(expected)
    assert clip["details"]["error_breakdown"] != original["details"]["error_breakdown"]  # not the stale one


def single_object_rows_of(dataset: Path, split: str) -> list:
    from conceptforge.loaders.binding.data import load_binding

    return load_binding(str(dataset))[split].labels


def test_compmap_samples_and_rescoring_with_the_authors_curve(tiny_clip_dir, tmp_path, capsys):
    mit_options = ("compmap-mit-states.epochs=30", "compmap-mit-states.lr=0.05", "compmap-mit-states.world=both")
    argv, out, mit = compmap_argv(tiny_clip_dir, tmp_path, *mit_options)
    assert main(argv) == 0
    results = json.loads(out.read_text())
    rows = _check_samples(tmp_path / "compmap.samples", results)
    cub_task, mit_task = results["tasks"]
    episodes = [r["value"] for r in rows["compmap-cub"] if (r["setting"], r["row"]) == ("3-way-1-shot", "prim")]
    assert len(episodes) == 5 and cub_task["metrics"]["3-way-1-shot.prim"]["value"] == pytest.approx(sum(episodes) / 5)
    full = [r for r in rows["compmap-cub"] if (r["setting"], r["row"]) == ("full-shot", "oracle")]
    assert cub_task["metrics"]["full-shot.oracle"]["value"] == sum(r["correct"] for r in full) / len(full)
    assert cub_task["details"]["results"]["settings"]["full-shot"]["oracle"]["accuracy"] == pytest.approx(
        100 * cub_task["metrics"]["full-shot.oracle"]["value"]
    )
    assert {r["world"] for r in rows["compmap-mit-states"]} == {"closed", "open"}
    assert all(r["seen"] == (r["pair"] in seen_pairs(mit)) for r in rows["compmap-mit-states"])
    _rescore_equals(out, tmp_path)
    # the CZSL curve is a variant of the rows: rescored under the authors' curve without the model
    authors = tmp_path / "authors.json"

    def rescore(output: Path, option: str) -> int:
        samples = str(tmp_path / "compmap.samples")
        return main(["evaluate", "--from-predictions", samples, "--output", str(output), "--task-option", option])

    assert rescore(authors, "compmap-mit-states.czsl_curve=authors") == 0
    (_, rescored) = json.loads(authors.read_text())["tasks"]
    assert rescored["options"]["czsl_curve"] == "authors" and "rescored with czsl_curve=authors" in rescored["variant"]
    own = tmp_path / "own.json"  # the compmap command under the authors' curve, same settings
    assert (
        main(
            [
                "evaluate",
                "compmap",
                "--benchmark",
                "mit-states",
                "--model",
                str(tiny_clip_dir),
                "--data-dir",
                str(mit),
                "--cache-dir",
                str(tmp_path / "cache"),
                "--epochs",
                "30",
                "--dim",
                "8",
                "--lr",
                "0.05",
                "--targets",
                "primitives",
                "--world",
                "both",
                "--czsl-curve",
                "authors",
                "--output",
                str(own),
            ]
        )
        == 0
    )
    (direct,) = json.loads(own.read_text())["tasks"]
    assert rescored["metrics"] == direct["metrics"]
    # a variant that changes what the model computed needs a new run
    assert rescore(tmp_path / "x.json", "compmap-cub.protocol=episodic") == 2
    # FP19: a typo is an unknown option with the closest name, not "changes what the model computed"
    capsys.readouterr()
    assert rescore(tmp_path / "typo.json", "compmap-mit-states.czsl_curv=authors") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        "error: task compmap-mit-states has no option 'czsl_curv' (did you mean 'czsl_curve'? options: "
    )
    assert not (tmp_path / "typo.json").exists()


def seen_pairs(mit: Path) -> set[str]:
    from conceptforge.loaders.compmap.mit_states import load_mit_states

    return {f"{a} {o}" for a, o in load_mit_states(mit).seen_pairs}


def test_a_crashed_run_resumes_scoring_only_what_is_missing(tiny_clip_dir, single_object_dir, tmp_path, monkeypatch):
    """binding-clip dies after two chunks of 4 items; the rerun (another batch size) scores only
    the rest, and reports what a clean run reports."""
    from conceptforge.loaders.binding import evaluate as binding_evaluate
    from conceptforge.loaders.harness.model_ref import resolve_model
    from conceptforge.loaders.harness.registry import select_tasks
    from conceptforge.loaders.harness.runner import RunSettings, run_tasks

    total = sum(
        len(labels) for labels in (single_object_rows_of(single_object_dir, s) for s in ("train", "val", "gen"))
    )
    assert total > 8
    model = resolve_model(str(tiny_clip_dir))
    calls = []
    original = binding_evaluate.zero_shot_scores

    def dies_on_the_third_chunk(embedder, split, **kwargs):
        calls.append(len(split))
        if len(calls) == 3:
            raise KeyboardInterrupt("simulated crash")
        return original(embedder, split, **kwargs)

    monkeypatch.setattr(binding_evaluate, "zero_shot_scores", dies_on_the_third_chunk)
    cache = str(tmp_path / "cache")
    with pytest.raises(KeyboardInterrupt):
        run_tasks(
            model,
            select_tasks(f"binding-clip:{single_object_dir}"),
            RunSettings(device="cpu", batch_size=4, cache_dir=cache),
        )
    assert sum(calls[:2]) == 8
    monkeypatch.setattr(binding_evaluate, "zero_shot_scores", original)
    resumed = run_tasks(
        model,
        select_tasks(f"binding-clip:{single_object_dir}"),
        RunSettings(device="cpu", batch_size=16, cache_dir=cache),
    )
    assert resumed.scored["binding-clip"] == total - 8
    again = run_tasks(
        model,
        select_tasks(f"binding-clip:{single_object_dir}"),
        RunSettings(device="cpu", batch_size=3, cache_dir=cache),
    )
    assert again.scored["binding-clip"] == 0  # everything from the cache
    clean = run_tasks(
        model,
        select_tasks(f"binding-clip:{single_object_dir}"),
        RunSettings(device="cpu", batch_size=5, cache_dir=str(tmp_path / "fresh")),
    )
    assert clean.scored["binding-clip"] == total
    assert resumed.tasks[0]["metrics"] == clean.tasks[0]["metrics"] == again.tasks[0]["metrics"]
    resumed_rows, clean_rows = resumed.samples["binding-clip"][0], clean.samples["binding-clip"][0]
    assert [(r["item_id"], r["prediction"], r["value"]) for r in resumed_rows] == [
        (r["item_id"], r["prediction"], r["value"]) for r in clean_rows
    ]
    for a, b in zip(resumed_rows, clean_rows):  # image batches of another size round differently in the last bits
        assert a["scores"] == pytest.approx(b["scores"], abs=1e-5)
    # another option (prompt) is another key: nothing reused
    other = run_tasks(
        model,
        select_tasks(f"binding-clip:{single_object_dir}", options=["binding-clip.template=a {label}"]),
        RunSettings(device="cpu", batch_size=4, cache_dir=cache),
    )
    assert other.scored["binding-clip"] == total


def test_samples_folder_is_never_a_users_folder(tiny_clip_dir, single_object_dir, tmp_path, capsys):
    mine = tmp_path / "run.samples"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    argv = [
        "evaluate",
        "--model",
        str(tiny_clip_dir),
        "--tasks",
        f"binding-clip:{single_object_dir}",
        "--device",
        "cpu",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--output",
        str(tmp_path / "run.json"),
    ]
    assert main(argv) == 2
    assert "was not written by conceptforge evaluate" in capsys.readouterr().err
    assert (mine / "notes.txt").read_text() == "mine" and not (tmp_path / "run.json").exists()
    assert main(argv + ["--no-samples"]) == 0 and (tmp_path / "run.json").is_file()
    assert main(["evaluate", "--from-predictions", str(tmp_path / "none"), "--output", str(tmp_path / "x.json")]) == 2


def test_a_users_cbm_samples_and_rescoring(tmp_path, sub_dir, fake_cub, monkeypatch):
    """sub-cbm rows: the CBM's probabilities for the S+ group's attributes, what it detected, and
    S+/S- verdicts (by hand in test_evaluate_tasks: S+ 4/8, S- 6/8 under any-original)."""
    from conceptforge.cub import load_cub
    from tests.harness.test_evaluate_tasks import CBM_MODULE

    names = list(load_cub(fake_cub, need="votes").attributes)
    present = ["has_crown_color::red", "has_bill_shape::needle", "has_crown_color::blue"]
    (tmp_path / "my_cbms.py").write_text(CBM_MODULE.format(present=present, names=names))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "cbm.json"
    assert (
        main(
            [
                "evaluate",
                "--model",
                "my_cbms:make",
                "--tasks",
                f"sub-cbm:{sub_dir}",
                "--cub-dir",
                str(fake_cub),
                "--task-option",
                "sub-cbm.s_minus=any-original",
                "--batch-size",
                "3",
                "--device",
                "cpu",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    (task,) = json.loads(out.read_text())["tasks"]
    assert (task["metrics"]["s_plus"]["value"], task["metrics"]["s_minus"]["value"]) == (0.5, 0.75)
    # the rule that ran, named as it ran: the threshold applies to sigmoid(logit), not to the logits
    assert task["variant"].startswith("sigmoid(logit) >= 0.5;") and task["details"]["settings"]["rule"] == (
        "sigmoid(logit) >= 0.5"
    )
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "cbm.samples" / "sub-cbm.parquet").to_pylist()
    crown = next(r for r in rows if r["side"] == "S+" and r["attribute"] == "has_crown_color::red")
    assert crown["correct"] and set(crown["prediction"].split(";")) == {"has_crown_color::red", "has_crown_color::blue"}
    assert len(crown["candidates"]) == len(crown["scores"]) and all(
        s in (0.0, 1.0) or 0 < s < 1 for s in crown["scores"]
    )
    _rescore_equals(out, tmp_path)
