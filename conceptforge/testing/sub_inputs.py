"""Synthetic inputs in the exact on-disk formats: a miniature CUB_200_2011 and SUB candidate dirs."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from pathlib import Path

from PIL import Image

from conceptforge.cards import DatasetMetadata
from conceptforge.cards.grid import png_bytes
from conceptforge.generators.sub.card import SCHEMA_FEATURES
from conceptforge.testing.synthetic import write_dataset

MINI_ATTRIBUTES = [
    "has_bill_shape::curved_(up_or_down)",
    "has_bill_shape::dagger",
    "has_bill_shape::needle",
    "has_crown_color::blue",
    "has_crown_color::brown",
    "has_crown_color::grey",
    "has_crown_color::yellow",
    "has_crown_color::black",
    "has_crown_color::white",
    "has_crown_color::red",
    "has_crown_color::buff",
    "has_crown_color::green",
    "has_crown_color::pink",
    "has_tail_pattern::solid",
    "has_tail_pattern::spotted",
    "has_tail_pattern::multi-colored",
]
MINI_CLASSES = ["001.Black_footed_Albatross", "017.Cardinal", "073.Blue_Jay", "094.White_breasted_Nuthatch"]

CANDIDATE_FEATURES = SCHEMA_FEATURES


def image_png(seed: int, size: tuple[int, int] = (48, 40)) -> bytes:
    rng = random.Random(seed)
    image = Image.new("RGB", size, tuple(rng.randrange(256) for _ in range(3)))
    for _ in range(6):
        x, y = rng.randrange(size[0]), rng.randrange(size[1])
        image.paste(tuple(rng.randrange(256) for _ in range(3)), (x, y, min(size[0], x + 12), min(size[1], y + 12)))
    return png_bytes(image)


def write_attributes(root: Path, names: Sequence[str] = MINI_ATTRIBUTES) -> None:
    (root / "attributes").mkdir(parents=True, exist_ok=True)
    text = "".join(f"{i} {name}\n" for i, name in enumerate(names, start=1))
    (root / "attributes" / "attributes.txt").write_text(text)


def make_mini_cub(root: Path, *, images_per_class: int = 3) -> Path:
    """A CUB_200_2011 folder in the real layout: 4 classes, a few images, per-image labels."""
    write_attributes(root)
    (root / "classes.txt").write_text("".join(f"{i} {name}\n" for i, name in enumerate(MINI_CLASSES, start=1)))
    images, labels, attr_lines = [], [], []
    image_id = 0
    rng = random.Random(0)
    for class_id, name in enumerate(MINI_CLASSES, start=1):
        for k in range(images_per_class):
            image_id += 1
            rel = f"{name}/{name.split('.')[1]}_{k:04d}.jpg"
            path = root / "images" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(image_png(image_id))
            images.append(f"{image_id} {rel}\n")
            labels.append(f"{image_id} {class_id}\n")
            for attr_id in range(1, len(MINI_ATTRIBUTES) + 1):
                present = 1 if rng.random() < 0.3 else 0
                attr_lines.append(f"{image_id} {attr_id} {present} 3 10.5\n")
    (root / "images.txt").write_text("".join(images))
    (root / "image_class_labels.txt").write_text("".join(labels))
    (root / "attributes" / "image_attribute_labels.txt").write_text("".join(attr_lines))
    # Class-level percentages: class c has attribute j at 100% when (c + j) % 3 == 0, else 20%.
    continuous = [
        " ".join("100.0" if (c + j) % 3 == 0 else "20.0" for j in range(len(MINI_ATTRIBUTES)))
        for c in range(len(MINI_CLASSES))
    ]
    (root / "attributes" / "class_attribute_labels_continuous.txt").write_text("\n".join(continuous) + "\n")
    return root


def candidate_rows(pairs: Iterable[tuple[str, str]], per_pair: int, *, corrupt: Sequence[str] = ()) -> list[dict]:
    rows = []
    for bird, attribute in pairs:
        group, value = attribute.split("::")
        slug = attribute.removeprefix("has_").replace("::", "-").replace("(", "").replace(")", "")
        for index in range(per_pair):
            item_id = f"{bird}__{slug}__{index:04d}"
            seed = index * 7919 + len(bird) * 31 + len(value)
            data = b"not a png" if item_id in corrupt else image_png(seed)
            rows.append(
                {
                    "image": {"bytes": data, "path": f"{item_id}.png"},
                    "item_id": item_id,
                    "bird": bird,
                    "attribute": attribute,
                    "group": group,
                    "value": value,
                    "category": "shape" if "shape" in group else ("pattern" if "pattern" in group else "colour"),
                    "removed_attribute": f"{group}::other",
                    "prompt_reference": f"A photo of a {bird.replace('_', ' ')} with {value} {group}",
                    "prompt_guidance": f"A photo of a bird with {value} {group}",
                    "image_index": index,
                    "seed": seed,
                    "tdg_k": 10.0,
                    "tdg_tmin": 0.2,
                    "tdg_tmax": 0.9,
                    "guidance_scale": 3.5,
                    "num_inference_steps": 4,
                    "model_id": "tiny-flux",
                    "model_revision": "",
                }
            )
    rows.sort(key=lambda r: r["item_id"])
    return rows


DEFAULT_PAIRS = (("Blue_Jay", "has_crown_color::black"), ("Cardinal", "has_bill_shape::needle"))


def make_candidates_dir(
    path: Path,
    *,
    pairs: Sequence[tuple[str, str]] = DEFAULT_PAIRS,
    per_pair: int = 5,
    corrupt: Sequence[str] = (),
    license: str = "cc-by-nc-4.0",
) -> Path:
    rows = candidate_rows(pairs, per_pair, corrupt=corrupt)
    metadata = DatasetMetadata(pretty_name="SUB candidates (test)", license=license, summary="synthetic candidates")
    return write_dataset(path, {"candidates": rows}, CANDIDATE_FEATURES, metadata=metadata)
