"""A synthetic attribute dataset (mugs, not birds, not CUB) saved with ``datasets``, and its SUB spec.

Four mug classes, 6 images each, with three attribute groups of per-image 0/1 labels
(``group::value`` columns): body colour, surface pattern, handle shape. Each class has a dominant
value per group in most of its images, so the class-level table is known by construction
(:data:`DOMINANT`), and one class shows a value in exactly half its images (the threshold edge).
"""

from __future__ import annotations

from pathlib import Path

GROUPS = {
    "body_colour": ("colour", ["red", "blue", "white", "black"]),
    "surface_pattern": ("pattern", ["solid", "striped", "dotted"]),
    "handle_shape": ("shape", ["round", "square", "ring"]),
}
CLASSES = ["Diner_Mug", "Travel_Mug", "Espresso_Cup", "Beer_Stein"]
IMAGES_PER_CLASS = 6
#: class -> group -> (value of images 0..3, value of images 4..5)
DOMINANT = {
    "Diner_Mug": {
        "body_colour": ("white", "white"),
        "surface_pattern": ("solid", "striped"),
        "handle_shape": ("round", "round"),
    },
    "Travel_Mug": {
        "body_colour": ("black", "blue"),
        "surface_pattern": ("solid", "solid"),
        "handle_shape": ("square", "square"),
    },
    "Espresso_Cup": {
        "body_colour": ("red", "red"),
        "surface_pattern": ("dotted", "dotted"),
        "handle_shape": ("ring", "ring"),
    },
    "Beer_Stein": {
        "body_colour": ("blue", "blue"),
        "surface_pattern": ("striped", "striped"),
        "handle_shape": ("square", "round"),
    },
}


def value_of(name: str, group: str, index: int) -> str:
    first, last = DOMINANT[name][group]
    return first if index < 4 else last


def save_mug_dataset(folder: Path) -> Path:
    """The dataset as ``save_to_disk`` writes it: image, label (ClassLabel), one 0/1 column per value."""
    from datasets import ClassLabel, Dataset, Features, Image, Value
    from PIL import Image as PILImage

    rows: dict[str, list] = {"image": [], "label": []}
    columns = [f"{group}::{value}" for group, (_, values) in GROUPS.items() for value in values]
    rows.update({column: [] for column in columns})
    for class_index, name in enumerate(CLASSES):
        for index in range(IMAGES_PER_CLASS):
            rows["image"].append(PILImage.new("RGB", (24, 24), (40 * class_index, 30 * index, 90)))
            rows["label"].append(class_index)
            for group, (_, values) in GROUPS.items():
                chosen = value_of(name, group, index)
                for value in values:
                    rows[f"{group}::{value}"].append(int(value == chosen))
    features = Features(
        {"image": Image(), "label": ClassLabel(names=CLASSES), **{column: Value("int8") for column in columns}}
    )
    Dataset.from_dict(rows, features=features).save_to_disk(str(folder))
    return folder


def mug_spec_text(dataset_path: str = "mugs", **overrides: str) -> str:
    """A complete SUB spec over the mug dataset (``overrides`` replace top-level YAML blocks by key)."""
    blocks = {
        "head": "method: sub\nspec_version: 1\nname: sub-mugs\ndescription: SUB on a synthetic mug dataset.\ndomain: mug\n",
        "source": f"source:\n  kind: dataset\n  dataset: {{path: {dataset_path}, image_column: image, class_column: label}}\n",
        "classes": "classes: [Diner_Mug, Travel_Mug]\n",
        "groups": (
            "groups:\n"
            "  body_colour: {category: colour, phrase: 'a {value} body', values: [red, blue, white, black]}\n"
            "  surface_pattern: {category: pattern, phrase: 'a {value} surface', values: [solid, striped, dotted]}\n"
            "  handle_shape: {category: shape, phrase: 'a handle', values: [round, square, ring]}\n"
        ),
        "substitutions": "substitutions: ['body_colour::red', 'surface_pattern::dotted', 'handle_shape::ring']\n",
        "guidance": "guidance: {generic: mug}\n",
        "templates": (
            "templates:\n"
            "  colour: {reference: 'A photo of a {class} with {phrase}', guidance: 'A photo of a {guide} with {phrase}'}\n"
            "  shape: {reference: 'A photo of a {class} with {phrase} like a {guide}', guidance: 'A photo of a {guide}'}\n"
            "  pattern: {reference: 'A photo of a {class} with {phrase} like a {guide}', guidance: 'A photo of a {guide} with {phrase}'}\n"
        ),
        "tdg": (
            "tdg:\n  colour: {k: 10, tmin: 0.2, tmax: 0.9}\n  shape: {k: 10, tmin: 0.2, tmax: 0.9}\n"
            "  pattern: {k: 10, tmin: 0.2, tmax: 0.6}\n"
        ),
        "plain_template": "plain_template: 'A photo of a {class}'\n",
        "vqa_question": "vqa_question: 'Which {group} does this {domain} have? Pick one of {choices}'\n",
    }
    blocks.update(overrides)
    return "".join(blocks.values())
