"""Small synthetic datasets in our schemas (docs/schemas.md) and a fake CUB directory."""

from __future__ import annotations

import io
import random
from pathlib import Path

import numpy as np
from PIL import Image

SHAPES = ["cube", "sphere", "cylinder"]
COLOURS = ["blue", "gray", "yellow", "brown", "green", "purple", "red", "cyan"]
RELATIONS = ["left", "right", "front", "behind"]

# A miniature CUB: 3 groups, 4 classes.
CUB_ATTRIBUTES = [
    "has_bill_shape::curved_(up_or_down)",
    "has_bill_shape::dagger",
    "has_bill_shape::needle",
    "has_crown_color::blue",
    "has_crown_color::black",
    "has_crown_color::red",
    "has_crown_color::yellow",
    "has_tail_pattern::solid",
    "has_tail_pattern::spotted",
    "has_tail_pattern::multi-colored",
]
CUB_CLASSES = ["001.Black_footed_Albatross", "073.Blue_Jay", "010.Red_winged_Blackbird", "094.White_breasted_Nuthatch"]
# class -> attributes present in most of its images
CUB_CLASS_ATTRS = {
    0: ["has_bill_shape::dagger", "has_crown_color::black", "has_tail_pattern::solid"],
    1: ["has_bill_shape::dagger", "has_crown_color::blue", "has_tail_pattern::multi-colored"],
    2: ["has_bill_shape::needle", "has_crown_color::black", "has_tail_pattern::solid"],
    3: ["has_bill_shape::needle", "has_crown_color::blue", "has_tail_pattern::spotted"],
}


