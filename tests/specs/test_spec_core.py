"""The shared spec core (conceptforge/specs): reading, the envelope, field paths, dataset sources.

A toy method spec (two nested dataclasses and a cross-field rule) stands in for a method's, so
these tests hold whatever the four methods' specs become. Sources are opened for real: a
``save_to_disk`` folder, a Hub-layout parquet folder, an ImageFolder, and a dataset on the local
Hub test server read at a pinned tag while ``main`` has moved on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import datasets
import pytest
from PIL import Image
from pydantic import ConfigDict, Field

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError, SpecError
from conceptforge.specs import (
    DatasetSource,
    SpecFieldError,
    load_benchmark_spec,
    open_source,
    parse_fields,
    preset_path,
    read_spec_file,
    spec_error,
)
from conceptforge.specs.sources import image_folder_classes


@dataclass(frozen=True)
class ToyAttribute:
    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    name: str
    group: str


@dataclass(frozen=True)
class ToyGroup:
    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    name: str
    question: str = "What is it?"


@dataclass(frozen=True)
class ToySpec:
    """A toy method: a source, groups, attributes naming a group, a bounded threshold."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    source: DatasetSource
    groups: tuple[ToyGroup, ...]
    attributes: tuple[ToyAttribute, ...]
    threshold: Annotated[float, Field(ge=0, le=1)] = 0.5
    mode: Literal["fast", "exact"] = "exact"

    def check(self, *, source: str = "") -> None:
        self.source.check(source=source)
        known = [group.name for group in self.groups]
        for index, attribute in enumerate(self.attributes):
            if attribute.group not in known:
                raise spec_error(
                    ("attributes", index, "group"),
                    f"unknown group {attribute.group!r}; known groups: {', '.join(known)}",
                    source=source,
                )


GOOD = {
    "method": "sub",
    "spec_version": 1,
    "name": "toy-cars",
    "description": "cars by colour",
    "source": {"path": "data"},
    "groups": [{"name": "colour"}, {"name": "shape"}],
    "attributes": [
        {"name": "red", "group": "colour"},
        {"name": "blue", "group": "colour"},
        {"name": "boxy", "group": "shape"},
    ],
}


def write(folder: Path, name: str, content: str | bytes | dict) -> Path:
    path = folder / name
    if isinstance(content, dict):
        content = json.dumps(content) if name.endswith(".json") else _yaml(content)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _yaml(data: dict) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False)


def load(path: Path, method: str = "sub"):
    return load_benchmark_spec(path, method=method, spec_cls=ToySpec)


def with_(**changes) -> dict:
    data = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


# --- reading the file --------------------------------------------------------------------------


def test_a_good_spec_loads_with_its_envelope_and_base_dir(tmp_path):
    path = write(tmp_path, "cars.yaml", {"$schema": "../schemas/sub.schema.json", **GOOD})
    loaded = load(path)
    assert (loaded.method, loaded.spec_version, loaded.name, loaded.description) == (
        "sub",
        1,
        "toy-cars",
        "cars by colour",
    )
    assert loaded.spec.attributes[2] == ToyAttribute("boxy", "shape")
    assert loaded.spec.groups[0].question == "What is it?"  # a default filled in
    assert loaded.base_dir == tmp_path.resolve()
    assert loaded.preset is None and loaded.path == path


def test_yaml_and_json_of_the_same_content_have_the_same_sha256(tmp_path):
    as_yaml = load(write(tmp_path, "a.yaml", GOOD))
    reordered = dict(reversed(list(GOOD.items())))
    as_json = load(write(tmp_path, "b.json", reordered))
    assert as_yaml.sha256 == as_json.sha256
    assert len(as_yaml.sha256) == 64
    changed = load(write(tmp_path, "c.yaml", with_(name="toy-cars-2")))
    assert changed.sha256 != as_yaml.sha256


