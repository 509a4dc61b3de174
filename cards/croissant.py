"""``croissant.json``: the release described in Croissant 1.0 with its Responsible-AI (RAI 1.0) fields.

Why we write it: benchmark tracks (NeurIPS Datasets & Benchmarks) ask for a Croissant file with
core and RAI fields, and the Hub's own Croissant (``/api/datasets/{id}/croissant``) carries only
the core part, generated from the parquet files, without what the card says about how the data
was made. This file is built at publish time from the same inputs as the card (its spec:
summary, sections, provenance, filter statistics, validity report) and ``provenance.json``, so it
never says something the card does not.

Core: name, description, license (a URL for Creative Commons ids), url, version, citeAs,
keywords, creator; one ``cr:FileSet`` of parquet shards and one ``cr:RecordSet`` per config,
whose fields follow the parquet features (images as ``sc:ImageObject`` from the ``bytes`` of the
image struct, ClassLabels as ``sc:Integer``, lists as ``repeated``, structs as ``subField``) plus
a ``split`` field read from each shard's file name.

RAI (property names as in the RAI vocabulary, ``http://mlcommons.org/croissant/RAI/``):
``dataCollection`` (how the rows were generated: the summary, generator, models with resolved
revisions, seeds), ``dataCollectionType``, ``dataCollectionRawData``, ``dataPreprocessingProtocol``
(the filter and its statistics), ``dataAnnotationProtocol`` (the card's Annotations), and where a
human study was applied ``dataAnnotationPlatform``, ``dataAnnotationAnalysis`` (agreement) and
``annotationsPerItem``; ``machineAnnotationTools`` (the models that made or filtered rows),
``dataBiases`` and ``dataLimitations`` (the card's Bias, Risks and Limitations, out-of-scope use
and the blind baselines of the Validity section), ``dataUseCases`` (Uses and out-of-scope use),
``personalSensitiveInformation`` and ``dataReleaseMaintenancePlan``. :data:`REQUIRED_RAI` are
the ones ``publish --dry-run`` reports when they would be empty.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from datasets import ClassLabel, Features, Image, LargeList, List, Value

from conceptforge.cards.card import DatasetMetadata
from conceptforge.cards.dataset_dir import DATA_DIR, SplitStats
from conceptforge.cards.provenance import published_model_id

CROISSANT_NAME = "croissant.json"
CROISSANT_VERSION = "http://mlcommons.org/croissant/1.0"
RAI_VERSION = "http://mlcommons.org/croissant/RAI/1.0"
#: The JSON-LD context of Croissant 1.0 (the specification's), plus the RAI namespace.
CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}
#: RAI fields a benchmark track expects filled; ``publish --dry-run`` names the empty ones.
REQUIRED_RAI = (
    "rai:dataCollection",
    "rai:dataCollectionType",
    "rai:dataPreprocessingProtocol",
    "rai:dataAnnotationProtocol",
    "rai:dataBiases",
    "rai:dataLimitations",
    "rai:dataUseCases",
    "rai:personalSensitiveInformation",
    "rai:dataReleaseMaintenancePlan",
)
SHARD_REGEX = r"^(?:.*/)?(.+?)-\d{5}-of-\d{5}\.parquet$"
HUB = "https://huggingface.co"
#: The ``cr:FileObject`` every file set is read from: the release's git repository at its tag.
REPO_NODE = "repo"
#: What the Hub's own Croissant files put in a git repository's ``sha256`` (a repository has no
#: one hash; Croissant's convention, mlcommons/croissant#80): the tag pins the files instead.
GIT_REPO_HASH = "https://github.com/mlcommons/croissant/issues/80"


# -- core -------------------------------------------------------------------------------------
def license_url(metadata: DatasetMetadata) -> str:
    """A URL for Creative Commons ids (Croissant recommends URLs); the link or id otherwise."""
    license = metadata.license
    if license == "cc0-1.0":
        return "https://creativecommons.org/publicdomain/zero/1.0/"
    match = re.fullmatch(r"cc-(by(?:-nc)?(?:-sa|-nd)?)-(\d\.\d)", license)
    if match:
        return f"https://creativecommons.org/licenses/{match[1]}/{match[2]}/"
    if license == "other":
        return metadata.license_link or metadata.license_name or "other"
    return license


def _data_type(feature: Any) -> str:
    if isinstance(feature, Image):
        return "sc:ImageObject"
    if isinstance(feature, ClassLabel):
        return "sc:Integer"
    if isinstance(feature, Value):
        dtype = feature.dtype
        if dtype == "bool":
            return "sc:Boolean"
        if dtype.startswith(("int", "uint")):
            return "sc:Integer"
        if dtype.startswith("float") or dtype.startswith("double"):
            return "sc:Float"
        return "sc:Text"
    return "sc:Text"


def _field(
    field_id: str, name: str, feature: Any, *, config: str, column: str, path: str = "", description: str = ""
) -> dict[str, Any]:
    """A Croissant field for a parquet column; a struct becomes sub-fields read through ``jsonPath``."""
    out: dict[str, Any] = {"@type": "cr:Field", "@id": field_id, "name": name}
    inner, repeated = feature, False
    if isinstance(feature, (List, LargeList)):
        inner, repeated = feature.feature, True
    elif isinstance(feature, (list, tuple)) and feature:
        inner, repeated = feature[0], True
    if isinstance(inner, ClassLabel):
        names = inner.names
        shown = ", ".join(names[:8]) + (", …" if len(names) > 8 else "")
        description = (description + " " if description else "") + f"(class index over {len(names)} names: {shown})"
    if description:
        out["description"] = description
    if isinstance(inner, dict):
        out["subField"] = [
            _field(f"{field_id}/{sub}", sub, value, config=config, column=column, path=f"{path}.{sub}" if path else sub)
            for sub, value in inner.items()
        ]
    else:
        source: dict[str, Any] = {"fileSet": {"@id": f"parquet-files-{config}"}, "extract": {"column": column}}
        json_path = path
        if isinstance(inner, Image):  # the image struct {bytes, path}: the bytes are the image
            json_path = f"{path}.bytes" if path else "bytes"
        if json_path:
            source["transform"] = {"jsonPath": json_path}
        out["dataType"] = _data_type(inner)
        out["source"] = source
    if repeated:
        out["repeated"] = True
    return out


def _configs(splits: Sequence[SplitStats]) -> list[str]:
    seen: list[str] = []
    for split in splits:
        if split.config not in seen:
            seen.append(split.config)
    return seen


def repo_url(repo_id: str, version: str, hub: str = HUB) -> str:
    """The release's git repository at its tag, as Croissant readers fetch it (mlcroissant clones
    ``https://huggingface.co/datasets/ORG/NAME`` and checks out the ref after ``/tree/``, the form
    the Hub's own Croissant uses). ``hub`` is the endpoint the release is published to."""
    return f"{hub}/datasets/{repo_id}/tree/refs%2Ftags%2F{version}"


