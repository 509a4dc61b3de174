"""Per-sample predictions: one parquet file per task beside the results JSON.

Why: a headline number hides which compositions a model fails; the rows let a researcher group,
bootstrap and rescore without the model (``conceptforge evaluate --from-predictions DIR``). The
schema (docs/evaluation-results.md, "Per-sample predictions") is a contract shared with the breakdowns
and charts: common columns first, then the task's own grouping columns, always present.

The file's schema metadata carries ``model``, ``model_revision``, ``dataset_revision`` and, as
JSON, the task's record (``conceptforge.task``: everything of the results entry except the
metrics, which are recomputed from the rows) and the run's (``conceptforge.run``), so a folder of
these files is enough to rebuild the results file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conceptforge.errors import DataFormatError, DataNotFoundError

logger = logging.getLogger(__name__)

SAMPLES_SUFFIX = ".samples"
COMMON_COLUMNS: tuple[tuple[str, str], ...] = (
    ("task", "string"),
    ("item_id", "string"),
    ("candidates", "list<string>"),
    ("scores", "list<float64>"),
    ("prediction", "string"),
    ("label", "string"),
    ("correct", "bool"),
    ("value", "float64"),
)


def samples_dir(results_path: str | Path) -> Path:
    """``results/x.json`` -> ``results/x.samples/``."""
    path = Path(results_path)
    return path.with_name(path.stem + SAMPLES_SUFFIX)


def _arrow_type(name: str):
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "float64": pa.float64(),
        "int64": pa.int64(),
        "bool": pa.bool_(),
        "list<string>": pa.list_(pa.string()),
        "list<float64>": pa.list_(pa.float64()),
    }
    if name not in types:
        raise ValueError(f"unknown sample column type {name!r}")
    return types[name]


def schema_for(columns: Sequence[tuple[str, str]], metadata: dict[str, str] | None = None):
    import pyarrow as pa

    return pa.schema(
        [pa.field(name, _arrow_type(kind)) for name, kind in (*COMMON_COLUMNS, *columns)],
        metadata={k.encode(): v.encode() for k, v in (metadata or {}).items()},
    )


def write_samples(
    path: str | Path, rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]], *, metadata: dict[str, str]
) -> Path:
    """Write ``rows`` (dicts holding every column) as one parquet file, atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from conceptforge.serialization import atomic_write_bytes

    schema = schema_for(columns, metadata)
    missing = [f.name for f in schema if rows and f.name not in rows[0]]
    if missing:
        raise ValueError(f"sample rows lack column(s) {', '.join(missing)}")
    table = pa.Table.from_pylist([{f.name: row.get(f.name) for f in schema} for row in rows], schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())
    return path


def open_sample_table(path: str | Path, *, required: Sequence[str] = ("item_id", "value")):
    """The arrow table of one ``<task>.parquet``, checked: it exists, is parquet, has the
    ``required`` columns and a numeric ``value``. Both readers (rows here, columns for the
    breakdowns in :mod:`sample_columns`) start from it, so they refuse the same files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"per-sample file {path} does not exist")
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError, ValueError) as error:
        raise DataFormatError(f"{path} is not a samples parquet file ({str(error).splitlines()[0]})") from None
    missing = [name for name in required if name not in table.column_names]
    if missing:
        raise DataFormatError(
            f"{path} lacks column(s) {', '.join(missing)} of the per-sample schema "
            f"(it has {', '.join(table.column_names)})"
        )
    if "value" in table.column_names:
        kind = table.schema.field("value").type
        if not (pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_boolean(kind)):
            raise DataFormatError(f"{path}: column value must be numeric, it is {kind}")
    return table


def table_metadata(table) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}


def read_sample_rows(path: str | Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The rows (as dicts) and the schema metadata of one samples file."""
    table = open_sample_table(path)
    return table.to_pylist(), table_metadata(table)


#: the metadata key holding how many rows the run wrote: ``--from-predictions`` says when a file
#: holds fewer (rows dropped since) or more, instead of rescoring a subset without a word
ROWS_KEY = "conceptforge.rows"


def samples_metadata(
    *, model: dict[str, Any], dataset: dict[str, Any], record: dict[str, Any], run: dict[str, Any], rows: int
) -> dict[str, str]:
    return {
        "model": str(model.get("id") or ""),
        "model_revision": str(model.get("sha") or model.get("revision") or ""),
        "dataset_revision": str(dataset.get("sha") or ""),
        "conceptforge.task": json.dumps(record, allow_nan=True),
        "conceptforge.run": json.dumps(run, allow_nan=True),
        ROWS_KEY: str(rows),
    }


def list_sample_files(directory: str | Path) -> list[Path]:
    directory = Path(directory)
    if not directory.is_dir():
        raise DataNotFoundError(f"--from-predictions {directory} is not a folder of per-task samples (.parquet)")
    files = sorted(directory.glob("*.parquet"))
    if not files:
        raise DataNotFoundError(f"--from-predictions {directory} holds no .parquet samples files")
    return files


MARKER = ".conceptforge-samples"  # marks a samples folder as ours: a rerun may replace it
SAMPLES_MADE_BY = "evaluate"  # the output guard's owner record of a samples folder


def check_samples_target(directory: str | Path) -> None:
    """Refuse (before anything runs) to replace a folder conceptforge did not write."""
    from conceptforge.errors import InvalidArgumentError

    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise InvalidArgumentError(
            f"{directory} is a file; the per-sample predictions go to a folder of that name "
            "(move it, pass another --output, or --no-samples)"
        )
    if directory.is_dir() and any(directory.iterdir()) and not (directory / MARKER).is_file():
        raise InvalidArgumentError(
            f"{directory} exists and was not written by conceptforge evaluate: the per-sample "
            "predictions would replace it (move it, pass another --output, or --no-samples)"
        )
    from conceptforge.output import claim_folder

    claim_folder(
        directory, made_by=SAMPLES_MADE_BY, flag="--output", nested_ok=True
    )  # the same rule the final write applies


def write_run_samples(
    directory: str | Path,
    payload: dict[str, Any],
    samples: dict[str, tuple[list[dict[str, Any]], tuple[tuple[str, str], ...]]],
) -> list[Path]:
    """One ``<task>.parquet`` per task of ``payload`` into ``directory`` (replaced as a whole, so
    a folder never mixes two runs); each file's metadata carries its results entry and the run."""
    from conceptforge.files import write_directory_atomically

    check_samples_target(directory)
    run = {**payload, "tasks": None}  # the header, in the results file's key order
    written: list[Path] = []

    def write(tmp: Path) -> None:
        (tmp / MARKER).write_text("per-task sample predictions of one conceptforge evaluate run\n")
        for position, record in enumerate(payload["tasks"]):
            rows, columns = samples[record["task"]]
            meta = samples_metadata(
                model=payload["model"],
                dataset=record["dataset"],
                record={**record, "metrics": None, "position": position},
                run=run,
                rows=len(rows),
            )
            write_samples(tmp / f"{record['task']}.parquet", rows, columns, metadata=meta)
            written.append(Path(directory) / f"{record['task']}.parquet")

    write_directory_atomically(directory, write, made_by=SAMPLES_MADE_BY, flag="--output")
    return written
