"""filter_sub end to end on the tiny LLaVA: scores cached per image, resume, output loads."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from datasets import load_dataset

from conceptforge import ItemStore, ShardSpec
from conceptforge.cub import load_attributes
from conceptforge.filters.dataset_io import decode_image
from conceptforge.filters.sub.decision import FilterParams
from conceptforge.filters.sub.pipeline import (
    assemble_filtered,
    open_candidates,
    score_candidates,
)
from conceptforge.filters.vqa.questions import OTHER, QuestionBuilder
from conceptforge.output import WORK_DIR
from conceptforge.testing.sub_inputs import candidate_rows, make_candidates_dir
from tests.filters.filter_helpers import filter_sub_args

REPO = Path(__file__).resolve().parents[2]


def _pairs_the_model_accepts(scorer, mini_cub):
    """Two pairs whose S+ is what the (random) tiny model answers, and one whose S+ it never picks.

    A random tiny VLM answers from the text alone, so its answer per group is stable across images.
    """
    questions = QuestionBuilder(load_attributes(mini_cub).groups)
    probe = [decode_image(r["image"]) for r in candidate_rows([("Probe", "has_crown_color::black")], 1)]
    answers = {
        g: scorer.score(probe, [questions(g)])[0].answer
        for g in ("has_crown_color", "has_tail_pattern", "has_bill_shape")
    }
    assert OTHER not in (answers["has_crown_color"], answers["has_tail_pattern"])
    wrong = next(v for v in questions("has_bill_shape").options[:-1] if v != answers["has_bill_shape"])
    return [
        ("Blue_Jay", f"has_crown_color::{answers['has_crown_color']}"),
        ("Cardinal", f"has_bill_shape::{wrong}"),
        ("Cardinal", f"has_tail_pattern::{answers['has_tail_pattern']}"),
    ]


class CountingScorer:
    def __init__(self, scorer):
        self.scorer, self.images = scorer, 0

    def __getattr__(self, name):
        return getattr(self.scorer, name)

    def score(self, images, questions, **kwargs):
        self.images += len(images)
        return self.scorer.score(images, questions, **kwargs)


def test_scores_are_cached_and_resume_does_not_rescore(
    tiny_scorer, mini_cub, candidates_factory, tmp_path, monkeypatch
):
    pairs = _pairs_the_model_accepts(tiny_scorer, mini_cub)
    corrupt = ["Blue_Jay__crown_color-" + pairs[0][1].split("::")[1] + "__0002"]
    cand_dir = candidates_factory(pairs=pairs, per_pair=10, corrupt=corrupt)
    candidates = open_candidates(cand_dir)
    questions = QuestionBuilder(load_attributes(mini_cub).groups)
    store = ItemStore(tmp_path / "out" / WORK_DIR)
    counting = CountingScorer(tiny_scorer)
    import conceptforge.filters.sub.pipeline as pipeline

    monkeypatch.setattr(pipeline, "VQAScorer", CountingScorer)  # isinstance check in score_candidates
    # chunks of 5 candidates: shard 0 of 2 scores chunks 0, 2, 4
    first = score_candidates(
        candidates, store, counting, questions, shard=ShardSpec(2, 0), batch_size=4, progress=False, chunk_size=5
    )
    assert first == {"total": 15, "skipped": 0, "scored": 14, "unreadable": 1}
    second = score_candidates(
        candidates, store, counting, questions, shard=ShardSpec(2, 1), batch_size=4, progress=False, chunk_size=5
    )
    assert second["scored"] == 15 and counting.images == 29
    again = score_candidates(candidates, store, counting, questions, batch_size=4, progress=False, chunk_size=5)
    assert again == {"total": 30, "skipped": 30, "scored": 0, "unreadable": 0} and counting.images == 29

    stats = assemble_filtered(
        candidates,
        store,
        tmp_path / "out",
        params=FilterParams(keep_fraction=0.3),
        license="cc-by-nc-4.0",
        provenance={"test": True},
    )
    assert stats["totals"]["unreadable"] == 1
    assert stats["totals"]["pairs_dropped"] >= 1  # the pair whose S+ the model never answers
    ds = load_dataset(str(tmp_path / "out"), split="test")
    assert ds.num_rows == stats["totals"]["kept"] == 6  # 3 of 10 for each of the two accepted pairs
    assert corrupt[0] not in ds["item_id"]
    row = ds[0]
    assert row["vqa_answer"] == row["value"] and row["vqa_options"][-1] == OTHER
    assert sum(row["vqa_probs"]) == pytest.approx(1.0, abs=1e-5)
    assert row["vqa_splus_prob"] == pytest.approx(row["vqa_probs"][row["vqa_options"].index(row["value"])], rel=1e-6)
    for bird, attribute in [pairs[0], pairs[2]]:
        kept = ds.filter(lambda r, bird=bird, attribute=attribute: r["bird"] == bird and r["attribute"] == attribute)
        assert sorted(kept["rank"]) == [0, 1, 2]
        ordered = sorted(zip(kept["rank"], kept["vqa_splus_prob"]))
        assert [p for _, p in ordered] == sorted((p for _, p in ordered), reverse=True)
    card = (tmp_path / "out" / "README.md").read_text()
    assert "## Filter statistics" in card and '"pairs_dropped"' in card and "license: cc-by-nc-4.0" in card
    assert (tmp_path / "out" / "grid.png").stat().st_size > 0


def test_script_end_to_end_with_resume(tiny_vlm, tiny_scorer, mini_cub, candidates_factory, tmp_path):
    cand_dir = candidates_factory(pairs=_pairs_the_model_accepts(tiny_scorer, mini_cub), per_pair=4)
    out = tmp_path / "sub"
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, str(REPO / "scripts" / "filter_sub.py")]
    cmd += filter_sub_args(cand_dir, out, mini_cub, tiny_vlm, "--keep-fraction", "0.5", "--batch-size", "3")
    cmd += ["--chunk-size", "2"]
    # stopped after 5 images: two chunks of 2 are kept, the third (cut short) is not
    partial = subprocess.run(cmd + ["--max-images", "5"], env=env, capture_output=True, text=True, timeout=300)
    assert partial.returncode == 0, partial.stderr
    assert "scored 4 of 12 candidates" in partial.stdout and not (out / "README.md").exists()
    chunks = out / WORK_DIR / "chunks"
    before = {p.name: p.stat().st_mtime_ns for p in chunks.glob("*.parquet")}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "resuming: 4 of 12 items of this shard already done" in done.stderr
    after = {p.name: p.stat().st_mtime_ns for p in chunks.glob("*.parquet")}
    assert len(before) == 2 and all(after[name] == mtime for name, mtime in before.items()) and len(after) == 6
    assert "kept 4 of 12 images in 2 of 3 pairs" in done.stdout
    ds = load_dataset(str(out), split="test")
    assert ds.num_rows == 4 and set(ds.column_names) >= {"vqa_probs", "vqa_raw_mass", "rank", "removed_attribute"}
    # Resuming with another model is refused instead of mixing scores.
    other = subprocess.run(
        [c if c != str(tiny_vlm) else str(tmp_path / "other") for c in cmd],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert other.returncode == 2 and "differs in: vqa_model" in other.stderr


@pytest.mark.parametrize("case", ["missing", "not-candidates", "unknown-group", "no-cub"])
def test_bad_input_is_one_clear_line(case, mini_cub, candidates_factory, tmp_path, capsys):
    args = ["--out", str(tmp_path / "out"), "--cub-dir", str(mini_cub), "--vqa-model", str(tmp_path / "no-model")]
    if case == "missing":
        args += ["--candidates", str(tmp_path / "nowhere")]
        expected = "does not exist"
    elif case == "not-candidates":
        (tmp_path / "ds" / "data").mkdir(parents=True)
        (tmp_path / "ds" / "data" / "test-00000-of-00001.parquet").write_bytes(b"")
        args += ["--candidates", str(tmp_path / "ds")]
        expected = "is not a SUB candidates dataset: no data/candidates-*.parquet (it has split(s): test)"
    elif case == "unknown-group":
        args += ["--candidates", str(candidates_factory(pairs=[("Blue_Jay", "has_fin_color::red")], per_pair=1))]
        expected = "unknown attribute group 'has_fin_color'"
    else:
        (tmp_path / "no-cub").mkdir()  # a folder without CUB's files (a missing one is argparse's error)
        args = [
            "--out",
            str(tmp_path / "out"),
            "--cub-dir",
            str(tmp_path / "no-cub"),
            "--candidates",
            str(candidates_factory(per_pair=1)),
        ]
        expected = "is not a CUB_200_2011 directory"
    from conceptforge.commands import main

    assert main(["filter", "sub", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and expected in err and "\n" not in err
    assert not (tmp_path / "out" / "README.md").exists()


def test_four_filter_shards_each_read_about_a_quarter_of_the_images(
    tiny_scorer, mini_cub, candidates_factory, monkeypatch, tmp_path
):
    """A shard reads only the parquet row groups of its own chunks (bytes counted at the file)."""
    import conceptforge.cards.dataset_dir as dataset_dir

    pairs = _pairs_the_model_accepts(tiny_scorer, mini_cub)
    pairs.append(("Gray_Catbird", pairs[0][1]))
    monkeypatch.setattr(dataset_dir, "ROW_GROUP_SIZE", 10)  # 40 candidates in 4 row groups
    cand_dir = candidates_factory(pairs=pairs, per_pair=10)
    full = open_candidates(cand_dir)
    assert [rows for *_, rows in full.row_groups()] == [10, 10, 10, 10]
    for file_index, rg, _ in full.row_groups():
        full.read_row_group(file_index, rg, ["item_id", "image", "group", "value", "attribute", "bird"])
    everything = full.bytes_read[0]
    questions = QuestionBuilder(load_attributes(mini_cub).groups)
    store = ItemStore(tmp_path / "out" / WORK_DIR)
    shares = []
    for index in range(4):
        candidates = open_candidates(cand_dir)
        counts = score_candidates(
            candidates, store, tiny_scorer, questions, shard=ShardSpec(4, index), batch_size=10, progress=False
        )
        assert counts["total"] == 10 and counts["scored"] == 10
        shares.append(candidates.bytes_read[0] / everything)
    print("filter shard byte shares:", [round(s, 3) for s in shares])
    assert all(0.2 <= share <= 0.35 for share in shares), shares  # ~1/4 each, never the whole set
    assert store.count("scores") == 40


def test_foreign_out_folder_is_refused_untouched(tiny_vlm, mini_cub, candidates_factory, tmp_path, capsys):
    from conceptforge.commands import main
    from tests.foreign_out import assert_refused_untouched, make_foreign_folder

    out = tmp_path / "mine"
    before = make_foreign_folder(out)
    code = main(["filter", "sub", *filter_sub_args(candidates_factory(per_pair=1), out, mini_cub, tiny_vlm)])
    assert_refused_untouched(out, before, code, capsys.readouterr().err)


def test_dry_run_counts_the_candidates_and_prints_gpu_hours(candidates_factory, tmp_path, capsys):
    from conceptforge import gpu_costs
    from conceptforge.commands import main

    candidates = candidates_factory(per_pair=7)  # 2 pairs
    out = tmp_path / "out"
    assert main(["filter", "sub", "--candidates", str(candidates), "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    seconds = gpu_costs.load_table()["workloads"]["filter/vqa-image-1-tile"]["flops"] / 790e12
    assert f"candidates: 14 images in {candidates}" in text
    assert f"  score: 14 x {seconds:.3g} s per image scored = {gpu_costs.format_hours(14 * seconds / 3600)} h" in text
    assert "source: floor from FLOPs on H100, not a measurement" in text and "3x3 + thumbnail" in text
    assert (
        main(
            [
                "filter",
                "sub",
                "--candidates",
                str(candidates),
                "--out",
                str(out),
                "--dry-run",
                "--seconds-per-image",
                "0.5",
            ]
        )
        == 0
    )
    assert "estimated GPU-hours: 0.0019\n" in capsys.readouterr().out  # 14 x 0.5 s
    assert not out.exists()


@pytest.mark.parametrize("where", ["image-page", "footer"])
def test_a_damaged_candidates_parquet_is_one_line_without_retries(
    where, tiny_vlm, mini_cub, candidates_factory, tmp_path, capsys
):
    """Issue 32: random bytes inside the candidates' image pages were retried as bad *items*
    (16 tries) and ended in a 101-line traceback; no retry can mend an input file."""
    import pyarrow.parquet as pq

    from conceptforge.commands import main

    candidates = candidates_factory(per_pair=2)
    path = next((candidates / "data").glob("candidates-*.parquet"))
    data = bytearray(path.read_bytes())
    if where == "image-page":  # inside the compressed data of the first image page
        meta = pq.ParquetFile(path).metadata.row_group(0)
        column = next(
            meta.column(i) for i in range(meta.num_columns) if meta.column(i).path_in_schema.startswith("image")
        )
        start = column.data_page_offset + 32
    else:  # the footer pyarrow reads to find the row groups
        start = len(data) - 200
    data[start : start + 64] = bytes((7 * i + 91) % 256 for i in range(64))
    path.write_bytes(bytes(data))
    assert main(["filter", "sub", *filter_sub_args(candidates, tmp_path / "out", mini_cub, tiny_vlm)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if not line.startswith(("INFO", "WARNING"))]
    assert "Traceback" not in err and "attempt" not in err, err[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(path.name) in lines[0], err[-3000:]
    assert ("is damaged or unreadable" if where == "image-page" else "cannot read") in lines[0]
    assert not (tmp_path / "out" / "README.md").exists()


# Runs `conceptforge filter sub` with the VQA forward pass wrapped: on call number FAIL_AT it raises
# once (a transient error), on call number STOP_AT it writes the flag file and waits to be killed.
_HARNESS = """
import os, sys, time
from pathlib import Path
import conceptforge.filters.vqa.scorer as vqa

