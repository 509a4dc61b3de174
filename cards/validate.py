"""Card and dataset-directory validation, run before anything is uploaded.

Checks that the YAML header parses and round-trips through ``huggingface_hub.DatasetCard``, uses
only metadata keys the Hub knows, names a Hub license id / task categories / size bucket, and —
against the directory — that ``configs`` matches the data files, ``dataset_info`` features equal
the parquet schemas, split row counts equal the parquet footers (no data is loaded), the sample
grid exists, and no secret appears in the text. Each function returns a list of problems; the
publish step refuses to upload while the list is not empty.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml
from datasets import ClassLabel, Features, Image, LargeList, List, Value

from conceptforge.cards.dataset_dir import CARD_NAME, DATA_DIR, GRID_NAME
from conceptforge.cards.provenance import TOKEN_PATTERN
from conceptforge.cards.validity import NOT_COMPUTED
from conceptforge.errors import ConceptforgeError, DataFormatError
from conceptforge.hub_ids import HUB_LICENSES


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


# https://github.com/huggingface/huggingface.js/blob/main/packages/tasks/src/pipelines.ts
HUB_TASK_CATEGORIES = frozenset(
    """
text-classification token-classification table-question-answering question-answering
zero-shot-classification translation summarization feature-extraction text-generation
text2text-generation fill-mask sentence-similarity text-to-speech text-to-audio
automatic-speech-recognition audio-to-audio audio-classification audio-text-to-text
voice-activity-detection depth-estimation image-classification object-detection image-segmentation
text-to-image image-to-text image-to-image image-to-video unconditional-image-generation
video-classification reinforcement-learning robotics tabular-classification tabular-regression
tabular-to-text table-to-text multiple-choice text-ranking text-retrieval time-series-forecasting
text-to-video image-text-to-text visual-question-answering document-question-answering
zero-shot-image-classification graph-ml mask-generation zero-shot-object-detection text-to-3d
image-to-3d image-feature-extraction video-text-to-text keypoint-detection visual-document-retrieval
any-to-any other
""".split()
)

SIZE_CATEGORIES = frozenset(
    [
        "n<1K",
        "1K<n<10K",
        "10K<n<100K",
        "100K<n<1M",
        "1M<n<10M",
        "10M<n<100M",
        "100M<n<1B",
        "1B<n<10B",
        "10B<n<100B",
        "100B<n<1T",
        "n>1T",
    ]
)

# https://github.com/huggingface/hub-docs/blob/main/datasetcard.md
KNOWN_DATASET_KEYS = frozenset(
    """
language language_details license license_name license_link license_details tags
annotations_creators language_creators multilinguality pretty_name size_categories source_datasets
task_categories task_ids paperswithcode_id configs dataset_info extra_gated_fields
extra_gated_prompt extra_gated_heading extra_gated_description extra_gated_button_content
train-eval-index viewer thumbnail
""".split()
)

MAX_HUB_FILE_SIZE = 50 * 10**9  # the Hub refuses single files above 50 GB
MAX_FILES_PER_COMMIT = 25_000  # LFS files per commit accepted by the Hub
_YAML_RE = re.compile(r"\A---\s*\n(.*?)\n---\s*(\n|\Z)", re.DOTALL)
_GRID_LINK = f"]({GRID_NAME})"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def parse_card_yaml(text: str) -> dict[str, Any]:
    """The card's YAML header as a dict (ConceptforgeError when missing or invalid)."""
    match = _YAML_RE.match(text)
    if not match:
        raise DataFormatError("the dataset card has no YAML header (--- … ---)")
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as error:
        raise DataFormatError(f"the dataset card's YAML does not parse: {' '.join(str(error).split())}") from None
    if not isinstance(data, dict):
        raise DataFormatError("the dataset card's YAML header is not a mapping")
    return data


def _bibtex_problems(text: str) -> list[str]:
    problems = []
    for block in re.findall(r"```bibtex\n(.*?)```", text, re.DOTALL):
        entry = block.strip()
        if not re.match(r"@\w+\s*\{", entry):
            problems.append("the citation is not a BibTeX entry (@type{key, …})")
        elif entry.count("{") != entry.count("}"):
            problems.append("the BibTeX citation has unbalanced braces")
    return problems


