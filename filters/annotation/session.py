"""Open a study (create or resume) and export its results: the glue the command line calls."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conceptforge import files
from conceptforge.argtypes import dataset_name_problem
from conceptforge.errors import ConceptforgeError, DataFormatError, DataNotFoundError, StoreError
from conceptforge.filters.annotation.dataset import AnnotationDataset
from conceptforge.filters.annotation.db import AnnotationDB, default_db_path
from conceptforge.filters.annotation.groups import resolve_group_values
from conceptforge.filters.annotation.results import Rules, compute_results, load_metric
from conceptforge.filters.annotation.sampling import sample_items
from conceptforge.filters.annotation.server import StudyApp
from conceptforge.filters.annotation.studies import Study, check_references, get_study

logger = logging.getLogger(__name__)


@dataclass
class StudySettings:
    dataset_dir: str | Path
    study: str
    per_group: int | None = None  # None: the study's default (new study) or the stored one (resume)
    seed: int | None = None
    split: str | None = None
    db: str | Path | None = None
    cub_dir: str | Path | None = None
    metrics: list[str] = field(default_factory=list)


def fingerprint(item_ids) -> str:
    return hashlib.sha256("\n".join(sorted(item_ids)).encode("utf-8")).hexdigest()[:16]


def _metric_columns(specs: list[str]) -> tuple[str, ...]:
    return tuple(spec for spec in specs if "=" not in spec)


#: Which benchmark's datasets each study prefix is for (the study names start with it).
_BENCHMARK_OF_STUDY = {"sub": "SUB", "conceptbed": "ConceptBed"}


def check_benchmark(study: Study, dataset_dir: str | Path) -> None:
    """Refuse a dataset of another benchmark first, in those words.

    Why: a binding dataset given to a SUB study was told "no annotations yet … serve the study
    first" (export, apply) or "has splits none" (serve): true, and no help. The columns decide,
    whatever the split names or configs (any shard under ``data/``).
    """
    import pyarrow.parquet as pq

    problem = dataset_name_problem(dataset_dir)
    if problem:
        raise DataFormatError(problem)
    shards = sorted(Path(dataset_dir, "data").rglob("*.parquet"))
    if not shards:
        return  # not a dataset folder at all: AnnotationDataset says so
    try:
        columns = set(pq.read_schema(shards[0]).names)
    except (OSError, ValueError):
        return  # a damaged shard: the dataset reader names it
    missing = [c for c in study.required_columns if c not in columns]
    if missing:
        benchmark = _BENCHMARK_OF_STUDY.get(study.name.split("-", 1)[0], study.name)
        raise DataFormatError(
            f"{dataset_dir} is not a {benchmark} dataset of conceptforge's schema (it lacks the columns "
            f"{', '.join(missing)}; see docs/schemas.md): study {study.name} is for {benchmark} datasets"
        )


def open_study(settings: StudySettings, *, create: bool = True) -> tuple[StudyApp, dict[str, Any]]:
    """Load the dataset and the study database; create the study (seeded sample) if ``create``.

    Returns the app and the stored study configuration.
    """
    study: Study = get_study(settings.study)
    check_benchmark(study, settings.dataset_dir)
    db_path = Path(settings.db) if settings.db else default_db_path(settings.dataset_dir, study.name)
    db = AnnotationDB(db_path)
    stored: dict[str, Any] | None = None
    if db_path.exists():
        try:
            stored = db.config()
        except ConceptforgeError:
            stored = None
        except Exception as error:  # not a database at all
            raise StoreError(f"{db_path} is not an annotation database: {error}") from None
    if stored is None and not create:
        raise DataNotFoundError(f"no annotations yet for study {study.name} at {db_path}; serve the study first")
    split = settings.split or (stored or {}).get("split")
    dataset = AnnotationDataset(
        settings.dataset_dir,
        splits=study.splits,
        required_columns=study.required_columns,
        split=split,
        extra_columns=_metric_columns(settings.metrics),
        study_name=study.name,
    )
    if create:
        check_references(study, dataset.rows, settings.dataset_dir)  # before the study database is written
    group_values: dict[str, list[str]] = {}
    source = None
    if study.name == "sub-attribute":
        if stored is not None and settings.cub_dir is None:
            group_values, source = stored["group_values"], stored["group_values_source"]
        else:
            group_values, source = resolve_group_values(dataset.rows, settings.cub_dir)
    config = {
        "study": study.name,
        "split": dataset.split,
        "per_group": settings.per_group or (stored or {}).get("per_group") or study.default_per_group,
        "seed": settings.seed if settings.seed is not None else (stored or {}).get("seed", 0),
        "groups": study.group_doc,
        "dataset_fingerprint": fingerprint(dataset.rows),
    }
    if source is not None:
        config["group_values_source"] = source
        config["group_values"] = group_values
    sample = sample_items(
        dataset.rows, group_of=study.group_of, per_group=config["per_group"], seed=config["seed"], study=study.name
    )
    created = db.initialise(config, sample)
    logger.info(
        "%s study %s at %s: %d items sampled (%d per %s, seed %d)",
        "created" if created else "resuming",
        study.name,
        db_path,
        len(sample),
        config["per_group"],
        study.group_doc,
        config["seed"],
    )
    if create:  # serving: copy the sampled images out of the shards once (see dataset.py)
        dataset.materialise_images([item_id for item_id, _ in db.sample()], db_path.with_suffix(".images"))
    app = StudyApp(study=study, dataset=dataset, db=db, seed=config["seed"], group_values=group_values)
    return app, config


def export_results(app: StudyApp, config: dict[str, Any], *, rules: Rules, metric_specs: list[str]) -> dict[str, Any]:
    metrics = dict(load_metric(spec, app.dataset.rows) for spec in metric_specs)
    extra = {"dataset": str(Path(app.dataset.root).name), "annotation_db": str(app.db.path)}
    if "group_values_source" in config:
        extra["group_values_source"] = config["group_values_source"]
    return compute_results(
        app.study,
        app.dataset.rows,
        app.db.annotations(),
        config=config,
        sample=app.db.sample(),
        rules=rules,
        metrics=metrics,
        extra=extra,
    )


#: Keys of every results export (:func:`~conceptforge.filters.annotation.results.compute_results`).
EXPORT_KEYS = ("study", "rules", "progress", "annotations")


def claim_export(path: str | Path) -> Path:
    """Refuse (before any work) an ``--export`` path holding a file that is not an export of ours."""
    from conceptforge.output import claim_files, json_with_keys

    claim_files([path], flag="--export", ours=json_with_keys(*EXPORT_KEYS))
    return Path(path)


def write_json(path: str | Path, payload: Any) -> None:
    """Write an export with sorted keys (so two exports diff cleanly) through the one JSON writer."""
    claim_export(path)
    files.write_json(path, payload, sort_keys=True)
