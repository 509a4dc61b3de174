"""SUB on a researcher's own attribute dataset (issue 46): a synthetic mug dataset saved with
``datasets`` (not birds, not CUB), through ``generate sub --spec`` -> ``filter sub`` -> publish to
the local Hub, with the spec travelling in every dataset and its card.

The class-level numbers are worked out by hand from tests/specs/sub_synthetic.py's labels; the
chain's fixtures (``mugs``, ``chain``, ``released``) are in tests/specs/conftest.py.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
import yaml

from conceptforge.commands import invoke
from conceptforge.generators.sub.benchmark import SubBenchmarkSpec
from conceptforge.generators.sub.own_benchmark import load_sub_benchmark
from conceptforge.specs import load_benchmark_spec
from conceptforge.specs.release import BENCHMARK_SPEC_NAME, normalised_spec
from tests.specs.sub_synthetic import mug_spec_text


def _rows(folder):
    return [row for path in sorted((folder / "data").glob("*.parquet")) for row in pq.read_table(path).to_pylist()]


def test_class_level_table_is_the_share_of_each_class_images(mugs):
    table = load_sub_benchmark(mugs / "spec.yaml").table
    # Travel_Mug: 4 of 6 images black, 2 blue -> 66.7 % and 33.3 %; Diner_Mug: 4 of 6 solid.
    assert table.percent("Travel_Mug", "body_colour::black") == pytest.approx(400 / 6)
    assert table.percent("Travel_Mug", "body_colour::blue") == pytest.approx(200 / 6)
    assert table.percent("Diner_Mug", "surface_pattern::striped") == pytest.approx(200 / 6)
    assert table.removed_attribute("Travel_Mug", "body_colour") == "body_colour::black"
    assert table.removed_attribute("Beer_Stein", "handle_shape") == "handle_shape::square"  # 4 of 6 square
    assert table.most_typical_class("surface_pattern::dotted") == "Espresso_Cup"  # 6 of 6
    assert table.image_counts == [6, 6, 6, 6]


def test_presence_threshold_of_the_spec_decides_s_minus(mugs):
    """At 70 % Travel_Mug's black body (66.7 %) is not its colour any more: S- is empty."""
    strict = mugs / "strict.yaml"
    strict.write_text(mug_spec_text() + "presence: {class_percent: 70}\n")
    table = load_sub_benchmark(strict).table
    assert table.removed_attribute("Travel_Mug", "body_colour") == ""
    assert table.removed_attribute("Diner_Mug", "body_colour") == "body_colour::white"  # 100 %


def test_dry_run_prints_the_plan_of_the_spec(mugs, tmp_path, capsys):
    assert (
        invoke(["generate", "sub", "--spec", str(mugs / "spec.yaml"), "--out", str(tmp_path / "x"), "--dry-run"]) == 0
    )
    text = capsys.readouterr().out
    assert "spec: sub-mugs (mug; source mugs)" in text
    assert "pairs: 6 (colour 2, pattern 2, shape 2)" in text  # 2 classes x 3 substitutions, none present
    assert "classes: 2, attributes: 3" in text and "dropped (class already has S+): 0" in text
    assert (
        "Travel_Mug | body_colour::red | S-=body_colour::black | 'A photo of a Travel Mug with a red body' | "
        "'A photo of a mug with a red body'" in text
    )
    # shape: the guidance class is the class that most often shows S+ (Espresso_Cup: all its handles are rings)
    assert "'A photo of a Diner Mug with a handle like a Espresso Cup' | 'A photo of a Espresso Cup'" in text
    assert not (tmp_path / "x").exists()


def test_candidates_are_the_spec_pairs_with_its_prompts_and_labels(chain):
    rows = _rows(chain["candidates"])
    assert sorted({(r["bird"], r["attribute"], r["removed_attribute"]) for r in rows}) == [
        ("Diner_Mug", "body_colour::red", "body_colour::white"),
        ("Diner_Mug", "handle_shape::ring", "handle_shape::round"),
        ("Diner_Mug", "surface_pattern::dotted", "surface_pattern::solid"),
    ]
    assert len(rows) == 6
    names = pq.read_schema(next((chain["candidates"] / "data").glob("*.parquet")))
    assert names.names[0] == "image"
    features = yaml.safe_load((chain["candidates"] / "README.md").read_text().split("---")[1])["dataset_info"]
    labels = next(f for f in features["features"] if f["name"] == "bird_label")["dtype"]["class_label"]["names"]
    assert list(labels.values()) == ["Diner_Mug", "Travel_Mug"]  # the spec's classes, not CUB's birds
    assert {r["bird_label"] for r in rows} == {0}
    assert {r["prompt_reference"] for r in rows if r["category"] == "colour"} == {
        "A photo of a Diner Mug with a red body"
    }