def test_a_yaml_syntax_error_names_its_line(tmp_path):
    text = "method: sub\nspec_version: 1\nname: toy\ngroups: [colour, shape\nattributes: []\n"
    with pytest.raises(SpecError, match=r"bad\.yaml: line \d+: not valid YAML") as caught:
        read_spec_file(write(tmp_path, "bad.yaml", text))
    line = int(str(caught.value).split("line ")[1].split(":")[0])
    assert line in (4, 5)  # the unclosed list opens on line 4; YAML notices on the next


def test_a_yaml_tab_indent_names_its_line(tmp_path):
    text = "method: sub\nname: toy\nsource:\n\tpath: data\n"
    with pytest.raises(SpecError, match=r"line 4: not valid YAML"):
        read_spec_file(write(tmp_path, "tab.yaml", text))


def test_a_json_syntax_error_names_its_line(tmp_path):
    text = '{\n  "method": "sub",\n  "name": "toy",\n  "groups": [1, 2,]\n}\n'
    with pytest.raises(SpecError, match=r"bad\.json: line 4: not valid JSON"):
        read_spec_file(write(tmp_path, "bad.json", text))


@pytest.mark.parametrize(
    ("name", "content", "kind", "pattern"),
    [
        ("empty.yaml", "", SpecError, "is empty"),
        ("comments.yaml", "# only a comment\n", SpecError, "is empty"),
        ("list.yaml", "- method: sub\n", SpecError, "holds a list, not a mapping"),
        ("text.yaml", "just words\n", SpecError, "holds a str, not a mapping"),
        ("latin1.yaml", "name: caf\xe9\n".encode("latin-1"), SpecError, "is not UTF-8 text"),
        ("spec.txt", "method: sub\n", SpecError, r"ends in \.yaml, \.yml or \.json"),
    ],
)
def test_a_file_that_is_not_a_spec_is_one_line(tmp_path, name, content, kind, pattern):
    with pytest.raises(kind, match=pattern) as caught:
        read_spec_file(write(tmp_path, name, content))
    assert "\n" not in str(caught.value) and name in str(caught.value)


def test_a_missing_file_and_a_folder_are_said(tmp_path):
    with pytest.raises(DataNotFoundError, match="no such spec file"):
        read_spec_file(tmp_path / "nope.yaml")
    (tmp_path / "folder.yaml").mkdir()
    with pytest.raises(SpecError, match="is a folder, not a spec file"):
        read_spec_file(tmp_path / "folder.yaml")


def test_a_utf8_byte_order_mark_is_read(tmp_path):
    """Windows editors save UTF-8 with a BOM; the spec is still UTF-8 text."""
    path = write(tmp_path, "bom.yaml", "\ufeff" + _yaml(GOOD))
    assert load(path).name == "toy-cars"
    path = write(tmp_path, "bom.json", "\ufeff" + json.dumps(GOOD))
    assert load(path).name == "toy-cars"


# --- the envelope ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"method": None}, "method: is required; add 'method: sub'"),
        ({"method": "cars"}, "method: unknown method 'cars'; choose one of sub, conceptbed, binding, compmap"),
        ({"method": ["sub"]}, "method: unknown method ['sub']"),
        ({"method": "binding"}, "method: this is a binding spec, not a sub spec; use 'conceptforge generate binding'"),
        ({"spec_version": None}, "spec_version: is required; add 'spec_version: 1'"),
        ({"spec_version": "1"}, "spec_version: must be a positive integer (got '1')"),
        ({"spec_version": True}, "spec_version: must be a positive integer (got True)"),
        ({"spec_version": 0}, "spec_version: must be a positive integer (got 0)"),
        ({"spec_version": 2}, "spec_version: 2 is newer than this conceptforge reads (1); upgrade conceptforge"),
        ({"name": None}, "name: is required"),
        ({"name": "  "}, "name: is required"),
        ({"name": 42}, "name: is required"),
        ({"description": ["a"]}, "description: must be text"),
    ],
)
def test_envelope_errors_name_the_field(tmp_path, changes, message):
    path = write(tmp_path, "spec.yaml", with_(**changes))
    with pytest.raises(SpecFieldError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}: {message}"), str(caught.value)
    assert caught.value.field_path == message.split(":")[0]


