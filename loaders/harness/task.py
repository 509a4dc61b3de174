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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from conceptforge import argtypes
from conceptforge.errors import ConceptforgeError, InvalidArgumentError
from conceptforge.loaders.harness.adapters import base as adapters
from conceptforge.loaders.harness.adapters.base import ANSWER_TEXT as ANSWER_TEXT
from conceptforge.loaders.harness.adapters.base import CHOOSE as CHOOSE  # the capabilities, for the task tables
from conceptforge.loaders.harness.adapters.base import CONCEPTS as CONCEPTS
from conceptforge.loaders.harness.adapters.base import EMBED as EMBED
from conceptforge.loaders.harness.adapters.base import GENERATE as GENERATE
from conceptforge.loaders.harness.adapters.base import IMAGES_TO_JUDGE as IMAGES_TO_JUDGE
from conceptforge.loaders.harness.adapters.base import MATCH as MATCH
from conceptforge.loaders.harness.adapters.base import provides as provides  # for the tasks' option checks
from conceptforge.loaders.harness.units import MetricSpec, declared_unit


@dataclass(frozen=True)
class Option:
    """A protocol setting a user may change with ``--task-option TASK.NAME=VALUE``.

    ``parse`` turns the text into the value and refuses one outside the setting's domain: an
    :class:`conceptforge.argtypes.ArgType` (or ``str``), because the per-benchmark commands
    (``conceptforge evaluate binding …``) build their flags from these options with ``parse`` as
    the flag's type, so a bad value is the same one line either way. A ``bool`` default makes an
    on/off flag (``--calibrate/--no-calibrate``), a tuple default a list (``--seeds 0 1`` or
    ``0,1``). ``help`` says what it does; where it mentions "default", the flag's help adds none.

    Every value is checked before any model loads: ``parse`` holds the option's own domain (an
    ``ArgType`` names values outside it, which tests/harness/test_option_checks.py tries on every
    option of every task), and a task's ``check_options`` what depends on other options, the
    model's family or the run's folders."""

    name: str
    default: Any
    parse: Callable[[str], Any]
    help: str


#: The task option that picks the by-answer protocol (``--task-option TASK.by_answer=true``).
BY_ANSWER_OPTION = "by_answer"


def by_answer_option(what: str) -> Option:
    """The ``by_answer`` option of a task with a by-answer protocol (``what``: that protocol)."""
    return Option(
        BY_ANSWER_OPTION,
        False,
        argtypes.flag,
        f"score the model's own words instead of its probabilities: {what} (docs/evaluation-by-answer.md"
        "; never on a leaderboard column with the probability protocols)",
    )


def check_by_answer(options: dict[str, Any], *, model: Any, inputs: dict[str, Any]) -> None:
    """Before any model loads: ``by_answer`` needs a family whose adapter answers in words."""
    if options.get(BY_ANSWER_OPTION) and not adapters.provides(model.kind, ANSWER_TEXT):
        raise InvalidArgumentError(
            f"{BY_ANSWER_OPTION}: {model.id} is a {model.kind} model, which does not answer in words; "
            f"families that do: {', '.join(f.name for f in adapters.families_providing(ANSWER_TEXT))}"
        )


VQASCORE_OPTION = "vqascore"


def vqascore_option() -> Option:
    """The ``vqascore`` option of a task that scores pairs with ``match``: which VQAScore variant
    a generative VLM computes (``adapters/vqascore.py``, docs/metrics.md)."""
    from conceptforge.loaders.harness.adapters.vqascore import AUTO, VQASCORE_CHOICES

    return Option(
        VQASCORE_OPTION,
        AUTO,
        choice(VQASCORE_CHOICES),
        "VQAScore variant of a generative VLM (docs/metrics.md): auto = the family's t2v_metrics rule "
        "(t2v-llava-1.5 for LLaVA, t2v-instructblip for InstructBLIP, …; next-token elsewhere)",
    )


