"""Per-sample parquet files written to the schema contract of ``conceptforge evaluate`` (one file per
task, ``<results-stem>.samples/<task>.parquet``), built here from plain rows so the breakdown tests do
not depend on the evaluation code that writes them in a real run."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

BASE = {
    "task": pa.string(),
    "item_id": pa.string(),
    "candidates": pa.list_(pa.string()),
    "scores": pa.list_(pa.float64()),
    "prediction": pa.string(),
    "label": pa.string(),
    "correct": pa.bool_(),
    "value": pa.float64(),
}
GROUPING = {  # the task columns `conceptforge evaluate` writes (a row that does not name one leaves it null)
    "binding": {
        "dataset": pa.string(),
        "split": pa.string(),
        "relation": pa.string(),
        "swap_kind": pa.string(),
        "binding_model": pa.string(),
        "seed": pa.int64(),
    },
    "sub": {"attribute_group": pa.string(), "bird": pa.string(), "attribute": pa.string(), "side": pa.string()},
    "compmap-cub": {
        "n_way": pa.int64(),
        "k_shot": pa.int64(),
        "episode": pa.int64(),
        "setting": pa.string(),
        "row": pa.string(),
    },
    "compmap-mit-states": {
        "pair": pa.string(),
        "attr": pa.string(),
        "obj": pa.string(),
        "seen": pa.bool_(),
        "world": pa.string(),
        "row": pa.string(),
    },
    "conceptbed-ccd": {
        "concept": pa.string(),
        "concept_category": pa.string(),
        "source": pa.string(),
        "oracle_task": pa.string(),
    },
}


def family(task: str) -> str:
    return "binding" if task.startswith("binding-") else "sub" if task.startswith("sub-") else task


def write_samples(
    samples_dir: Path,
    task: str,
    rows: Sequence[dict[str, Any]],
    *,
    model: str = "model-a",
    model_revision: str = "rev-a",
    dataset_revision: str = "data-1",
) -> Path:
    """``samples_dir/<task>.parquet``: every contract column, filled with plausible defaults where a
    row does not say (a correct row predicts its label)."""
    schema = pa.schema({**BASE, **GROUPING[family(task)]}).with_metadata(
        {"model": model, "model_revision": model_revision, "dataset_revision": dataset_revision}
    )
    full = []
    for row in rows:
        value = row["value"]
        correct = row.get("correct", None if family(task) == "conceptbed-ccd" or value is None else bool(value >= 0.5))
        label = row.get("label", "a red cube")
        filled = {
            "task": task,
            "candidates": [label, "a blue cube"],
            "scores": [0.9, 0.1] if correct else [0.1, 0.9],
            "prediction": label if correct else "a blue cube",
            "label": label,
            "correct": correct,
            **row,
        }
        full.append({name: filled.get(name) for name in schema.names})
    samples_dir.mkdir(parents=True, exist_ok=True)
    path = samples_dir / f"{task}.parquet"
    pq.write_table(pa.Table.from_pylist(full, schema=schema), path)
    return path


def write_results(path: Path, model: str, tasks: dict[str, str], *, kind: str = "clip") -> Path:
    """A minimal ``conceptforge-eval-results/1`` file naming ``tasks`` (task -> main metric)."""
    payload = {
        "format": "conceptforge-eval-results/1",
        "conceptforge_version": "0",
        "created": "2026-01-01T00:00:00Z",
        "model": {
            "id": model,
            "kind": kind,
            "revision": None,
            "sha": "local-sha256:" + hashlib.sha256(model.encode()).hexdigest()[:16],
        },
        "settings": {},
        "skipped": [],
        "tasks": [
            {
                "task": task,
                "benchmark": family(task),
                "protocol": "p",
                "variant": "v",
                "seeds": [],
                "dataset": {"repo": "data", "revision": None, "sha": "local-sha256:0123456789abcdef"},
                "main_metric": metric,
                "metrics": {metric: {"value": 0.5, "stderr": None, "n": 4}},
            }
            for task, metric in tasks.items()
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))
    return path
