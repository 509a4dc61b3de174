"""The dataset card: YAML header, markdown sections, the embedded spec and validation."""

from __future__ import annotations

import pytest
import yaml
from datasets import ClassLabel, Features, List, Value
from datasets import Image as ImageFeature
from huggingface_hub import DatasetCard
from publish_helpers import BIBTEX, make_dataset

from conceptforge.cards import (
    DatasetMetadata,
    FilterStats,
    SplitStats,
    card_problems,
    dataset_dir_problems,
    read_card_spec,
    render_card,
)
from conceptforge.cards.card import feature_type
from conceptforge.errors import ConceptforgeError

FEATURES = Features(
    {
        "image": ImageFeature(),
        "attr_label": ClassLabel(names=[f"has_crown_color::c{i}" for i in range(6)]),
        "vqa_probs": List(Value("float32")),
        "objects": List({"shape": Value("string"), "bbox": List(Value("int32"), length=4)}),
        "seed": Value("int64"),
    }
)
SPLITS = [SplitStats("test", 1500, 123_456, ["data/test-00000-of-00001.parquet"])]


def _metadata(**overrides) -> DatasetMetadata:
    stats = FilterStats(group_label="bird–attribute pair")
    stats.add(kept=True, group="Blue_Jay / crown black", count=50)
    stats.add(kept=False, reason="answer is not S+", group="Blue_Jay / crown black", count=120)
    stats.add(kept=False, reason="below the top 10%", group="Blue_Jay / crown black", count=330)
    stats.add(kept=False, reason="pair has fewer than 50", group="Cardinal / bill needle", count=500)
    base = dict(
        pretty_name="SUB",
        license="cc-by-nc-4.0",
        summary="Synthetic birds with one substituted attribute.",
        task_categories=["image-classification", "visual-question-answering"],
        tags=["cub", "concept-bottleneck"],
        citation=BIBTEX,
        paper_title="SUB",
        paper_url="https://arxiv.org/abs/2507.23784",
        column_docs={"attr_label": "S+", "seed": "work-item seed"},
        provenance={
            "generator": "conceptforge.generators.sub",
            "models": [
                {
                    "role": "diffusion",
                    "id": "black-forest-labs/FLUX.1-dev",
                    "revision": "0ef5fff789c832c5c7f4e127f94c8b54bbcced44",
                }
            ],
            "parameters": {"tdg_k": 10, "tdg_tmin": 0.2, "tdg_tmax": 0.9, "guidance_scale": 3.5},
            "seeds": {"run": 0},
            "packages": {"diffusers": "0.42.1"},
            "python": "3.11.7",
            "command_line": "python scripts/generate_sub.py --out x",
            "notes": {"gpu": "H100"},
        },
        filter_stats=stats,
        source_datasets=["cub-200-2011"],
        language=["en"],
        license_note="Images were generated with FLUX.1-dev under its non-commercial license.",
    )
    base.update(overrides)
    return DatasetMetadata(**base)


def test_card_header_matches_the_data_and_uses_only_hub_keys():
    text = render_card(_metadata(), FEATURES, SPLITS)
    card = DatasetCard(text)
    data = yaml.safe_load(text.split("---")[1])
    assert card.data.to_dict() == data
    assert data["license"] == "cc-by-nc-4.0" and data["pretty_name"] == "SUB"
    assert data["size_categories"] == ["1K<n<10K"]
    assert data["configs"] == [{"config_name": "default", "data_files": [{"split": "test", "path": "data/test-*"}]}]
    assert Features._from_yaml_list(data["dataset_info"]["features"]) == FEATURES
    assert data["dataset_info"]["splits"] == [{"name": "test", "num_bytes": 123_456, "num_examples": 1500}]
    assert data["source_datasets"] == ["cub-200-2011"] and data["language"] == ["en"]
    assert card_problems(text) == []


def test_card_markdown_sections():
    text = render_card(_metadata(version="v1.1.0", previous_version="v1.0.0", repo_id="org/sub"), FEATURES, SPLITS)
    body = DatasetCard(text).text
    assert "[SUB](https://arxiv.org/abs/2507.23784)" in body
    assert "![Sample grid](grid.png)" in body
    assert "This is version `v1.1.0`; previous version: `v1.0.0`" in body
    assert 'ds = load_dataset("org/sub", revision="v1.1.0")' in body
    assert (
        "| `attr_label` | ClassLabel (6: `has_crown_color::c0`, `has_crown_color::c1`, `has_crown_color::c2`, `has_crown_color::c3`, …) | S+ |"
        in body
    )
    assert "| `objects` | list[struct{shape: string, bbox: list[int32] (4)}] |  |" in body
    # filter statistics: totals and per-group counts
    assert "| candidates | 1000 | 100.0% |" in body and "| kept | 50 | 5.0% |" in body
    assert "| dropped: pair has fewer than 50 | 500 | 50.0% |" in body
    assert "| Blue_Jay / crown black | 500 | 50 | 120 | 330 | 0 |" in body
    assert "| Cardinal / bill needle | 500 | 0 | 0 | 0 | 500 |" in body
    # provenance: model with its resolved revision, parameters, packages, command line, extras
    assert "| diffusion | `black-forest-labs/FLUX.1-dev` | `0ef5fff789c832c5c7f4e127f94c8b54bbcced44` |" in body
    assert '"tdg_tmax": 0.9' in body and "| diffusers | 0.42.1 |" in body
    assert "python scripts/generate_sub.py --out x" in body and '"gpu": "H100"' in body
    assert "non-commercial license" in body
    # BibTeX goes through verbatim (no template engine eating {{ }})
    assert BIBTEX in body


