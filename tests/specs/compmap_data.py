"""Tiny CompMap data that is neither CUB nor MIT-States, saved with ``datasets``, and its specs.

* shapes x textures: (texture, shape) pairs, a ``split`` column, 8 px images;
* gadgets: five product classes with a class x attribute table (colour, finish) in a CSV.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

TEXTURES = ["dotted", "plain", "striped"]
SHAPES = ["circle", "square", "triangle"]
PAIR_SPLITS = {
    "train": [("dotted", "circle"), ("plain", "square"), ("striped", "triangle"), ("dotted", "square")],
    "val": [("dotted", "circle"), ("plain", "circle")],
    "test": [("plain", "square"), ("striped", "circle"), ("plain", "triangle")],
}
GADGETS = {  # class -> share of its images showing each attribute (majority vote at 0.5)
    "kettle": {"colour::red": 0.9, "colour::blue": 0.1, "finish::matte": 0.8, "finish::glossy": 0.2},
    "toaster": {"colour::red": 0.2, "colour::blue": 0.7, "finish::matte": 0.6, "finish::glossy": 0.4},
    "blender": {"colour::red": 0.6, "colour::blue": 0.4, "finish::matte": 0.3, "finish::glossy": 0.9},
    "grinder": {"colour::red": 0.0, "colour::blue": 1.0, "finish::matte": 0.0, "finish::glossy": 1.0},
    "mixer": {"colour::red": 0.1, "colour::blue": 0.8, "finish::matte": 0.2, "finish::glossy": 0.7},
}
PER_CLASS = 4  # gadgets: images per class (2 train, 2 test by the split column)


def _image(rng: np.random.Generator):
    from PIL import Image

    return Image.new("RGB", (8, 8), tuple(int(x) for x in rng.integers(0, 255, 3)))


def write_shape_pairs(root: Path, *, per_pair: int = 3, split_column: bool = True, seed: int = 0) -> Path:
    """A ``save_to_disk`` folder: image, texture, shape and split columns, ``per_pair`` images of each
    pair in each split; without ``split_column``, ``per_pair`` images of each of the 7 distinct pairs."""
    import datasets

    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {"image": [], "texture": [], "shape": [], "split": []}
    by_split = PAIR_SPLITS if split_column else {"": sorted({p for pairs in PAIR_SPLITS.values() for p in pairs})}
    for split, pairs in by_split.items():
        for texture, shape in pairs:
            for _ in range(per_pair):
                rows["image"].append(_image(rng))
                rows["texture"].append(texture)
                rows["shape"].append(shape)
                rows["split"].append(split)
    if not split_column:
        del rows["split"]
    dataset = datasets.Dataset.from_dict(rows).cast_column("image", datasets.Image())
    dataset.save_to_disk(str(root))
    return root


def write_gadgets(root: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """A ``save_to_disk`` folder (image, label, split) and its class x attribute CSV beside it."""
    import datasets

    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {"image": [], "label": [], "split": []}
    for name in GADGETS:
        for index in range(PER_CLASS):
            rows["image"].append(_image(rng))
            rows["label"].append(name)
            rows["split"].append("train" if index < PER_CLASS // 2 else "test")
    datasets.Dataset.from_dict(rows).cast_column("image", datasets.Image()).save_to_disk(str(root / "gadgets"))
    attributes = list(next(iter(GADGETS.values())))
    lines = ["class," + ",".join(attributes)]
    lines += [f"{name}," + ",".join(str(shares[a]) for a in attributes) for name, shares in GADGETS.items()]
    table = root / "gadgets.csv"
    table.write_text("\n".join(lines) + "\n")
    return root / "gadgets", table


CZSL_SPEC = """\
method: compmap
spec_version: 1
name: shapes-textures
description: textures on shapes
czsl:
  source:
    path: shapes
  attribute_column: texture
  object_column: shape
  split_column: split
  template: "a drawing of {}"
  epochs: 5
  dim: 8
  lr: 0.05
"""

FEW_SHOT_SPEC = """\
method: compmap
spec_version: 1
name: gadgets
few_shot:
  source:
    path: gadgets
  attribute_table: gadgets.csv
  split_column: split
  attribute_phrase: "gadget whose {group} is {value}"
  ways: [2, 3]
  shots: [1]
  episodes: 4
  queries: 1
"""