def card_problems(text: str, *, secrets: Iterable[str] = ()) -> list[str]:
    """What is wrong with a card's text on its own (empty list: nothing)."""
    try:
        data = parse_card_yaml(text)
    except ConceptforgeError as error:
        return [str(error)]
    problems = []
    # Round trip through the Hub client: what it writes back must parse to the same mapping.
    from huggingface_hub import DatasetCard

    try:
        reparsed = yaml.safe_load(DatasetCard(text).data.to_yaml())
    except Exception as error:  # the client's own validation
        problems.append(f"huggingface_hub cannot read the card metadata: {' '.join(str(error).split())}")
    else:
        if reparsed != data:
            changed = sorted(k for k in set(data) | set(reparsed or {}) if data.get(k) != (reparsed or {}).get(k))
            problems.append(f"card metadata does not round-trip through DatasetCard (keys: {', '.join(changed)})")
    unknown = sorted(set(data) - KNOWN_DATASET_KEYS)
    if unknown:
        problems.append(f"metadata keys unknown to the Hub: {', '.join(unknown)}")
    licenses = _as_list(data.get("license"))
    if not licenses:
        problems.append("no license in the card metadata")
    for license_id in licenses:
        if license_id not in HUB_LICENSES:
            problems.append(
                f"license {license_id!r} is not a Hub license id; use one from "
                "https://huggingface.co/docs/hub/repositories-licenses or 'other' with license_name"
            )
    if "other" in licenses and not data.get("license_name"):
        problems.append("license 'other' needs license_name (and ideally license_link)")
    if not str(data.get("pretty_name") or "").strip():
        problems.append("no pretty_name in the card metadata")
    for task in _as_list(data.get("task_categories")):
        if task not in HUB_TASK_CATEGORIES:
            problems.append(f"task category {task!r} is unknown to the Hub")
    for size in _as_list(data.get("size_categories")):
        if size not in SIZE_CATEGORIES:
            problems.append(f"size category {size!r} is unknown to the Hub")
    configs = data.get("configs")
    if not isinstance(configs, list) or not configs:
        problems.append("no configs with data_files in the card metadata")
    else:
        for config in configs:
            files = config.get("data_files") if isinstance(config, dict) else None
            if not isinstance(files, list) or not all(
                isinstance(f, dict) and {"split", "path"} <= set(f) for f in files
            ):
                problems.append(f"config {config!r} has no data_files list of {{split, path}}")
    infos = _dataset_infos(data.get("dataset_info"))
    if not infos or any(not isinstance(i, dict) or "features" not in i or "splits" not in i for i in infos.values()):
        problems.append("dataset_info with features and splits is missing")
    else:
        for info in infos.values():
            try:
                Features._from_yaml_list(info["features"])
            except Exception as error:
                problems.append(f"dataset_info features do not parse: {' '.join(str(error).split())}")
        if isinstance(configs, list):
            names = {c.get("config_name", "default") for c in configs if isinstance(c, dict)}
            if names != set(infos):
                problems.append(f"configs {sorted(names)} and dataset_info configs {sorted(infos)} differ")
    secret_list = [s for s in secrets if s]
    if any(secret in text for secret in secret_list) or TOKEN_PATTERN.search(text):
        problems.append("the card contains an access token; it must never be published")
    problems += _bibtex_problems(text)
    local = _LOCAL_PATH_RE.search(text)
    if local:
        problems.append(
            f"the card holds a local path ({local.group(1)}): it names a user's folders and means nothing "
            "on the Hub; write the folder's name instead (conceptforge's own cards elide paths to .../NAME)"
        )
    return problems


#: An absolute path of this machine in a card's text (/home/me/x, /tmp/y/z): a "/" not preceded by
#: a word character, a dot or ":" (relative paths, URLs, ".../name" and "yes/no" do not match).
_LOCAL_PATH_RE = re.compile(r"(?<![\w.:/~-])(/(?:[\w.+@-]+/)+[\w.+@-]+)")


def _declared_features(directory: Path, card_text: str) -> dict[str, Features] | None:
    """The features the directory's own card declares, when ``card_text`` is another rendering
    (publish re-renders the card from the first shard's schema, so a shard with an extra column
    would otherwise be checked against a card made from itself); None when there is none."""
    path = directory / CARD_NAME
    if not path.is_file():
        return None
    own = path.read_text(encoding="utf-8")
    if own == card_text:
        return None
    try:
        infos = _dataset_infos(parse_card_yaml(own)["dataset_info"])
        return {name: Features._from_yaml_list(info["features"]) for name, info in infos.items()}
    except Exception:  # an unreadable own card: the rendered one is checked as before
        return None


