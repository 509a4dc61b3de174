"""Miniature CUB_200_2011 and MIT-States directories in the real layouts, and synthetic activations."""

from __future__ import annotations

from pathlib import Path

import numpy as np

GROUPS = {
    "bill_shape": ["needle", "hooked", "cone"],
    "wing_color": ["red", "black", "white"],
    "size": ["small_(5_-_9_in)", "large"],
}


def write_fake_cub(
    root: Path, *, num_classes: int = 6, per_class: int = 8, attributes_at_root: bool = False, seed: int = 0
) -> Path:
    """A CUB_200_2011 directory: 8 px images, 3 attribute groups, noisy per-image annotations."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "attributes").mkdir(exist_ok=True)
    attributes = [f"has_{g}::{v}" for g, values in GROUPS.items() for v in values]
    attr_text = "".join(f"{i + 1} {a}\n" for i, a in enumerate(attributes))
    ((root / "attributes.txt") if attributes_at_root else (root / "attributes" / "attributes.txt")).write_text(
        attr_text
    )
    classes, images, labels, split, attr_lines = [], [], [], [], []
    offsets = np.cumsum([0] + [len(v) for v in GROUPS.values()])
    image_id = 0
    for c in range(num_classes):
        folder = f"{c + 1:03d}.Bird_number_{c + 1}"
        classes.append(f"{c + 1} {folder}\n")
        (root / "images" / folder).mkdir(exist_ok=True)
        proto = [offsets[g] + (c + g) % len(values) for g, values in enumerate(GROUPS.values())]
        for j in range(per_class):
            image_id += 1
            rel = f"{folder}/img_{j}.png"
            colour = tuple(int(x) for x in rng.integers(0, 255, 3))
            Image.new("RGB", (8, 8), colour).save(root / "images" / rel)
            images.append(f"{image_id} {rel}\n")
            labels.append(f"{image_id} {c + 1}\n")
            split.append(f"{image_id} {int(j < per_class // 2)}\n")
            for a in range(len(attributes)):
                present = int(a in proto) if rng.random() > 0.15 else int(rng.random() < 0.5)
                attr_lines.append(f"{image_id} {a + 1} {present} 3 1.5\n")
    (root / "classes.txt").write_text("".join(classes))
    (root / "images.txt").write_text("".join(images))
    (root / "image_class_labels.txt").write_text("".join(labels))
    (root / "train_test_split.txt").write_text("".join(split))
    (root / "attributes" / "image_attribute_labels.txt").write_text("".join(attr_lines))
    (root / "attributes" / "class_attribute_labels_continuous.txt").write_text("")
    return root


MIT_ATTRS = ["ancient", "broken", "wet"]
MIT_OBJS = ["apple", "chair", "dog"]
MIT_SPLITS = {
    "train": [
        ("ancient", "apple"),
        ("broken", "chair"),
        ("wet", "dog"),
        ("ancient", "chair"),
        ("broken", "dog"),
        ("wet", "apple"),
    ],
    "val": [("ancient", "apple"), ("broken", "chair"), ("ancient", "dog")],
    "test": [("wet", "dog"), ("ancient", "chair"), ("broken", "apple"), ("wet", "chair")],
}


def write_fake_mit_states(root: Path, *, per_pair: int = 3, seed: int = 0) -> Path:
    import torch
    from PIL import Image

    rng = np.random.default_rng(seed)
    root = Path(root)
    split_dir = root / "compositional-split-natural"
    split_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for split, pairs in MIT_SPLITS.items():
        (split_dir / f"{split}_pairs.txt").write_text("".join(f"{a} {o}\n" for a, o in pairs))
        for a, o in pairs:
            folder = root / "images" / f"{a} {o}"
            folder.mkdir(parents=True, exist_ok=True)
            for j in range(per_pair):
                name = f"{split}_{j}.jpg"
                Image.new("RGB", (8, 8), tuple(int(x) for x in rng.integers(0, 255, 3))).save(folder / name)
                rows.append({"image": f"{a} {o}/{name}", "attr": a, "obj": o, "set": split})
    rows.append({"image": "NA/none.jpg", "attr": "NA", "obj": "apple", "set": "train"})
    torch.save(rows, root / "metadata_compositional-split-natural.t7")
    return root
