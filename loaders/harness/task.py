"""The types a benchmark uses to declare its ``conceptforge evaluate`` tasks (its task table).

Why a module of its own: each benchmark declares its tasks next to its protocol code
(``loaders/sub/tasks.py``, ``loaders/binding/tasks.py``, ``loaders/compmap/tasks.py``,
``loaders/conceptbed/tasks.py``), and the registry (``loaders/harness/registry.py``) collects those tables;
both import these types, so neither imports the other's module back.

A task has two halves: ``run`` (the model scores the items: per-sample rows, plus the
benchmark's own tables) and ``score`` (every metric from those rows alone, no model). The runner
calls both on a live run, and ``--from-predictions`` calls ``score`` only, so a rescored run
reports the same numbers by construction.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from conceptforge.errors import InvalidArgumentError


@dataclass(frozen=True)
class Option:
    """A protocol setting a user may change with ``--task-option TASK.NAME=VALUE``."""

    name: str
    default: Any
    parse: Callable[[str], Any]
    help: str


def int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in str(text).split(",") if v.strip())
    except ValueError:
        raise InvalidArgumentError(f"expected comma-separated integers, got {text!r}") from None


def str_list(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in str(text).split(",") if v.strip())


def choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise InvalidArgumentError(f"expected one of {', '.join(choices)}, got {text!r}")
        return text

    return parse


def template(*, allowed: set[str], required: set[str]) -> Callable[[str], str]:
    """A prompt template checked like the command line's ``--template`` (known fields only)."""
    import argparse

    from conceptforge.argtypes import Template

    check = Template(allowed=allowed, required=required)

    def parse(text: str) -> str:
        try:
            return check(text)
        except argparse.ArgumentTypeError as error:
            raise InvalidArgumentError(str(error)) from None

    return parse


def flag(text: str) -> bool:
    if str(text).lower() in ("1", "true", "yes", "on"):
        return True
    if str(text).lower() in ("0", "false", "no", "off"):
        return False
    raise InvalidArgumentError(f"expected true/false, got {text!r}")


def optional_float(text: str) -> float | None:
    return None if str(text).lower() in ("", "none", "default") else float(text)


@dataclass(frozen=True)
class DatasetRef:
    """The data a task ran on: ``repo`` (Hub id or local path), requested ``revision``, the
    ``sha`` it resolved to (commit, or ``local-…`` fingerprint), ``config`` and ``split``."""

    repo: str
    revision: str | None
    sha: str | None
    source: str  # hub | local
    config: str | None = None
    split: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def load_revision(self) -> str | None:
        """What to pass to ``load_dataset``: the resolved commit, so data and record agree."""
        return self.sha if self.source == "hub" else None


@dataclass
class Metric:
    """A number in [0, 1] (accuracies) or signed (CCD, Δ), with its standard error over seeds or
    episodes where the protocol has them (``None`` for a single deterministic pass)."""

    value: float
    stderr: float | None = None
    n: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TaskOutcome:
    """What a task's ``run`` returns: the per-sample rows (``docs/evaluation.md``, samples) and
    what the benchmark reports beside its metrics. ``metrics`` are the protocol code's own
    numbers; the runner replaces them by ``Task.score(samples)`` after checking they agree."""

    samples: list[dict[str, Any]]
    main_metric: str
    metrics: dict[str, Metric] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=list)
    variant: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    table: str = ""


@dataclass
class TaskContext:
    """Everything a task's run function gets: the model (``session``), its resolved dataset,
    its options, the run's shared settings and the per-sample cache (``samples``)."""

    model: Any  # conceptforge.loaders.harness.model_ref.ModelRef
    session: Any  # conceptforge.loaders.harness.runner.ModelSession
    dataset: DatasetRef
    options: dict[str, Any]
    batch_size: int
    device: str | None
    cub_dir: str | None = None
    concepts: str | None = None
    mit_states_dir: str | None = None
    samples: Any = None  # conceptforge.loaders.harness.sample_cache.TaskSamples (None: no cache)


ScoreFunction = Callable[[Sequence[dict[str, Any]], dict[str, Any]], dict[str, Metric]]


@dataclass(frozen=True)
class Task:
    """One row of a benchmark's task table."""

    name: str
    benchmark: str
    description: str
    model_kinds: tuple[str, ...]
    protocol: str
    run: Callable[[TaskContext], TaskOutcome]
    score: ScoreFunction  # every metric from the per-sample rows and the options, no model
    columns: tuple[tuple[str, str], ...] = ()  # grouping/extra sample columns: (name, arrow type)
    dataset: str | None = None  # default Hub repo (None: the data is a local folder the user passes)
    revision: str | None = None
    config: str | None = None
    split: str | None = None
    needs: tuple[str, ...] = ()  # run-level inputs: "cub_dir", "mit_states_dir", "concepts"
    options: tuple[Option, ...] = ()
    seeded: bool = False  # metrics carry standard errors over seeds/episodes
    rescore_options: tuple[str, ...] = ()  # options --from-predictions may change (variants computed from the rows)
    # how the per-sample rows break down (a ``loaders.analysis.breakdowns.TaskSpec``, declared by the
    # benchmark beside this table; None: no breakdowns)
    breakdowns: Any = None

    def option_defaults(self) -> dict[str, Any]:
        return {o.name: o.default for o in self.options}

    def skip_reason(self, model: Any, provided: dict[str, Any]) -> str | None:
        """One line saying why this task cannot run with ``model`` (None: it can)."""
        if model.kind not in self.model_kinds:
            what = f"a {model.kind} model" + (f" ({model.model_type})" if model.model_type else "")
            return f"{self.name} needs a {' or '.join(self.model_kinds)} model; {model.id} is {what}"
        missing = [need for need in self.needs if not provided.get(need)]
        if missing:
            return f"{self.name} needs --{missing[0].replace('_', '-')}"
        return None


def options_digest(options: dict[str, Any]) -> str:
    """A stable digest of a task's options (tuples and lists alike), for cache keys."""
    text = json.dumps(
        {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(options.items())}, sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def mean_metric(values: Sequence[float], n: int | None = None) -> Metric:
    """The mean of per-sample values (NaN when there are none), no standard error."""
    values = [float(v) for v in values]
    return Metric(sum(values) / len(values) if values else float("nan"), None, len(values) if n is None else n)


def over_runs(per_run: Sequence[float]) -> Metric:
    """Mean ± standard error over seeds or episodes (sample std / sqrt(n)); ``stderr``/``n``
    are ``None`` for a single run, as the protocols report them."""
    from conceptforge.loaders.harness.reports import mean_se

    mean, se = mean_se(per_run)
    return Metric(float(mean), float(se) if len(per_run) > 1 else None, len(per_run) if len(per_run) > 1 else None)
