"""Dataset cards rendered from a dataset's own metadata (never written by hand per dataset)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from datasets import DatasetInfo, Features, SplitDict, SplitInfo
from huggingface_hub import DatasetCard, DatasetCardData

from cards.dataset_dir import DATA_DIR, GRID_NAME, SplitStats
from generators.errors import ConceptforgeError


def size_category(num_examples: int) -> str:
    """The Hub's ``size_categories`` bucket for a row count."""
    bounds = [
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
        (100_000_000, "10M<n<100M"),
        (1_000_000_000, "100M<n<1B"),
    ]
    for bound, name in bounds:
        if num_examples < bound:
            return name
    return "n>1T" if num_examples >= 10**12 else "1B<n<10B"


@dataclass
class DatasetMetadata:
    """What a card says about a dataset; filled in by the generator or filter that made it.

    ``license`` is required on purpose: several source datasets (CUB, FLUX.1-dev outputs) carry
    non-commercial terms, so no default could be right.
    """

    pretty_name: str
    license: str
    summary: str
    task_categories: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    citation: str = ""
    column_docs: dict[str, str] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    filter_stats: dict[str, Any] | None = None
    version: str | None = None
    previous_version: str | None = None
    repo_id: str | None = None

    def __post_init__(self) -> None:
        if not self.license or not self.license.strip():
            raise ConceptforgeError("a dataset license is required (e.g. cc-by-4.0, cc-by-nc-4.0)")


def dataset_info_yaml(features: Features, splits: Sequence[SplitStats]) -> dict[str, Any]:
    split_dict = SplitDict()
    for stats in splits:
        split_dict.add(SplitInfo(name=stats.name, num_bytes=stats.num_bytes, num_examples=stats.num_examples))
    info = DatasetInfo(features=features, splits=split_dict)
    info.download_size = None
    return info._to_yaml_dict()


def render_card(
    metadata: DatasetMetadata,
    features: Features,
    splits: Sequence[SplitStats],
    *,
    has_grid: bool = True,
) -> str:
    """Render the README card: YAML header (configs, dataset_info, license, …) and markdown."""
    total = sum(s.num_examples for s in splits)
    card_data = DatasetCardData(
        license=metadata.license,
        pretty_name=metadata.pretty_name,
        task_categories=metadata.task_categories or None,
        size_categories=[size_category(total)],
        tags=metadata.tags or None,
        configs=[
            {
                "config_name": "default",
                "data_files": [{"split": s.name, "path": f"{DATA_DIR}/{s.name}-*"} for s in splits],
            }
        ],
        dataset_info=dataset_info_yaml(features, splits),
    )
    repo = metadata.repo_id or "<org>/<name>"
    revision = f', revision="{metadata.version}"' if metadata.version else ""
    lines = [f"# {metadata.pretty_name}", "", metadata.summary.strip(), ""]
    if has_grid:
        lines += [f"![Sample grid]({GRID_NAME})", ""]
    lines += ["## Splits", "", "| split | examples |", "| --- | ---: |"]
    lines += [f"| {s.name} | {s.num_examples} |" for s in splits]
    lines += ["", "## How to load", "", "```python", "from datasets import load_dataset", "",
              f'ds = load_dataset("{repo}"{revision})', "```", ""]
    if metadata.column_docs:
        lines += ["## Schema", "", "| column | type | meaning |", "| --- | --- | --- |"]
        for name, feature in features.items():
            kind = type(feature).__name__
            if kind == "Value":
                kind = feature.dtype
            lines.append(f"| `{name}` | {kind} | {metadata.column_docs.get(name, '')} |")
        lines.append("")
    if metadata.provenance:
        lines += ["## Provenance", "", "```json", json.dumps(metadata.provenance, indent=2, sort_keys=True), "```", ""]
    if metadata.filter_stats:
        lines += ["## Filter statistics", "", "```json", json.dumps(metadata.filter_stats, indent=2, sort_keys=True), "```", ""]
    if metadata.citation:
        lines += ["## Citation", "", "```bibtex", metadata.citation.strip(), "```", ""]
    card = DatasetCard.from_template(card_data, template_str="---\n{{ card_data }}\n---\n\n" + "\n".join(lines))
    return str(card)