def _dataset_infos(info: Any) -> dict[str, Any]:
    """dataset_info per config name: the Hub writes a mapping for one config, a list for several."""
    if isinstance(info, dict):
        return {info.get("config_name", "default"): info}
    if isinstance(info, list):
        return {i.get("config_name", "default") if isinstance(i, dict) else "?": i for i in info}
    return {}


SECTION_HEADINGS = ("## Uses", "### Out-of-scope use", "## Bias, Risks and Limitations", "## Annotations")


def missing_sections(text: str) -> list[str]:
    """Hub card sections that are absent or still the placeholder (a warning, not a refusal)."""
    missing = []
    for heading in SECTION_HEADINGS:
        match = re.search(re.escape(heading) + r"\n\n(.*?)\n", text)
        if not match or match.group(1).strip() in ("", "_Not written yet._"):
            missing.append(heading.lstrip("# "))
    match = re.search(r"## Validity\n\n(.*?)\n", text)
    if not match or match.group(1).strip() == NOT_COMPUTED:
        missing.append("Validity")
    return missing


def dataset_dir_problems(
    directory: str | Path, card_text: str | None = None, *, secrets: Iterable[str] = ()
) -> list[str]:
    """Card problems plus mismatches between the card and the files in ``directory``."""
    directory = Path(directory)
    if card_text is None:
        card_path = directory / CARD_NAME
        if not card_path.is_file():
            return [f"{directory} has no {CARD_NAME}: not a complete dataset directory"]
        card_text = card_path.read_text(encoding="utf-8")
    problems = card_problems(card_text, secrets=secrets)
    try:
        data = parse_card_yaml(card_text)
        infos = _dataset_infos(data["dataset_info"])
        features = {name: Features._from_yaml_list(info["features"]) for name, info in infos.items()}
        card_splits = {(name, s["name"]): s for name, info in infos.items() for s in info["splits"]}
        data_files = [
            (config.get("config_name", "default"), f) for config in data["configs"] for f in config["data_files"]
        ]
    except Exception:
        return problems or ["the card metadata lacks configs/dataset_info"]
    # the assembly's own card too: what the shards were written to hold
    declared = _declared_features(directory, card_text) or {}

    files = sorted(
        p.relative_to(directory).as_posix()
        for p in (directory / DATA_DIR).rglob("*")
        if p.is_file() and not p.name.startswith(".")
    )
    if not files:
        problems.append(f"{directory}/{DATA_DIR} holds no data files")
    if len(files) + 2 > MAX_FILES_PER_COMMIT:
        problems.append(
            f"{len(files)} data files exceed what one Hub commit takes; assemble with a larger max_shard_size"
        )
    matched: set[str] = set()
    rows: dict[tuple[str, str], int] = {}
    for config, entry in data_files:
        split, pattern = (config, entry["split"]), entry["path"]
        hits = [f for f in files if fnmatch.fnmatch(f, pattern)]
        if not hits:
            problems.append(f"split {split[1]!r}: no file matches {pattern!r}")
        matched.update(hits)
        for name in hits:
            path = directory / name
            if path.stat().st_size > MAX_HUB_FILE_SIZE:
                problems.append(f"{name} is larger than the Hub's 50 GB file limit; use a smaller max_shard_size")
            if not name.endswith(".parquet"):
                continue
            try:
                parquet = pq.ParquetFile(path)
            except Exception as error:
                problems.append(f"{name} is not a readable parquet file: {' '.join(str(error).split())}")
                continue
            problem = shard_schema_problem(parquet.schema_arrow, declared.get(config)) if declared else None
            problem = problem or shard_schema_problem(parquet.schema_arrow, features.get(config))
            if problem:
                problems.append(f"{name}: {problem}")
            else:
                problems += [f"{name}: {p}" for p in model_id_problems(parquet)]
            rows[split] = rows.get(split, 0) + parquet.metadata.num_rows
    unmatched = sorted(set(files) - matched)
    if unmatched:
        problems.append(f"data files not in any split of the card: {', '.join(unmatched[:5])}")
    for split, info in card_splits.items():
        if split in rows and rows[split] != info.get("num_examples"):
            problems.append(
                f"split {split[1]!r}: card says {info.get('num_examples')} rows, parquet files hold {rows[split]}"
            )
    if set(card_splits) != {(config, entry["split"]) for config, entry in data_files}:
        problems.append("dataset_info splits and configs data_files name different splits")

    for split, count in sorted(rows.items()):
        if count == 0:  # load_dataset refuses a dataset with an empty split
            problems.append(f"split {split[1]!r} has no rows (load_dataset refuses it); reassemble without it")
    total = sum(rows.values())
    if rows and data.get("size_categories") != [size_category(total)]:
        problems.append(f"size_categories {data.get('size_categories')} does not match {total} rows")
    return problems + grid_problems(directory, card_text)