# --- the method's fields: paths into nested dataclasses ------------------------------------------


@pytest.mark.parametrize(
    ("changes", "path", "message"),
    [
        ({"colour": "red"}, "colour", "unknown field; remove it or check its spelling"),
        ({"attributes": [{"name": "red", "group": "colour", "hue": 3}]}, "attributes[0].hue", "unknown field"),
        ({"attributes": [{"name": "red", "group": "colour"}, {"name": "x"}]}, "attributes[1].group", "is required"),
        ({"attributes": [{"name": "red", "group": 7}]}, "attributes[0].group", "Input should be a valid string"),
        ({"groups": [{"name": "colour", "question": ["a"]}]}, "groups[0].question", "Input should be a valid string"),
        ({"attributes": "red"}, "attributes", "Input should be a valid tuple"),
        ({"threshold": 1.5}, "threshold", "Input should be less than or equal to 1 (got 1.5)"),
        ({"threshold": "high"}, "threshold", "Input should be a valid number"),
        ({"mode": "quick"}, "mode", "Input should be 'fast' or 'exact' (got 'quick')"),
        ({"source": {"path": "data", "split": "train", "colum": "x"}}, "source.colum", "unknown field"),
        ({"source": None}, "source", "is required"),
        (
            {"attributes": [{"name": "red", "group": "colour"}, {"name": "x", "group": "size"}]},
            "attributes[1].group",
            "unknown group 'size'; known groups: colour, shape",
        ),
        ({"source": {"hub": "org/cars"}}, "source.revision", "a Hub source needs a pinned revision"),
    ],
)
def test_field_errors_name_the_path_into_nested_dataclasses(tmp_path, changes, path, message):
    spec = write(tmp_path, "spec.yaml", with_(**changes))
    with pytest.raises(SpecFieldError) as caught:
        load(spec)
    text = str(caught.value)
    assert caught.value.field_path == path, text
    assert text.startswith(f"{spec}: {path}: {message}"), text
    assert "\n" not in text


def test_parse_fields_prefixes_a_part_with_its_location():
    with pytest.raises(SpecFieldError) as caught:
        parse_fields(ToyAttribute, {"name": "red"}, source="cars.yaml", location=("attributes", 4))
    assert str(caught.value) == "cars.yaml: attributes[4].group: is required; add it"
    with pytest.raises(SpecFieldError, match=r"^cars\.yaml: \(top level\): Input should be"):
        parse_fields(ToyAttribute, ["red"], source="cars.yaml")


def test_a_long_value_is_not_echoed_into_the_line(tmp_path):
    spec = write(tmp_path, "spec.yaml", with_(mode="q" * 200))
    with pytest.raises(SpecFieldError) as caught:
        load(spec)
    assert "q" * 60 not in str(caught.value)


# --- presets -----------------------------------------------------------------------------------


def test_an_unknown_preset_is_a_flag_error_naming_the_known_ones():
    with pytest.raises(InvalidArgumentError, match=r"--preset: unknown preset 'sub-nope'; choose one of .* --spec"):
        preset_path("sub-nope", method="sub")
    with pytest.raises(InvalidArgumentError, match="unknown preset '../loading'"):
        preset_path("../loading")


def test_load_needs_exactly_one_of_file_and_preset(tmp_path):
    with pytest.raises(ValueError, match="exactly one"):
        load_benchmark_spec(method="sub", spec_cls=ToySpec)
    with pytest.raises(ValueError, match="exactly one"):
        load_benchmark_spec(tmp_path / "a.yaml", preset="sub-cub-paper", method="sub", spec_cls=ToySpec)


