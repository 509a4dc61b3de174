"""The task registry, the runner and the leaderboard in-process (the Hub round trip is in
test_evaluate_hub_e2e.py)."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from conceptforge.errors import ConceptforgeError
from conceptforge.loaders.analysis.leaderboard import leaderboard
from conceptforge.loaders.harness.model_ref import ModelRef, resolve_model
from conceptforge.loaders.harness.registry import all_tasks, parse_dataset_override, select_tasks
from conceptforge.loaders.harness.runner import RunSettings, results_markdown, run_tasks


def test_selection_overrides_and_options():
    chosen = select_tasks(
        "binding-clip:me/binding@v2,binding-cdsm,sub-vlm",
        datasets=["binding-cdsm=out/binding@ignored-for-local"],
        revisions=["sub-vlm=abc123"],
        options=["binding-cdsm.seeds=3,4", "binding-cdsm.models=add,mult", "sub-vlm.none_prompt=a bird"],
    )
    by_name = {s.task.name: s for s in chosen}
    assert (by_name["binding-clip"].dataset, by_name["binding-clip"].revision) == ("me/binding", "v2")
    assert (by_name["binding-cdsm"].dataset, by_name["binding-cdsm"].revision) == ("out/binding", "ignored-for-local")
    assert (by_name["sub-vlm"].dataset, by_name["sub-vlm"].revision) == (None, "abc123")  # default repo kept
    assert by_name["binding-cdsm"].options["seeds"] == (3, 4)
    assert by_name["binding-cdsm"].options["models"] == ("add", "mult")
    assert by_name["binding-cdsm"].options["epochs"] == 20  # untouched default
    assert by_name["sub-vlm"].options["none_prompt"] == "a bird"
    assert all_tasks()["binding-cdsm"].option_defaults()["seeds"] == (0, 1, 2, 3, 4)  # defaults not mutated
    assert parse_dataset_override("sub-vlm=/data/my@dir/sub") == ("sub-vlm", "/data/my@dir/sub", None)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"names": "binding-clip,binding-clip"}, "listed twice"),
        ({"names": "nope"}, "unknown task 'nope'; run --tasks list"),
        ({"names": ""}, "--tasks is empty"),
        ({"names": "binding-clip", "options": ["binding-clip.seeds=1"]}, "task binding-clip has no option 'seeds'"),
        (
            {"names": "binding-clip", "options": ["binding-cdsm.seeds=1"]},
            "names task 'binding-cdsm', which is not in --tasks",
        ),
        ({"names": "binding-cdsm", "options": ["binding-cdsm.seeds=a,b"]}, "expected comma-separated integers"),
        ({"names": "binding-cdsm", "revisions": ["binding-cdsm"]}, "--revision wants TASK=REVISION"),
        # an unknown template field used to surface as a KeyError traceback after the model loaded
        (
            {"names": "binding-clip", "options": ["binding-clip.template=a photo of {lable}"]},
            "--task-option binding-clip.template: unknown field(s) {lable}",
        ),
        ({"names": "sub-vlm", "options": ["sub-vlm.template=a {colour} bird"]}, "unknown field(s) {colour}"),
    ],
)
def test_selection_errors_are_one_line(kwargs, message):
    names = kwargs.pop("names")
    with pytest.raises(ConceptforgeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        select_tasks(names, **kwargs)


def test_skip_reasons_name_the_kind_and_the_missing_input():
    clip = ModelRef("org/clip", "clip", "hub", None, "a" * 40, "clip")
    vilt = ModelRef("org/vilt", "itm", "hub", None, "b" * 40, "vilt")
    tasks = all_tasks()
    assert tasks["binding-clip"].skip_reason(clip, {}) is None
    assert tasks["binding-clip"].skip_reason(vilt, {}) is None  # by its ITM head (match)
    assert (
        tasks["binding-cdsm"].skip_reason(vilt, {})
        == "binding-cdsm runs with clip, open_clip (embed); org/vilt is a itm model (vilt)"
    )
    assert tasks["compmap-cub"].skip_reason(vilt, {"cub_dir": None}) == "compmap-cub needs --cub-dir"
    assert tasks["compmap-cub"].skip_reason(vilt, {"cub_dir": "/x"}) is None


def test_model_kinds_from_the_models_own_files(tmp_path, tiny_clip_dir):
    diffusers = tmp_path / "pipe"
    diffusers.mkdir()
    (diffusers / "model_index.json").write_text(json.dumps({"_class_name": "FluxPipeline"}))
    assert resolve_model(str(diffusers)).kind == "diffusers"
    ref = resolve_model(str(tiny_clip_dir))
    from conceptforge.cards.provenance import local_fingerprint

    assert (ref.kind, ref.source, ref.model_type, ref.sha) == (
        "clip",
        "local",
        "clip",
        local_fingerprint(tiny_clip_dir),
    )
    assert resolve_model("mypkg.cbms:independent").kind == "cbm"
    with pytest.raises(ConceptforgeError, match="is a file"):
        resolve_model(str(tiny_clip_dir / "config.json"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConceptforgeError, match="holds no config.json"):
        resolve_model(str(empty))


def test_one_run_shares_the_model_and_its_embedding_cache(tiny_clip_dir, single_object_dir, tmp_path, monkeypatch):
    """binding-cdsm embeds the same images binding-clip did: the encoder runs only for the first."""
    from conceptforge.loaders.harness.embeddings import EmbeddingModel

    calls = []
    original = EmbeddingModel.encode_images_uncached
    monkeypatch.setattr(
        EmbeddingModel,
        "encode_images_uncached",
        lambda self, images: calls.append(len(images)) or original(self, images),
    )
    loads = []
    original_load = EmbeddingModel.from_pretrained.__func__
    monkeypatch.setattr(
        EmbeddingModel,
        "from_pretrained",
        classmethod(lambda cls, *a, **k: loads.append(a) or original_load(cls, *a, **k)),
    )
    selections = select_tasks(
        f"binding-clip:{single_object_dir},binding-cdsm:{single_object_dir}",
        options=["binding-cdsm.models=add", "binding-cdsm.seeds=0", "binding-cdsm.epochs=1"],
    )
    model = resolve_model(str(tiny_clip_dir))
    results = run_tasks(model, selections, RunSettings(device="cpu", batch_size=64, cache_dir=str(tmp_path / "emb")))
    assert len(loads) == 1
    total_images = sum(calls)
    from conceptforge.loaders.binding.data import load_binding

    assert total_images == sum(
        len(s) for s in load_binding(str(single_object_dir)).values()
    )  # each image embedded once
    assert [t["task"] for t in results.tasks] == ["binding-clip", "binding-cdsm"]
    assert results.tasks[0]["dataset"]["source"] == "local" and results.tasks[0]["dataset"]["sha"].startswith("local-")
    markdown = results_markdown(results.to_dict())
    assert "| binding-cdsm | add.gen_accuracy *" in markdown


def test_compmap_cub_task_matches_the_compmap_command(tmp_path, tiny_clip_dir):
    from tests.compmap.synthetic import write_fake_cub

    cub = write_fake_cub(tmp_path / "CUB_200_2011")
    options = [
        "compmap-cub.ways=2,3",
        "compmap-cub.shots=1",
        "compmap-cub.episodes=4",
        "compmap-cub.queries=2",
        "compmap-cub.full_shot=false",
    ]
    results = run_tasks(
        resolve_model(str(tiny_clip_dir)),
        select_tasks("compmap-cub", options=options),
        RunSettings(device="cpu", cub_dir=str(cub), cache_dir=str(tmp_path / "emb")),
    )
    (task,) = results.tasks
    assert task["dataset"]["repo"] == str(cub) and task["seeds"] == [0]

    from conceptforge.commands.evaluate import compmap as compmap_cli

    parser = argparse.ArgumentParser()
    compmap_cli.add_arguments(parser)
    out = tmp_path / "compmap.json"
    args = parser.parse_args(
        [
            "--benchmark",
            "cub",
            "--data-dir",
            str(cub),
            "--model",
            str(tiny_clip_dir),
            "--ways",
            "2",
            "3",
            "--shots",
            "1",
            "--episodes",
            "4",
            "--queries",
            "2",
            "--no-full-shot",
            "--device",
            "cpu",
            "--cache-dir",
            str(tmp_path / "emb2"),
            "--output",
            str(out),
        ]
    )
    compmap_cli.run(args)
    own = json.loads(out.read_text())["tasks"][0]["details"]["results"]
    for setting in ("2-way-1-shot", "3-way-1-shot"):
        cell = own["settings"][setting]["prim"]
        metric = task["metrics"][f"{setting}.prim"]
        assert metric["value"] == pytest.approx(cell["accuracy"] / 100)
        assert metric["stderr"] == pytest.approx(cell["std"] / 100 / 4**0.5) and metric["n"] == 4
        assert task["metrics"][f"{setting}.delta"]["value"] == pytest.approx(
            own["interpretability"][setting]["delta"] / 100
        )


def _payload(model: str, sha: str, value: float, stderr: float | None) -> dict:
    return {
        "format": "conceptforge-eval-results/1",
        "conceptforge_version": "0",
        "created": "",
        "skipped": [],
        "model": {"id": model, "kind": "clip", "sha": "f" * 40, "revision": None},
        "tasks": [
            {
                "task": "binding-cdsm",
                "protocol": "binding/cdsm-frozen",
                "variant": "add",
                "seeds": [0, 1],
                "dataset": {"repo": "o/b", "revision": "v1", "sha": sha},
                "main_metric": "add.gen_accuracy",
                "metrics": {
                    "add.gen_accuracy": {"value": value, "stderr": stderr, "n": 2},
                    "add.val_accuracy": {"value": 0.5, "stderr": 0.0, "n": 2},
                },
            }
        ],
    }


def test_leaderboard_values_and_separate_columns_for_other_data():
    same = leaderboard([_payload("a", "1" * 40, 0.71234, 0.01234), _payload("b", "1" * 40, 0.5, None)])
    lines = same.splitlines()
    assert [c.strip() for c in lines[0].strip("|").split("|")] == [
        "model",
        "kind",
        "revision",
        "binding-cdsm add.gen_accuracy (%)",  # a file without recorded units: the task's declared unit
    ]
    assert [c.strip() for c in lines[2].strip("|").split("|")][-1] == "71.23 ± 1.23"
    assert [c.strip() for c in lines[3].strip("|").split("|")][-1] == "50.00"
    apart = leaderboard([_payload("a", "1" * 40, 0.7, 0.01), _payload("b", "2" * 40, 0.6, 0.02)]).splitlines()
    header = [c.strip() for c in apart[0].strip("|").split("|")]
    assert header[3:] == ["binding-cdsm add.gen_accuracy @1111111 (%)", "binding-cdsm add.gen_accuracy @2222222 (%)"]
    assert [c.strip() for c in apart[2].strip("|").split("|")][3:] == ["70.00 ± 1.00", "–"]
    every = leaderboard([_payload("a", "1" * 40, 0.7, 0.01)], metrics="all").splitlines()[0]
    assert "add.val_accuracy" in every


def test_model_card_merge_keeps_other_results():
    from huggingface_hub import EvalResult, ModelCard

    from conceptforge.loaders.harness.push_results import _merged_card

    existing = ModelCard("---\nlicense: mit\n---\n# my model\n")
    existing.data.model_name = "me/m"
    existing.data.eval_results = [
        EvalResult(
            task_type="image-classification",
            dataset_type="imagenet-1k",
            dataset_name="ImageNet",
            metric_type="accuracy",
            metric_value=80.0,
        ),
        EvalResult(
            task_type="image-classification",
            dataset_type="o/b",
            dataset_name="o/b",
            metric_type="binding-clip.gen_accuracy",
            metric_value=1.0,
        ),
    ]
    new = [
        EvalResult(
            task_type="image-classification",
            dataset_type="o/b",
            dataset_name="o/b",
            metric_type="binding-clip.gen_accuracy",
            metric_value=42.0,
        )
    ]
    merged = ModelCard(_merged_card(str(existing), "me/m", new))
    values = sorted((r.dataset_type, r.metric_type, r.metric_value) for r in merged.data.eval_results)
    assert values == [("imagenet-1k", "accuracy", 80.0), ("o/b", "binding-clip.gen_accuracy", 42.0)]
    assert merged.data.license == "mit" and "# my model" in merged.text


CBM_MODULE = '''
import torch

PRESENT = {present!r}


class ConstantCBM(torch.nn.Module):
    """Logit +5 for the listed attributes and -5 for the others, whatever the image."""

    def __init__(self, names):
        super().__init__()
        self.register_buffer("logits", torch.tensor([5.0 if n in PRESENT else -5.0 for n in names]))

    def forward(self, images):
        return self.logits.expand(images.shape[0], -1)


def make():
    return ConstantCBM({names!r}), lambda image: torch.zeros(3, 8, 8)
'''


def test_sub_cbm_task_runs_a_users_cbm_factory(tmp_path, sub_dir, fake_cub, monkeypatch):
    """sub-cbm through the task path: the CBM comes from ``package.module:function``. By hand over
    sub_rows' 8 items (2 per pair), with crown red, bill needle and crown blue present:
    S+ right for crown red and bill needle, wrong for tail spotted and crown yellow -> 4/8;
    S- (any-original: the removed attribute must be absent) right for black, dagger and
    multi-coloured, wrong for blue (present) -> 6/8."""
    from conceptforge.cub import load_cub

    names = list(load_cub(fake_cub, need="votes").attributes)
    present = ["has_crown_color::red", "has_bill_shape::needle", "has_crown_color::blue"]
    assert set(present) <= set(names)
    (tmp_path / "my_cbms.py").write_text(CBM_MODULE.format(present=present, names=names))
    monkeypatch.syspath_prepend(str(tmp_path))
    model = resolve_model("my_cbms:make")
    assert model.kind == "cbm"
    selections = select_tasks(f"sub-cbm:{sub_dir}", options=["sub-cbm.s_minus=any-original"])
    results = run_tasks(model, selections, RunSettings(device="cpu", batch_size=3, cub_dir=str(fake_cub)))
    (task,) = results.tasks
    assert task["metrics"]["s_plus"]["value"] == pytest.approx(0.5) and task["metrics"]["s_plus"]["n"] == 8
    assert task["metrics"]["s_minus"]["value"] == pytest.approx(0.75) and task["metrics"]["s_minus"]["n"] == 8
    assert "S- rule any-original" in task["variant"]


@pytest.mark.parametrize(
    "break_it, problem",
    [
        (lambda p: p.pop("model"), "its 'model' is not an object"),
        (lambda p: p.update(tasks={"a": 1}), "its 'tasks' is not a list"),
        (lambda p: p["tasks"][0].pop("metrics"), "tasks[0] has no dict 'metrics'"),
        (lambda p: p["tasks"][0].update(dataset="o/b"), "tasks[0] has no dict 'dataset'"),
        (lambda p: p["tasks"][0]["metrics"].update({"x": 0.5}), "tasks[0].metrics.x is not an object"),
    ],
)
def test_leaderboard_file_with_the_format_tag_but_a_wrong_structure_is_one_line(tmp_path, break_it, problem):
    """The format tag alone used to pass: a wrong structure then ended in a KeyError traceback."""
    from conceptforge.commands import main

    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(_payload("a", "1" * 40, 0.7, 0.01)))
    payload = _payload("b", "1" * 40, 0.6, 0.01)
    break_it(payload)
    bad.write_text(json.dumps(payload))
    with pytest.raises(
        ConceptforgeError, match=re.escape(f"{bad} says format conceptforge-eval-results/1 but {problem}")
    ):
        from conceptforge.loaders.analysis.leaderboard import load_results

        load_results([good, bad])
    assert main(["leaderboard", str(good), str(bad)]) == 2


def test_unwritable_results_file_is_refused_before_any_task_runs(tmp_path, tiny_clip_dir, monkeypatch, capsys):
    """The results were written after every task ran: an unwritable path lost the whole evaluation."""
    from conceptforge.commands import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "results" / f"{tiny_clip_dir.name}.json").mkdir(parents=True)  # the default output, taken by a folder
    assert main(["evaluate", "--model", str(tiny_clip_dir), "--tasks", "binding-clip", "--device", "cpu"]) == 2
    assert (
        capsys.readouterr().err.strip().splitlines()[-1]
        == f"error: --output {Path('results') / tiny_clip_dir.name}.json is a folder; give a file name"
    )