def _repo_object(repo_id: str, version: str, hub: str) -> dict[str, Any]:
    """Why a repository node: a file set with only relative ``includes`` resolves against the
    folder the JSON-LD sits in, so the records loaded from a downloaded copy but not from the
    published URL. Contained in the repository at the release's tag, they load from either."""
    return {
        "@type": "cr:FileObject",
        "@id": REPO_NODE,
        "name": REPO_NODE,
        "description": f"The Hugging Face git repository of {repo_id} at tag {version} (this release).",
        "contentUrl": repo_url(repo_id, version, hub),
        "encodingFormat": "git+https",
        "sha256": GIT_REPO_HASH,
    }


def _file_set(config: str, splits: Sequence[SplitStats]) -> dict[str, Any]:
    folder = next((s.files[0].rsplit("/", 1)[0] for s in splits if s.config == config and s.files), DATA_DIR)
    return {
        "@type": "cr:FileSet",
        "@id": f"parquet-files-{config}",
        "name": f"parquet-files-{config}",
        "description": f"The parquet shards of config `{config}` (one file set per config).",
        "containedIn": {"@id": REPO_NODE},
        "encodingFormat": "application/x-parquet",
        "includes": f"{folder}/*.parquet",
    }


def _record_set(config: str, features: Features, metadata: DatasetMetadata, splits: Sequence[str]) -> dict[str, Any]:
    file_set = {"fileSet": {"@id": f"parquet-files-{config}"}}
    fields = [
        {
            "@type": "cr:Field",
            "@id": f"{config}/split",
            "name": "split",
            "description": f"the split the row belongs to ({', '.join(splits)}), from its shard's file name",
            "dataType": "sc:Text",
            "source": {**file_set, "extract": {"fileProperty": "fullpath"}, "transform": {"regex": SHARD_REGEX}},
        }
    ]
    for name, feature in features.items():
        fields.append(
            _field(
                f"{config}/{name}",
                name,
                feature,
                config=config,
                column=name,
                description=metadata.column_docs.get(name, ""),
            )
        )
    record: dict[str, Any] = {"@type": "cr:RecordSet", "@id": config, "name": config, "field": fields}
    summary = metadata.config_summaries.get(config)
    record["description"] = summary or f"The rows of config `{config}`."
    return record


