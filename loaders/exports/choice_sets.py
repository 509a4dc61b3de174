"""The multiple-choice sets a release exports: one per (task, config, split), read from its folder.

Why here: every harness export (lmms-eval, VLMEvalKit, inspect-ai) must ask the same question with
the same lettered options and the same answer key as ``conceptforge evaluate``'s by-answer
protocols, so all of them are built from one :class:`ChoiceSet`, whose items come from
:mod:`conceptforge.loaders.harness.by_answer` (``sub_choice_items``, ``binding_choice_items``)
and nowhere else.

Which tasks export: SUB (``sub-vlm``: the paper's question, the group's attributes and "Other";
for a release made from a user's spec, its ``benchmark_spec.yaml``'s values and domain, as
``evaluate`` reads them: :mod:`conceptforge.loaders.sub.spec_vocabulary`)
and binding (``binding-clip``: the image against its candidate captions). Not exported:
ConceptBed (it scores a generator's images, not a model's answers), binding-cdsm (it trains
heads on embeddings), CompMap (its n-way episodes are drawn per run from a seed over CUB
images the release does not carry — :data:`NOT_EXPORTED`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)

SUB_TASK = "sub-vlm"
BINDING_TASK = "binding-clip"
#: The conceptforge tasks with a harness export, and the metrics their leaderboards list.
EXPORTED_TASKS = (SUB_TASK, BINDING_TASK)
NOT_EXPORTED = {
    "conceptbed": "ConceptBed scores a generator's images, not a model's answers",
    "binding-cdsm": "binding-cdsm trains heads on frozen embeddings; there is no question to ask",
    "compmap": "CompMap's n-way episodes are drawn per run (seeded) over a CUB copy the release does not carry",
    "sub-cbm": "sub-cbm reads concept logits of a CBM, not answers",
}
BINDING_SPLITS = ("train", "val", "gen")
SUB_SPLIT = "test"


def identifier(text: str) -> str:
    """``text`` as a Python identifier (inspect task names, VLMEvalKit dataset names): every run of
    characters other than letters, digits and ``_`` becomes one ``_``."""
    name = re.sub(r"[^0-9A-Za-z_]+", "_", text).strip("_")
    return name if not name[:1].isdigit() else f"t_{name}"


@dataclass(frozen=True)
class ChoiceSet:
    """One exported multiple-choice set: the items of ``split`` of ``config`` for ``task``.

    ``rows[i]`` is the row of ``items[i]`` in the split (the harnesses read the image from that row
    of the release at its tag); ``s_minus[i]`` (SUB only) the letters whose choice fails S− for
    that image, ``None`` where S− does not score it; ``configs`` the release's configs (an id names
    the config only where there are several, as :func:`push_results.leaderboard_id` does)."""

    task: str
    config: str
    split: str
    items: tuple[Any, ...]
    rows: tuple[int, ...]
    configs: tuple[str, ...] = ("default",)
    s_minus: tuple[tuple[str, ...] | None, ...] = field(default=())

    @property
    def metrics(self) -> tuple[str, ...]:
        """The leaderboard metrics of this set (the task's own names)."""
        return ("s_plus", "s_minus") if self.task == SUB_TASK else (f"{self.split}_accuracy",)

    @property
    def named_config(self) -> str | None:
        return self.config if len(set(self.configs)) > 1 else None

    @property
    def name(self) -> str:
        """The set's name in every export: ``<task>[_<config>]_<split>`` as an identifier
        (``sub_vlm_test``, ``binding_clip_gen``)."""
        parts = [self.task, *([self.named_config] if self.named_config else []), self.split]
        return identifier("_".join(parts))

    def task_ids(self) -> list[tuple[str, str]]:
        """(inspect task name = Hub task id, metric) for each leaderboard metric of the set."""
        from conceptforge.loaders.harness.push_results import by_answer_task_id

        return [(by_answer_task_id(self.task, m, config=self.config, configs=self.configs), m) for m in self.metrics]


def dataset_family(columns: Sequence[str]) -> str | None:
    """``sub``, ``binding`` or None (no export) from a split's columns."""
    from conceptforge.loaders.binding.data import COLUMNS as BINDING_COLUMNS
    from conceptforge.loaders.sub.protocol import OUR_COLUMNS, PUBLISHED_COLUMNS

    have = set(columns)
    if set(BINDING_COLUMNS) <= have:
        return "binding"
    if set(OUR_COLUMNS) <= have or set(PUBLISHED_COLUMNS) <= have:
        return "sub"
    return None


def _binding_sets(directory: Path, config: str, split_names: list[str], configs: tuple[str, ...]) -> list[ChoiceSet]:
    from conceptforge.loaders.binding.data import split_from_dataset
    from conceptforge.loaders.harness.by_answer import binding_choice_items
    from conceptforge.loaders.harness.data import load_split

    sets = []
    for name in [s for s in BINDING_SPLITS if s in split_names]:
        dataset = load_split(directory, name, config=None if config == "default" else config)
        split = split_from_dataset(dataset, name)
        items = tuple(binding_choice_items({name: split}))
        sets.append(ChoiceSet(BINDING_TASK, config, name, items, tuple(range(len(items))), configs))
    return sets


def _sub_sets(
    directory: Path, config: str, split_names: list[str], configs: tuple[str, ...], cub_dir
) -> list[ChoiceSet]:
    from conceptforge.loaders.harness.by_answer import sub_choice_items
    from conceptforge.loaders.harness.data import load_split
    from conceptforge.loaders.sub.protocol import items_from_dataset
    from conceptforge.loaders.sub.scoring import s_minus_targets

    if SUB_SPLIT not in split_names:
        return []
    vocabulary = _sub_vocabulary(directory, cub_dir)
    dataset = load_split(directory, SUB_SPLIT, config=None if config == "default" else config)
    sub_items, _ = items_from_dataset(dataset, cub=vocabulary)
    items = tuple(sub_choice_items(sub_items, vocabulary.groups, domain=getattr(vocabulary, "domain", None)))
    targets = s_minus_targets(sub_items, vocabulary)
    s_minus = tuple(
        tuple(letter for letter, key in zip(item.letters, item.option_keys) if key in set(removed)) if removed else None
        for item, removed in zip(items, targets)
    )
    return [ChoiceSet(SUB_TASK, config, SUB_SPLIT, items, tuple(range(len(items))), configs, s_minus)]


def _sub_vocabulary(directory: Path, cub_dir: str | Path | None) -> Any:
    """The attribute vocabulary of a SUB release, as ``conceptforge evaluate``'s sub-vlm reads it:
    the release's own ``benchmark_spec.yaml`` (a release made from a user's spec: its groups, its
    values, its domain; S- its own ``removed_attribute``), else CUB's from ``cub_dir``."""
    from conceptforge.cub import load_cub
    from conceptforge.loaders.sub.spec_vocabulary import release_vocabulary
    from conceptforge.specs.release import read_release_spec

    own = release_vocabulary(read_release_spec(directory))
    if own is not None:
        return own
    if cub_dir is None:
        raise InvalidArgumentError(
            "a SUB release's export needs CUB's attribute list and class labels for its options and S-: pass --cub-dir"
        )
    return load_cub(cub_dir, need="votes")


def choice_sets(directory: str | Path, *, cub_dir: str | Path | None = None) -> tuple[list[ChoiceSet], str | None]:
    """The choice sets of a dataset folder, and why there are none (None when there are some)."""
    from conceptforge.cards.local_dataset import read_dataset_dir

    directory = Path(directory)
    local = read_dataset_dir(directory)
    from datasets import Features

    features = {"default": local.features} if isinstance(local.features, Features) else dict(local.features)
    configs = tuple(features)
    sets: list[ChoiceSet] = []
    families = set()
    for config, config_features in features.items():
        family = dataset_family(list(config_features))
        families.add(family)
        split_names = [s.name for s in local.splits if s.config == config]
        if family == "binding":
            sets += _binding_sets(directory, config, split_names, configs)
        elif family == "sub":
            sets += _sub_sets(directory, config, split_names, configs, cub_dir)
    if sets:
        return sets, None
    if families == {None}:
        return [], "its rows are neither SUB's nor binding's (ConceptBed scores a generator's images; no export)"
    return [], "it has none of the splits the exported tasks evaluate"