def test_unpublished_card_and_no_grid():
    text = render_card(_metadata(filter_stats=None, provenance={}, citation=""), FEATURES, SPLITS, has_grid=False)
    assert "grid.png" not in text.split("<!--")[0]
    assert 'load_dataset("<org>/<name>")' in text and "Not published yet" in text
    assert "## Filter statistics" not in text and "## Citation" not in text


def test_spec_round_trips_through_the_card():
    metadata = _metadata(paper_title="A > B --> C")  # must not close the HTML comment
    text = render_card(metadata, FEATURES, SPLITS)
    assert read_card_spec(text).to_dict() == metadata.to_dict()
    assert isinstance(read_card_spec(text).filter_stats, FilterStats)
    with pytest.raises(ConceptforgeError, match="no conceptforge metadata block"):
        read_card_spec("---\nlicense: mit\n---\n# hand written\n")


def test_plain_dict_filter_stats_still_render():
    metadata = _metadata(filter_stats={"candidates": 10, "kept": 4, "dropped": {"blurry": 6}})
    assert isinstance(metadata.filter_stats, FilterStats)
    assert "| dropped: blurry | 6 | 60.0% |" in render_card(metadata, FEATURES, SPLITS)
    other = render_card(_metadata(filter_stats={"custom": [1, 2]}), FEATURES, SPLITS)
    assert '"custom": [' in other


def test_filter_stats_must_add_up(tmp_path):
    stats = FilterStats(candidates=10, kept=3, dropped={"x": 5})
    with pytest.raises(ConceptforgeError, match="do not add up"):
        stats.check()
    grouped = FilterStats(group_label="pair")
    grouped.add(kept=True, group="a", count=2)
    grouped.kept += 1
    grouped.candidates += 1
    with pytest.raises(ConceptforgeError, match="per-group candidates"):
        grouped.check()
    # The card still renders (for inspection) but the release is refused.
    directory = make_dataset(tmp_path / "d")
    card = (directory / "README.md").read_text().replace('"kept": 34', '"kept": 33')
    (directory / "README.md").write_text(card)
    from conceptforge.cards.publish import read_dataset_dir

    with pytest.raises(ConceptforgeError, match="do not add up"):
        read_dataset_dir(directory)
    with pytest.raises(ValueError):
        FilterStats().add(kept=False)


@pytest.mark.parametrize(
    "overrides, problem",
    [
        (dict(license="cc-by-nc"), "is not a Hub license id"),
        (dict(license="other"), "needs license_name"),
        (dict(task_categories=["bird-spotting"]), "task category 'bird-spotting' is unknown"),
        (dict(citation="Bader et al. 2025"), "not a BibTeX entry"),
        (dict(citation="@misc{x, title={a}"), "unbalanced braces"),
        (dict(summary="token hf_abcdefghijklmnop123 leaked"), "contains an access token"),
    ],
)
def test_card_problems_are_found(overrides, problem):
    text = render_card(_metadata(**overrides), FEATURES, SPLITS)
    assert any(problem in p for p in card_problems(text)), card_problems(text)


def test_card_problems_in_yaml():
    good = render_card(_metadata(), FEATURES, SPLITS)
    assert any(
        "unknown to the Hub: my_field" in p for p in card_problems(good.replace("---\n", "---\nmy_field: 1\n", 1))
    )
    assert any(
        "does not parse" in p for p in card_problems(good.replace("license: cc-by-nc-4.0", "license: [unclosed", 1))
    )
    assert card_problems("# no header") == ["the dataset card has no YAML header (--- … ---)"]
    assert any("contains an access token" in p for p in card_problems(good, secrets=["Synthetic birds"]))
    assert render_card(_metadata(license="other", license_name="flux-1-dev-non-commercial-license"), FEATURES, SPLITS)


def test_directory_problems(tmp_path):
    directory = make_dataset(tmp_path / "d", shard=2500)
    assert dataset_dir_problems(directory) == []
    card = (directory / "README.md").read_text()
    # the shard's real column type, not the feature metadata embedded beside it
    assert dataset_dir_problems(directory, card.replace("dtype: int32", "dtype: int64")) == [
        f"data/{name}: column idx holds int32, the card's features say int64"
        for name in ("train-00000-of-00002.parquet", "train-00001-of-00002.parquet", "test-00000-of-00001.parquet")
    ]
    (directory / "grid.png").write_bytes(b"GIF89a")
    assert any("grid.png is not a PNG" in p for p in dataset_dir_problems(directory))
    (directory / "grid.png").unlink()
    assert any("has none" in p for p in dataset_dir_problems(directory))
    (directory / "data" / "extra-00000-of-00001.parquet").write_bytes(b"x")
    assert any("not in any split" in p for p in dataset_dir_problems(directory))


def test_feature_type_names():
    assert feature_type(Value("string")) == "string"
    assert feature_type(List(ImageFeature())) == "list[Image]"
    assert feature_type(ClassLabel(names=["a", "b"])) == "ClassLabel (2: `a`, `b`)"