# --- DatasetSource checks ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "path", "message"),
    [
        ({"hub": "org/cars"}, "source.revision", "a Hub source needs a pinned revision"),
        ({"hub": "cars", "revision": "v1"}, "source.hub", "is not a Hub repo id of the form ORG/NAME"),
        ({"hub": "org/cars", "revision": "v1", "path": "d"}, "source", "give exactly one of hub (with revision), path"),
        ({"path": "d", "imagefolder": "i"}, "source", "(got path, imagefolder)"),
        ({}, "source", "give exactly one of hub (with revision), path or imagefolder"),
        ({"path": "d", "revision": "v1"}, "source.revision", "applies to a hub source only"),
        ({"imagefolder": "i", "config": "x"}, "source.config", "an imagefolder has no configs"),
    ],
)
def test_dataset_source_checks(fields, path, message):
    source = parse_fields(DatasetSource, fields, location=("source",))
    with pytest.raises(SpecFieldError) as caught:
        source.check(source="s.yaml")
    assert caught.value.field_path == path
    assert message in str(caught.value)


def test_dataset_source_description():
    assert DatasetSource(hub="org/cars", revision="v1.0.0").description == "org/cars@v1.0.0"
    assert DatasetSource(path="data").description == "data"
    assert DatasetSource(imagefolder="imgs").description == "imagefolder imgs"


def _png(path: Path, colour: tuple[int, int, int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), colour).save(path)


@pytest.fixture
def image_folder(tmp_path) -> Path:
    root = tmp_path / "shapes"
    for index, name in enumerate(("circle", "square", "star")):
        for copy in range(2):
            _png(root / name / f"{name}{copy}.png", (index * 80, copy * 100, 50))
    return root


def test_image_folder_classes_lists_classes_and_images(image_folder):
    classes = image_folder_classes(image_folder)
    assert list(classes) == ["circle", "square", "star"]
    assert [p.name for p in classes["star"]] == ["star0.png", "star1.png"]


def test_an_image_folder_with_an_empty_class_folder_is_refused(image_folder):
    (image_folder / "triangle").mkdir()
    (image_folder / "triangle" / "notes.txt").write_text("no images here")
    with pytest.raises(SpecFieldError, match="source.imagefolder: class folder 'triangle' has no images"):
        image_folder_classes(image_folder)


def test_an_image_folder_without_class_folders_or_missing_is_said(tmp_path):
    (tmp_path / "flat").mkdir()
    _png(tmp_path / "flat" / "a.png", (1, 2, 3))
    with pytest.raises(SpecFieldError, match="has no class folders; lay it out as <root>/<class>/<image>"):
        image_folder_classes(tmp_path / "flat")
    with pytest.raises(DataNotFoundError, match="source.imagefolder: no such folder"):
        image_folder_classes(tmp_path / "nope")


# --- open_source on real datasets --------------------------------------------------------------


def _rows(n: int, offset: int = 0) -> dict[str, list]:
    return {
        "image": [Image.new("RGB", (6, 6), (i * 30 % 256, 0, 0)) for i in range(n)],
        "label": [f"class{(i + offset) % 3}" for i in range(n)],
        "colour": ["red" if i % 2 else "blue" for i in range(n)],
    }


def _dataset(n: int, offset: int = 0) -> datasets.Dataset:
    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.Value("string"), "colour": datasets.Value("string")}
    )
    return datasets.Dataset.from_dict(_rows(n, offset), features=features)


def test_open_source_reads_a_save_to_disk_dataset_relative_to_the_spec(tmp_path):
    _dataset(5).save_to_disk(str(tmp_path / "specs" / "data"))
    loaded = open_source(DatasetSource(path="data"), base_dir=tmp_path / "specs")
    assert len(loaded) == 5 and loaded[1]["colour"] == "red"
    assert loaded[0]["image"].size == (6, 6)


