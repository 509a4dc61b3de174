"""``conceptforge init binding --from properties.json``: a starter spec from a CLEVR vocabulary.

The source is CLEVR's ``properties.json`` (or a folder holding one), optionally with CLEVR's
``shapes/`` and ``materials/`` folders beside it. The starter says, as comments, what it found
(shapes with their Blender objects and whether each is a shape file or built in, colours,
materials, sizes), the held-out compositions the paper's rules give for this vocabulary, and the
defaults it chose and why; the YAML loads with :func:`load_binding_spec` as it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError
from conceptforge.generators.binding.heldout import auto_adj_noun, auto_relational
from conceptforge.generators.binding.vocab import MATERIAL_ASSETS, SHAPE_ASSETS, SUPPORTED_RELATIONS, AssetKind

KEYS = ("shapes", "colors", "materials", "sizes")
#: Starter split sizes: enough images per class for a first CLIP run, small enough to render in
#: minutes on a laptop (the paper's Table 1 sizes are in the binding-clevr-paper preset).
IMAGES_PER_TRAIN_CLASS, IMAGES_PER_HELD_OUT_CLASS = 20, 20


def _properties_path(source: str) -> Path:
    if "@" in source and not Path(source).exists():
        raise InvalidArgumentError(
            f"--from {source}: a binding vocabulary starts from CLEVR's properties.json (a file or a folder "
            "holding one), not a Hub dataset"
        )
    path = Path(source)
    if path.is_dir():
        path = path / "properties.json"
    if not path.is_file():
        raise DataNotFoundError(f"--from {source}: no {path.name} there; give CLEVR's properties.json or its folder")
    return path


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise DataFormatError(f"{path}: not JSON ({error}); give CLEVR's properties.json") from None
    if not isinstance(data, dict) or not all(isinstance(data.get(key), dict) and data[key] for key in KEYS):
        missing = [key for key in KEYS if not isinstance(data, dict) or not data.get(key)]
        raise DataFormatError(
            f"{path}: no {', '.join(missing)} mapping; CLEVR's properties.json maps shapes, colors, materials and sizes"
        )
    return data


def _origin(kind: AssetKind, blender_name: str, folder: Path) -> str:
    """Where a word's Blender thing will come from: its file, the renderer, or (a note) nowhere yet."""
    file = folder / f"{blender_name}.blend"
    if file.is_file():
        return f"{kind.file_label} {file.name}"
    return "built in" if blender_name in kind.builtins else f"MISSING: put {blender_name}.blend in {folder}"


def starter_spec(source: str, *, name: str) -> str:
    """The YAML text of a starter binding spec for the CLEVR vocabulary at ``source``."""
    path = _properties_path(source).resolve()
    data = _read(path)
    shapes_dir, materials_dir = path.parent / "shapes", path.parent / "materials"
    shapes, colors = list(data["shapes"]), list(data["colors"])
    notes = [f"Starter binding spec made by conceptforge init from {path}.", "", "Found:"]
    for shape, object_name in data["shapes"].items():
        notes.append(
            f"  shape {shape}: Blender object {object_name} ({_origin(SHAPE_ASSETS, object_name, shapes_dir)})"
        )
    notes.append(f"  {len(colors)} colours: " + ", ".join(f"{c} {tuple(rgb)}" for c, rgb in data["colors"].items()))
    for material, blender in data["materials"].items():
        notes.append(f"  material {material}: {blender} ({_origin(MATERIAL_ASSETS, blender, materials_dir)})")
    notes.append("  sizes: " + ", ".join(f"{s} radius {r}" for s, r in data["sizes"].items()))
    compositions = len(shapes) * len(colors)
    datasets = ["single-object", "two-object"] + (["relational"] if len(shapes) >= 3 else [])
    held = auto_adj_noun(shapes, colors, 0)
    notes += [
        "",
        "Defaults chosen, and why:",
        f"  relations: CLEVR's four ({', '.join(SUPPORTED_RELATIONS)}), the ones this generator renders.",
        f"  held-out: none named, so computed by the paper's rules from the {compositions} colour-shape",
        f"    compositions: gen {', '.join(' '.join(c) for c in held['gen'])};",
        f"    val {', '.join(' '.join(c) for c in held['val'])} (N/3 and N/12, every colour and shape kept in train).",
    ]
    if "relational" in datasets:
        facts = auto_relational(shapes, list(SUPPORTED_RELATIONS), 0)
        notes.append(
            "    relational: val "
            + " / ".join(" ".join(f) for f in facts["val"])
            + "; gen "
            + " / ".join(" ".join(f) for f in facts["gen"])
            + " (one image type each)."
        )
    else:
        notes.append("  no relational dataset: it needs 3 shapes (the aRc and cRb distractors name a third).")
    notes.append(
        f"  splits: {IMAGES_PER_TRAIN_CLASS} images per class, small enough to render on a laptop; "
        "the paper's Table 1 sizes are in the binding-clevr-paper preset."
    )
    train_classes = compositions - len(held["gen"]) - len(held["val"])
    adj_sizes = {
        "train": IMAGES_PER_TRAIN_CLASS * train_classes,
        "val": IMAGES_PER_HELD_OUT_CLASS * len(held["val"]),
        "gen": IMAGES_PER_HELD_OUT_CLASS * len(held["gen"]),
    }
    splits = {dataset: dict(adj_sizes) for dataset in datasets if dataset != "relational"}
    if "relational" in datasets:
        relational_classes = len(shapes) * (len(shapes) - 1) * len(SUPPORTED_RELATIONS)
        splits["relational"] = {
            "train": IMAGES_PER_TRAIN_CLASS * (relational_classes - 4),
            "val": IMAGES_PER_HELD_OUT_CLASS * 2,
            "gen": IMAGES_PER_HELD_OUT_CLASS * 2,
        }
    vocabulary = {"properties": str(path)}
    if shapes_dir.is_dir():
        vocabulary["shape_dir"] = str(shapes_dir)
    if materials_dir.is_dir():
        vocabulary["material_dir"] = str(materials_dir)
    spec = {
        "method": "binding",
        "spec_version": 1,
        "name": name,
        "description": f"Binding scenes over the CLEVR vocabulary in {path.name}.",
        "vocabulary": vocabulary,
        "relations": list(SUPPORTED_RELATIONS),
        "splits": splits,
    }
    header = "\n".join(f"# {line}".rstrip() for line in notes)
    return header + "\n" + yaml.safe_dump(spec, sort_keys=False, default_flow_style=None, width=100)