def check_vqascore(task: str, options: dict[str, Any], *, model: Any) -> None:
    """Before any model loads: a VQAScore variant other than ``auto`` needs a model scored by
    VQAScore, and one that can compute it (a served model returns next-token log-probabilities
    only: no teacher-forced answer)."""
    from conceptforge.loaders.harness.adapters.vqascore import AUTO, NEXT_TOKEN

    name = options.get(VQASCORE_OPTION, AUTO)
    if name == AUTO:
        return
    where = f"{task}.{VQASCORE_OPTION}={name}"
    if options.get(BY_ANSWER_OPTION):
        raise InvalidArgumentError(f"{where} does not apply with {task}.{BY_ANSWER_OPTION}=true (no probabilities)")
    if model.kind == adapters.ENDPOINT and name != NEXT_TOKEN:
        raise InvalidArgumentError(
            f"{where}: {model.id} is a served model, which returns next-token log-probabilities only; "
            f"use {task}.{VQASCORE_OPTION}=next-token (or auto)"
        )
    if model.kind not in (adapters.VLM, adapters.ENDPOINT):
        raise InvalidArgumentError(
            f"{where}: {model.id} is a {model.kind} model, not scored by VQAScore; "
            "the option applies to generative VLMs (drop it)"
        )


def check_match_options(task: str) -> Callable[..., None]:
    """``check_options`` of a task with the ``by_answer`` and ``vqascore`` options."""

    def check(options: dict[str, Any], *, model: Any, inputs: dict[str, Any]) -> None:
        check_by_answer(options, model=model, inputs=inputs)
        check_vqascore(task, options, model=model)

    return check


int_list = argtypes.IntList()  # comma-separated integers -> tuple
str_list = argtypes.StrList()  # comma-separated names -> tuple


def choice(choices: tuple[str, ...]) -> argtypes.Choice:
    return argtypes.Choice(choices)


def template(*, allowed: set[str], required: set[str]) -> argtypes.Template:
    """A prompt template checked like the command line's ``--template`` (known fields only)."""
    return argtypes.Template(allowed=allowed, required=required)


flag = argtypes.flag  # an on/off option's text (the flags built from it are ``--name/--no-name``)
text = argtypes.Text  # free text: a prompt (multiline=True) or a one-line name
model_source = argtypes.model_source  # a model loaded later (an oracle, an encoder): folder or Hub id


def option_text(value: Any) -> str:
    """A value as ``--task-option`` text (lists comma-joined): what :func:`parse_option` reads."""
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def parse_option(option: Option, value: Any, *, where: str) -> Any:
    """``value`` (text, or a value a caller or a flag already holds) checked by the option's own
    ``parse``; a refusal is one :class:`InvalidArgumentError` line starting ``where``."""
    import argparse

    try:
        return option.parse(option_text(value))
    except (argparse.ArgumentTypeError, ConceptforgeError) as error:
        raise InvalidArgumentError(f"{where}: {error}") from None
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{where}: cannot read {value!r} ({option.help})") from None


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
    """A number in [0, 1] (accuracies), signed (CCD, Δ) or a count, with its standard error over
    seeds or episodes where the protocol has them (``None`` for a single deterministic pass).
    ``unit``: the name of its :class:`~conceptforge.loaders.harness.units.Unit`, set from the
    task's declaration (:meth:`Task.scored`) and recorded in the results file."""

    value: float
    stderr: float | None = None
    n: int | None = None
    unit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TaskOutcome:
    """What a task's ``run`` returns: the per-sample rows (``docs/evaluation-results.md``, samples) and
    what the benchmark reports beside its metrics. ``metrics`` are the protocol code's own
    numbers; the runner replaces them by ``Task.score(samples)`` after checking they agree."""

    samples: list[dict[str, Any]]
    main_metric: str
    metrics: dict[str, Metric] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=list)
    variant: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    table: str = ""
    #: the dataset config the task read where the run chose it (binding's ``config`` option, or a
    #: one-config repo's own config): recorded as the result's ``dataset.config``
    dataset_config: str | None = None
    protocol: str = ""  # the protocol actually run (the task's, per capability); "" = Task.protocol
    #: options the data decided in place of what was asked (a SUB spec release has no CUB table,
    #: so its S- rule is the release's own): the result records these, so it says what was applied
    options_used: dict[str, Any] = field(default_factory=dict)


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
    compmap_spec: str | None = None  # a CompMap benchmark spec naming its own data (loaders/compmap/benchmark.py)
    samples: Any = None  # conceptforge.loaders.harness.sample_cache.TaskSamples (None: no cache)
    given: frozenset[str] = frozenset()  # the options the user set (--task-option), not defaults
    capability: str = ""  # the capability the task runs with for this model (Task.capability_for)