def test_every_dataset_carries_the_validated_spec_and_a_card_section(chain):
    expected = normalised_spec(load_benchmark_spec(chain["spec"], method="sub", spec_cls=SubBenchmarkSpec))
    for folder in (chain["candidates"], chain["filtered"]):
        carried = load_benchmark_spec(folder / BENCHMARK_SPEC_NAME, method="sub", spec_cls=SubBenchmarkSpec)
        assert normalised_spec(carried) == expected
        card = (folder / "README.md").read_text()
        assert "### Benchmark spec: sub-mugs" in card
        assert "`body_colour` (colour): red, blue, white, black" in card
        assert "at least 50% of its images show it" in card
        assert "CUB birds" not in card and "cub-200-2011" not in card
        # the sections (uses, limitations, personal data) speak of the spec's domain, not of birds
        assert "stop detecting the bird's own" not in card and "pictures of birds" not in card
        assert "bird classifiers" not in card and "guidance bird" not in card
        assert "stop detecting the mug's own attribute S-" in card and "generated pictures of mug classes" in card


def test_filter_asks_the_spec_question_over_the_spec_values(chain):
    rows = _rows(chain["filtered"])
    assert rows, "the tiny VLM keeps some candidates"
    for row in rows:
        group = row["group"]
        values = {
            "body_colour": ["red", "blue", "white", "black"],
            "surface_pattern": ["solid", "striped", "dotted"],
            "handle_shape": ["round", "square", "ring"],
        }[group]
        assert row["vqa_options"] == [*values, "Other"]
        assert row["vqa_answer"] == row["value"]