def test_open_source_reads_a_saved_dataset_dict_split(tmp_path):
    datasets.DatasetDict({"train": _dataset(4), "test": _dataset(2)}).save_to_disk(str(tmp_path / "dd"))
    assert len(open_source(DatasetSource(path="dd", split="test"), base_dir=tmp_path)) == 2
    with pytest.raises(DataNotFoundError, match=r"source.split: .* has no split 'validation' \(splits: train, test\)"):
        open_source(DatasetSource(path="dd", split="validation"), base_dir=tmp_path)


def test_open_source_reads_a_hub_layout_parquet_folder(tmp_path):
    root = tmp_path / "cars"
    (root / "data").mkdir(parents=True)
    _dataset(6).to_parquet(str(root / "data" / "train-00000-of-00001.parquet"))
    _dataset(3).to_parquet(str(root / "data" / "test-00000-of-00001.parquet"))
    loaded = open_source(DatasetSource(path=str(root)), base_dir=tmp_path / "elsewhere")
    assert len(loaded) == 6 and isinstance(loaded.features["image"], datasets.Image)
    assert len(open_source(DatasetSource(path=str(root), split="test"), base_dir=tmp_path)) == 3


def test_open_source_names_a_missing_split_of_a_parquet_folder(tmp_path):
    root = tmp_path / "cars"
    (root / "data").mkdir(parents=True)
    _dataset(2).to_parquet(str(root / "data" / "train-00000-of-00001.parquet"))
    with pytest.raises(DataNotFoundError, match=r"source.split: .* has no split 'test'"):
        open_source(DatasetSource(path=str(root), split="test"), base_dir=tmp_path)


def test_open_source_reads_an_image_folder(image_folder):
    loaded = open_source(DatasetSource(imagefolder=image_folder.name), base_dir=image_folder.parent)
    assert len(loaded) == 6
    names = loaded.features["label"].names
    assert sorted(names) == ["circle", "square", "star"]
    assert sorted(names[label] for label in loaded["label"]) == ["circle"] * 2 + ["square"] * 2 + ["star"] * 2


def test_open_source_refuses_an_image_folder_with_an_empty_class(image_folder):
    (image_folder / "empty").mkdir()
    with pytest.raises(SpecFieldError, match="class folder 'empty' has no images"):
        open_source(DatasetSource(imagefolder=str(image_folder)), base_dir=image_folder)


def test_open_source_names_a_missing_column_and_the_columns_there(tmp_path):
    _dataset(3).save_to_disk(str(tmp_path / "data"))
    with pytest.raises(SpecFieldError) as caught:
        open_source(DatasetSource(path="data", class_column="make"), base_dir=tmp_path, spec_source="cars.yaml")
    assert str(caught.value) == (
        "cars.yaml: source.class_column: data has no column 'make' (columns: image, label, colour)"
    )


def test_open_source_names_a_missing_folder_with_the_spec(tmp_path):
    with pytest.raises(DataNotFoundError) as caught:
        open_source(DatasetSource(path="nope"), base_dir=tmp_path, spec_source="cars.yaml")
    assert str(caught.value).startswith("cars.yaml: source.path: no such dataset folder")


def test_open_source_names_a_folder_without_data(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.md").write_text("nothing")
    with pytest.raises((DataFormatError, DataNotFoundError)) as caught:
        open_source(DatasetSource(path="empty"), base_dir=tmp_path, spec_source="cars.yaml")
    assert str(caught.value).startswith("cars.yaml: source")
    assert "\n" not in str(caught.value)


# --- a Hub source at a pinned revision, through the local Hub test server -----------------------

PUSH = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from huggingface_hub import HfApi
    repo, first, second = sys.argv[1:4]
    api = HfApi()
    api.create_repo(repo, repo_type="dataset", exist_ok=True)
    api.upload_folder(repo_id=repo, repo_type="dataset", folder_path=first)
    api.create_tag(repo, repo_type="dataset", tag="v1.0.0")
    api.upload_folder(repo_id=repo, repo_type="dataset", folder_path=second, delete_patterns=["data/*"])
    print("pushed")
    """
)

OPEN = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from conceptforge.errors import ConceptforgeError
    from conceptforge.specs import DatasetSource, open_source
    repo = sys.argv[1]
    out = {}
    for revision in ("v1.0.0", "main"):
        loaded = open_source(DatasetSource(hub=repo, revision=revision), base_dir=Path("."))
        out[revision] = sorted(loaded["label"])
    try:
        open_source(DatasetSource(hub=repo, revision="v9.9.9"), base_dir=Path("."), spec_source="s.yaml")
    except ConceptforgeError as error:
        out["missing"] = [type(error).__name__, str(error)]
    print(json.dumps(out))
    """
)


