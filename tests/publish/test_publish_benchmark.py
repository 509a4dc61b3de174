"""Releases a benchmark track accepts: croissant.json (core + RAI) that mlcroissant validates in
every release, eval.yaml only when the owner asks for it (listed frameworks only), and the
dry run naming RAI fields that would be empty. Tiny binding and SUB releases carry the cards'
real sections and validity reports; they are published with the command line to the local Hub."""

from __future__ import annotations

import json

import mlcroissant as mlc
import pytest
import yaml
from mlcroissant._src.operation_graph.operations.download import extract_git_info
from publish_helpers import binding_release, run_publish, sub_release

from conceptforge.cards import DatasetMetadata
from conceptforge.cards.croissant import REQUIRED_RAI
from conceptforge.cards.hub_eval import EVALUATION_FRAMEWORKS, eval_yaml_problems
from conceptforge.testing.synthetic import sub_rows

FRAMEWORK = "harbor"  # a framework the Hub lists (conceptforge is not one)


def _one_line_error(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.heavy
def test_croissant_in_every_release_and_eval_yaml_only_when_asked(tmp_path, hub, client_env):
    binding, splits = binding_release(tmp_path / "binding")
    sub = sub_release(tmp_path / "sub")
    done = run_publish(client_env, sub, "org/sub", "v1.0.0")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "croissant.json: core and Responsible-AI fields filled" in done.stdout
    assert "eval.yaml" not in hub.files("org/sub", "v1.0.0")
    done = run_publish(
        client_env,
        binding,
        "org/binding",
        "v1.0.0",
        "--eval-framework",
        FRAMEWORK,
        "--eval-tasks",
        "binding-clip,binding-cdsm",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"eval.yaml: 21 task(s), evaluation_framework {FRAMEWORK}" in done.stdout
    files = hub.files("org/binding", "v1.0.0")
    declared = yaml.safe_load(files["eval.yaml"])
    assert eval_yaml_problems(declared) == []
    assert declared["evaluation_framework"] == FRAMEWORK and declared["name"] == "Binding (tiny)"
    ids = {t["id"]: (t["config"], t["split"]) for t in declared["tasks"]}
    assert ids["binding-clip.gen_accuracy"] == ("default", "gen")
    assert ids["binding-cdsm.csp.train_accuracy"] == ("default", "train") and len(ids) == 3 + 6 * 3

    for repo in ("org/sub", "org/binding"):
        path = tmp_path / f"{repo.replace('/', '-')}-croissant.json"
        path.write_bytes(hub.files(repo, "v1.0.0")["croissant.json"])
        document = json.loads(path.read_text())
        for key in REQUIRED_RAI:  # every RAI field a benchmark track expects is filled
            assert document[key], (repo, key)
        assert "http://mlcommons.org/croissant/RAI/1.0" in document["conformsTo"]
        # published to the local Hub (HF_ENDPOINT): the file names where the release is (not huggingface.co)
        assert document["version"] == "1.0.0" and document["url"] == f"{hub.url}/datasets/{repo}"
        dataset = mlc.Dataset(jsonld=path)  # raises on any validation error
        assert not dataset.metadata.ctx.issues.errors
        # the file sets are the release's own parquet shards, in its git repository at the tag: records
        # read back through mlcroissant from the published URL, the repository being the tag's files
        repo_node = next(d for d in document["distribution"] if d["@type"] == "cr:FileObject")
        assert repo_node["contentUrl"] == f"{hub.url}/datasets/{repo}/tree/refs%2Ftags%2Fv1.0.0"
        # the huggingface.co form of that URL is the one mlcroissant clones (its host list)
        assert extract_git_info(repo_node["contentUrl"].replace(hub.url, "https://huggingface.co")) == (
            f"https://huggingface.co/datasets/{repo}",
            "refs/tags/v1.0.0",
        )
        checkout = tmp_path / "checkout" / repo
        for name, content in hub.files(repo, "v1.0.0").items():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            (checkout / name).write_bytes(content)
        published = mlc.Dataset(
            jsonld=f"{hub.url}/datasets/{repo}/resolve/v1.0.0/croissant.json", mapping={repo_node["@id"]: checkout}
        )
        record_set = dataset.metadata.record_sets[0].name
        records = list(published.records(record_set=record_set))
        expected = sum(len(rows) for rows in splits.values()) if repo == "org/binding" else len(sub_rows())
        assert len(records) == expected
    sub_doc = json.loads(hub.files("org/sub", "v1.0.0")["croissant.json"])
    assert sub_doc["license"] == "https://creativecommons.org/licenses/by-nc/4.0/"
    # the blind baselines travel along: crown colour red 2 / yellow 2 tie (2 right on average), bill shape
    # needle 2, tail pattern spotted 2 -> 6 of 8
    assert "test: group prior 75.0%" in " ".join(sub_doc["rai:dataLimitations"])
    assert "vqa: org/vqa @ " + "a" * 40 in sub_doc["rai:machineAnnotationTools"]

    # A later release without --eval-framework leaves the owner's eval.yaml in place.
    done = run_publish(client_env, binding, "org/binding", "v1.0.1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert hub.files("org/binding", "v1.0.1")["eval.yaml"] == files["eval.yaml"]
    assert json.loads(hub.files("org/binding", "v1.0.1")["croissant.json"])["version"] == "1.0.1"


@pytest.mark.heavy
def test_unlisted_framework_and_tasks_without_a_leaderboard_are_refused_in_one_line(tmp_path, hub, client_env):
    sub = sub_release(tmp_path / "sub")
    before = hub.commits_made
    line = _one_line_error(
        run_publish(client_env, sub, "org/sub", "v1.0.0", "--eval-framework", "conceptforge", "--eval-tasks", "sub-vlm")
    )
    assert line.startswith("error: evaluation framework 'conceptforge' is not one the Hub lists (")
    assert "registered by a pull request adding them to EVALUATION_FRAMEWORKS in huggingface.js" in line
    assert all(name in line for name in EVALUATION_FRAMEWORKS)
    line = _one_line_error(
        run_publish(
            client_env, sub, "org/sub", "v1.0.0", "--eval-framework", FRAMEWORK, "--eval-tasks", "conceptbed-ccd"
        )
    )
    assert line.startswith("error: conceptbed-ccd has no Hub dataset leaderboard")
    line = _one_line_error(
        run_publish(client_env, sub, "org/sub", "v1.0.0", "--eval-framework", FRAMEWORK, "--eval-tasks", "binding-clip")
    )
    assert line.startswith(
        "error: binding-clip evaluates split(s) train,val,gen, which this dataset does not have (test)"
    )
    assert _one_line_error(run_publish(client_env, sub, "org/sub", "v1.0.0", "--eval-tasks", "sub-vlm")) == (
        "error: --eval-tasks goes with --eval-framework NAME"
    )
    assert hub.commits_made == before


def test_dry_run_names_the_rai_fields_that_would_be_empty(tmp_path, hub, client_env):
    sub = sub_release(tmp_path / "sub", uses="", personal_data="", validity={})
    done = run_publish(client_env, sub, "org/sub", "v1.0.0", "--dry-run")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        "croissant.json: RAI fields that would be empty: rai:dataUseCases, rai:personalSensitiveInformation"
        in done.stdout
    )
    assert hub.commits_made == 0


def test_conceptbed_croissant_validates_with_lists_of_images_and_class_labels(tmp_path):
    """ConceptBed's schema (a list of reference images, a 284-name ClassLabel, lists of strings)."""
    from conceptforge.cards import SplitStats
    from conceptforge.cards.croissant import croissant_bytes, croissant_document, empty_rai_fields
    from conceptforge.generators.conceptbed.card import CARD_SECTIONS, CITATION, FEATURES
    from conceptforge.generators.conceptbed.validity import conceptbed_validity

    metadata = DatasetMetadata(
        pretty_name="ConceptBed (tiny)",
        license="other",
        license_name="creativeml-openrail-m outputs",
        license_link="https://huggingface.co/spaces/CompVis/stable-diffusion-license",
        summary="Tiny ConceptBed card.",
        citation=CITATION,
        validity=conceptbed_validity({"concept": iter([{"concept": "dog"}])}),
        provenance={
            "generator": "conceptforge generate conceptbed",
            "models": [{"role": "diffusion", "id": "x/sd", "revision": "b" * 40}],
        },
        **CARD_SECTIONS,
    )
    splits = [SplitStats(s, 1, 10, [f"data/{s}-00000-of-00001.parquet"]) for s in ("concept", "composition")]
    document = croissant_document(metadata, FEATURES, splits, repo_id="org/conceptbed", version="v0.1.0")
    assert empty_rai_fields(document) == []
    assert document["license"] == "https://huggingface.co/spaces/CompVis/stable-diffusion-license"
    fields = {f["name"]: f for f in document["recordSet"][0]["field"]}
    assert fields["reference_images"]["repeated"] is True and fields["reference_images"]["dataType"] == "sc:ImageObject"
    assert "284 names" in fields["concept_label"]["description"]
    path = tmp_path / "croissant.json"
    path.write_bytes(croissant_bytes(document))
    assert not mlc.Dataset(jsonld=path).metadata.ctx.issues.errors


def test_task_ids_name_the_config_only_in_a_repo_with_several():
    """publish (eval.yaml) and evaluate (.eval_results) build the same ids, the config in them
    only where the repo has several (a one-config release loads its config whatever its name)."""
    from conceptforge.loaders.harness.push_results import benchmark_tasks, hub_entries

    splits = ["train", "val", "gen"]
    one = benchmark_tasks(["binding-clip"], {"relational": splits})
    assert [(t["id"], t["config"], t["split"]) for t in one] == [
        (f"binding-clip.{s}_accuracy", "relational", s) for s in splits
    ]
    several = benchmark_tasks(["binding-clip"], {"single-object": splits, "relational": splits})
    assert {t["id"] for t in several} == {
        f"binding-clip.{c}.{s}_accuracy" for c in ("single-object", "relational") for s in splits
    }
    task = {
        "task": "binding-clip",
        "protocol": "binding/zero-shot",
        "variant": "v",
        "options": {"config": "relational", "template": "a photo of {label}"},
        "dataset": {"repo": "org/binding", "sha": "c" * 40, "source": "hub", "config": None, "split": "train,val,gen"},
        "metrics": {f"{s}_accuracy": {"value": 0.5, "stderr": None, "n": 2} for s in splits},
    }
    payload = {"tasks": [task], "created": None}
    pushed = {e.task_id for e in hub_entries(payload, {("org/binding", "c" * 40): ["single-object", "relational"]})}
    assert pushed == {t["id"] for t in several if t["config"] == "relational"}
    assert {e.task_id for e in hub_entries(payload)} == {t["id"] for t in one}
    assert all("non-default options: config=relational" in e.notes for e in hub_entries(payload))
