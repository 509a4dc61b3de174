"""conceptforge cards: dataset directories in Hub layout, dataset cards, sample grids, publishing."""

from conceptforge.cards.card import DatasetMetadata, read_card_spec, render_card, size_category
from conceptforge.cards.dataset_dir import SplitStats, assemble_dataset_dir, write_parquet_split
from conceptforge.cards.filter_stats import FilterStats
from conceptforge.cards.grid import make_sample_grid
from conceptforge.cards.provenance import collect_provenance, package_versions, redact_secrets, resolve_model_revision
from conceptforge.cards.validate import card_problems, dataset_dir_problems
from conceptforge.cards.versions import Version, parse_version

__all__ = [
    "SplitStats",
    "assemble_dataset_dir",
    "write_parquet_split",
    "DatasetMetadata",
    "render_card",
    "read_card_spec",
    "size_category",
    "FilterStats",
    "make_sample_grid",
    "collect_provenance",
    "package_versions",
    "redact_secrets",
    "resolve_model_revision",
    "card_problems",
    "dataset_dir_problems",
    "Version",
    "parse_version",
    "publish_dataset",
    "PublishResult",
]


def __getattr__(name: str):
    # The publish step imports huggingface_hub's upload machinery; load it only when asked for.
    if name in ("publish_dataset", "PublishResult"):
        from conceptforge.cards import publish

        return getattr(publish, name)
    raise AttributeError(f"module 'conceptforge.cards' has no attribute {name!r}")
