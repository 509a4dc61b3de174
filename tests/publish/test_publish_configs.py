"""A repo with several configs (the binding layout): publish to the local Hub, load each config
by name and revision with plain ``datasets`` (ClassLabel features intact), CLEVR-style side files
travel with the release but are never mistaken for data; the Hub's card validation
(``DatasetCard.validate`` -> ``POST /api/validate-yaml``) accepts our card and rejects bad ones."""

from __future__ import annotations

import io
import json

import pytest
from datasets import ClassLabel, Features, List, Value
from datasets import Image as ImageFeature
from huggingface_hub import DatasetCard
from PIL import Image
from publish_helpers import run_publish, tiny_repo_metadata

from conceptforge.cards import render_card
from conceptforge.cards.dataset_dir import assemble_config_dir, write_card_and_grid
from conceptforge.cards.grid import png_bytes
from conceptforge.cards.publish import hub_validate_card
from conceptforge.cards.validate import dataset_dir_problems, missing_sections
from conceptforge.errors import ConceptforgeError
from tests.user_shell import plain_python_json

REPO = "conceptforge-test/binding-like"
CONFIGS = {
    "single": ["red cube", "blue sphere"],
    "pairs": ["cube left sphere", "sphere left cube", "cube front sphere"],
}


def _features(names: list[str]) -> Features:
    return Features(
        {
            "image": ImageFeature(),
            "label": ClassLabel(names=names),
            "objects": List({"shape": ClassLabel(names=["cube", "sphere"]), "x": Value("float32")}),
        }
    )


def _png(value: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 6), (value, 0, 0)).save(buffer, format="PNG")
    return buffer.getvalue()


def make_repo(out, *, license: str = "cc-by-4.0"):
    splits = []
    for config, names in CONFIGS.items():
        rows = {
            split: [
                {
                    "image": {"bytes": _png(i + 10 * k), "path": f"{split}-{i}.png"},
                    "label": names[i % len(names)],
                    "objects": [{"shape": "cube", "x": 0.5}, {"shape": "sphere", "x": -1.0}],
                }
                for i in range(n)
            ]
            for k, (split, n) in enumerate((("train", 5), ("test", 3)))
        }
        splits += assemble_config_dir(
            out,
            config=config,
            splits={s: (lambda r=r: iter(r)) for s, r in rows.items()},
            features=_features(names),
            side_files={f"{s}.json": json.dumps({"scenes": []}).encode() for s in rows},
        )
    metadata = tiny_repo_metadata(
        pretty_name="Binding-like",
        license=license,
        summary="Two configs.",
        language=["en"],
        source_datasets=["original"],
        config_summaries={"single": "one object", "pairs": "two objects"},
    )
    features = {config: _features(names) for config, names in CONFIGS.items()}
    grid = png_bytes(Image.new("RGB", (40, 30)))
    write_card_and_grid(out, render_card(metadata, features, splits), grid)
    return out


LOADER = r"""
import json, sys
from datasets import load_dataset
repo, revision = sys.argv[1], sys.argv[2]
out = {}
for config in ("single", "pairs"):
    ds = load_dataset(repo, config, revision=revision)
    out[config] = {split: {"rows": d.num_rows, "label_names": d.features["label"].names,
                           "label_type": type(d.features["label"]).__name__,
                           "shape_type": type(d.features["objects"].feature["shape"]).__name__,
                           "labels": [d.features["label"].int2str(v) for v in d["label"]]} for split, d in ds.items()}
print(json.dumps(out))
"""


def test_multi_config_repo_publishes_and_loads_by_config_and_revision(tmp_path, hub, client_env):
    repo_dir = make_repo(tmp_path / "repo")
    assert dataset_dir_problems(repo_dir) == []
    assert missing_sections((repo_dir / "README.md").read_text()) == []
    result = run_publish(client_env, repo_dir, REPO, "v1.0.0")
    assert result.returncode == 0, result.stderr[-2000:]
    assert f'load_dataset("{REPO}", "single", revision="v1.0.0")' in result.stdout
    assert any(
        r[:2] == ("POST", "/api/validate-yaml") and r[2] == 200 for r in hub.requests
    )  # card validated by the Hub
    files = hub.files(REPO, "v1.0.0")
    assert {"scenes/single/train.json", "scenes/pairs/test.json", "data/pairs/train-00000-of-00001.parquet"} <= set(
        files
    )

    out = plain_python_json(LOADER, REPO, "v1.0.0", env=client_env, drop=("HF_TOKEN",))
    assert out["single"]["train"]["rows"] == 5 and out["pairs"]["test"]["rows"] == 3
    assert out["pairs"]["train"]["label_type"] == "ClassLabel" and out["pairs"]["train"]["shape_type"] == "ClassLabel"
    assert out["pairs"]["train"]["label_names"] == CONFIGS["pairs"]
    assert out["single"]["train"]["labels"] == ["red cube", "blue sphere", "red cube", "blue sphere", "red cube"]


def test_hub_validate_yaml_accepts_our_card_and_rejects_bad_metadata(tmp_path, hub, monkeypatch):
    card_text = (make_repo(tmp_path / "repo") / "README.md").read_text()
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", hub.url)  # where DatasetCard.validate posts
    DatasetCard(card_text).validate()  # huggingface_hub's own call, answered by the server
    hub_validate_card(card_text)
    bad = card_text.replace("license: cc-by-4.0", "license: cc-by-5.0", 1)
    with pytest.raises(ValueError, match="license"):
        DatasetCard(bad).validate()
    with pytest.raises(ConceptforgeError, match="the Hub rejects the dataset card.*license"):
        hub_validate_card(bad, endpoint=hub.url)
    no_name = card_text.replace("- config_name: single\n", "- data_files_only: x\n", 1)
    with pytest.raises(ValueError, match="config_name"):
        DatasetCard(no_name).validate()