flag, stop_at, fail_at = Path(os.environ["HARNESS_FLAG"]), int(os.environ["HARNESS_STOP_AT"]), int(os.environ["HARNESS_FAIL_AT"])
forward, calls = vqa.VQAScorer._next_token_logits, [0]

def wrapped(self, inputs):
    calls[0] += 1
    if calls[0] == fail_at:
        raise RuntimeError("CUDA out of memory (a transient error)")
    if calls[0] == stop_at:
        flag.write_text("inside a batch")
        while True:
            time.sleep(1)
    return forward(self, inputs)

vqa.VQAScorer._next_token_logits = wrapped
from conceptforge.commands import main
sys.exit(main(sys.argv[1:]))
"""


def _harness_command(setup: dict, out: Path) -> list[str]:
    extra = ["--keep-fraction", "0.5", "--batch-size", "2", "--chunk-size", "2"]
    return ["filter", "sub", *filter_sub_args(setup["candidates"], out, setup["cub"], setup["vlm"], *extra)]


def _harness_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}


def _harness_dataset_bytes(out: Path) -> dict[str, bytes]:
    """The dataset's files, and the exact float64 scores behind its ranks (the parquet keeps
    float32, which can hide a difference that flips a near tie in a larger run)."""
    files = {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "data").glob("*.parquet"))}
    scores = {r.item_id: r.metadata for r in ItemStore(out / WORK_DIR).records("scores")}
    return {**files, "scores": repr(sorted(scores.items())).encode()}


def _harness(setup: dict, out: Path, *, stop_at: int = 0, fail_at: int = 0) -> subprocess.Popen:
    flag = out.parent / f"{out.name}.flag"
    extra = {"HARNESS_FLAG": str(flag), "HARNESS_STOP_AT": str(stop_at), "HARNESS_FAIL_AT": str(fail_at)}
    return subprocess.Popen(
        [sys.executable, "-c", _HARNESS, *_harness_command(setup, out)],
        env={**_harness_env(), **extra},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def uninterrupted_filter(tiny_vlm, tiny_scorer, mini_cub, tmp_path_factory) -> dict:
    """15 candidates (3 pairs of 5) filtered by one uninterrupted process: the bytes every
    interrupted run below must give (built once for the module's cases)."""
    root = tmp_path_factory.mktemp("filter-harness")
    pairs = _pairs_the_model_accepts(tiny_scorer, mini_cub)
    setup = {"candidates": make_candidates_dir(root / "candidates", pairs=pairs, per_pair=5)}
    setup |= {"cub": mini_cub, "vlm": tiny_vlm, "root": root}
    done = _harness(setup, root / "reference")
    assert done.wait(timeout=600) == 0, done.stderr.read()
    setup["expected"] = _harness_dataset_bytes(root / "reference")
    assert setup["expected"]
    return setup


# 15 candidates (3 pairs of 5, in pair order), chunks and batches of 2: forward N makes chunk N.
# Forwards 2 and 4 score prompts the uninterrupted run had seen in the chunk before (its fast
# input path) but the resumed process has not: the kills land inside those batches. Both are heavy:
# the default suite's kill-and-resume proof is test_script_end_to_end_with_resume.
@pytest.mark.parametrize(
    ("stop_at", "done_before"),
    [pytest.param(2, 2, marks=pytest.mark.heavy), pytest.param(4, 6, marks=pytest.mark.heavy)],
    ids=["forward-2", "forward-4"],
)
def test_a_kill_inside_a_vqa_batch_resumes_byte_identical(uninterrupted_filter, stop_at, done_before, tmp_path):
    """Issue 32: the resumed dataset must be the bytes of an uninterrupted run, whatever batch
    the run was killed in (batches are a function of the chunk: never spanning chunks, never
    regrouped)."""
    import signal
    import time

    setup = uninterrupted_filter
    out = tmp_path / f"killed-{stop_at}"
    run = _harness(setup, out, stop_at=stop_at)
    flag = out.parent / f"{out.name}.flag"
    while not flag.exists():  # wait for the condition, not for a time
        assert run.poll() is None, run.stderr.read()[-3000:]
        time.sleep(0.05)
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=600)
    resumed = subprocess.run(
        [sys.executable, "-m", "conceptforge", *_harness_command(setup, out)],
        env=_harness_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming: {done_before} of 15 items" in resumed.stderr
    assert _harness_dataset_bytes(out) == setup["expected"]


@pytest.mark.heavy
def test_a_transient_error_inside_a_vqa_batch_gives_the_same_bytes(uninterrupted_filter, tmp_path):
    """Issue 32: a transient error (retried) in a batch changes no byte of the dataset."""
    setup = uninterrupted_filter
    transient = tmp_path / "transient"
    run = _harness(setup, transient, fail_at=2)
    assert run.wait(timeout=600) == 0, run.stderr.read()[-3000:]
    assert _harness_dataset_bytes(transient) == setup["expected"]
