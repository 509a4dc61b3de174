"""Dataset cards rendered from a dataset's own metadata (never written by hand per dataset).

A card is ``huggingface_hub.DatasetCard``: a YAML header built with ``DatasetCardData``
(license, pretty_name, task_categories, computed size_categories, tags, ``configs`` with the data
files of every split, and ``dataset_info`` whose features/splits match the parquet exactly) and a
markdown body: what the dataset is and which paper it follows, a sample grid, the version and how
to load it, the schema, filter statistics, provenance, the license and BibTeX.

The card also carries its own inputs as a JSON comment (``<!-- conceptforge-card-spec … -->``),
invisible when rendered, so that the publish step can re-render it for a release (version,
previous version, repo id) from the same spec instead of editing text.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from datasets import ClassLabel, DatasetInfo, Features, LargeList, List, SplitDict, SplitInfo
from huggingface_hub import DatasetCard, DatasetCardData

from conceptforge.cards.dataset_dir import DATA_DIR, GRID_NAME, SplitStats
from conceptforge.cards.filter_stats import FilterStats
from conceptforge.cards.provenance import published_model_id, strip_local_paths
from conceptforge.cards.validate import card_problems, feature_type, missing_sections, size_category
from conceptforge.cards.validity import held_out_leaks, validity_markdown
from conceptforge.errors import ConceptforgeError, DataFormatError, InvalidArgumentError

logger = logging.getLogger(__name__)

SPEC_MARKER = "conceptforge-card-spec"
_SPEC_RE = re.compile(r"<!-- " + SPEC_MARKER + r"\n(.*?)\n-->", re.DOTALL)
SPEC_FORMAT = 1


_OMITTED_WHEN_EMPTY = frozenset({"validity", "personal_data", "maintenance"})


@dataclass
class DatasetMetadata:
    """What a card says about a dataset; filled in by the generator or filter that made it.

    ``license`` is required on purpose: several source datasets (CUB, FLUX.1-dev outputs) carry
    non-commercial terms, so no default could be right. Use a Hub license id (``cc-by-nc-4.0``…);
    for anything else ``license="other"`` with ``license_name`` (and ``license_link``).

    ``provenance`` is best made with :func:`cards.collect_provenance`; ``filter_stats`` is a
    :class:`cards.FilterStats` (or its ``to_dict()``). ``version``, ``previous_version`` and
    ``repo_id`` are filled in by the publish step.
    """

    pretty_name: str
    license: str
    summary: str
    task_categories: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    citation: str = ""
    column_docs: dict[str, str] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    filter_stats: FilterStats | dict[str, Any] | None = None
    version: str | None = None
    previous_version: str | None = None
    repo_id: str | None = None
    paper_title: str = ""
    paper_url: str = ""
    license_name: str = ""
    license_link: str = ""
    license_note: str = ""
    source_datasets: list[str] = field(default_factory=list)
    language: list[str] = field(default_factory=list)
    grid_caption: str = ""
    # The sections a Hub dataset card is expected to have (markdown; empty: a placeholder line
    # saying nothing was written is rendered, and cards.validate reports it).
    uses: str = ""
    out_of_scope_use: str = ""
    bias_risks_limitations: str = ""
    annotations: str = ""
    config_summaries: dict[str, str] = field(default_factory=dict)  # multi-config repos: one line each
    # The dataset ships a provenance.json (cards.run_record): the card says how to verify it.
    reproducible: bool = False
    # Filled in by the publish step (cards.release_diff): what changed since the previous release.
    changes_since: str | None = None
    changes: list[str] = field(default_factory=list)
    # The Validity section (cards.validity): blind baselines, held-out checks, human agreement,
    # computed from the rows when the dataset is assembled.
    validity: dict[str, Any] = field(default_factory=dict)
    # Croissant's Responsible-AI fields that no card section carries (cards.croissant):
    # rai:personalSensitiveInformation and the owner's part of rai:dataReleaseMaintenancePlan.
    personal_data: str = ""
    maintenance: str = ""

    def __post_init__(self) -> None:
        if not self.license or not self.license.strip():
            raise InvalidArgumentError("a dataset license is required (e.g. cc-by-4.0, cc-by-nc-4.0)")
        self.license = self.license.strip()
        self.provenance = strip_local_paths(self.provenance)  # published: no home folders or user names
        if isinstance(self.filter_stats, Mapping) and FilterStats.looks_like(self.filter_stats):
            self.filter_stats = FilterStats.from_dict(self.filter_stats)

    def to_dict(self) -> dict[str, Any]:
        # Fields added after cards were first published are left out while empty, so the spec of a
        # card that does not use them is the same JSON as before they existed.
        data = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in _OMITTED_WHEN_EMPTY or getattr(self, f.name)
        }
        if isinstance(self.filter_stats, FilterStats):
            data["filter_stats"] = self.filter_stats.to_dict()
        return json.loads(json.dumps(data))  # plain JSON types only (copies nested values)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DatasetMetadata:
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


# -- YAML header ------------------------------------------------------------------------------
def dataset_info_yaml(features: Features, splits: Sequence[SplitStats]) -> dict[str, Any]:
    split_dict = SplitDict()
    for stats in splits:
        split_dict.add(SplitInfo(name=stats.name, num_bytes=stats.num_bytes, num_examples=stats.num_examples))
    info = DatasetInfo(features=features, splits=split_dict)
    info.download_size = None
    return info._to_yaml_dict()


FeaturesArg = Features | Mapping[str, Features]


def group_by_config(splits: Sequence[SplitStats]) -> dict[str, list[SplitStats]]:
    """Splits per config, in first-seen order (a plain dataset has one config, ``default``)."""
    groups: dict[str, list[SplitStats]] = {}
    for stats in splits:
        groups.setdefault(stats.config, []).append(stats)
    return groups


def features_of(features: FeaturesArg, config: str) -> Features:
    if isinstance(features, Features):
        return features
    try:
        return features[config]
    except KeyError:
        raise ConceptforgeError(f"no features given for config {config!r}") from None


def _split_pattern(stats: SplitStats) -> str:
    folder = stats.files[0].rsplit("/", 1)[0] if stats.files and "/" in stats.files[0] else DATA_DIR
    return f"{folder}/{stats.name}-*"


def card_data(metadata: DatasetMetadata, features: FeaturesArg, splits: Sequence[SplitStats]) -> DatasetCardData:
    """The YAML header: only keys the Hub knows (see :mod:`cards.validate`).

    One config (``default``) gives ``dataset_info`` as a mapping; several give the Hub's list
    form, one entry per ``config_name``, each with its own features (label names differ).
    """
    total = sum(s.num_examples for s in splits)
    groups = group_by_config(splits)
    infos = []
    for config, group in groups.items():
        info = dataset_info_yaml(features_of(features, config), group)
        infos.append(info if list(groups) == ["default"] else {"config_name": config, **info})
    extra: dict[str, Any] = {}
    if metadata.license_name:
        extra["license_name"] = metadata.license_name
    if metadata.license_link:
        extra["license_link"] = metadata.license_link
    return DatasetCardData(
        license=metadata.license,
        pretty_name=metadata.pretty_name,
        language=metadata.language or None,
        source_datasets=metadata.source_datasets or None,
        task_categories=metadata.task_categories or None,
        size_categories=[size_category(total)],
        tags=metadata.tags or None,
        configs=[
            {"config_name": config, "data_files": [{"split": s.name, "path": _split_pattern(s)} for s in group]}
            for config, group in groups.items()
        ],
        dataset_info=infos[0] if len(infos) == 1 and "config_name" not in infos[0] else infos,
        **extra,
    )


# -- markdown helpers -------------------------------------------------------------------------
def _cell(text: Any) -> str:
    """Markdown table cell: no pipes or newlines."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} B"  # pragma: no cover


