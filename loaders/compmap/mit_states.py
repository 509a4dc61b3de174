"""MIT-States with the standard compositional split (Purushwalkam et al. 2019), from local files.

Layout (as distributed with the TMN/CZSL code)::

    ROOT/images/<attr obj>/<file>.jpg
    ROOT/compositional-split-natural/{train,val,test}_pairs.txt      one "attr obj" per line
    ROOT/metadata_compositional-split-natural.t7                     list of {image, attr, obj, set}

The metadata file may also be ``.pt`` (``torch.load``), ``.json`` or ``.jsonl`` with the same
keys. Entries with attribute ``NA``, set ``NA`` or a pair outside their split are dropped, as in
the reference loaders. Closed-world candidates are all pairs of the three splits (1,962);
open-world candidates every attribute × object combination (28,175); seen = training pairs.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError

logger = logging.getLogger(__name__)

SPLITS = ("train", "val", "test")
Pair = tuple[str, str]


@dataclass(frozen=True)
class MitSample:
    """One image: ``path`` names it (the activation cache's key); ``image`` is what the model
    reads when it is not that file (a ``datasets`` record of a spec's source; None: the file)."""

    path: Path
    attr: str
    obj: str
    image: Any = field(default=None, compare=False, repr=False)

    @property
    def model_input(self) -> Any:
        return str(self.path) if self.image is None else self.image


@dataclass
class MitStatesData:
    """Vocabularies, pairs per split and samples per split."""

    root: Path
    attrs: list[str]
    objs: list[str]
    pairs: dict[str, list[Pair]]
    samples: dict[str, list[MitSample]] = field(default_factory=dict)

    @property
    def seen_pairs(self) -> list[Pair]:
        return self.pairs["train"]

    def candidate_pairs(self, world: str) -> list[Pair]:
        """Closed world: every pair of the three splits; open world: all attribute × object pairs."""
        if world == "closed":
            return sorted(set(self.pairs["train"]) | set(self.pairs["val"]) | set(self.pairs["test"]))
        if world == "open":
            return [(a, o) for a in self.attrs for o in self.objs]
        raise InvalidArgumentError(f"world must be 'closed' or 'open', got {world!r}")

    def gt_primitives(self, split: str) -> np.ndarray:
        """[M, A + O] one-hot attribute then one-hot object (the 360-d primitive space)."""
        a_idx = {a: i for i, a in enumerate(self.attrs)}
        o_idx = {o: i for i, o in enumerate(self.objs)}
        out = np.zeros((len(self.samples[split]), len(self.attrs) + len(self.objs)), dtype=np.float32)
        for i, s in enumerate(self.samples[split]):
            out[i, a_idx[s.attr]] = 1.0
            out[i, len(self.attrs) + o_idx[s.obj]] = 1.0
        return out

    def pair_primitives(self, pairs: list[Pair]) -> np.ndarray:
        a_idx = {a: i for i, a in enumerate(self.attrs)}
        o_idx = {o: i for i, o in enumerate(self.objs)}
        out = np.zeros((len(pairs), len(self.attrs) + len(self.objs)), dtype=np.float32)
        for i, (a, o) in enumerate(pairs):
            out[i, a_idx[a]] = 1.0
            out[i, len(self.attrs) + o_idx[o]] = 1.0
        return out

    def labels(self, split: str, pairs: list[Pair]) -> np.ndarray:
        index = {p: i for i, p in enumerate(pairs)}
        return np.array([index[(s.attr, s.obj)] for s in self.samples[split]], dtype=np.int64)


def read_pairs(path: Path) -> list[Pair]:
    if not path.is_file():
        raise DataNotFoundError(f"MIT-States split file {path} does not exist")
    pairs = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2:
            raise DataFormatError(f"{path}:{line_no}: expected 'attr obj', got {line.strip()[:60]!r}")
        pairs.append((parts[0], parts[1]))
    return pairs


def _read_metadata(path: Path) -> list[dict]:
    if path.suffix in (".t7", ".pt", ".pth"):
        import torch

        try:
            rows = torch.load(path, weights_only=True)
        except Exception as error:  # noqa: BLE001 - any unreadable file is the user's to fix
            raise DataFormatError(f"cannot read MIT-States metadata {path}: {error}") from None
    elif path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    elif path.suffix == ".json":
        rows = json.loads(path.read_text(encoding="utf-8"))
    else:
        raise DataFormatError(f"unsupported MIT-States metadata format {path.suffix!r} (use .t7, .pt, .json or .jsonl)")
    if not isinstance(rows, list) or not all(
        isinstance(r, dict) and {"image", "attr", "obj", "set"} <= set(r) for r in rows
    ):
        raise DataFormatError(f"MIT-States metadata {path} must be a list of {{image, attr, obj, set}} records")
    return rows


def _image_path(root: Path, image: str) -> Path:
    direct = root / "images" / image
    if direct.is_file():
        return direct
    # Some copies flatten "<attr obj>/<file>" into "<attr>_<obj>/<file>"; keep the record's own path
    # when nothing matches so the error names what the metadata said.
    parts = Path(image).parts
    if len(parts) == 2:
        alt = root / "images" / parts[0].replace(" ", "_") / parts[1]
        if alt.is_file():
            return alt
    return direct


def load_mit_states(
    root: str | Path,
    *,
    split_dir: str = "compositional-split-natural",
    metadata: str | None = None,
    require_images: bool = True,
) -> MitStatesData:
    """Read the split files and metadata; check that every kept image exists."""
    root = Path(root)
    if not root.is_dir():
        raise DataNotFoundError(f"MIT-States directory {root} does not exist")
    pairs = {s: read_pairs(root / split_dir / f"{s}_pairs.txt") for s in SPLITS}
    all_pairs = pairs["train"] + pairs["val"] + pairs["test"]
    attrs = sorted({a for a, _ in all_pairs})
    objs = sorted({o for _, o in all_pairs})
    meta_path = root / (metadata or f"metadata_{split_dir}.t7")
    if not meta_path.is_file():
        raise DataNotFoundError(f"MIT-States metadata {meta_path} does not exist (pass --metadata)")
    pair_sets = {s: set(p) for s, p in pairs.items()}
    samples: dict[str, list[MitSample]] = {s: [] for s in SPLITS}
    for row in _read_metadata(meta_path):
        split, attr, obj = str(row["set"]), str(row["attr"]), str(row["obj"])
        if attr == "NA" or split not in samples or (attr, obj) not in pair_sets[split]:
            continue
        samples[split].append(MitSample(_image_path(root, str(row["image"])), attr, obj))
    if require_images:
        missing = [s.path for split in SPLITS for s in samples[split] if not s.path.is_file()]
        if missing:
            raise DataNotFoundError(f"{len(missing)} MIT-States images are missing, e.g. {missing[0]}")
    for split in SPLITS:
        if not samples[split]:
            raise DataFormatError(f"MIT-States split {split!r} has no images in {meta_path}")
    logger.info(
        "MIT-States: %d attrs, %d objs; pairs train/val/test %d/%d/%d; images %d/%d/%d",
        len(attrs),
        len(objs),
        *(len(pairs[s]) for s in SPLITS),
        *(len(samples[s]) for s in SPLITS),
    )
    return MitStatesData(root=root, attrs=attrs, objs=objs, pairs=pairs, samples=samples)
