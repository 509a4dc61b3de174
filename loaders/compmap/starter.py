"""``conceptforge init compmap --from SOURCE``: a starter CompMap spec made from a dataset.

What the source looks like decides the protocol:

* a MIT-States / UT-Zappos folder (``images/`` and ``<split>/train_pairs.txt``) -> ``czsl`` on it;
* a CUB_200_2011 folder -> ``few_shot`` on CUB;
* a ``datasets`` dataset (a local folder, or ``ORG/NAME@REVISION`` on the Hub) with an attribute
  and an object column -> ``czsl`` (its split column, or a split rule choosing unseen pairs);
* a ``datasets`` dataset with a class column, or an ImageFolder -> ``few_shot``, with the header
  of the class x attribute table to write.

The spec says what it found and why it chose each default, as ``#`` comments, so a researcher
edits a file that explains itself rather than starting from the schema.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError

ATTRIBUTE_NAMES = ("attribute", "attr", "adjective", "adj", "state", "texture", "material")
OBJECT_NAMES = ("object", "obj", "noun", "shape", "category")
CLASS_NAMES = ("label", "class", "category", "species", "name")
SPLIT_NAMES = ("split", "set", "subset")
SHOWN = 12  # names listed in a comment before "..."


def _listed(names: list[str]) -> str:
    return ", ".join(names[:SHOWN]) + (f", ... ({len(names)} in all)" if len(names) > SHOWN else "")


def _header(name: str, description: str, found: list[str]) -> list[str]:
    lines = ["# yaml-language-server: $schema=https://conceptforge.dev/schemas/compmap.schema.json"]
    lines += [f"# {line}" for line in found]
    lines += [
        "method: compmap",
        "spec_version: 1",
        f"name: {json.dumps(name)}",
        f"description: {json.dumps(description)}",
    ]
    return lines


def starter_spec(source: str, *, name: str) -> str:
    """The YAML text of a starter spec for ``source`` (module docstring); one line on a bad source."""
    if not name.strip():
        raise InvalidArgumentError("--name: give the benchmark's name, e.g. my-pairs")
    text = source.strip()
    path = Path(text).expanduser()
    if path.is_dir():
        if _is_pair_folder(path):
            return _pair_folder_spec(path, name)
        if (path / "attributes").is_dir() and (path / "classes.txt").is_file():
            return _cub_spec(path, name)
        if (path / "state.json").is_file() or (path / "dataset_dict.json").is_file() or _has_data_files(path):
            from conceptforge.specs import DatasetSource

            return _dataset_spec(DatasetSource(path=str(path)), _load_local(path), name)
        return _imagefolder_spec(path, name)
    if path.exists():
        raise DataFormatError(f"--from {text}: is a file; give a dataset folder, an ImageFolder or ORG/NAME@REVISION")
    if "@" in text and text.count("/") == 1:
        from conceptforge.specs import DatasetSource

        hub, revision = text.split("@", 1)
        given = DatasetSource(hub=hub, revision=revision, class_column="__none__")
        given.check(source="--from")
        return _dataset_spec(given, _open_hub(given), name)
    if text.count("/") == 1 and not text.startswith((".", "/", "~")):
        raise InvalidArgumentError(
            f"--from {text}: a Hub dataset needs a pinned revision: {text}@v1.0.0 (a tag or commit)"
        )
    raise DataNotFoundError(
        f"--from {text}: no such folder; give a dataset folder, an ImageFolder or ORG/NAME@REVISION"
    )


def _open_hub(given: Any) -> Any:
    import datasets

    try:
        return datasets.load_dataset(given.hub, split=given.split, revision=given.revision)
    except Exception as error:  # noqa: BLE001 - any failure to read the Hub dataset is one line
        raise DataNotFoundError(
            f"--from {given.description}: cannot read it ({str(error).splitlines()[0][:160]})"
        ) from None


def _has_data_files(path: Path) -> bool:
    return any(p.suffix in (".parquet", ".csv", ".jsonl", ".arrow") for p in path.rglob("*") if p.is_file())


def _load_local(path: Path) -> Any:
    import datasets

    try:
        if (path / "state.json").is_file() or (path / "dataset_dict.json").is_file():
            loaded = datasets.load_from_disk(str(path))
            return loaded[next(iter(loaded))] if isinstance(loaded, datasets.DatasetDict) else loaded
        return datasets.load_dataset(str(path), split="train")
    except (ValueError, OSError) as error:
        raise DataFormatError(
            f"--from {path}: cannot read it as a dataset ({str(error).splitlines()[0][:160]})"
        ) from None


def _is_pair_folder(path: Path) -> bool:
    return (path / "images").is_dir() and any((child / "train_pairs.txt").is_file() for child in path.iterdir())


def _pair_folder_spec(path: Path, name: str) -> str:
    from conceptforge.loaders.compmap.mit_states import read_pairs

    split_dirs = sorted(child.name for child in path.iterdir() if (child / "train_pairs.txt").is_file())
    split_dir = "compositional-split-natural" if "compositional-split-natural" in split_dirs else split_dirs[0]
    pairs = {s: read_pairs(path / split_dir / f"{s}_pairs.txt") for s in ("train", "val", "test")}
    every = sorted({p for part in pairs.values() for p in part})
    attrs, objs = sorted({a for a, _ in every}), sorted({o for _, o in every})
    seen = set(pairs["train"])
    unseen = sorted({p for s in ("val", "test") for p in pairs[s]} - seen)
    found = [
        f"Made by `conceptforge init compmap --from {path}`: the MIT-States / UT-Zappos folder layout.",
        f"attributes ({len(attrs)}): {_listed(attrs)}",
        f"objects ({len(objs)}): {_listed(objs)}",
        f"pairs: {len(every)} (train/val/test {len(pairs['train'])}/{len(pairs['val'])}/{len(pairs['test'])}); "
        f"seen (training) pairs {len(seen)}, unseen {len(unseen)}",
        f"split: the folder's own split files in {split_dir}/ (split folders found: {', '.join(split_dirs)})",
        "protocol: czsl (generalized compositional zero-shot learning), the paper's MIT-States settings.",
    ]
    lines = _header(name, f"CZSL on {path.name}", found)
    lines += ["czsl:", "  mit_states:", f"    folder: {json.dumps(str(path))}", f"    split_dir: {split_dir}"]
    lines += _czsl_defaults()
    return "\n".join(lines) + "\n"


def _czsl_defaults() -> list[str]:
    return [
        "  # prompts: the paper's 'this is {}'; 'template: \"a photo of {}\"' puts your own, a3 ensembles Table A3's",
        "  templates: paper",
        "  # closed world (the pairs of the splits); open: every attribute x object; both: two tables",
        "  world: closed",
        "  # the composition model, as in the paper (A.6): 20 epochs, width 256, lr 1e-3, seed 0",
        "  epochs: 20",
        "  dim: 256",
        "  lr: 0.001",
        "  seed: 0",
    ]


def _few_shot_defaults(n_classes: int) -> list[str]:
    ways = [w for w in (5, 10, 100, 200) if w <= n_classes] or [max(2, min(n_classes, 5))]
    return [
        f"  # n of n-way: the paper's 5, 10, 100, 200 that fit {n_classes} classes",
        f"  ways: [{', '.join(map(str, ways))}]",
        "  shots: [1, 5]",
        "  episodes: 600",
        "  seed: 0",
        "  # authors: k support images from the train split, every test image a query (the CompMap code)",
        "  protocol: authors",
        "  full_shot: true",
        "  templates: paper",
    ]


def _cub_spec(path: Path, name: str) -> str:
    classes = [
        line.split(" ", 1)[1].strip() for line in (path / "classes.txt").read_text().splitlines() if line.strip()
    ]
    attributes_file = path / "attributes" / "attributes.txt"
    if not attributes_file.is_file():
        attributes_file = path / "attributes.txt"
    names = [line.split(" ", 1)[1].strip() for line in attributes_file.read_text().splitlines() if line.strip()]
    groups = Counter(n.split("::", 1)[0] for n in names)
    found = [
        f"Made by `conceptforge init compmap --from {path}`: a CUB_200_2011 folder.",
        f"classes ({len(classes)}): {_listed(classes)}",
        f"attributes: {len(names)} in {len(groups)} groups ({_listed(sorted(groups))})",
        "presence: CUB's per-image labels, majority vote per class (>= half of its images), as the paper",
        "protocol: few_shot (n-way k-shot usefulness and the interpretability gap), the paper's CUB settings.",
    ]
    lines = _header(name, f"n-way k-shot on {path.name}", found)
    lines += ["few_shot:", "  cub:", f"    folder: {json.dumps(str(path))}"]
    lines += ['  attribute_phrase: "bird whose {group} is {value}"', *_few_shot_defaults(len(classes))]
    return "\n".join(lines) + "\n"


def _imagefolder_spec(path: Path, name: str) -> str:
    from conceptforge.specs.sources import image_folder_classes

    classes = image_folder_classes(path, location="--from")
    counts = sorted(len(images) for images in classes.values())
    found = [
        f"Made by `conceptforge init compmap --from {path}`: an ImageFolder.",
        f"classes ({len(classes)}): {_listed(sorted(classes))}",
        f"images: {sum(counts)} ({counts[0]} to {counts[-1]} per class)",
        "split: none in the folder, so each class's images are shuffled (split_seed) and half go to test.",
        "protocol: few_shot. Write attributes.csv beside this file: a row per class, a column per attribute",
        "named group::value (one group = mutually exclusive values), each cell 0/1 or the share of images.",
        "header: class," + ",".join(["colour::red", "colour::blue", "size::small", "size::large"]),
    ]
    lines = _header(name, f"n-way k-shot on {path.name}", found)
    lines += ["few_shot:", "  source:", f"    imagefolder: {json.dumps(str(path))}"]
    lines += ["  attribute_table: attributes.csv", "  test_share: 0.5", "  split_seed: 0"]
    lines += ['  attribute_phrase: "object whose {group} is {value}"', *_few_shot_defaults(len(classes))]
    return "\n".join(lines) + "\n"


def _column(columns: list[str], wanted: tuple[str, ...]) -> str | None:
    lowered = {c.lower(): c for c in columns}
    return next((lowered[w] for w in wanted if w in lowered), None)


def _values(dataset: Any, column: str) -> list[str]:
    names = getattr(dataset.features[column], "names", None)
    return [str(names[v]) if names is not None else str(v) for v in dataset[column]]


def _source_lines(given: Any, image: str) -> list[str]:
    lines = ["  source:"]
    lines += [f"    hub: {given.hub}", f"    revision: {json.dumps(given.revision)}"] if given.hub else []
    lines += [f"    path: {json.dumps(given.path)}"] if given.path else []
    return lines + [f"    image_column: {image}"]


def _dataset_spec(given: Any, dataset: Any, name: str) -> str:
    columns = list(dataset.column_names)
    image = _column(columns, ("image", "img", "picture", "photo"))
    if image is None:
        raise DataFormatError(f"--from {given.description}: no image column (columns: {', '.join(columns)})")
    attribute, obj = _column(columns, ATTRIBUTE_NAMES), _column(columns, OBJECT_NAMES)
    split = _column(columns, SPLIT_NAMES)
    if attribute and obj and attribute != obj:
        return _pair_dataset_spec(given, dataset, name, image, attribute, obj, split)
    label = _column(columns, CLASS_NAMES)
    if label is None:
        raise DataFormatError(
            f"--from {given.description}: found neither attribute and object columns nor a class column "
            f"(columns: {', '.join(columns)})"
        )
    classes = sorted(set(_values(dataset, label)))
    found = [
        f"Made by `conceptforge init compmap --from {given.description}`: a datasets dataset, {len(dataset)} rows.",
        f"classes ({len(classes)}) in column {label!r}: {_listed(classes)}",
        f"columns: {', '.join(columns)}",
        "protocol: few_shot. Write attributes.csv beside this file: a row per class, a column per attribute",
        "named group::value (one group = mutually exclusive values), each cell 0/1 or the share of images.",
    ]
    found.append(
        f"split: the column {split!r} (train/test)"
        if split
        else "split: none found, so half of each class goes to test"
    )
    lines = _header(name, f"n-way k-shot on {given.description}", found)
    lines += ["few_shot:", *_source_lines(given, image), f"    class_column: {label}"]
    lines += ["  attribute_table: attributes.csv"]
    lines += [f"  split_column: {split}"] if split else ["  test_share: 0.5", "  split_seed: 0"]
    lines += ['  attribute_phrase: "object whose {group} is {value}"', *_few_shot_defaults(len(classes))]
    return "\n".join(lines) + "\n"


def _pair_dataset_spec(
    given: Any, dataset: Any, name: str, image: str, attribute: str, obj: str, split: str | None
) -> str:
    attrs, objs = _values(dataset, attribute), _values(dataset, obj)
    pairs = Counter(zip(attrs, objs))
    found = [
        f"Made by `conceptforge init compmap --from {given.description}`: a datasets dataset, {len(dataset)} rows.",
        f"attributes ({len(set(attrs))}) in column {attribute!r}: {_listed(sorted(set(attrs)))}",
        f"objects ({len(set(objs))}) in column {obj!r}: {_listed(sorted(set(objs)))}",
        f"pairs: {len(pairs)} ({min(pairs.values())} to {max(pairs.values())} images each)",
    ]
    lines_split: list[str]
    if split:
        splits = Counter(_values(dataset, split))
        found.append(f"split: the column {split!r} ({', '.join(f'{k} {v}' for k, v in sorted(splits.items()))})")
        lines_split = [f"  split_column: {split}"]
    else:
        unseen = _choose_unseen(sorted(pairs))
        found += [
            "split: no split column, so a rule: the unseen pairs below (about 1 in 5, each attribute and object",
            "still seen in another pair) alternate between test and val; of every seen pair's images 20% go to",
            "test and 10% to val (at least one each while one stays in training), the rest to training (split_seed).",
        ]
        lines_split = ["  split_column: null", "  unseen_pairs:"] + [
            f"    - {json.dumps(f'{a} {o}')}" for a, o in unseen
        ]
        lines_split += ["  test_share: 0.2", "  val_share: 0.1", "  split_seed: 0"]
    found.append("protocol: czsl (generalized compositional zero-shot learning).")
    lines = _header(name, f"CZSL on {given.description}", found)
    lines += ["czsl:", *_source_lines(given, image), f"  attribute_column: {attribute}", f"  object_column: {obj}"]
    lines += lines_split + _czsl_defaults()
    return "\n".join(lines) + "\n"


def _choose_unseen(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """About one pair in five (at least two), from the end of the sorted list, each keeping its
    attribute and its object in some seen pair: the composition model must have seen both
    primitives of an unseen pair to compose it."""
    unseen: list[tuple[str, str]] = []
    target = max(2, len(pairs) // 5)
    for pair in pairs[::-1]:
        if len(unseen) >= target:
            break
        rest = [p for p in pairs if p != pair and p not in unseen]
        if any(a == pair[0] for a, _ in rest) and any(o == pair[1] for _, o in rest):
            unseen.append(pair)
    if len(unseen) < 2:
        raise DataFormatError(
            f"too few pairs ({len(pairs)}) to hold two unseen pairs out with both their primitives seen; "
            "add a split column"
        )
    return sorted(unseen)