def load_line(repo_id: str | None, version: str | None, config: str | None = None) -> str:
    """The exact ``load_dataset`` call for a release (``revision=`` pins the version)."""
    repo = repo_id or "<org>/<name>"
    name = f', "{config}"' if config and config != "default" else ""
    revision = f', revision="{version}"' if version else ""
    return f'load_dataset("{repo}"{name}{revision})'


def filter_stats_markdown(stats: FilterStats) -> list[str]:
    """Totals table plus a per-group table (collapsed: SUB has ~1000 groups)."""
    try:
        stats.check()
    except ConceptforgeError as error:  # rendered anyway so the card can be inspected; publishing refuses
        logger.warning("dataset card: %s", error)
    reasons = stats.reasons
    lines = ["| | count | share |", "| --- | ---: | ---: |"]

    def share(n: int) -> str:
        return f"{100 * n / stats.candidates:.1f}%" if stats.candidates else "–"

    lines.append(f"| candidates | {stats.candidates} | {share(stats.candidates)} |")
    lines.append(f"| kept | {stats.kept} | {share(stats.kept)} |")
    for reason in reasons:
        count = stats.dropped.get(reason, 0)
        lines.append(f"| dropped: {_cell(reason)} | {count} | {share(count)} |")
    lines.append("")
    if stats.groups:
        label = stats.group_label
        lines += [
            "<details>",
            f"<summary>Per {_cell(label)} ({len(stats.groups)})</summary>",
            "",
            f"| {_cell(label)} | candidates | kept | " + " | ".join(f"dropped: {_cell(r)}" for r in reasons) + " |",
            "| --- | ---: | ---: | " + " | ".join("---:" for _ in reasons) + " |",
        ]
        for name, group in stats.groups.items():
            drops = " | ".join(str(group.dropped.get(r, 0)) for r in reasons)
            lines.append(f"| {_cell(name)} | {group.candidates} | {group.kept} | {drops} |")
        lines += ["", "</details>", ""]
    return lines


