"""Harness exports and ``eval.yaml`` of a SUB release made from a user's spec (issue 46, item 8):
the synthetic mugs release (tests/specs/conftest.py) exports lmms-eval, VLMEvalKit and inspect-ai
tasks with no ``--cub-dir``, over the spec's values, asking about a mug, and every exported item
is exactly what ``sub-vlm`` by-answer asks the model (one prompt, one answer key).

The expected questions, letters and S- letters are worked out by hand from tests/specs/
sub_synthetic.py's spec: Diner_Mug's own values are a white body, a solid surface and a round
handle (the release's ``removed_attribute``); its substitutions are red, dotted and ring.
"""

from __future__ import annotations

import csv
import io
import json
import shutil

import pyarrow.parquet as pq
import pytest

from conceptforge.commands import main
from tests.specs.conftest import MUGS_REPO

#: The spec's groups, values in its order (tests/specs/sub_synthetic.py) and Other.
OPTIONS = {
    "body_colour": ["red", "blue", "white", "black", "Other"],
    "surface_pattern": ["solid", "striped", "dotted", "Other"],
    "handle_shape": ["round", "square", "ring", "Other"],
}
#: Diner_Mug's substituted value's letter (S+) and its own value's letter (S-), by group.
ANSWER = {"body_colour": "A", "surface_pattern": "C", "handle_shape": "C"}
S_MINUS = {"body_colour": ["C"], "surface_pattern": ["A"], "handle_shape": ["A"]}
QUESTION = {
    "body_colour": "What type of body colour does this mug have?",
    "surface_pattern": "What type of surface pattern does this mug have?",
    "handle_shape": "What type of handle shape does this mug have?",
}
SET = "sub_vlm_test"


def _rows(folder):
    return [row for path in sorted((folder / "data").glob("*.parquet")) for row in pq.read_table(path).to_pylist()]


@pytest.fixture(scope="module")
def exported(chain, tmp_path_factory):
    """``conceptforge export`` of a copy of the filtered mugs release, without --cub-dir."""
    folder = shutil.copytree(chain["filtered"], tmp_path_factory.mktemp("mugs-export") / "filtered")
    assert main(["export", str(folder), "--repo-id", MUGS_REPO, "--version", "v1.0.0"]) == 0
    return folder


def _items(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / "exports" / "items" / f"{SET}.jsonl").read_text().splitlines()]


def test_export_writes_every_format_over_the_spec_vocabulary(exported):
    exports = exported / "exports"
    for path in (
        f"items/{SET}.jsonl",
        f"lmms-eval/{SET}/{SET}.yaml",
        f"lmms-eval/{SET}/utils.py",
        f"vlmevalkit/Conceptforge_{SET}.tsv",
        "inspect-ai/conceptforge_tasks.py",
        "MANIFEST.json",
    ):
        assert (exports / path).is_file(), path
    rows = _rows(exported)
    items = _items(exported)
    assert len(items) == len(rows) > 0
    for n, (item, row) in enumerate(zip(items, rows)):
        group = row["group"]
        assert item["row"] == n and item["category"] == group
        assert item["question"] == QUESTION[group]
        assert item["options"] == OPTIONS[group]
        assert item["answer"] == ANSWER[group] and item["options"][ord(ANSWER[group]) - 65] == row["value"]
        assert item["s_minus_letters"] == S_MINUS[group]
    tsv = list(
        csv.DictReader(io.StringIO((exports / "vlmevalkit" / f"Conceptforge_{SET}.tsv").read_text()), delimiter="\t")
    )
    assert [r["question"] for r in tsv] == [QUESTION[row["group"]] for row in rows]
    assert [r["answer"] for r in tsv] == [ANSWER[row["group"]] for row in rows]
    # what is asked names the spec's domain; the .py files carry the library's parser verbatim (its
    # comments' examples mention a bird), so they are left out of this check
    asked = [
        p.read_text() for p in exports.rglob("*") if p.is_file() and p.suffix in (".yaml", ".jsonl", ".tsv", ".md")
    ]
    assert not any("bird" in text for text in asked), "a spec release's exports name its domain, not the paper's"


class RecordingAnswerer:
    """A model double that answers "A" to everything and keeps what it was asked (image, prompt)."""

    model_id = "recording"
    revision = "r1"

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def answer_text(self, images, prompts, *, max_new_tokens=16, batch_size=8):
        from conceptforge.loaders.harness.embeddings import image_key

        self.asked += [(image_key(image), prompt) for image, prompt in zip(images, prompts)]
        return ["A"] * len(prompts)

    def close(self) -> None:
        pass


