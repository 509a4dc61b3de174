"""``conceptforge init conceptbed --from SOURCE``: a starter ConceptBed spec from a researcher's images.

SOURCE is an ImageFolder (one folder of images per concept), a local `datasets` folder, or
``ORG/NAME@REVISION`` on the Hub, with an image column and a class column. Every class becomes a
concept; the YAML's comments say what was found (concepts, images per concept), the class noun
guessed for each and why, and the defaults chosen, so the researcher edits a spec instead of
writing one. The text loads with :func:`conceptforge.specs.load_benchmark_spec` as it is.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError
from conceptforge.generators.conceptbed.benchmark import PAPER_NUM_IMAGES
from conceptforge.specs import DatasetSource
from conceptforge.specs.sources import image_folder_classes

logger = logging.getLogger(__name__)

#: The learner a starter names: the cheapest of the paper's three that learns a concept (Table 5).
STARTER_LEARNER = "textual-inversion"
#: General composite captions ('{}' is the class noun): the paper's four categories in one line each.
STARTER_TEMPLATES = (
    "a {} on a wooden table",  # relation
    "a red {}",  # attribute
    "two {}s side by side",  # counting
    "a person holding a {}",  # action
)
#: A reference-image count above which a starter warns: the learners fit a few images (the paper: 3-5 to 100).
FEW_IMAGES = 3


def guess_noun(concept: str) -> str:
    """The class noun guessed from a concept's name: its last word ('red_cube' -> 'cube',
    'Striped Vase' -> 'vase'), since an English compound names its kind last."""
    words = [w for w in re.split(r"[\s_\-.]+", concept) if w and not w.isdigit()]
    return words[-1].lower() if words else concept.lower()


def _quote(value: Any) -> str:
    """A YAML scalar in flow style (JSON strings are valid YAML)."""
    return json.dumps(value, ensure_ascii=False)


def _hub_source(source: str) -> DatasetSource:
    repo, _, revision = source.partition("@")
    if not revision:
        raise InvalidArgumentError(
            f"--from: {source} needs its revision, e.g. {source}@v1.0.0: a benchmark names the data it was made from"
        )
    return DatasetSource(hub=repo, revision=revision)


def _read_dataset(source: DatasetSource) -> Any:
    """The train split, its columns unknown yet (open_source checks columns a spec names; here they
    are what the starter finds)."""
    import datasets

    try:
        if source.path and any((Path(source.path) / name).is_file() for name in ("state.json", "dataset_dict.json")):
            loaded = datasets.load_from_disk(source.path)
            if isinstance(loaded, datasets.DatasetDict):
                split = "train" if "train" in loaded else next(iter(loaded))
                loaded = loaded[split]
            return loaded
        return datasets.load_dataset(source.path or source.hub, split=source.split, revision=source.revision)
    except (ValueError, OSError, ConnectionError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise DataFormatError(f"--from: cannot read {source.description}: {first}") from None


def _dataset_columns(dataset: Any) -> tuple[str, str]:
    """(image column, class column): the first Image feature, and a ClassLabel (or 'label'/'class')."""
    from datasets import ClassLabel, Image

    features = dataset.features
    images = [name for name, f in features.items() if isinstance(f, Image)]
    if not images:
        raise DataFormatError(f"--from: the dataset has no image column (columns: {', '.join(features)})")
    labels = [name for name, f in features.items() if isinstance(f, ClassLabel)]
    labels += [name for name in ("label", "class", "concept", "category") if name in features and name not in labels]
    if not labels:
        raise DataFormatError(
            f"--from: the dataset has no class column (a ClassLabel, or one named label/class/concept; "
            f"columns: {', '.join(features)})"
        )
    return images[0], labels[0]


def _dataset_classes(dataset: Any, column: str) -> dict[str, int]:
    from datasets import ClassLabel

    feature = dataset.features[column]
    counts: dict[str, int] = {}
    for value in dataset[column]:
        key = feature.names[value] if isinstance(feature, ClassLabel) else str(value)
        counts[key] = counts.get(key, 0) + 1
    return counts


def starter_spec(source: str, *, name: str) -> str:
    """The YAML text of a starter spec for the concepts in ``source``."""
    text = source.strip()
    path = Path(text).expanduser()
    if path.is_dir() and _is_image_folder(path):
        classes = {concept: len(images) for concept, images in image_folder_classes(path, location="--from").items()}
        where = f"the ImageFolder {text}"
        root = text.rstrip("/")
        image_lines = {concept: f"{{folder: {_quote(root + '/' + concept)}}}" for concept in classes}
    else:
        if path.exists():
            dataset_source = DatasetSource(path=text)
        elif "/" in text and not text.startswith((".", "/", "~")):
            dataset_source = _hub_source(text)
        else:
            raise DataNotFoundError(
                f"--from: no such folder {text!r}; give an ImageFolder, a dataset folder or ORG/NAME@REVISION"
            )
        dataset = _read_dataset(dataset_source)
        image_column, class_column = _dataset_columns(dataset)
        classes = _dataset_classes(dataset, class_column)
        where = f"the dataset {dataset_source.description} (images: {image_column!r}, classes: {class_column!r})"
        reader = {
            **({"hub": dataset_source.hub, "revision": dataset_source.revision} if dataset_source.hub else {}),
            **({"path": dataset_source.path} if dataset_source.path else {}),
            "image_column": image_column,
            "class_column": class_column,
        }
        flow = ", ".join(f"{key}: {_quote(value)}" for key, value in reader.items())
        image_lines = {concept: f"{{dataset: {{{flow}}}, label: {_quote(concept)}}}" for concept in classes}
    if not classes:
        raise DataFormatError(f"--from: {text} holds no classes; give one folder (or class value) per concept")
    return _render(name, where, classes, image_lines)


def _is_image_folder(path: Path) -> bool:
    """A folder of class folders (not a `datasets` folder with its own files)."""
    if (path / "dataset_info.json").exists() or (path / "state.json").exists() or (path / "dataset_dict.json").exists():
        return False
    return any(child.is_dir() and not child.name.startswith(".") for child in path.iterdir()) and not any(
        child.suffix in (".parquet", ".arrow", ".csv", ".jsonl") for child in path.iterdir()
    )


def _render(name: str, where: str, classes: dict[str, int], image_lines: dict[str, str]) -> str:
    few = [concept for concept, count in classes.items() if count < FEW_IMAGES]
    lines = [
        f"# A ConceptBed spec started by `conceptforge init conceptbed` from {where}.",
        f"# Found {len(classes)} concept(s): "
        + ", ".join(f"{concept} ({count} image{'s' if count != 1 else ''})" for concept, count in classes.items())
        + ".",
        "# class_noun: guessed as the last word of each concept's name (an English compound names its kind",
        "#   last: 'red_cube' -> 'cube'). It is the word composite captions use for the concept, replaced by V*,",
        "#   and Textual Inversion's initializer: check each one.",
        "# kind: every concept is an 'object'; make a concept 'style' to sample it as 'a <subject> in the style",
        "#   of V*' over prompts.style_subjects.",
    ]
    if few:
        lines.append(
            f"# Few reference images (< {FEW_IMAGES}): {', '.join(few)}; learners fit 3-5 or more (the paper: up to 100)."
        )
    lines += [
        f"# Defaults chosen: learner {STARTER_LEARNER} (the cheapest of the paper's three; Table 5's settings),",
        f"#   {PAPER_NUM_IMAGES} images per concept and the paper's prompts and sampling; the composition templates",
        "#   below cover the paper's four categories (relation, attribute, counting, action) once each.",
        "# Check: conceptforge generate conceptbed --spec THIS_FILE --out OUT --dry-run",
        "method: conceptbed",
        "spec_version: 1",
        f"name: {_quote(name)}",
        "concepts:",
    ]
    for concept in classes:
        lines.append(
            f"  - {{name: {_quote(concept)}, class_noun: {_quote(guess_noun(concept))}, kind: object, "
            f"images: {image_lines[concept]}}}"
        )
    lines += [
        "composition_templates:",
        *(f"  - {_quote(template)}" for template in STARTER_TEMPLATES),
        f"learner: {{name: {STARTER_LEARNER}}}",
        f"sampling: {{num_images: {PAPER_NUM_IMAGES}}}",
    ]
    return "\n".join(lines) + "\n"
