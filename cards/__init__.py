"""conceptforge cards: dataset directories in Hub layout, dataset cards, sample grids, publishing."""

from cards.dataset_dir import SplitStats, assemble_dataset_dir, write_parquet_split
from cards.card import DatasetMetadata, render_card
from cards.grid import make_sample_grid

__all__ = [
    "SplitStats",
    "assemble_dataset_dir",
    "write_parquet_split",
    "DatasetMetadata",
    "render_card",
    "make_sample_grid",
]
