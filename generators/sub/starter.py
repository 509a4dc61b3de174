"""``conceptforge init sub --from SOURCE``: a starter SUB spec made from an attribute dataset.

The starter reads the dataset once and writes a spec that loads as it is, with ``#`` comments
saying what it found (the class column, the attribute columns and how they group, the counts)
and every default it chose and why, so a researcher edits a working benchmark instead of writing
one from the docs. SOURCE is a local dataset folder (``save_to_disk``, parquet/csv/json files)
or ``ORG/NAME@REVISION`` on the Hub. An ImageFolder has classes but no attribute labels, which
SUB needs (S- and the pairs to leave out come from them): it is refused in one line.

Attributes are found in one of two layouts: one 0/1 column per ``group::value`` (grouped by the
prefix), or one column per group holding the value (text or a ClassLabel, 2 to 25 values).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError
from conceptforge.generators.sub.benchmark import SEP, SubBenchmarkSpec
from conceptforge.specs import DatasetSource, open_source
from conceptforge.specs.sources import imagefolder_suffixes

#: Column names that usually hold the class, in the order they are tried.
CLASS_COLUMN_NAMES = ("label", "class", "class_name", "category", "species", "model", "name")
MAX_VALUES = 25  # the VQA question letters its options A-Z, "Other" included
CATEGORY_WORDS = {"colour": ("colour", "color"), "pattern": ("pattern", "texture", "stripe", "spot", "print")}


def parse_source(source: str) -> DatasetSource:
    """``ORG/NAME@REVISION`` (the Hub), or a local folder; one line for anything else."""
    path = Path(source).expanduser()
    if path.exists():
        if not path.is_dir():
            raise InvalidArgumentError(f"--from {source}: give a dataset folder or ORG/NAME@REVISION, not a file")
        if _is_image_folder(path):
            raise DataFormatError(
                f"--from {source}: an ImageFolder has classes but no attribute labels, which SUB needs (S- and the "
                "pairs to leave out come from them); save a dataset with attribute columns (docs/sub.md)"
            )
        return DatasetSource(path=str(path.resolve()))
    repo, at, revision = source.partition("@")
    if repo.count("/") == 1 and not source.startswith((".", "/", "~")):
        if not at or not revision:
            raise InvalidArgumentError(
                f"--from {source}: a Hub dataset needs a pinned revision, ORG/NAME@REVISION (e.g. {repo}@v1.0.0)"
            )
        return DatasetSource(hub=repo, revision=revision)
    raise DataNotFoundError(f"--from {source}: no such dataset folder, and not ORG/NAME@REVISION")


def _is_image_folder(path: Path) -> bool:
    folders = [p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")]
    suffixes = imagefolder_suffixes()
    return bool(folders) and all(
        any(f.suffix.lower() in suffixes for f in folder.iterdir() if f.is_file()) for folder in folders[:3]
    )


def _image_column(dataset: Any) -> str:
    for name, feature in dataset.features.items():
        if type(feature).__name__ == "Image":
            return name
    raise DataFormatError(f"the dataset has no image column (columns: {', '.join(dataset.column_names)})")


def _class_column(dataset: Any, exclude: set[str]) -> str:
    labels = [n for n, f in dataset.features.items() if type(f).__name__ == "ClassLabel" and n not in exclude]
    named = [n for n in CLASS_COLUMN_NAMES if n in dataset.column_names and n not in exclude]
    for name in named + labels:
        if SEP not in name:
            return name
    raise DataFormatError(
        "found no class column (a ClassLabel, or one named " + ", ".join(CLASS_COLUMN_NAMES) + "); "
        f"columns: {', '.join(dataset.column_names)}"
    )


def _texts(dataset: Any, column: str) -> list[str]:
    names = getattr(dataset.features[column], "names", None)
    return [names[v] for v in dataset[column]] if names else [str(v) for v in dataset[column]]


def find_groups(dataset: Any, skip: set[str]) -> tuple[str, dict[str, list[str]], dict[str, str]]:
    """(layout, group -> values, group -> column) of the dataset's attribute columns."""
    prefixed: dict[str, list[str]] = {}
    for name in dataset.column_names:
        group, sep, value = name.partition(SEP)
        if sep and group and value and name not in skip:
            prefixed.setdefault(group, []).append(value)
    if prefixed:
        return "value-columns", prefixed, {}
    groups, columns = {}, {}
    for name in dataset.column_names:
        if name in skip:
            continue
        values = sorted(set(_texts(dataset, name)) - {"", "None"})
        if 2 <= len(values) <= MAX_VALUES:
            groups[name], columns[name] = values, name
    if not groups:
        raise DataFormatError(
            "found no attribute columns: name them group::value (0/1 per image) or give one column per group "
            f"holding its value (2-{MAX_VALUES} values); columns: {', '.join(dataset.column_names)}"
        )
    return "group-columns", groups, columns


