"""The per-sample predictions a run writes beside its results, read for the breakdowns.

Schema contract (one parquet per task, ``<results-stem>.samples/<task>.parquet``): ``task``,
``item_id``, ``candidates`` (list<string>), ``scores`` (list<float64>), ``prediction``, ``label``,
``correct`` (bool, null where not a correctness), ``value`` (float64: the per-sample quantity the
headline metric averages; a null row is not counted) and each task's grouping columns (its
``Task.columns``, grouped by its ``breakdowns=`` spec); the schema metadata holds ``model``,
``model_revision`` and ``dataset_revision``. Grouping columns are kept dictionary-encoded: the
breakdowns group millions of CompMap query rows in numpy, not row by row in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SAMPLE_COLUMNS_REQUIRED = ("item_id", "value")
NONE_LABEL = "(none)"  # a group label: the column is null or empty
#: Per sample, the probability mass the allowed tokens (Yes/No, the option letters) carried before
#: they were renormalised over: a model that mostly wants to say something else shows here.
ALLOWED_MASS_COLUMN = "allowed_mass"
#: A run reports how many samples' allowed tokens carried less than this (the answer is then mostly
#: the renormalisation's, not the model's).
ALLOWED_MASS_FLOOR = 0.5
METADATA_KEYS = ("model", "model_revision", "dataset_revision")  # what the breakdowns keep of the file's metadata


@dataclass(frozen=True)
class Not:
    """A row filter value: every row whose value is not ``value`` (ConceptBed: not the real images)."""

    value: Any

    def __str__(self) -> str:
        return f"not {self.value}"


@dataclass
class Column:
    """A grouping column, dictionary-encoded: ``codes`` (−1 = null) into ``values``. Why: the
    grouping runs in numpy over millions of CompMap query rows, not row by row in Python."""

    codes: np.ndarray
    values: list

    @classmethod
    def from_values(cls, values: Sequence[Any]) -> Column:
        mapping: dict[Any, int] = {}
        codes = np.fromiter(
            (-1 if v is None else mapping.setdefault(v, len(mapping)) for v in values),
            dtype=np.int64,
            count=len(values),
        )
        return cls(codes, list(mapping))

    @classmethod
    def from_arrow(cls, chunked: Any) -> Column:
        encoded = chunked.combine_chunks().dictionary_encode()
        codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        return cls(codes, encoded.dictionary.to_pylist())

    def equals(self, wanted: Any) -> np.ndarray:
        """Rows whose value is ``wanted`` (``Not(v)``: every row but those equal to ``v``)."""
        if isinstance(wanted, Not):
            return ~self.equals(wanted.value)
        if wanted is None:
            return self.codes == -1
        return np.isin(self.codes, [i for i, v in enumerate(self.values) if v == wanted and type(v) is type(wanted)])

    def first(self) -> Any:
        """The first value in file order (a run writes its first model, world, … first)."""
        return self.values[0] if self.values else None

    def value(self, code: int) -> Any:
        return None if code < 0 else self.values[code]


@dataclass
class Samples:
    """One task's per-sample rows: ``value`` as floats (NaN = not counted), the grouping columns
    dictionary-encoded, and the parquet's schema metadata (``model``, revisions)."""

    task: str
    value: np.ndarray
    columns: dict[str, Column]
    metadata: dict[str, str] = field(default_factory=dict)
    path: str = ""

    def __len__(self) -> int:
        return len(self.value)

    @property
    def model(self) -> str:
        return self.metadata.get("model", "")

    @classmethod
    def from_rows(cls, task: str, rows: Sequence[dict[str, Any]], metadata: dict[str, str] | None = None) -> Samples:
        names = {name for row in rows for name in row} - {"value"}
        value = np.array(
            [np.nan if row.get("value") is None else float(row["value"]) for row in rows], dtype=np.float64
        )
        return cls(
            task,
            value,
            {name: Column.from_values([row.get(name) for row in rows]) for name in names},
            dict(metadata or {}),
        )


def read_samples(path: str | Path) -> Samples:
    """Read ``<task>.parquet`` (the contract above) column-wise; the task name is the file's stem."""
    import pyarrow as pa

    from conceptforge.loaders.harness.samples import open_sample_table, table_metadata

    path = Path(path)
    table = open_sample_table(path, required=SAMPLE_COLUMNS_REQUIRED)
    value = table.column("value").cast(pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64)
    columns = {
        name: Column.from_arrow(table.column(name))
        for name in table.column_names
        if name != "value" and not pa.types.is_nested(table.schema.field(name).type)
    }  # not candidates, scores
    metadata = {k: v for k, v in table_metadata(table).items() if k in METADATA_KEYS}
    return Samples(path.stem, value, columns, metadata, str(path))