def test_release_on_the_local_hub_carries_the_spec(chain, released, hub_env):
    """publish -> the Hub repo at v1.0.0 has benchmark_spec.yaml beside the card and the data."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub_env["HF_ENDPOINT"], token=hub_env["HF_TOKEN"])
    files = api.list_repo_files("conceptforge-e2e/sub-mugs", repo_type="dataset", revision="v1.0.0")
    assert BENCHMARK_SPEC_NAME in files and "README.md" in files
    path = api.hf_hub_download(
        "conceptforge-e2e/sub-mugs",
        BENCHMARK_SPEC_NAME,
        repo_type="dataset",
        revision="v1.0.0",
        cache_dir=str(chain["spec"].parent / "hub-cache"),
    )
    assert open(path).read() == (chain["filtered"] / BENCHMARK_SPEC_NAME).read_text()


def test_evaluate_sub_vlm_on_the_release_reads_the_spec_not_cub(chain, released, hub_env, tmp_path):
    """``evaluate --tasks sub-vlm:ORG/NAME@v1.0.0`` without --cub-dir: the choices are the spec's
    values + none, S- the release's own removed_attribute (Diner_Mug's white body), chance 1/5."""
    import json

    from conceptforge.testing.tiny_models import build_tiny_clip
    from tests.user_shell import check, run_script

    clip = build_tiny_clip(tmp_path / "tiny-clip")
    out = tmp_path / "eval.json"
    done = run_script(
        "evaluate.py", "--model", clip, "--tasks", f"sub-vlm:{released}@v1.0.0", "--output", out, env=hub_env
    )
    check(done, "evaluate sub-vlm on the spec's release")
    (entry,) = json.loads(out.read_text())["tasks"]
    assert entry["task"] == "sub-vlm" and entry["dataset"]["revision"] == "v1.0.0"
    # what was used, not the paper rule the option defaults to: no CUB table, so no CBM subset
    settings = entry["details"]["settings"]
    assert (settings["s_minus"], settings["cbm_min_classes"]) == ("release", None)
    assert entry["variant"].endswith("S- rule release")
    assert (entry["options"]["s_minus"], entry["options"]["cbm_min_classes"]) == ("release", None)
    assert settings["label_set"].startswith("the spec 'sub-mugs''s 10 attributes, within group")
    kept = _rows(chain["filtered"])
    assert entry["metrics"]["s_plus"]["n"] == len(kept)
    per_attribute = entry["details"]["per_attribute"]
    assert set(per_attribute) == {r["attribute"] for r in kept}
    colour = per_attribute.get("body_colour::red")
    if colour is not None:  # S- scored against the release's own S- (the class's white body)
        assert colour["n_s_minus"] == sum(1 for r in kept if r["attribute"] == "body_colour::red")
    assert entry["metrics"]["chance_s_plus"]["value"] == pytest.approx(  # a fraction: 1 / (values + none)
        sum({"body_colour": 1 / 5, "surface_pattern": 1 / 4, "handle_shape": 1 / 4}[r["group"]] for r in kept)
        / len(kept)
    )


def test_sub_cbm_scores_a_cbm_over_the_spec_attributes(chain, tmp_path, monkeypatch):
    """A CBM whose outputs are the spec's 10 attributes (in its order) that detects only a red
    body: S+ is right on the 2 red-body images of 6, S- (white body, solid surface, round handle:
    never detected) right on all 6. No --cub-dir: the candidates carry the spec."""
    from conceptforge.loaders.harness.runner import run_task

    (tmp_path / "red_body_cbm.py").write_text(
        "import torch\n"
        "def make():\n"
        "    def red_body(images):\n"
        "        logits = -torch.ones(len(images), 10)\n"
        "        logits[:, 0] = 3.0  # body_colour::red, the spec's first attribute\n"
        "        return logits\n"
        "    return red_body\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    outcome = run_task(
        "sub-cbm", model="red_body_cbm:make", dataset=chain["candidates"], split="candidates", cache_dir=tmp_path / "c"
    )
    assert outcome.metrics["s_plus"].value == pytest.approx(2 / 6)
    assert outcome.metrics["s_minus"].value == 1.0 and outcome.metrics["s_minus"].n == 6
    assert outcome.details["settings"]["s_minus"] == "release" and outcome.variant.endswith("S- rule release")
    assert outcome.details["per_attribute"]["body_colour::red"]["s_plus"] == 1.0
    assert outcome.details["per_attribute"]["handle_shape::ring"]["s_plus"] == 0.0


def test_verify_regenerates_the_spec_candidates(chain, capsys, hub_offline):
    """``conceptforge verify`` rebuilds a spec run from its provenance.json (the pairs, prompts and
    seeds the spec decided), as for the paper's runs."""
    from conceptforge.commands import main

    flux = chain["spec"].parent / "flux"
    assert main(["verify", str(chain["candidates"]), "--all", "--weights", f"diffusion={flux}"]) == 0
    assert "verified: 6 of 6 item(s)" in capsys.readouterr().out


def test_the_filter_question_is_the_spec_question_and_a_group_may_have_its_own(mugs, tmp_path):
    from conceptforge.filters.vqa.questions import QuestionBuilder
    from conceptforge.generators.sub.own_benchmark import questions_of, vocabulary

    own = tmp_path / "own.yaml"
    own.write_text(
        mug_spec_text().replace(
            "handle_shape: {category: shape, phrase: 'a handle', values: [round, square, ring]}",
            "handle_shape: {category: shape, phrase: 'a handle', values: [round, square, ring], "
            "question: 'How is the handle of this {domain} shaped? {choices}'}",
        )
    )
    benchmark = load_sub_benchmark(own, with_labels=False)
    ask = QuestionBuilder(vocabulary(benchmark), answer_hint="", **questions_of(benchmark))
    assert (
        ask("body_colour").text
        == "Which body colour does this mug have? Pick one of A) red B) blue C) white D) black E) Other"
    )
    assert ask("handle_shape").text == "How is the handle of this mug shaped? A) round B) square C) ring D) Other"


def test_grid_captions_name_the_spec_group_whole():
    """The sample grid's caption of a spec group: 'handle shape', not CUB's prefix cut off ('le shape')."""
    from conceptforge.generators.sub.card import grid_caption

    mug = {"bird": "Diner_Mug", "attribute": "handle_shape::ring", "value": "ring", "group": "handle_shape"}
    assert grid_caption(mug) == "Diner Mug + ring handle shape"
    bird = {"bird": "Blue_Jay", "attribute": "has_crown_color::red", "value": "red", "group": "has_crown_color"}
    assert grid_caption(bird) == "Blue Jay + red crown color"
    assert grid_caption({"bird": "Blue_Jay", "attribute": "", "value": "", "group": ""}) == "Blue Jay"