def png_bytes(seed: int, size=(32, 24), colour=None) -> bytes:
    rng = np.random.RandomState(seed)
    if colour is None:
        array = rng.randint(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    else:
        array = np.tile(np.array(colour, dtype=np.uint8), (size[1], size[0], 1))
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def write_fake_cub(root: Path, images_per_class: int = 3) -> Path:
    root = Path(root)
    (root / "CUB_200_2011" / "attributes").mkdir(parents=True, exist_ok=True)
    (root / "attributes.txt").write_text("".join(f"{i + 1} {a}\n" for i, a in enumerate(CUB_ATTRIBUTES)))
    cub = root / "CUB_200_2011"
    (cub / "classes.txt").write_text("".join(f"{i + 1} {c}\n" for i, c in enumerate(CUB_CLASSES)))
    image_lines, label_lines = [], []
    image_id = 0
    for class_index, present in CUB_CLASS_ATTRS.items():
        for k in range(images_per_class):
            image_id += 1
            image_lines.append(f"{image_id} {class_index + 1}\n")
            for attr_index, attr in enumerate(CUB_ATTRIBUTES):
                # the first image of a class disagrees with the majority on every attribute
                is_present = int(attr in present) if k else int(attr not in present)
                label_lines.append(f"{image_id} {attr_index + 1} {is_present} 3 10.0\n")
    (cub / "image_class_labels.txt").write_text("".join(image_lines))
    (cub / "attributes" / "image_attribute_labels.txt").write_text("".join(label_lines))
    return root


def sub_rows(n_per_pair: int = 2):
    """Rows in our filtered-SUB schema (subset of columns that loaders need + a few extras)."""
    pairs = [
        ("Black_footed_Albatross", "has_crown_color::red", "has_crown_color::black"),
        ("Blue_Jay", "has_bill_shape::needle", "has_bill_shape::dagger"),
        ("Blue_Jay", "has_tail_pattern::spotted", "has_tail_pattern::multi-colored"),
        ("White_breasted_Nuthatch", "has_crown_color::yellow", "has_crown_color::blue"),
    ]
    rows = []
    for p, (bird, attribute, removed) in enumerate(pairs):
        group, value = attribute.split("::")
        for i in range(n_per_pair):
            rows.append(
                {
                    "image": {"bytes": png_bytes(100 * p + i), "path": None},
                    "item_id": f"{bird}__{value}__{i}",
                    "bird": bird,
                    "attribute": attribute,
                    "group": group,
                    "value": value,
                    "category": "colour",
                    "removed_attribute": removed,
                    "rank": i,
                }
            )
    return rows


def sub_features():
    """The columns of :func:`sub_rows`: the SUB candidates' identity columns, typed as the
    generator's schema types them (one declaration), and the filter's ``rank``."""
    from datasets import Features, Value

    from conceptforge.generators.sub.card import SCHEMA_FEATURES

    kept = ("image", "item_id", "bird", "attribute", "group", "value", "category", "removed_attribute")
    return Features({**{name: SCHEMA_FEATURES[name] for name in kept}, "rank": Value("int32")})


def write_dataset(out_dir: Path, splits: dict[str, list[dict]], features, *, metadata=None) -> Path:
    """A dataset folder of ``splits`` (name -> rows); its card is ``metadata`` rendered as our cards
    are (no grid), or a one-line placeholder without it."""
    from conceptforge.cards import assemble_dataset_dir, render_card

    assemble_dataset_dir(
        out_dir,
        splits={name: (lambda rows=rows: iter(rows)) for name, rows in splits.items()},
        features=features,
        render_card=lambda stats: (
            "# test dataset\n" if metadata is None else render_card(metadata, features, stats, has_grid=False)
        ),
    )
    return out_dir


def write_published_sub(out_dir: Path, rows: list[dict]) -> Path:
    """The published Jessica-bader/SUB layout: image, attr_label / bird_label ClassLabels with '--'."""
    from datasets import ClassLabel, Features
    from datasets import Image as ImageFeature

    attr_names = sorted({r["attribute"].replace("::", "--") for r in rows})
    bird_names = sorted({r["bird"] for r in rows})
    features = Features(
        {
            "image": ImageFeature(),
            "attr_label": ClassLabel(names=attr_names),
            "bird_label": ClassLabel(names=bird_names),
        }
    )
    published = [
        {
            "image": r["image"],
            "attr_label": attr_names.index(r["attribute"].replace("::", "--")),
            "bird_label": bird_names.index(r["bird"]),
        }
        for r in rows
    ]
    return write_dataset(out_dir, {"test": published}, features)


# ------------------------------------------------------------------ binding
def _colour_rgb(colour: str):
    from conceptforge.generators.binding.benchmark import paper_vocabulary  # CLEVR's colours, one table

    return paper_vocabulary().color_rgb[colour]


def binding_features():
    from datasets import Features, Sequence, Value
    from datasets import Image as ImageFeature

    objects = {
        "shape": Value("string"),
        "color": Value("string"),
        "material": Value("string"),
        "size": Value("string"),
        "x": Value("float32"),
        "y": Value("float32"),
        "z": Value("float32"),
        "rotation": Value("float32"),
        "bbox": Sequence(Value("float32")),
        "center": Sequence(Value("float32")),
        "pixels": Value("int64"),
    }
    return Features(
        {
            "image": ImageFeature(),
            "item_id": Value("string"),
            "label": Value("string"),
            "candidates": Sequence(Value("string")),
            "label_index": Value("int32"),
            "candidate_kinds": Sequence(Value("string")),
            "objects": [objects],
            "relation": {"subject": Value("string"), "relation": Value("string"), "object": Value("string")},
            "seed": Value("int64"),
        }
    )


def _object(shape, colour):
    return {
        "shape": shape,
        "color": colour,
        "material": "rubber",
        "size": "large",
        "x": 0.0,
        "y": 0.0,
        "z": 0.35,
        "rotation": 0.0,
        "bbox": [0.0, 0.0, 10.0, 10.0],
        "center": [5.0, 5.0],
        "pixels": 100,
    }


def single_object_rows(labels, n_per_label, seed, all_labels):
    rng = random.Random(seed)
    rows = []
    for label in labels:
        colour, shape = label.split()
        for i in range(n_per_label):
            distractors = rng.sample([x for x in all_labels if x != label], 4)
            candidates = [label] + distractors
            kinds = ["true"] + ["random"] * 4
            order = list(range(5))
            rng.shuffle(order)
            rows.append(
                {
                    # the image colour encodes the adjective, a per-shape patch the noun
                    "image": {"bytes": _shape_png(shape, colour, rng.randint(0, 10**6)), "path": None},
                    "item_id": f"{label.replace(' ', '-')}-{seed}-{i}",
                    "label": label,
                    "candidates": [candidates[j] for j in order],
                    "label_index": order.index(0),
                    "candidate_kinds": [kinds[j] for j in order],
                    "objects": [_object(shape, colour)],
                    "relation": {"subject": "", "relation": "", "object": ""},
                    "seed": rng.randint(0, 2**31),
                }
            )
    return rows


def _shape_png(shape, colour, noise_seed, size=32):
    rng = np.random.RandomState(noise_seed)
    array = np.tile(np.array(_colour_rgb(colour), dtype=np.int16), (size, size, 1))
    array += rng.randint(-8, 9, array.shape)
    s = SHAPES.index(shape)
    array[s * 10 : s * 10 + 10, :10] = 255
    buffer = io.BytesIO()
    Image.fromarray(array.clip(0, 255).astype(np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def relational_rows(triples, n_per_triple, seed):
    rng = random.Random(seed)
    rows = []
    for s, r, o in triples:
        c = next(x for x in SHAPES if x not in (s, o))
        other = rng.choice([x for x in RELATIONS if x != r])
        candidates = [f"{s} {r} {o}", f"{o} {r} {s}", f"{s} {other} {o}", f"{s} {r} {c}", f"{c} {r} {o}"]
        kinds = ["true", "bRa", "aSb", "aRc", "cRb"]
        for i in range(n_per_triple):
            order = list(range(5))
            rng.shuffle(order)
            rows.append(
                {
                    "image": {"bytes": png_bytes(rng.randint(0, 10**6)), "path": None},
                    "item_id": f"{s}-{r}-{o}-{seed}-{i}",
                    "label": candidates[0],
                    "candidates": [candidates[j] for j in order],
                    "label_index": order.index(0),
                    "candidate_kinds": [kinds[j] for j in order],
                    "objects": [_object(s, "red"), _object(o, "blue")],
                    "relation": {"subject": s, "relation": r, "object": o},
                    "seed": rng.randint(0, 2**31),
                }
            )
    return rows


def write_single_object(out_dir: Path, n_per_label: int = 3) -> Path:
    all_labels = [f"{c} {s}" for c in COLOURS for s in SHAPES]
    train = [label for label in all_labels if label not in ("red cube", "blue sphere", "green cylinder", "cyan cube")]
    splits = {
        "train": single_object_rows(train, n_per_label, 1, all_labels),
        "val": single_object_rows(["red cube", "blue sphere"], n_per_label, 2, all_labels),
        "gen": single_object_rows(["green cylinder", "cyan cube"], n_per_label, 3, all_labels),
    }
    return write_dataset(out_dir, splits, binding_features())


def write_relational(out_dir: Path, n_per_triple: int = 2) -> Path:
    splits = {
        "train": relational_rows(
            [("cube", "left", "sphere"), ("sphere", "front", "cylinder"), ("cylinder", "right", "cube")],
            n_per_triple,
            1,
        ),
        "val": relational_rows([("sphere", "behind", "cube")], n_per_triple, 2),
        "gen": relational_rows([("cube", "behind", "cylinder")], n_per_triple, 3),
    }
    return write_dataset(out_dir, splits, binding_features())
