"""SUB end to end through the real scripts and the real files between them.

generate_sub.py (tiny FLUX, miniature CUB) -> filter_sub.py (tiny VLM) -> publish.py (local Hub,
v1.0.0) -> plain ``datasets.load_dataset(repo, revision=)`` -> evaluate.py sub on the published
revision (tiny CLIP) -> annotate.py served, answered over its HTTP API, then --export/--apply ->
publish.py v1.1.0 of the human-validated set. Each stage reads exactly what the previous one wrote.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.pipeline.pipeline_helpers import load_with_plain_datasets
from tests.sub.sub_helpers import TINY_FLUX_ARGS
from tests.user_shell import SCRIPTS, check, publish, run_script, script_env

REPO_ID = "conceptforge-e2e/sub"
# One bird, a colour and a pattern substitution: Blue_Jay's class-level crown colour is blue (its
# S−, so the evaluation scores S−), its tail pattern has none (S− empty, not scored).
SPEC = {"birds": ["Blue_Jay"], "attributes": ["has_crown_color::yellow", "has_tail_pattern::solid"]}
IMAGES_PER_PAIR = 4
CANDIDATE_COLUMNS = {
    "image",
    "item_id",
    "bird",
    "attribute",
    "group",
    "value",
    "category",
    "removed_attribute",
    "prompt_reference",
    "prompt_guidance",
    "image_index",
    "seed",
    "tdg_k",
    "tdg_tmin",
    "tdg_tmax",
    "guidance_scale",
    "num_inference_steps",
    "model_id",
    "model_revision",
}
FILTER_COLUMNS = {"vqa_options", "vqa_probs", "vqa_answer", "vqa_splus_prob", "vqa_raw_mass", "rank"}


def _rows(directory: Path) -> list[dict]:
    rows = []
    for path in sorted((directory / "data").glob("*.parquet")):
        rows += pq.read_table(path).to_pylist()
    return rows


def _card_spec(directory: Path):
    from conceptforge.cards.card import read_card_spec

    return read_card_spec((directory / "README.md").read_text())


@pytest.fixture(scope="module")
def sub_chain(tmp_path_factory, pipeline_cub, pipeline_flux, pipeline_vlm, hub_env):
    """Generate, filter and publish once; the tests below check each hand-over."""
    work = tmp_path_factory.mktemp("sub-chain")
    spec = work / "candidates.json"
    spec.write_text(json.dumps(SPEC))
    env = script_env()
    candidates, filtered = work / "sub-candidates", work / "sub-filtered"
    generated = check(
        run_script(
            "generate_sub.py",
            "--cub-dir",
            pipeline_cub,
            "--out",
            candidates,
            "--model",
            pipeline_flux,
            "--candidate-spec",
            spec,
            "--images-per-pair",
            IMAGES_PER_PAIR,
            *TINY_FLUX_ARGS,
            env=env,
        ),
        "generate_sub.py",
    )
    filtered_run = check(
        run_script(
            "filter_sub.py",
            "--candidates",
            candidates,
            "--out",
            filtered,
            "--cub-dir",
            pipeline_cub,
            "--vqa-model",
            pipeline_vlm,
            "--keep-fraction",
            0.5,
            "--min-survivor-fraction",
            0,
            "--device",
            "cpu",
            env=env,
        ),
        "filter_sub.py",
    )
    published = publish(filtered, REPO_ID, "v1.0.0", hub_env)
    return {
        "work": work,
        "candidates": candidates,
        "filtered": filtered,
        "generated": generated,
        "filtered_run": filtered_run,
        "published": published,
    }


def test_filter_consumes_generated_candidates_and_keeps_their_lineage(sub_chain):
    assert "wrote 8 images (2 pairs)" in sub_chain["generated"].stdout
    assert "kept 4 of 8 images in 2 of 2 pairs" in sub_chain["filtered_run"].stdout
    candidates = {row["item_id"]: row for row in _rows(sub_chain["candidates"])}
    filtered = _rows(sub_chain["filtered"])
    assert len(candidates) == 8 and len(filtered) == 4
    assert set(filtered[0]) >= CANDIDATE_COLUMNS | FILTER_COLUMNS | {"generation_mode", "guidance_bird"}
    for row in filtered:  # candidate columns pass through untouched, images byte-identical
        source = candidates[row["item_id"]]
        assert row["image"]["bytes"] == source["image"]["bytes"]
        assert {k: row[k] for k in source if k != "image"} == {k: v for k, v in source.items() if k != "image"}
        assert row["vqa_answer"] == row["value"] and row["vqa_options"][-1] == "Other"
    assert {row["removed_attribute"] for row in filtered} == {"has_crown_color::blue", ""}

    # Regression: the filtered card used to lose the generator's column meanings and provenance.
    generated, derived = _card_spec(sub_chain["candidates"]), _card_spec(sub_chain["filtered"])
    names = pq.read_schema(next((sub_chain["filtered"] / "data").glob("*.parquet"))).names
    assert all(derived.column_docs.get(name) for name in names), [n for n in names if not derived.column_docs.get(n)]
    assert derived.column_docs["tdg_k"] == generated.column_docs["tdg_k"]
    upstream = derived.provenance["upstream"]
    assert upstream["dataset"] == "sub-candidates" and upstream["provenance"] == generated.provenance
    # Named by folder, not by the absolute local path (cards are published; issue 20.9).
    assert derived.provenance["parameters"]["vqa"]["candidates"] == f".../{sub_chain['candidates'].name}"
    assert derived.license == generated.license == "cc-by-nc-4.0"


def test_published_revision_loads_with_plain_datasets(sub_chain, hub, hub_env):
    assert f'load_dataset("{REPO_ID}", revision="v1.0.0")' in sub_chain["published"].stdout
    loaded = load_with_plain_datasets(hub_env, REPO_ID, "v1.0.0")
    local = _rows(sub_chain["filtered"])
    assert list(loaded) == ["test"] and loaded["test"]["rows"] == len(local)
    assert loaded["test"]["item_ids"] == [row["item_id"] for row in local]
    assert set(loaded["test"]["columns"]) >= CANDIDATE_COLUMNS | FILTER_COLUMNS
    assert loaded["test"]["image_sizes"] == [[32, 32]] * len(local)
    files = hub.files(REPO_ID, "v1.0.0")
    # Only the dataset is released: not the filter's resumable item store (OUT/.work) beside it.
    assert set(files) - {".gitattributes"} == {
        "README.md",
        "grid.png",
        "croissant.json",
        "data/test-00000-of-00001.parquet",
    }
    card = files["README.md"].decode()
    assert 'revision="v1.0.0"' in card and "guidance_bird" in card
    assert "_Not written yet._" not in card and "extended|cub-200-2011" in card and "## Annotations" in card
    # the filtered SUB's own Validity section and Croissant (core + RAI, from this card and its upstream)
    assert "### Blind baselines" in card and "| test | group prior |" in card and "_Not computed" not in card
    assert "croissant.json: core and Responsible-AI fields filled" in sub_chain["published"].stdout
    import mlcroissant

    path = sub_chain["work"] / "croissant.json"
    path.write_bytes(files["croissant.json"])
    assert not mlcroissant.Dataset(jsonld=path).metadata.ctx.issues.errors
    document = json.loads(files["croissant.json"])
    assert document["rai:dataPreprocessingProtocol"][0].startswith("Filter statistics: ")
    tools = " ".join(document["rai:machineAnnotationTools"])
    assert "vqa: " in tools and "diffusion: " in tools  # the filter's VQA model and, upstream, the generator's
    # bird_label/attr_label stay ClassLabels through the filter, as in the published Jessica-bader/SUB
    from datasets import ClassLabel, load_dataset

    filtered = load_dataset(str(sub_chain["filtered"]))["test"]
    for name in ("bird_label", "attr_label"):
        assert isinstance(filtered.features[name], ClassLabel)
    names = filtered.features["attr_label"].names
    for value, attribute in zip(filtered["attr_label"], filtered["attribute"]):
        # -1: an S+ outside the paper's 32 substitutions (this test's candidate spec has some)
        assert (names[value] if value >= 0 else None) == (
            attribute.replace("::", "--") if attribute.replace("::", "--") in names else None
        )


def test_evaluate_sub_on_the_published_revision(sub_chain, pipeline_cub, pipeline_clip, hub_env):
    out = sub_chain["work"] / "sub-eval.json"
    done = check(
        run_script(
            "evaluate.py",
            "sub",
            "--dataset",
            REPO_ID,
            "--revision",
            "v1.0.0",
            "--cub-dir",
            pipeline_cub,
            "--model",
            pipeline_clip,
            "--output",
            out,
            "--cbm-min-classes",
            "1",
            env=hub_env,
        ),
        "evaluate.py sub",
    )
    assert "S+" in done.stdout
    report = json.loads(out.read_text())  # the one results format
    (vlm,) = report["tasks"]
    assert (vlm["dataset"]["repo"], vlm["dataset"]["revision"], vlm["dataset"]["split"]) == (REPO_ID, "v1.0.0", "test")
    assert vlm["task"] == "sub-vlm" and vlm["metrics"]["s_plus"]["n"] == 4
    # S− (paper rule) is the bird's class-wise label of the group in CUB's per-image majority vote
    # (the mini CUB has too few classes for the 112-attribute subset: --cbm-min-classes 1).
    assert vlm["options"]["s_minus"] == "paper"
    assert vlm["details"]["per_attribute"]["has_crown_color::yellow"]["n_s_minus"] == 2
    assert vlm["details"]["per_attribute"]["has_tail_pattern::solid"]["n_s_minus"] == 0
    assert set(vlm["details"]["per_bird"]) == {"Blue_Jay"}


def _annotate_over_http(dataset: Path, cub: Path, env: dict, answer, *, study: str = "sub-faithfulness") -> int:
    """Serve the study as a user would and answer every item through the app's JSON API."""
    process = subprocess.Popen(
        [
            sys.executable,
            str(SCRIPTS / "annotate.py"),
            str(dataset),
            "--study",
            study,
            "--port",
            "0",
            "--cub-dir",
            str(cub),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    stored = 0
    try:
        line = process.stdout.readline()
        assert line.startswith(f"serving {study} (4 items) at http://127.0.0.1:"), line + process.stderr.read()
        url = line.split(" at ")[1].split()[0]
        for annotator in ("ann-a", "ann-b"):
            while True:
                step = json.loads(urllib.request.urlopen(f"{url}api/next?annotator={annotator}", timeout=30).read())
                if step["done"]:
                    break
                item = step["item"]
                image = urllib.request.urlopen(url + item["image"].lstrip("/"), timeout=30)
                assert image.headers["Content-Type"].startswith("image/") and image.read()
                body = {
                    "annotator": annotator,
                    "item_id": item["item_id"],
                    "answers": answer(annotator, item),
                    "elapsed_ms": 1200,
                }
                request = urllib.request.Request(
                    url + "api/answer", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
                )
                assert urllib.request.urlopen(request, timeout=30).status == 200
                stored += 1
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err[-2000:]  # stopped by Ctrl+C: an interrupted run (issue 20.3)
    assert "answers are saved" in err
    return stored


@pytest.mark.heavy
def test_annotate_export_apply_and_republish(sub_chain, pipeline_cub, pipeline_clip, hub, hub_env):
    filtered = sub_chain["filtered"]
    env = script_env()

    def answer(annotator, item):
        # Annotator b says the yellow crown is not there: the attribute misses SUB's 90% "yes".
        crown = "yellow" in item["item_id"]
        return {"attribute": "no" if (crown and annotator == "ann-b") else "yes", "bird": "yes"}

    assert _annotate_over_http(filtered, pipeline_cub, env, answer) == 8
    results, validated = sub_chain["work"] / "faithfulness.json", sub_chain["work"] / "sub-validated"
    check(
        run_script(
            "annotate.py",
            filtered,
            "--study",
            "sub-faithfulness",
            "--cub-dir",
            pipeline_cub,
            "--export",
            results,
            "--apply",
            validated,
            env=env,
        ),
        "annotate.py --export/--apply",
    )
    exported = json.loads(results.read_text())
    assert exported["attributes"]["has_crown_color::yellow"]["attribute_yes"] == pytest.approx(0.5)
    assert not exported["attributes"]["has_crown_color::yellow"]["kept"]
    assert exported["attributes"]["has_tail_pattern::solid"]["kept"]
    assert len(exported["annotations"]) == 8

    rows = _rows(validated)
    assert {row["attribute"] for row in rows} == {"has_tail_pattern::solid"} and len(rows) == 2
    assert all(row["human_faithfulness_attribute"] == 1.0 and row["human_faithfulness_n"] == 2 for row in rows)
    # Regression: the validated card used to drop every input column meaning, the paper and lineage.
    source, derived = _card_spec(filtered), _card_spec(validated)
    assert all(derived.column_docs.get(name) for name in rows[0]), [
        n for n in rows[0] if not derived.column_docs.get(n)
    ]
    assert derived.citation == source.citation and derived.paper_title == source.paper_title
    assert derived.provenance["upstream"]["provenance"] == source.provenance
    assert derived.provenance["upstream"]["provenance"]["upstream"]["dataset"] == "sub-candidates"

    # The human-validated set is the next release of the same repository.
    publish(validated, REPO_ID, "v1.1.0", hub_env)
    assert set(hub.refs(REPO_ID)["tags"]) == {"v1.0.0", "v1.1.0"}
    loaded = load_with_plain_datasets(hub_env, REPO_ID, "v1.1.0")
    assert loaded["test"]["item_ids"] == [row["item_id"] for row in rows]
    assert "human_faithfulness_attribute" in loaded["test"]["columns"]
    assert load_with_plain_datasets(hub_env, REPO_ID, "v1.0.0")["test"]["rows"] == 4  # v1.0.0 unchanged


def test_annotate_sub_attribute_offers_cub_values_for_generated_pairs(sub_chain, pipeline_cub):
    """The attribute study on the filtered set: options come from the same CUB folder as generation."""
    offered = {}

    def answer(annotator, item):
        (question,) = item["questions"]
        values = [option["value"] for option in question["options"]]
        offered[item["item_id"]] = values
        target = "yellow" if "crown" in item["item_id"] else "solid"
        return {question["id"]: target}

    assert _annotate_over_http(sub_chain["filtered"], pipeline_cub, script_env(), answer, study="sub-attribute") == 8
    crown = next(v for k, v in offered.items() if "crown" in k)
    tail = next(v for k, v in offered.items() if "tail" in k)
    assert len(crown) == 16 and {"yellow", "blue"} <= set(crown)  # CUB's 15 crown colours + none
    assert {"solid", "spotted", "striped", "multi-colored"} <= set(tail)
    results = sub_chain["work"] / "attribute.json"
    check(
        run_script(
            "annotate.py",
            sub_chain["filtered"],
            "--study",
            "sub-attribute",
            "--cub-dir",
            pipeline_cub,
            "--export",
            results,
            env=script_env(),
        ),
        "annotate.py sub-attribute --export",
    )
    exported = json.loads(results.read_text())
    assert exported["config"]["group_values_source"] == "cub"
    assert exported["human"]["splus"] == pytest.approx(100.0)
    assert exported["human"]["sminus"] == pytest.approx(100.0)  # nobody named the removed crown blue


def test_croissant_spells_every_local_model_one_way(sub_chain, hub, pipeline_flux, pipeline_vlm):
    """CRO2: the filter's VQA model and, upstream, the generator's FLUX were both local folders; the
    release's croissant.json names both as `.../<folder name> @ local-sha256:<fingerprint>` (not one
    as given and the other as `@ local`)."""
    from pathlib import Path

    from conceptforge.cards.provenance import local_fingerprint

    document = json.loads(hub.files(REPO_ID, "v1.0.0")["croissant.json"])
    assert document["rai:machineAnnotationTools"] == [
        f"vqa: .../{Path(pipeline_vlm).name} @ {local_fingerprint(pipeline_vlm)}",
        f"diffusion: .../{Path(pipeline_flux).name} @ {local_fingerprint(pipeline_flux)}",
    ]