def guess_category(group: str) -> str:
    lowered = group.lower()
    for category, words in CATEGORY_WORDS.items():
        if any(word in lowered for word in words):
            return category
    return "shape"


def class_level(dataset: Any, class_column: str, layout: str, groups: dict[str, list[str]]) -> dict:
    """class -> attribute -> share of the class's images showing it (0-100)."""
    classes = _texts(dataset, class_column)
    counts = Counter(classes)
    shown: dict[str, Counter] = {name: Counter() for name in counts}
    for group, values in groups.items():
        if layout == "value-columns":
            for value in values:
                for cls, flag in zip(classes, dataset[f"{group}{SEP}{value}"]):
                    if flag and float(flag) > 0.5:
                        shown[cls][f"{group}{SEP}{value}"] += 1
        else:
            for cls, value in zip(classes, _texts(dataset, group)):
                shown[cls][f"{group}{SEP}{value}"] += 1
    return {cls: {a: 100.0 * n / counts[cls] for a, n in shown[cls].items()} for cls in counts}, counts


def starter_spec(source: str, *, name: str) -> str:
    """The YAML text of a starter SUB spec for ``source`` (see the module docstring)."""
    dataset_source = parse_source(source)
    probe = DatasetSource(**{**_fields(dataset_source)})
    dataset = _open_any_columns(probe)
    image_column = _image_column(dataset)
    class_column = _class_column(dataset, {image_column})
    layout, found, columns = find_groups(dataset, {image_column, class_column})
    groups = {g: v for g, v in found.items() if 2 <= len(v) <= MAX_VALUES}
    skipped = sorted(set(found) - set(groups))
    if not groups:
        raise DataFormatError(
            f"--from {source}: no attribute group has 2 to {MAX_VALUES} values ({', '.join(skipped)}); SUB substitutes "
            "one value of a group of mutually exclusive values for another"
        )
    percent, counts = class_level(dataset, class_column, layout, groups)
    classes = list(counts)
    lines = [
        f"# A starter SUB spec made by `conceptforge init sub --from {source}` from {len(dataset)} rows.",
        f"# Classes: column {class_column!r}, {len(classes)} classes; images: column {image_column!r}.",
        f"# Attributes: {sum(len(v) for v in groups.values())} in {len(groups)} groups, layout {layout}"
        + (
            " (columns named group::value, grouped by prefix)."
            if layout == "value-columns"
            else " (one column per group)."
        ),
        "# Check every line marked CHECK; docs/sub.md 'Your own SUB benchmark' explains each field.",
        "method: sub",
        "spec_version: 1",
        f"name: {json.dumps(name)}",
        "domain: object  # CHECK: the noun for one class's kind ('car', 'mug'); used in the VQA question",
        "source:",
        "  kind: dataset",
        "  dataset:",
    ]
    for key, value in _fields(dataset_source).items():
        lines.append(f"    {key}: {json.dumps(value)}")
    lines += [f"    image_column: {json.dumps(image_column)}", f"    class_column: {json.dumps(class_column)}"]
    lines.append(f"  layout: {layout}")
    if columns and any(group != column for group, column in columns.items()):
        lines.append("  group_columns: " + json.dumps(columns))
    lines.append("# Reference classes R (images per class). The paper kept the 33 of CUB's 200 that FLUX draws")
    lines.append("# recognisably (a classifier on prompt-only images): CHECK and trim to yours.")
    lines.append("classes:")
    for cls in classes:
        lines.append(f"  - {json.dumps(cls)}  # {counts[cls]} images")
    lines.append("# Attribute groups: mutually exclusive values. The category (colour, shape, pattern) picks the")
    lines.append("# prompt templates and TDG schedule; it was guessed from the group's name: CHECK it.")
    if skipped:
        lines.append(f"# Left out (a group needs 2 to {MAX_VALUES} mutually exclusive values): {', '.join(skipped)}.")
    lines.append("groups:")
    for group, values in groups.items():
        category = guess_category(group)
        phrase = "a {value} " + group.replace("_", " ") if category != "shape" else "a " + group.replace("_", " ")
        lines.append(f"  {json.dumps(group)}:")
        lines.append(f"    category: {category}")
        lines.append(f"    phrase: {json.dumps(phrase)}  # CHECK: how a prompt says S+; {{value}} is the value")
        lines.append(f"    values: {json.dumps(values)}")
    lines.append("# Substitutions S+: per group, the value the fewest classes have (>= 50% of their images), so")
    lines.append("# the most classes get a pair (a class that already has S+ is left out, as in the paper).")
    lines.append("substitutions:")
    for group, values in groups.items():
        have = {v: sum(1 for cls in classes if percent[cls].get(f"{group}{SEP}{v}", 0.0) >= 50.0) for v in values}
        rarest = min(values, key=lambda v: (have[v], values.index(v)))
        lines.append(
            f"  - {json.dumps(f'{group}{SEP}{rarest}')}  # present in {have[rarest]} of {len(classes)} classes"
        )
    lines += [
        "guidance:",
        "  generic: object  # CHECK: G of colour substitutions, a generic word (the paper's 'bird')",
        "  named: {}  # group::value -> a class to use as G; others: the class that most often shows S+",
        "presence:",
        "  class_percent: 50  # the paper's majority vote: a class has an attribute when half its images show it",
        "  drop_present: true",
        "tdg:  # the paper's schedules (Sec. 5)",
    ]
    paper = _paper_preset()  # the paper's defaults come from its preset, not from constants here
    for category, schedule in paper.tdg.items():
        lines.append(f"  {category}: {{k: {schedule.k}, tmin: {schedule.tmin}, tmax: {schedule.tmax}}}")
    lines.append("templates:  # the paper's c_R / c_G (App. D) with {class}, {guide}, {phrase}")
    for category, pair in paper.templates.items():
        lines.append(
            f"  {category}: {{reference: {json.dumps(pair.reference)}, guidance: {json.dumps(pair.guidance)}}}"
        )
    lines.append(f"plain_template: {json.dumps(paper.plain_template)}")
    lines.append(f"vqa_question: {json.dumps(paper.vqa_question)}  # the paper's (Sec. 4.2)")
    return "\n".join(lines) + "\n"