def provenance_markdown(provenance: Mapping[str, Any]) -> list[str]:
    """Known provenance keys as tables/code; anything else as JSON."""
    provenance = dict(provenance)
    lines: list[str] = []
    generator = provenance.pop("generator", None)
    if generator:
        lines += [f"Generated by `{generator}`.", ""]
    models = provenance.pop("models", None)
    if models:
        lines += ["| role | model | revision |", "| --- | --- | --- |"]
        for model in models:
            lines.append(
                f"| {_cell(model.get('role', ''))} | `{_cell(published_model_id(model.get('id', ''), model.get('revision')))}` "
                f"| `{_cell(model.get('revision', ''))}` |"
            )
        lines.append("")
    for key, title in (("parameters", "Generation parameters"), ("filters", "Filter parameters"), ("seeds", "Seeds")):
        value = provenance.pop(key, None)
        if value not in (None, {}, []):
            lines += [f"**{title}**", "", "```json", json.dumps(value, indent=2, sort_keys=True), "```", ""]
    packages = provenance.pop("packages", None)
    python = provenance.pop("python", None)
    if packages or python:
        lines += ["| package | version |", "| --- | --- |"]
        if python:
            lines.append(f"| python | {_cell(python)} |")
        lines += [f"| {_cell(name)} | {_cell(version)} |" for name, version in packages.items()]
        lines.append("")
    command = provenance.pop("command_line", None)
    if command:
        lines += ["**Command line**", "", "```bash", command, "```", ""]
    if provenance:
        lines += ["```json", json.dumps(provenance, indent=2, sort_keys=True), "```", ""]
    return lines


def _spec_comment(metadata: DatasetMetadata) -> str:
    payload = {"format": SPEC_FORMAT, "metadata": metadata.to_dict()}
    # '>' is escaped so the JSON can never close the HTML comment early.
    text = json.dumps(payload, indent=1, sort_keys=True, ensure_ascii=False).replace(">", "\\u003e")
    return f"<!-- {SPEC_MARKER}\n{text}\n-->"


def read_card_spec(card_text: str) -> DatasetMetadata:
    """The :class:`DatasetMetadata` a card was rendered from (for re-rendering at publish time)."""
    match = _SPEC_RE.search(card_text)
    if not match:
        raise DataFormatError(
            "the dataset card has no conceptforge metadata block; re-assemble the dataset so "
            "conceptforge.cards.render_card writes README.md"
        )
    payload = json.loads(match.group(1))
    if payload.get("format") != SPEC_FORMAT:
        raise DataFormatError(f"unsupported card spec format {payload.get('format')!r}")
    return DatasetMetadata.from_dict(payload["metadata"])


MISSING_SECTION = "_Not written yet._"
REQUIRED_SECTIONS = ("## Uses", "### Out-of-scope use", "## Bias, Risks and Limitations", "## Annotations")


def _class_label_names(features: FeaturesArg, groups: Mapping[str, Any]) -> bool:
    def has(feature: Any) -> bool:
        if isinstance(feature, ClassLabel):
            return True
        if isinstance(feature, dict):
            return any(has(v) for v in feature.values())
        if isinstance(feature, (List, LargeList)):
            return has(feature.feature)
        if isinstance(feature, (list, tuple)):
            return any(has(v) for v in feature)
        return False

    return any(has(f) for config in groups for f in features_of(features, config).values())


