"""Binding datasets (Binding paper §3) in our schema: splits ``train``/``val``/``gen`` with 5 shuffled
candidates per image (``docs/schemas.md``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conceptforge.cards.local_dataset import SPEC_FILE_NAME
from conceptforge.errors import DataFormatError, DataNotFoundError
from conceptforge.generators.binding.compositions import SPLITS
from conceptforge.loaders.harness.data import image_column_raw, load_split, require_columns

logger = logging.getLogger(__name__)

COLUMNS = ("image", "label", "candidates", "label_index", "candidate_kinds")
ADJ_NOUN = "adjective-noun"
RELATIONAL = "relational"


def parse_label(label: str) -> tuple[str, ...]:
    """``"red cube"`` -> ``("red", "cube")``; ``"cube left sphere"`` -> ``("cube", "left", "sphere")``."""
    words = tuple(label.split())
    if len(words) not in (2, 3):
        raise DataFormatError(f"label {label!r} is neither '<adjective> <noun>' nor '<subject> <relation> <object>'")
    return words


@dataclass
class BindingSplit:
    name: str
    images: list[Any]
    labels: list[str]
    candidates: list[list[str]]
    label_index: list[int]
    kinds: list[list[str]]
    item_ids: list[str] = field(default_factory=list)
    score_scale: str = "similarity"  # of the scores read with it (binding.scoring: ties on that scale)

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, indices: Sequence[int], name: str | None = None) -> BindingSplit:
        pick = lambda values: [values[i] for i in indices] if values else []  # noqa: E731
        return BindingSplit(
            name or self.name,
            pick(self.images),
            pick(self.labels),
            pick(self.candidates),
            pick(self.label_index),
            pick(self.kinds),
            pick(self.item_ids),
            self.score_scale,
        )

    @property
    def setting(self) -> str:
        return RELATIONAL if len(parse_label(self.labels[0])) == 3 else ADJ_NOUN


def _label_strings(dataset) -> list[str]:
    """The ``label`` column as text; published datasets store it as a ClassLabel."""
    feature = dataset.features["label"]
    values = list(dataset["label"])
    if hasattr(feature, "int2str"):
        return [feature.int2str(int(v)) for v in values]
    return values


def split_from_dataset(dataset, name: str) -> BindingSplit:
    require_columns(dataset, COLUMNS, what="binding")
    split = BindingSplit(
        name=name,
        images=image_column_raw(dataset),
        labels=_label_strings(dataset),
        candidates=[list(c) for c in dataset["candidates"]],
        label_index=[int(i) for i in dataset["label_index"]],
        kinds=[list(k) for k in dataset["candidate_kinds"]],
        item_ids=list(dataset["item_id"]) if "item_id" in dataset.column_names else [],
    )
    validate_split(split)
    return split


def validate_split(split: BindingSplit) -> None:
    sizes = {len(c) for c in split.candidates}
    if len(sizes) > 1:
        raise DataFormatError(f"split {split.name}: rows have different numbers of candidates {sorted(sizes)}")
    arity = {len(parse_label(label)) for label in split.labels}
    if len(arity) > 1:
        raise DataFormatError(f"split {split.name}: mixes adjective-noun and relational labels")
    for row, (label, candidates, index, kinds) in enumerate(
        zip(split.labels, split.candidates, split.label_index, split.kinds)
    ):
        if not 0 <= index < len(candidates) or candidates[index] != label:
            raise DataFormatError(
                f"split {split.name} row {row}: label_index {index} does not point at label {label!r}"
            )
        if len(kinds) != len(candidates):
            raise DataFormatError(f"split {split.name} row {row}: candidate_kinds and candidates differ in length")
        for candidate in candidates:
            if len(parse_label(candidate)) != len(parse_label(label)):
                raise DataFormatError(
                    f"split {split.name} row {row}: candidate {candidate!r} does not match the label form"
                )


@dataclass(frozen=True)
class ConfigChoice:
    """Which config of a binding repo to load: ``load`` (None: the repo's only config) and
    ``name``, the config as the repo names it (recorded in results as ``dataset.config``)."""

    load: str | None
    name: str
    only: bool = False  # the repo has one config, whatever ``wanted`` said


def resolve_config(source: str, wanted: str, *, revision: str | None = None) -> ConfigChoice:
    """The config to load from ``source``: ``wanted`` where the repo has it (our one-repo layout
    with single-object / two-object / relational), the only config of a repo with one (a release
    of one dataset), else an error naming the configs there."""
    import datasets

    local = Path(str(source)).exists()
    try:
        names = datasets.get_dataset_config_names(str(source), revision=None if local else revision)
    except Exception as error:  # noqa: BLE001 - unreachable or malformed: load_split reports it in one line
        logger.debug("config names of %s unavailable (%s); loading %r", source, error, wanted)
        return ConfigChoice(wanted, wanted)
    if wanted in names:
        return ConfigChoice(wanted, wanted, only=len(names) == 1)
    if len(names) == 1:
        logger.info("%s has one config (%s); using it", source, names[0])
        return ConfigChoice(None, names[0], only=True)
    raise DataNotFoundError(
        f"dataset {source} has no config {wanted!r} (configs: {', '.join(names)}); choose one of them"
    )


def dataset_kind(splits: dict[str, BindingSplit]) -> str | None:
    """Which binding dataset the loaded rows are, from the rows themselves: ``relational`` (labels
    ``subject relation object``), ``two-object`` (adjective–noun with hard-swap distractors: the
    second object's attributes) or ``single-object``; None without rows."""
    loaded = [split for split in splits.values() if len(split)]
    if not loaded:
        return None
    if loaded[0].setting == RELATIONAL:
        return "relational"
    if any("hard-swap" in kinds for split in loaded for kinds in split.kinds):
        return "two-object"
    return "single-object"


def release_spec_words(source: str, *, revision: str | None = None) -> dict[str, list[str]] | None:
    """The vocabulary a release was made from (its ``benchmark_spec.yaml``): shapes, colours and
    relations in the spec's order; None for a release without one (the paper's presets).

    A local folder is read directly; a Hub release's file is fetched at the release's revision."""
    import yaml

    local = Path(str(source))
    if local.exists():
        path = local / SPEC_FILE_NAME
        if not path.is_file():
            return None
    else:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError

        try:
            path = Path(hf_hub_download(str(source), SPEC_FILE_NAME, repo_type="dataset", revision=revision))
        except EntryNotFoundError:  # not in the release (or not cached offline): the labels' words are used
            return None
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        vocabulary = spec["vocabulary"]
        return {
            "shapes": [str(word) for word in vocabulary["shapes"]],
            "colors": [str(word) for word in vocabulary["colors"]],
            "relations": [str(word) for word in spec.get("relations", [])],
        }
    except (yaml.YAMLError, KeyError, TypeError, UnicodeDecodeError) as error:
        raise DataFormatError(f"{source}: {SPEC_FILE_NAME} does not name the vocabulary ({error})") from None


def load_binding(
    source: str, *, revision: str | None = None, splits: Sequence[str] = SPLITS, config: str | None = None
) -> dict[str, BindingSplit]:
    """Load the splits of one binding dataset: ``config`` names it (single-object, two-object or
    relational) in the one-repo layout; None loads the repo's only config."""
    loaded = {
        name: split_from_dataset(load_split(source, name, revision=revision, config=config), name) for name in splits
    }
    settings = {s.setting for s in loaded.values() if len(s)}
    if len(settings) > 1:
        raise DataFormatError(f"dataset {source} mixes adjective-noun and relational splits")
    return loaded