def _hub_layout(root: Path, n: int, offset: int) -> Path:
    (root / "data").mkdir(parents=True)
    _dataset(n, offset).to_parquet(str(root / "data" / "train-00000-of-00001.parquet"))
    return root


def test_open_source_reads_a_hub_dataset_at_its_pinned_revision(tmp_path, hub_env):
    repo = f"spec-core/cars-{tmp_path.name[-8:]}"
    first, second = _hub_layout(tmp_path / "v1", 3, 0), _hub_layout(tmp_path / "v2", 5, 1)
    env = dict(hub_env, HF_HOME=str(tmp_path / "hf-home"))
    pushed = subprocess.run(
        [sys.executable, "-c", PUSH, repo, str(first), str(second)], env=env, capture_output=True, text=True
    )
    assert pushed.returncode == 0, pushed.stderr[-3000:]
    opened = subprocess.run([sys.executable, "-c", OPEN, repo], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert opened.returncode == 0, opened.stderr[-3000:]
    result = json.loads(opened.stdout.strip().splitlines()[-1])
    assert result["v1.0.0"] == ["class0", "class1", "class2"]  # the tag, not main's newer rows
    assert result["main"] == sorted(f"class{(i + 1) % 3}" for i in range(5))
    kind, message = result["missing"]
    assert kind in ("HubError", "DataNotFoundError"), message
    assert message.startswith(f"s.yaml: source: cannot read {repo}@v9.9.9"), message
    assert "\n" not in message


def test_open_source_names_a_missing_split_of_an_image_folder(image_folder):
    with pytest.raises(DataNotFoundError, match=r"s\.yaml: source.split: .* has no split 'test' \(splits: train\)"):
        open_source(
            DatasetSource(imagefolder=str(image_folder), split="test"), base_dir=image_folder, spec_source="s.yaml"
        )


@dataclass(frozen=True)
class UnionToy:
    """Unions and keyed tables, where pydantic's locations hold more than the file's keys."""

    __pydantic_config__: ClassVar = ConfigDict(extra="forbid")

    size: float | str = 1.0
    part: ToyGroup | list[str] | None = None
    classes: dict[str, ToyGroup] | None = None


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"size": [1]}, "size: Input should be a valid number"),  # not "size.float"
        ({"part": {"question": "?"}}, "part.name: is required; add it"),  # not "part.ToyGroup.name"
        ({"part": 3}, "part: Input should be a dictionary or an instance of ToyGroup"),
        ({"classes": {"Blue Jay": {"nam": "x"}}}, 'classes["Blue Jay"].name: is required; add it'),
        ({"classes": {"blue-jay": {"name": 4}}}, "classes.blue-jay.name: Input should be a valid string (got 4)"),
        ({"classes": {"x": {"name": "x", "hue": 1}}}, "classes.x.hue: unknown field"),
    ],
)
def test_a_path_names_only_keys_that_are_in_the_file(data, expected):
    with pytest.raises(SpecFieldError) as caught:
        parse_fields(UnionToy, data, source="u.yaml")
    assert str(caught.value).startswith(f"u.yaml: {expected}"), str(caught.value)
