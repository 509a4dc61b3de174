"""Builders and runners for the end-to-end pipeline tests.

Why a separate module: the stage tests each build their own synthetic inputs; here every stage
must read the *previous stage's real output*, so the fixtures are the other areas' tiny-model
builders (reused, loaded by path or package import) and a CUB directory complete enough for all
stages (generation, filtering, evaluation and annotation each read different CUB files).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from tests.user_shell import REPO, plain_python_json


def load_by_path(name: str, path: Path):
    """Import a helper that lives in another test directory (conftests are not packages)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def sub_fixtures():
    """tests/sub/conftest.py: the miniature CUB (all 312 attributes, the paper's birds)."""
    return load_by_path("pipeline_sub_fixtures", REPO / "tests" / "sub" / "conftest.py")


def write_full_mini_cub(root: Path, *, images_per_class: int = 2) -> Path:
    """tests/sub's miniature CUB plus the per-image files the evaluation reads.

    Per-image labels follow the class-level table (present when the class percentage is ≥ 50),
    so the majority vote of ``loaders.cub`` agrees with the generator's S− choice.
    """
    import numpy as np
    from PIL import Image

    sub = sub_fixtures()
    cub = sub.write_mini_cub(root)
    table = np.loadtxt(cub / "attributes" / "class_attribute_labels_continuous.txt")
    images, labels, attrs = [], [], []
    image_id = 0
    for class_id, name in enumerate(sub.CLASSES, start=1):
        for k in range(images_per_class):
            image_id += 1
            relative = f"{class_id:03d}.{name}/{name}_{k:04d}.jpg"
            images.append(f"{image_id} {relative}\n")
            path = cub / "images" / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (24, 24), ((37 * class_id) % 256, (91 * k) % 256, 128)).save(path, format="JPEG")
            labels.append(f"{image_id} {class_id}\n")
            for attr_id in range(1, len(sub.ATTRIBUTES) + 1):
                present = int(table[class_id - 1, attr_id - 1] >= 50.0)
                attrs.append(f"{image_id} {attr_id} {present} 3 10.0\n")
    (cub / "images.txt").write_text("".join(images))
    (cub / "image_class_labels.txt").write_text("".join(labels))
    (cub / "attributes" / "image_attribute_labels.txt").write_text("".join(attrs))
    return cub


PLAIN_LOADER = r"""
import json, sys
from datasets import load_dataset
repo, revision = sys.argv[1], sys.argv[2]
ds = load_dataset(repo, revision=revision)
out = {split: {"rows": d.num_rows, "columns": d.column_names,
               "item_ids": list(d["item_id"]) if "item_id" in d.column_names else [],
               "image_sizes": [list(im.size) for im in d["image"]]} for split, d in ds.items()}
print(json.dumps(out))
"""


def load_with_plain_datasets(env: dict[str, str], repo_id: str, revision: str) -> dict:
    """``datasets.load_dataset(repo, revision=…)`` in a process that cannot import conceptforge."""
    return plain_python_json(PLAIN_LOADER, repo_id, revision, env=env, drop=("HF_TOKEN", "HF_HUB_OFFLINE"))