# -- RAI --------------------------------------------------------------------------------------
def _models(provenance: Mapping[str, Any]) -> list[str]:
    """``role: id @ revision`` for every model the provenance names (upstream stages included)."""
    found = []
    for model in provenance.get("models") or []:
        if isinstance(model, Mapping) and model.get("id"):
            revision = model.get("revision") or "unknown revision"
            found.append(f"{model.get('role', 'model')}: {published_model_id(model['id'], revision)} @ {revision}")
    if provenance.get("model_id"):
        revision = provenance.get("model_revision") or "unknown revision"
        found.append(f"diffusion: {published_model_id(provenance['model_id'], revision)} @ {revision}")
    upstream = _upstream(provenance)
    if upstream is not None:
        found += [m for m in _models(upstream) if m not in found]
    return found


def _upstream(provenance: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The input dataset's provenance a derived dataset nests (cards.lineage.upstream_provenance)."""
    upstream = provenance.get("upstream")
    if not isinstance(upstream, Mapping):
        return None
    nested = upstream.get("provenance")
    return nested if isinstance(nested, Mapping) else upstream


def _generators(provenance: Mapping[str, Any] | None) -> list[str]:
    chain = []
    while isinstance(provenance, Mapping):
        if provenance.get("generator"):
            chain.append(str(provenance["generator"]))
        provenance = _upstream(provenance)
    return chain


def _collection(metadata: DatasetMetadata, record: Mapping[str, Any] | None) -> str:
    provenance = metadata.provenance or {}
    parts = [metadata.summary.strip()]
    chain = _generators(provenance)
    if chain:
        parts.append("Generated (not collected) by " + " after ".join(f"`{g}`" for g in chain) + ".")
    models = _models(provenance)
    if models:
        parts.append("Models: " + "; ".join(models) + ".")
    for key in ("seeds", "run_seed"):
        if provenance.get(key) not in (None, {}, []):
            parts.append(f"Seeds: {json.dumps(provenance[key], sort_keys=True)}.")
    if provenance.get("command_line"):
        parts.append(f"Command line: `{provenance['command_line']}`.")
    if record:
        parts.append(
            "Every generation input is recorded in `provenance.json` "
            f"(generator `{record.get('generator')}`, configs {', '.join(record.get('configs', {}))})."
        )
    return " ".join(p for p in parts if p)


def _preprocessing(metadata: DatasetMetadata) -> str:
    stats = metadata.filter_stats
    if stats is None:
        return "No filter stage: the rows are the generator's output as recorded in the provenance."
    data = stats.to_dict() if hasattr(stats, "to_dict") else dict(stats)
    filters = (metadata.provenance or {}).get("filters")
    text = "Filter statistics: " + json.dumps(
        {k: v for k, v in data.items() if k not in ("groups", "items", "pairs", "attributes", "annotations")},
        sort_keys=True,
    )
    if filters:
        text += " Filter parameters: " + json.dumps(filters, sort_keys=True)
    return text


def _agreement(metadata: DatasetMetadata) -> tuple[list[str], str | None]:
    part = (metadata.validity or {}).get("agreement") or {}
    if not part.get("applicable"):
        return [], None
    lines = []
    for row in part.get("rows") or []:
        alpha = row.get("alpha")
        share = row.get("percent_agreement")
        lines.append(
            f"{row['comparison']}: {row.get('items', 0)} items, Krippendorff's alpha "
            f"{'undefined' if alpha is None else f'{alpha:.3f}'}, percent agreement "
            f"{'undefined' if share is None else f'{100 * share:.1f}%'}"
        )
    return lines, part.get("note")


def _blind_summary(metadata: DatasetMetadata) -> str | None:
    part = (metadata.validity or {}).get("blind_baselines") or {}
    rows = [r for r in part.get("rows") or [] if r.get("accuracy") is not None]
    if not part.get("applicable") or not rows:
        return None
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        key = (row.get("config", "default"), row["split"])
        if key not in best or row["accuracy"] > best[key]["accuracy"]:
            best[key] = row
    shown = "; ".join(
        f"{(config + '/') if config != 'default' else ''}{split}: {row['baseline']} {100 * row['accuracy']:.1f}%"
        for (config, split), row in best.items()
    )
    return f"Best blind (image-free) baseline per split (card, Validity section): {shown}."


def _maintenance(metadata: DatasetMetadata, repo_id: str, version: str) -> str:
    """``version`` is the git tag (``v1.0.0``): the command it prints must run as printed."""
    previous = f" (previous: {metadata.previous_version})" if metadata.previous_version else " (first release)"
    text = (
        f"Released on the Hugging Face Hub as {repo_id}; this file describes version {version}{previous}. Every "
        "version is an immutable git tag: fixes are published as a new version with a 'Changes since' section in "
        "its card, never by moving a tag."
    )
    if metadata.reproducible:
        text += (
            f" `conceptforge verify {repo_id}@{version}` regenerates items from `provenance.json` and compares them."
        )
    if metadata.maintenance.strip():
        text += " " + metadata.maintenance.strip()
    return text


SYNTHETIC = "Others: synthetic generation by software"


def _collection_types(study: Any) -> list[str]:
    """What was collected: the rows are generated, but a human study applied to them collected
    people's answers, so "no data collected from people" is said only where no study was applied
    (a human-validated release said it beside its count of answers and annotators)."""
    if not study:
        return [f"{SYNTHETIC} (no data collected from people)"]
    return [
        SYNTHETIC,
        f"Others: answers collected from people (human study `{study}` in conceptforge's annotation app, "
        "see rai:dataAnnotationAnalysis)",
    ]


def rai_fields(
    metadata: DatasetMetadata, *, repo_id: str, version: str, record: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The RAI properties (empty ones as "" or [] so :func:`empty_rai_fields` can name them);
    ``version`` is the release's tag (``v1.0.0``)."""
    out_of_scope = metadata.out_of_scope_use.strip()
    agreement, agreement_note = _agreement(metadata)
    study = (metadata.provenance or {}).get("study")
    limitations = [metadata.bias_risks_limitations.strip()] if metadata.bias_risks_limitations.strip() else []
    if out_of_scope:
        limitations.append(f"Not recommended (out of scope): {out_of_scope}")
    blind = _blind_summary(metadata)
    if blind and limitations:
        limitations.append(blind)
    fields: dict[str, Any] = {
        "rai:dataCollection": _collection(metadata, record),
        "rai:dataCollectionType": _collection_types(study),
        "rai:dataCollectionRawData": "; ".join(metadata.source_datasets) if metadata.source_datasets else "",
        "rai:dataPreprocessingProtocol": [_preprocessing(metadata)],
        "rai:dataAnnotationProtocol": [metadata.annotations.strip()] if metadata.annotations.strip() else [],
        "rai:machineAnnotationTools": _models(metadata.provenance or {}),
        "rai:dataBiases": [metadata.bias_risks_limitations.strip()] if metadata.bias_risks_limitations.strip() else [],
        "rai:dataLimitations": limitations,
        "rai:dataUseCases": ([metadata.uses.strip()] if metadata.uses.strip() else [])
        + ([f"Out of scope: {out_of_scope}"] if out_of_scope and metadata.uses.strip() else []),
        "rai:personalSensitiveInformation": [metadata.personal_data.strip()] if metadata.personal_data.strip() else [],
        "rai:dataReleaseMaintenancePlan": _maintenance(metadata, repo_id, version),
    }
    if study:
        fields["rai:dataAnnotationPlatform"] = ["conceptforge annotation app (`conceptforge annotate`)"]
        fields["rai:dataAnnotationAnalysis"] = agreement + ([agreement_note] if agreement_note else [])
        progress = (metadata.filter_stats or {}) if isinstance(metadata.filter_stats, Mapping) else {}
        answers = (progress.get("progress") or {}).get("answers")
        items = (progress.get("progress") or {}).get("annotated_items")
        if answers and items:
            fields["rai:annotationsPerItem"] = (
                f"{answers / items:.2f} answers per annotated item ({answers} on {items})"
            )
    return fields


def empty_rai_fields(document: Mapping[str, Any]) -> list[str]:
    """The :data:`REQUIRED_RAI` properties that are missing or empty in ``document``."""
    return [key for key in REQUIRED_RAI if not document.get(key)]


def croissant_document(
    metadata: DatasetMetadata,
    features: Features | Mapping[str, Features],
    splits: Sequence[SplitStats],
    *,
    repo_id: str,
    version: str,
    record: Mapping[str, Any] | None = None,
    hub: str = HUB,
) -> dict[str, Any]:
    """The whole JSON-LD document (deterministic: no dates or machine state). ``hub`` is the Hub
    endpoint the release is published to (``HF_ENDPOINT``): every URL names where the files are."""
    hub = hub.rstrip("/")
    org, name = repo_id.split("/", 1)
    configs = _configs(splits)
    description = metadata.summary.strip()
    if metadata.paper_title:
        description += f"\n\nIt follows the paper {metadata.paper_title}" + (
            f" ({metadata.paper_url})." if metadata.paper_url else "."
        )
    document: dict[str, Any] = {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": [CROISSANT_VERSION, RAI_VERSION],
        "name": name,
        "alternateName": metadata.pretty_name,
        "description": description,
        "url": f"{hub}/datasets/{repo_id}",
        "version": version.lstrip("v"),
        "license": license_url(metadata),
        "creator": {"@type": "Organization", "name": org, "url": f"{hub}/{org}"},
        "keywords": list(metadata.tags),
        "distribution": [_repo_object(repo_id, version, hub), *(_file_set(config, splits) for config in configs)],
        "recordSet": [
            _record_set(
                config,
                features if isinstance(features, Features) else features[config],
                metadata,
                [s.name for s in splits if s.config == config],
            )
            for config in configs
        ],
    }
    if metadata.citation.strip():
        document["citeAs"] = metadata.citation.strip()
    if metadata.language:
        document["inLanguage"] = list(metadata.language)
    for key, value in rai_fields(metadata, repo_id=repo_id, version=version, record=record).items():
        document[key] = value
    return document


def croissant_bytes(document: Mapping[str, Any]) -> bytes:
    """The file's bytes: stable key order inside each node, two-space indent, trailing newline."""
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