def render_card(
    metadata: DatasetMetadata,
    features: FeaturesArg,
    splits: Sequence[SplitStats],
    *,
    has_grid: bool = True,
) -> str:
    """Render the README card: YAML header (configs, dataset_info, license, …) and markdown.

    A held-out check that found violations is also logged as a warning (at assembly and at
    publish, where the card is rendered): the card counts them, but nobody reads a table of
    zeros closely enough to see the one that is not."""
    for leak in held_out_leaks(metadata.validity):
        logger.warning("held-out compositions leak: %s (see the card's Validity section)", leak)
    lines = [f"# {metadata.pretty_name}", "", metadata.summary.strip(), ""]
    if metadata.paper_title:
        paper = f"[{metadata.paper_title}]({metadata.paper_url})" if metadata.paper_url else f"*{metadata.paper_title}*"
        lines += [f"It follows the paper {paper}; see the citation below.", ""]
    if has_grid:
        caption = metadata.grid_caption or "Sample grid"
        lines += [f"![{caption}]({GRID_NAME})", ""]

    lines += ["## Version", ""]
    if metadata.version:
        previous = (
            f"; previous version: `{metadata.previous_version}`" if metadata.previous_version else "; first release"
        )
        lines += [
            f"This is version `{metadata.version}`{previous}. Versions are immutable git tags on the Hub: "
            "pin one with `revision=` to get exactly these files.",
            "",
        ]
    else:
        lines += ["Not published yet: the publish step records the version here.", ""]
    if metadata.reproducible:
        target = (
            f"{metadata.repo_id}@{metadata.version}" if metadata.repo_id and metadata.version else "path/to/this/folder"
        )
        lines += [
            f"Check that these files regenerate from their recorded inputs (`provenance.json`): "
            f"`conceptforge verify {target} --sample 20` (exit 0: every checked item matches).",
            "",
        ]
    if metadata.changes_since:
        lines += [f"## Changes since {metadata.changes_since}", ""]
        lines += [f"- {line}" for line in metadata.changes] or ["- No change in rows, features or card settings."]
        lines.append("")

    groups = group_by_config(splits)
    configs = [c for c in groups if c != "default"]
    lines += ["## How to load", "", "```python", "from datasets import load_dataset", ""]
    if configs:
        lines += [f"ds = {load_line(metadata.repo_id, metadata.version, config)}" for config in configs]
    else:
        lines.append(f"ds = {load_line(metadata.repo_id, metadata.version)}")
    lines += ["```", ""]
    if not metadata.repo_id:
        example = f', "{configs[-1]}"' if configs else ""
        lines += [
            f'Before publishing, the same call loads this folder: `load_dataset("path/to/this/folder"{example})`.',
            "",
        ]
    if configs:
        lines += ["## Configs", "", "| config | meaning |", "| --- | --- |"]
        lines += [f"| `{c}` | {_cell(metadata.config_summaries.get(c, ''))} |" for c in configs]
        lines.append("")

    lines += ["## Splits", ""]
    if configs:
        lines += ["| config | split | examples | size |", "| --- | --- | ---: | ---: |"]
        lines += [f"| {s.config} | {s.name} | {s.num_examples} | {_human_bytes(s.num_bytes)} |" for s in splits]
    else:
        lines += ["| split | examples | size |", "| --- | ---: | ---: |"]
        lines += [f"| {s.name} | {s.num_examples} | {_human_bytes(s.num_bytes)} |" for s in splits]
    lines.append("")

    lines += ["## Schema", ""]
    for config in groups:
        if configs:
            lines += [f"### `{config}`", ""]
        lines += ["| column | type | meaning |", "| --- | --- | --- |"]
        for name, feature in features_of(features, config).items():
            lines.append(f"| `{name}` | {_cell(feature_type(feature))} | {_cell(metadata.column_docs.get(name, ''))} |")
        lines.append("")
    closed = _class_label_names(features, groups)
    if closed:
        lines += [
            "ClassLabel columns load as integers; `ds.features[column].int2str(i)` (or "
            "`.feature[...]` inside lists) gives the names.",
            "",
        ]

    lines += ["## Uses", "", metadata.uses.strip() or MISSING_SECTION, ""]
    lines += ["### Out-of-scope use", "", metadata.out_of_scope_use.strip() or MISSING_SECTION, ""]
    lines += ["## Bias, Risks and Limitations", "", metadata.bias_risks_limitations.strip() or MISSING_SECTION, ""]
    lines += ["## Annotations", "", metadata.annotations.strip() or MISSING_SECTION, ""]
    lines += ["## Validity", ""] + validity_markdown(metadata.validity)

    if metadata.filter_stats:
        lines += ["## Filter statistics", ""]
        if isinstance(metadata.filter_stats, FilterStats):
            lines += filter_stats_markdown(metadata.filter_stats)
        else:
            lines += ["```json", json.dumps(metadata.filter_stats, indent=2, sort_keys=True), "```", ""]
    if metadata.provenance:
        lines += ["## Provenance", ""] + provenance_markdown(metadata.provenance)

    lines += [
        "## License",
        "",
        f"`{metadata.license}`"
        + (f" ({metadata.license_name})" if metadata.license_name else "")
        + (f", see {metadata.license_link}" if metadata.license_link else "")
        + ".",
        "",
    ]
    if metadata.license_note:
        lines += [metadata.license_note.strip(), ""]
    if metadata.citation:
        lines += ["## Citation", "", "```bibtex", metadata.citation.strip(), "```", ""]
    lines += [_spec_comment(metadata), ""]

    # No template engine on the markdown: BibTeX ``{{Title}}`` or JSON braces must stay verbatim.
    header = card_data(metadata, features, splits).to_yaml()
    card = DatasetCard(f"---\n{header}\n---\n\n" + "\n".join(lines))
    text = str(card)
    for problem in card_problems(text):  # publishing refuses these; say so early
        logger.warning("dataset card: %s", problem)
    missing = missing_sections(text)
    if missing:
        logger.warning("dataset card: sections not written yet: %s", ", ".join(missing))
    return text