def grid_problems(directory: str | Path, card_text: str) -> list[str]:
    """The sample grid a card shows must be there, as a PNG.

    ``publish`` checks the card on disk with this too: the release card is rendered again from the
    metadata, and rendering it for the files present dropped the grid of a dataset that had lost
    its ``grid.png`` (it published without one).
    """
    if _GRID_LINK not in card_text:
        return []
    grid = Path(directory) / GRID_NAME
    if not grid.is_file():
        return [f"the card shows {GRID_NAME} but the directory has none (reassemble the dataset to make it again)"]
    with open(grid, "rb") as handle:
        if handle.read(8) != PNG_MAGIC:
            return [f"{GRID_NAME} is not a PNG image"]
    return []


#: String columns that name a model: their values are published, so they must be a Hub id or an
#: elided folder name (``.../tiny-flux``), never a path of the machine that made the data.
MODEL_ID_COLUMNS = ("model_id",)


def feature_type(feature: Any) -> str:
    """A short human-readable type for the schema table."""
    if isinstance(feature, Value):
        return feature.dtype
    if isinstance(feature, ClassLabel):
        names = feature.names
        shown = ", ".join(f"`{n}`" for n in names[:4]) + (", …" if len(names) > 4 else "")
        return f"ClassLabel ({len(names)}: {shown})"
    if isinstance(feature, Image):
        return "Image"
    if isinstance(feature, (List, LargeList)):
        length = getattr(feature, "length", -1)
        suffix = f" ({length})" if length and length > 0 else ""
        return f"list[{feature_type(feature.feature)}]{suffix}"
    if isinstance(feature, dict):
        return "struct{" + ", ".join(f"{k}: {feature_type(v)}" for k, v in feature.items()) + "}"
    if isinstance(feature, (list, tuple)) and feature:
        return f"list[{feature_type(feature[0])}]"
    return type(feature).__name__


def shard_schema_problem(schema: Any, features: Features | None) -> str | None:
    """What differs between a shard's real columns and the card's features (None: nothing).

    The shard's own columns and arrow types are compared, not the ``huggingface`` feature
    metadata embedded in its schema: that metadata can say what the card says while the file
    holds another column, and ``load_dataset`` then fails on the Hub.
    """
    if features is None:
        return "its config has no features in the card's dataset_info"
    expected = features.arrow_schema
    names, wanted = list(schema.names), list(expected.names)
    extra = [n for n in names if n not in wanted]
    missing = [n for n in wanted if n not in names]
    if extra or missing:
        parts = ([f"column(s) {', '.join(extra)} not in the card's features"] if extra else []) + (
            [f"no column {', '.join(missing)}"] if missing else []
        )
        return "; ".join(parts) + " (load_dataset would fail: re-assemble the shard)"
    if names != wanted:
        return f"columns in another order than the card's features ({', '.join(names)})"
    for name in wanted:
        if not schema.field(name).type.equals(expected.field(name).type):
            said = feature_type(features[name])
            arrow = str(expected.field(name).type)
            return f"column {name} holds {schema.field(name).type}, the card's features say {said}" + (
                f" ({arrow})" if arrow != said else ""
            )
    if Features.from_arrow_schema(schema) != features:
        return "its embedded parquet features differ from the card's dataset_info features"
    return None


def model_id_problems(parquet: Any) -> list[str]:
    """Local paths in a shard's model-id columns (:data:`MODEL_ID_COLUMNS`), one problem per column."""
    import pyarrow as pa

    from conceptforge.cards.provenance import _is_local_path

    problems = []
    for column in MODEL_ID_COLUMNS:
        if column not in parquet.schema_arrow.names or not pa.types.is_string(parquet.schema_arrow.field(column).type):
            continue
        values = {v for v in parquet.read(columns=[column]).column(column).to_pylist() if isinstance(v, str)}
        local = sorted(v for v in values if _is_local_path(v))
        if local:
            problems.append(
                f"column {column} holds a local path ({local[0]}): published data must name a model by its Hub id "
                "or its folder name (.../NAME); re-assemble with this version of conceptforge"
            )
    return problems


def ensure_valid(problems: list[str], what: str) -> None:
    """Raise one ConceptforgeError line listing ``problems`` (if any)."""
    if problems:
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        raise DataFormatError(f"{what} is not valid: " + "; ".join(problems[:3]) + more)