def test_exported_items_are_what_sub_vlm_by_answer_asks(chain, exported, tmp_path):
    """sub-vlm by-answer on the same folder (no --cub-dir) asks each row's image the exported
    prompt, in row order; answering "A" everywhere, S+ is right exactly where the exported answer
    is A (the red bodies) and S- exactly where A is not an S- letter (the red bodies again)."""
    from conceptforge.loaders.harness.embeddings import image_key
    from conceptforge.loaders.harness.model_ref import ModelRef
    from conceptforge.loaders.harness.runner import ModelSession, run_task
    from conceptforge.loaders.sub.protocol import load_sub
    from conceptforge.loaders.sub.spec_vocabulary import vocabulary_from_spec
    from conceptforge.specs.release import read_release_spec

    answerer = RecordingAnswerer()
    session = ModelSession(
        ModelRef("org/vlm", "vlm", "hub", None, "c" * 40, "llava"), device="cpu", dtype=None, cache_dir=None
    )
    session._adapter = answerer  # the family's adapter, loaded: here the double
    outcome = run_task(
        "sub-vlm", model=session, dataset=str(exported), options={"by_answer": "true"}, sample_cache=False
    )
    assert outcome.protocol == "sub/choose-by-answer"
    items = _items(exported)
    vocabulary = vocabulary_from_spec(read_release_spec(exported))
    images = [image_key(item.image) for item in load_sub(str(exported), split="test", cub=vocabulary)]
    assert answerer.asked == [(images[item["row"]], item["prompt"]) for item in items]
    red = sum(item["category"] == "body_colour" for item in items)
    assert outcome.metrics["s_plus"].value == pytest.approx(red / len(items))
    assert outcome.metrics["s_minus"].value == pytest.approx(red / len(items))
    assert outcome.metrics["s_minus"].n == len(items)  # every kept mug has its own value in the group


def test_publish_writes_the_exports_and_an_inspect_eval_yaml(released, exported, hub_env, tmp_path):
    """``conceptforge publish --eval-framework inspect-ai --eval-tasks sub-vlm`` of the spec release
    (no --cub-dir; the ``released`` fixture): the release carries the same exports as
    ``conceptforge export`` and an ``eval.yaml`` whose task ids are the exported inspect ``@task`` names."""
    import yaml
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub_env["HF_ENDPOINT"], token=hub_env["HF_TOKEN"])

    def read(path: str) -> str:
        local = api.hf_hub_download(released, path, repo_type="dataset", revision="v1.0.0", cache_dir=str(tmp_path))
        return open(local, encoding="utf-8").read()

    files = api.list_repo_files(released, repo_type="dataset", revision="v1.0.0")
    assert f"exports/items/{SET}.jsonl" in files and f"exports/vlmevalkit/Conceptforge_{SET}.tsv" in files
    for path in (
        f"exports/items/{SET}.jsonl",
        f"exports/lmms-eval/{SET}/{SET}.yaml",
        "exports/inspect-ai/conceptforge_tasks.py",
    ):
        assert read(path) == (exported / path).read_text(), path  # the same release and tag: the same bytes
    tasks = yaml.safe_load(read("eval.yaml"))["tasks"]
    assert sorted(t["id"] for t in tasks) == ["sub_vlm_s_minus", "sub_vlm_s_plus"]
    module = read("exports/inspect-ai/conceptforge_tasks.py")
    assert all(f"def {t['id']}(" in module for t in tasks)


def test_a_damaged_release_spec_is_one_line_and_nothing_is_written(chain, tmp_path, capsys):
    """A spec release whose benchmark_spec.yaml lost its groups: export names the file's problem
    in one line, exits 2 and writes no exports (it never falls back to CUB's vocabulary)."""
    from conceptforge.specs.release import BENCHMARK_SPEC_NAME

    folder = shutil.copytree(chain["filtered"], tmp_path / "filtered")
    spec = folder / BENCHMARK_SPEC_NAME
    import yaml

    fields = yaml.safe_load(spec.read_text())
    del fields["groups"]
    spec.write_text(yaml.safe_dump(fields, sort_keys=False))
    capsys.readouterr()
    assert main(["export", str(folder), "--repo-id", MUGS_REPO, "--version", "v1.0.0"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err == ["error: the release's benchmark_spec.yaml lacks 'groups' (not a SUB spec?)"]
    assert not (folder / "exports").exists()