def _paper_preset() -> SubBenchmarkSpec:
    from conceptforge.generators.sub.spec import SUB_PAPER_PRESET
    from conceptforge.specs import load_benchmark_spec

    return load_benchmark_spec(preset=SUB_PAPER_PRESET, method="sub", spec_cls=SubBenchmarkSpec).spec


def _fields(source: DatasetSource) -> dict[str, str]:
    return {key: getattr(source, key) for key in ("hub", "revision", "path") if getattr(source, key)}


def _open_any_columns(source: DatasetSource) -> Any:
    """The dataset with whatever columns it has (open_source checks the image and class columns,
    which the starter has still to find)."""
    from conceptforge.specs.validation import SpecFieldError

    try:
        return open_source(source, base_dir=Path.cwd())
    except SpecFieldError as error:
        if error.field_path not in ("source.image_column", "source.class_column"):
            raise
    import datasets

    if source.path and (Path(source.path) / "state.json").is_file():
        return datasets.load_from_disk(source.path)
    if source.path and (Path(source.path) / "dataset_dict.json").is_file():
        loaded = datasets.load_from_disk(source.path)
        return loaded[source.split] if source.split in loaded else next(iter(loaded.values()))
    if source.path:
        return datasets.load_dataset(source.path, split=source.split)
    return datasets.load_dataset(source.hub, split=source.split, revision=source.revision)
