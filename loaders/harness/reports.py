"""Small helpers shared by the evaluation reports: tables and mean ± standard error.

Reports are written with :func:`conceptforge.files.write_json` (re-exported here).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from conceptforge.files import write_json  # noqa: F401  (the one JSON writer, in core)


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (sample std / sqrt(n); 0 for a single value)."""
    values = [float(v) for v in values]
    if not values:
        return float("nan"), float("nan")
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(variance / len(values))


def pct(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{100 * value:.{digits}f}"


def pct_se(mean: float, se: float, digits: int = 2) -> str:
    if mean is None or mean != mean:
        return "–"
    return f"{pct(mean, digits)} ± {pct(se, digits)}"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |",
        "| " + " | ".join("-" * w for w in widths) + " |",
    ]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in rows]
    return "\n".join(lines)