ScoreFunction = Callable[[Sequence[dict[str, Any]], dict[str, Any]], dict[str, Metric]]


@dataclass(frozen=True)
class Task:
    """One row of a benchmark's task table."""

    name: str
    benchmark: str
    description: str
    capabilities: tuple[str, ...]  # what the model must do (adapters.base), preferred first
    protocol: str
    run: Callable[[TaskContext], TaskOutcome]
    score: ScoreFunction  # every metric from the per-sample rows and the options, no model
    columns: tuple[tuple[str, str], ...] = ()  # grouping/extra sample columns: (name, arrow type)
    dataset: str | None = None  # default Hub repo (None: the data is a local folder the user passes)
    revision: str | None = None
    config: str | None = None
    split: str | None = None
    needs: tuple[str, ...] = ()  # run-level inputs: "cub_dir", "mit_states_dir", "concepts"
    #: a run-level input that, when given, stands in for ``needs`` (a spec that names its own data)
    needs_met_by: str | None = None
    #: the ``needs`` a release made from a user's spec (``benchmark_spec.yaml``) provides itself:
    #: SUB's vocabulary comes from the spec, not from --cub-dir (issue 46)
    release_spec_provides: tuple[str, ...] = ()
    options: tuple[Option, ...] = ()
    seeded: bool = False  # metrics carry standard errors over seeds/episodes
    rescore_options: tuple[str, ...] = ()  # options --from-predictions may change (variants computed from the rows)
    #: ``--from-predictions``: the first row that contradicts its own scores, prediction and label or
    #: the task's schema, given the run's options -> ``"row ID: rule"`` (None: all agree)
    check_rows: Callable[[Sequence[dict[str, Any]], dict[str, Any]], str | None] | None = None
    #: before any model loads: what an option's value means beside the other options, the model's
    #: family and the run's folders (``check_options(options, model=ModelRef, inputs=RunSettings.inputs())``
    #: raises one InvalidArgumentError line); each option's own domain is its ``parse``
    check_options: Callable[..., None] | None = None
    #: ``--from-predictions``: the entry's ``details`` that are functions of the rows, recomputed
    rescore_details: Callable[[Sequence[dict[str, Any]], dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None
    # how the per-sample rows break down (a ``loaders.analysis.breakdowns.TaskSpec``, declared by the
    # benchmark beside this table; None: no breakdowns)
    breakdowns: Any = None
    # The (metric, split) pairs that are Hub leaderboards, given the splits the task evaluates and
    # its options: each becomes a task id of the dataset's eval.yaml (``publish --eval-tasks``) and
    # of the models' .eval_results (loaders.harness.push_results). None: the task has no Hub dataset
    # leaderboard (it scores a local folder or the model's own images).
    leaderboard: Callable[[Sequence[str], dict[str, Any]], list[tuple[str, str]]] | None = None
    families: tuple[str, ...] = ()  # only these families, of those providing a capability (() = all of them)
    protocols: tuple[tuple[str, str], ...] = ()  # (capability, protocol it runs) for --tasks list and docs
    #: the unit of every metric ``score`` returns (``loaders.harness.units.MetricSpec``: a name or
    #: pattern and its unit; first match wins). A metric without one is a bug (:meth:`scored`).
    metrics: tuple[MetricSpec, ...] = ()

    def scored(self, rows: Sequence[dict[str, Any]], options: dict[str, Any]) -> dict[str, Metric]:
        """``score``'s metrics, each with its declared unit: what a run and ``--from-predictions``
        record. A metric the task's ``metrics`` do not declare raises (a table would guess)."""
        out = {}
        for name, metric in self.score(rows, options).items():
            unit = declared_unit(self.metrics, name)
            if unit is None:
                raise RuntimeError(
                    f"{self.name}: metric {name} has no unit: declare it in the task's metrics "
                    "(loaders/harness/units.py MetricSpec)"
                )
            out[name] = replace(metric, unit=unit.name)
        return out

    def option_defaults(self) -> dict[str, Any]:
        return {o.name: o.default for o in self.options}

    def capability_for(self, kind: str, options: dict[str, Any] | None = None) -> str | None:
        """The capability this task runs with for a model of family ``kind`` (None: it cannot).

        The family's first capability in the task's order, unless the run's ``options`` ask for
        the by-answer protocol (``by_answer``, the tasks that have it): then ``answer-text``, the
        model's own words parsed (``loaders/harness/by_answer.py``), where the family gives them."""
        if self.families and kind not in self.families:
            return None
        if options and options.get(BY_ANSWER_OPTION) and ANSWER_TEXT in self.capabilities:
            return ANSWER_TEXT if adapters.provides(kind, ANSWER_TEXT) else None
        return adapters.first_capability(kind, self.capabilities)

    def providers(self) -> list[str]:
        """The families that can run this task."""
        return [
            f.name
            for f in adapters.FAMILIES.values()
            if (not self.families or f.name in self.families) and adapters.first_capability(f.name, self.capabilities)
        ]

    def skip_reason(self, model: Any, provided: dict[str, Any]) -> str | None:
        """One line saying why this task cannot run with ``model`` (None: it can)."""
        if self.capability_for(model.kind) is None:
            what = f"a {model.kind} model" + (f" ({model.model_type})" if model.model_type else "")
            needs = " or ".join("generated images" if c == IMAGES_TO_JUDGE else c for c in self.capabilities)
            return f"{self.name} runs with {', '.join(self.providers())} ({needs}); {model.id} is {what}"
        missing = [need for need in self.needs if not provided.get(need)]
        if missing and not (self.needs_met_by and provided.get(self.needs_met_by)):
            return f"{self.name} needs --{missing[0].replace('_', '-')}"
        return None


#: How the options of the task being checked or run were given (option -> ``where``), so that a
#: message names them as the user typed them: an alias's ``--ablations``, not ``TASK.ablations=true``.
_SPELLED: ContextVar[tuple[str, dict[str, str]]] = ContextVar("option_spellings", default=("", {}))


@contextmanager
def options_spelled(task: str, spelled: dict[str, str]) -> Iterator[None]:
    """Within: :func:`option_spelling` answers for ``task``'s options as ``spelled`` records them."""
    token = _SPELLED.set((task, dict(spelled)))
    try:
        yield
    finally:
        _SPELLED.reset(token)


def option_spelling(task: str, name: str, value: Any) -> str:
    """The option ``task.name`` set to ``value`` as the user gave it: an alias's flag (``--ablations``,
    ``--templates X``) or ``--task-option TASK.NAME=VALUE`` (also what a default is called)."""
    current, spelled = _SPELLED.get()
    where = spelled.get(name, "") if current == task else ""
    shown = str(value).lower() if isinstance(value, bool) else str(value)
    if where.startswith("--") and not where.startswith("--task-option"):
        if isinstance(value, bool):
            return where if value else f"--no-{where.removeprefix('--')}"
        return f"{where} {shown}"
    return f"--task-option {task}.{name}={shown}"


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
    """Mean ± standard error over seeds or episodes (sample std / sqrt(n)), ``n`` the runs;
    ``stderr`` is ``None`` for a single run, as the protocols report it."""
    from conceptforge.loaders.harness.reports import mean_se

    mean, se = mean_se(per_run)
    return Metric(float(mean), float(se) if len(per_run) > 1 else None, len(per_run))
