"""Run a list of tasks on one model and write one results file (JSON) plus its markdown table.

Why one runner: every task resolves its dataset revision to a commit before loading it (so the
results name the exact data), shares one loaded model and its embedding cache (the second task
that embeds the same images or prompts reads them back instead of running the encoder), and a
task the model cannot do is skipped with one line instead of failing the run.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from conceptforge.errors import DataNotFoundError, InvalidArgumentError
from conceptforge.loaders.harness.model_ref import GENERATED, ModelRef, resolve_model
from conceptforge.loaders.harness.registry import TaskSelection, metric_unit
from conceptforge.loaders.harness.settings import EvaluationInputs
from conceptforge.loaders.harness.task import (
    DatasetRef,
    Metric,
    Task,
    TaskContext,
    TaskOutcome,
    options_digest,
    options_spelled,
)
from conceptforge.loaders.harness.units import PERCENT, Unit, format_metric, units_note

logger = logging.getLogger(__name__)

RESULTS_FORMAT = "conceptforge-eval-results/1"


# ----------------------------------------------------------------------------------- datasets
#: Metadata files a data folder's fingerprint reads whole (the images are named and sized only).
DATA_METADATA_SUFFIXES = (".txt", ".json", ".md", ".yaml")


def short_sha(value: str | None, digits: int = 12) -> str:
    """A commit's first ``digits`` hex digits; ``local:…`` digits for a local fingerprint."""
    if not value:
        return ""
    if value.startswith("local-sha256:"):
        return "local:" + value.split(":", 1)[1][:digits]
    return value[:digits]


def resolve_dataset(
    repo: str, revision: str | None, *, config: str | None = None, split: str | None = None, data_files: bool = True
) -> DatasetRef:
    """Pin ``repo`` at ``revision`` to a commit sha (Hub, via ``HfApi.dataset_info``) or a
    content fingerprint (local folder)."""
    if os.path.isdir(repo):
        from conceptforge.cards.provenance import local_fingerprint

        sha = local_fingerprint(repo) if data_files else local_fingerprint(repo, whole_suffixes=DATA_METADATA_SUFFIXES)
        return DatasetRef(str(repo), revision, sha, "local", config, split)
    if os.path.exists(repo):
        raise InvalidArgumentError(f"dataset {repo} is a file, not a dataset folder or Hub id")
    if os.path.isabs(repo) or repo.startswith(".") or repo.count("/") > 1:  # a path, not a Hub id
        raise DataNotFoundError(f"no dataset at {repo!r}: no such folder")
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        info = HfApi().dataset_info(repo, revision=revision)
    except RevisionNotFoundError:
        raise DataNotFoundError(
            f"dataset {repo} has no revision {revision!r}: pass an existing tag or commit"
        ) from None
    except RepositoryNotFoundError:
        raise DataNotFoundError(
            f"no dataset {repo!r} on the Hub: pass --dataset TASK=REPO@REVISION or a local folder"
        ) from None
    except (HfHubHTTPError, OSError) as error:  # offline mode, no network, a mute endpoint
        from conceptforge.external_errors import hub_failure

        raise hub_failure(error, f"resolve dataset {repo}@{revision or 'main'}") from None
    return DatasetRef(repo, revision, info.sha, "hub", config, split)


# ----------------------------------------------------------------------------------- model
class ModelSession:
    """The model under evaluation, loaded once (through its family's adapter) and shared by every
    task of a run."""

    def __init__(
        self,
        model: ModelRef,
        *,
        device: str | None,
        dtype: str | None,
        cache_dir: str | None,
        placement: Any = None,
    ) -> None:
        self.model = model
        self.placement = placement  # conceptforge/placement.Placement: --device-map (None: whole on device)
        self.device = device
        self.dtype = dtype
        self.cache_dir = cache_dir
        self._adapter = None
        self._shared: dict[str, Any] = {}
        self.task: str | None = None  # the task running now (a served model counts its requests per task)

    @classmethod
    def open(
        cls,
        model: str | os.PathLike[str],
        *,
        revision: str | None = None,
        device: str | None = None,
        dtype: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> ModelSession:
        """A session for ``model`` (Hub id, local folder or CBM factory), to share one loaded model
        between several :func:`run_task` calls; the caller closes it."""
        return cls(
            resolve_model(str(model), revision=revision),
            device=device,
            dtype=dtype,
            cache_dir=str(cache_dir) if cache_dir is not None else None,
        )

    def _load_revision(self) -> str | None:
        return self.model.sha if self.model.source == "hub" else self.model.revision

    def adapter(self):
        """The model's adapter (loaders/harness/adapters), loaded on first use."""
        if self._adapter is None:
            from conceptforge.loaders.harness.adapters.base import load_adapter

            self._adapter = load_adapter(
                self.model, device=self.device, dtype=self.dtype, cache_dir=self.cache_dir, placement=self.placement
            )
            if hasattr(self._adapter, "tag"):
                self._adapter.tag = self.task
        return self._adapter

    def start_task(self, name: str) -> None:
        """Count what the model does from now on under task ``name`` (a served model's requests)."""
        self.task = name
        if self._adapter is not None and hasattr(self._adapter, "tag"):
            self._adapter.tag = name

    def task_usage(self, name: str) -> dict[str, int] | None:
        """A served model's requests, cache hits and tokens for task ``name`` (None: not served)."""
        usage = getattr(getattr(self._adapter, "client", None), "usage_by_tag", None)
        return usage[name].to_dict() if usage and name in usage else None

    def provides(self, capability: str) -> bool:
        """Whether the model's family provides ``capability`` (``embed``, ``match``, …)."""
        from conceptforge.loaders.harness.adapters.base import provides

        return provides(self.model.kind, capability)

    def _capable(self, capability: str):
        if not self.provides(capability):
            raise InvalidArgumentError(f"{self.model.id} (a {self.model.kind} model) cannot {capability}")
        return self.adapter()

    def embedder(self):
        """``embed``: the dual encoder with its on-disk embedding cache (one per run)."""
        return self._capable("embed").embedder

    def matcher(self):
        """``match``: ``match(images, texts_per_image) -> scores`` and its ``protocol``."""
        return self._capable("match")

    def chooser(self):
        """``choose``: ``choose(images, questions) -> option distributions``."""
        return self._capable("choose")

    def answerer(self):
        """``answer-text``: ``answer_text(images, prompts) -> the model's own words`` (by-answer protocols)."""
        return self._capable("answer-text")

    def concept_predictor(self):
        """``concepts``: the CBM's ``concepts(images) -> [B, C]``."""
        return self._capable("concepts").concepts

    def shared(self, key: str, build: Callable[[], Any]) -> Any:
        """A view of the model that a benchmark builds once per run (e.g. CompMap's VL scorer):
        the benchmark owns how it is built, the session only keeps it for the next task."""
        if key not in self._shared:
            self._shared[key] = build()
        return self._shared[key]

    def activation_cache_dir(self) -> Path:
        from conceptforge.loaders.harness.embeddings import default_cache_dir

        return (Path(self.cache_dir) if self.cache_dir else default_cache_dir()) / "compmap-activations"

    def close(self) -> None:
        if self._adapter is not None and hasattr(self._adapter, "close"):
            self._adapter.close()


# ----------------------------------------------------------------------------------- run
@dataclass(kw_only=True)
class RunSettings(EvaluationInputs):
    compmap_spec: str | None = None  # a CompMap spec naming its own data (--compmap-spec; evaluate compmap --spec)
    placement: Any = None  # --device-map/--max-memory (conceptforge/placement.Placement); None: whole on device

    def inputs(self) -> dict[str, Any]:
        return {
            "cub_dir": self.cub_dir,
            "concepts": self.concepts,
            "mit_states_dir": self.mit_states_dir,
            "compmap_spec": self.compmap_spec,
        }


@dataclass
class RunResults:
    """Everything one ``conceptforge evaluate`` run measured (see :meth:`to_dict`)."""

    model: ModelRef
    settings: RunSettings
    tasks: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    created: str = ""
    samples: dict[str, tuple[list[dict[str, Any]], tuple[tuple[str, str], ...]]] = field(default_factory=dict)
    scored: dict[str, int] = field(default_factory=dict)  # items each task had to score (not from the cache)
    outcomes: dict[str, TaskOutcome] = field(default_factory=dict)  # each task's outcome, metrics as recorded

    def to_dict(self) -> dict[str, Any]:
        """The results payload (:func:`results_payload`), ready for :func:`write_results`."""
        return results_payload(
            self.model.to_dict(),
            {
                "device": self.settings.device,
                "dtype": self.settings.dtype,
                "batch_size": self.settings.batch_size,
                **(self.settings.placement.record() if self.settings.placement is not None else {}),
            },
            self.tasks,
            self.skipped,
            created=self.created,
        )


def results_payload(
    model: dict[str, Any],
    settings: dict[str, Any],
    tasks: list[dict[str, Any]],
    skipped: list[dict[str, str]],
    *,
    created: str,
) -> dict[str, Any]:
    """THE results payload (docs/evaluation.md, "Results file"), key order included: ``evaluate
    --output`` and a sweep's assembly (:func:`merge_results`) both build it here, so one model's
    file is the same bytes whichever wrote it."""
    import conceptforge

    return {
        "format": RESULTS_FORMAT,
        "conceptforge_version": conceptforge.__version__,
        "created": created,
        "model": model,
        "settings": settings,
        "tasks": tasks,
        "skipped": skipped,
    }


def merge_results(parts: Sequence[dict[str, Any]], *, created: str) -> dict[str, Any]:
    """Several runs of one model (a sweep's items, one task each, in plan order) as one payload:
    the first run's model and settings, every run's tasks and skipped tasks in order."""
    first = parts[0]
    return results_payload(
        first["model"],
        first["settings"],
        [task for part in parts for task in part["tasks"]],
        [skip for part in parts for skip in part["skipped"]],
        created=created,
    )


def _check_cub(cub_dir: str, *, images: bool) -> None:
    """Fail before the first task when the CUB folder lacks what a task reads (one line)."""
    from conceptforge.cub import (
        ATTRIBUTES,
        CLASSES,
        IMAGE_ATTRIBUTE_LABELS,
        IMAGE_CLASS_LABELS,
        IMAGES,
        TRAIN_TEST_SPLIT,
        CubLayout,
    )

    if not Path(cub_dir).is_dir():
        raise DataNotFoundError(f"--cub-dir {cub_dir} is not a folder: pass the extracted CUB_200_2011 folder")
    layout = CubLayout.resolve(cub_dir)
    needed = [ATTRIBUTES, CLASSES] + (
        [IMAGES, IMAGE_CLASS_LABELS, TRAIN_TEST_SPLIT, IMAGE_ATTRIBUTE_LABELS] if images else []
    )
    for relative in needed:
        layout.find(relative)


def _spec_dataset(spec_file: str) -> DatasetRef:
    """The data of a run from a benchmark spec: the spec file, fingerprinted (it names the data)."""
    spec = Path(spec_file)
    if not spec.is_file():
        raise DataNotFoundError(f"{spec}: no such spec file")
    return DatasetRef(str(spec), None, f"local-sha256:{hashlib.sha256(spec.read_bytes()).hexdigest()[:16]}", "local")


def _carries_spec(selection: TaskSelection) -> bool:
    """The release the task reads was made from a user's spec (it carries ``benchmark_spec.yaml``)."""
    if not selection.task.release_spec_provides:
        return False
    from conceptforge.specs.release import release_spec_at

    repo, revision = selection.data_source()
    spec = release_spec_at(repo, revision) if repo else None
    # a spec whose source is CUB (the paper readers' kind) still takes its vocabulary from --cub-dir
    return spec is not None and (spec.get("source") or {}).get("kind") != "cub"


def _provided(selection: TaskSelection, settings: RunSettings) -> dict[str, Any]:
    """The run's inputs, plus what the task's release provides itself (its spec)."""
    provided = dict(settings.inputs())
    if _carries_spec(selection):
        provided.update({need: "benchmark_spec.yaml" for need in selection.task.release_spec_provides})
    return provided


def _dataset_for(selection: TaskSelection, model: ModelRef, settings: RunSettings) -> DatasetRef:
    task = selection.task
    if task.needs_met_by and settings.inputs().get(task.needs_met_by):
        return _spec_dataset(settings.inputs()[task.needs_met_by])
    if "cub_dir" in task.needs and not ("cub_dir" in task.release_spec_provides and _carries_spec(selection)):
        _check_cub(settings.cub_dir, images=task.benchmark == "compmap")
    if "mit_states_dir" in task.needs:
        if not Path(settings.mit_states_dir).is_dir():
            raise DataNotFoundError(
                f"--mit-states-dir {settings.mit_states_dir} is not a folder: pass the MIT-States folder "
                "holding images/ and compositional-split-natural/"
            )
        return resolve_dataset(settings.mit_states_dir, None, data_files=False)
    if task.benchmark == "compmap":
        return resolve_dataset(settings.cub_dir, None, data_files=False)
    if task.benchmark == "conceptbed":  # the images under test are the "model"; the real ones come from the spec
        spec = Path(settings.concepts)
        if not spec.is_file():
            raise DataNotFoundError(f"--concepts {spec} is not a concept spec file")
        if model.kind != GENERATED:  # the model judges: the generated images are the task's dataset
            if not selection.dataset:
                raise InvalidArgumentError(
                    f"{task.name} with {model.id} (a {model.kind} model) judges generated images: "
                    f"pass them with --dataset {task.name}=FOLDER_OR_REPO"
                )
            return resolve_dataset(selection.dataset, selection.revision)
        return DatasetRef(
            str(spec), None, f"local-sha256:{hashlib.sha256(spec.read_bytes()).hexdigest()[:16]}", "local"
        )
    repo, revision = selection.data_source()  # the task's pinned revision unless the user chose another
    if not repo:
        raise InvalidArgumentError(f"task {task.name} has no default dataset: pass --dataset {task.name}=REPO@REVISION")
    return resolve_dataset(repo, revision, config=task.config, split=selection.split or task.split)


def reproducible() -> bool:
    """``SOURCE_DATE_EPOCH`` set (the reproducible-builds convention): the results carry that
    time as ``created`` and no wall-clock ``seconds`` (null), so two runs' files compare byte for
    byte, and a sweep's file is the bytes ``evaluate --output`` writes for the same model."""
    return bool(os.environ.get("SOURCE_DATE_EPOCH", "").strip())


def created_now() -> str:
    """The results' ``created`` stamp: now, or ``SOURCE_DATE_EPOCH`` where it is set."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch:
        try:
            moment = datetime.fromtimestamp(int(epoch), UTC)
        except (ValueError, OverflowError, OSError):
            raise InvalidArgumentError(f"SOURCE_DATE_EPOCH={epoch!r} is not a Unix time in seconds") from None
    else:
        moment = datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _refuse_by_answer_off(selection: Any, model: ModelRef) -> None:
    """An explicit ``TASK.by_answer=false`` for a family that only answers in words (a served model
    without log-probabilities) would be overridden, the run scored by answer all the same: refuse
    it, as every option that would be ignored is refused."""
    from conceptforge.loaders.harness.adapters.base import ANSWER_TEXT
    from conceptforge.loaders.harness.task import BY_ANSWER_OPTION

    task = selection.task
    if BY_ANSWER_OPTION not in selection.given or selection.options.get(BY_ANSWER_OPTION):
        return
    if task.capability_for(model.kind, selection.options) == ANSWER_TEXT:
        raise InvalidArgumentError(
            f"{task.name}.{BY_ANSWER_OPTION}=false: {model.id} answers only in words ({model.kind}: no token "
            f"log-probabilities), so {task.name} can only run by answer; drop the option, or serve "
            "the model with log-probabilities (vLLM, SGLang)"
        )


def run_tasks(
    model: ModelRef,
    selections: Sequence[TaskSelection],
    settings: RunSettings,
    *,
    session: ModelSession | None = None,
    quiet_skips: bool = False,
) -> RunResults:
    """Run every selected task the model can do, in order; skip the others with one line each.
    ``session``: an open session of ``model`` to use (and leave open) instead of loading it here;
    ``quiet_skips``: the caller says each skip itself (the log line is then a debug one)."""
    from conceptforge.loaders.harness.distributed import process_group

    group = process_group()  # one process, or the ranks of accelerate launch / torchrun sharing each task
    device = settings.device  # where this process runs the model; the results record the flag as given
    if group.device and settings.device in (None, "cuda"):  # rank r on its own GPU, cuda:LOCAL_RANK
        device = group.device
    results = RunResults(model, settings, created=created_now())
    runnable = []
    for selection in selections:
        reason = selection.task.skip_reason(model, _provided(selection, settings))
        if reason:
            # a caller that reports skips itself (evaluate's `skipped:` lines, its one error line) asks for quiet
            (logger.debug if quiet_skips else logger.warning)("skip %s", reason)
            results.skipped.append({"task": selection.task.name, "reason": reason})
        else:
            runnable.append(selection)
    if not runnable:
        return results
    from conceptforge.placement import check_family

    check_family(settings.placement, model)  # a map for open_clip, diffusers or a CBM: one line, nothing loaded
    # Every option against the model's family and the run's folders, then every dataset, before
    # the first (slow) task: a value no task can use or a wrong repo or tag fails in seconds.
    for selection in runnable:
        _refuse_by_answer_off(selection, model)
        if selection.task.check_options is not None:
            with options_spelled(selection.task.name, selection.spelled):
                selection.task.check_options(selection.options, model=model, inputs=settings.inputs())
    datasets = [_dataset_for(selection, model, settings) for selection in runnable]
    own_session = session is None
    if session is None:
        session = ModelSession(
            model,
            device=device,
            dtype=settings.dtype,
            cache_dir=settings.cache_dir,
            placement=settings.placement,
        )
    cache = None
    if settings.sample_cache and model.sha:  # no revision (a CBM factory): nothing safe to key rows on
        from conceptforge.loaders.harness.sample_cache import open_cache

        cache = open_cache(settings.cache_dir)
    try:
        for index, (selection, dataset) in enumerate(zip(runnable, datasets), start=1):
            task = selection.task
            where = dataset_label(dataset.to_dict())
            logger.info("[%d/%d] %s on %s", index, len(runnable), task.name, where)
            started = time.perf_counter()
            from conceptforge.loaders.harness.sample_cache import TaskSamples

            samples = TaskSamples(
                cache,
                task=task.name,
                options_digest=options_digest(selection.options),
                model_revision=model.sha or "",
                dataset_revision=dataset.sha or "",
                group=group,
            )
            context = TaskContext(
                model=model,
                session=session,
                dataset=dataset,
                options=dict(selection.options),
                batch_size=settings.batch_size,
                device=device,
                cub_dir=settings.cub_dir,
                concepts=settings.concepts,
                mit_states_dir=settings.mit_states_dir,
                compmap_spec=settings.compmap_spec,
                samples=samples,
                given=frozenset(selection.given),
                capability=task.capability_for(model.kind, selection.options) or "",
            )
            session.start_task(task.name)
            with options_spelled(task.name, selection.spelled):
                outcome = task.run(context)
            usage = session.task_usage(task.name)
            if usage is not None:  # logged, not written: --from-predictions must rewrite the file byte for byte
                logger.info("[%d/%d] %s: endpoint usage %s", index, len(runnable), task.name, usage)
            metrics = checked_metrics(task, outcome, selection.options)
            elapsed = time.perf_counter() - started
            seconds = None if reproducible() else elapsed  # null: no clock in a reproducible file
            main = metrics[outcome.main_metric]
            logger.info(
                "[%d/%d] %s: %s = %.4f (%.1f s)",
                index,
                len(runnable),
                task.name,
                outcome.main_metric,
                main.value,
                elapsed,
            )
            results.tasks.append(
                task_record(task, outcome, dataset, selection.options, metrics, seconds, adapter=model.kind)
            )
            results.samples[task.name] = (outcome.samples, task.columns)
            results.scored[task.name] = samples.scored
            results.outcomes[task.name] = replace(outcome, metrics=metrics)
    finally:
        if own_session:
            session.close()
        if cache is not None:
            cache.close()
    return results


def run_task(
    name: str,
    *,
    model: str | os.PathLike[str] | ModelSession,
    dataset: str | os.PathLike[str] | None = None,
    revision: str | None = None,
    split: str | None = None,
    options: Mapping[str, Any] | None = None,
    model_revision: str | None = None,
    cub_dir: str | os.PathLike[str] | None = None,
    concepts: str | os.PathLike[str] | None = None,
    mit_states_dir: str | os.PathLike[str] | None = None,
    batch_size: int = 32,
    device: str | None = None,
    dtype: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    sample_cache: bool = True,
) -> TaskOutcome:
    """Run one task from Python exactly as ``conceptforge evaluate --model MODEL --tasks NAME``
    runs it (same dataset resolution, task code, sample cache and metric check) and return its
    outcome: the per-sample rows, the metrics recomputed from them, the benchmark's details and
    table. Nothing is written; :func:`conceptforge.loaders.evaluation.evaluate` writes results.

    Why the only Python entry: the command line, its aliases, the tests and the benchmarks all
    go through the task's ``run``, so no second wiring of a protocol can drift from what the
    command line measures. ``model``: a Hub id, local folder or CBM factory ``module:function``,
    or an open :class:`ModelSession` (several tasks on one loaded model; then ``device``,
    ``dtype`` and ``cache_dir`` are the session's). ``options``: the task's options by name, as
    values or ``--task-option`` text, checked by each option's parse. A task the model cannot do
    raises its one-line skip reason."""
    from conceptforge.loaders.harness.registry import select_task

    selection = select_task(
        name, dataset=str(dataset) if dataset is not None else None, revision=revision, split=split, options=options
    )
    session = model if isinstance(model, ModelSession) else None
    if session is not None:
        given = [flag for flag, value in (("device", device), ("dtype", dtype), ("cache_dir", cache_dir)) if value]
        if given:
            raise InvalidArgumentError(f"run_task: {given[0]} is the session's when model is a ModelSession")
        ref, device, dtype, cache_dir = session.model, session.device, session.dtype, session.cache_dir
    else:
        ref = resolve_model(str(model), revision=model_revision)
    settings = RunSettings(
        device=device,
        dtype=dtype,
        batch_size=batch_size,
        cache_dir=str(cache_dir) if cache_dir is not None else None,
        cub_dir=str(cub_dir) if cub_dir is not None else None,
        concepts=str(concepts) if concepts is not None else None,
        mit_states_dir=str(mit_states_dir) if mit_states_dir is not None else None,
        sample_cache=sample_cache,
    )
    results = run_tasks(ref, [selection], settings, session=session)
    if results.skipped:
        raise InvalidArgumentError(results.skipped[0]["reason"])
    return results.outcomes[name]


def task_record(
    task: Task,
    outcome: TaskOutcome,
    dataset: DatasetRef,
    options: dict[str, Any],
    metrics: dict[str, Metric],
    seconds: float | None,
    adapter: str = "",
) -> dict[str, Any]:
    """One entry of the results file's ``tasks`` (docs/evaluation.md, "Results file"): ``protocol``
    is the one run (a task may run by several capabilities) and ``adapter`` the family that ran it."""
    return {
        "task": task.name,
        "benchmark": task.benchmark,
        "protocol": outcome.protocol or task.protocol,
        "adapter": adapter,
        "variant": outcome.variant,
        "dataset": {**dataset.to_dict(), **({"config": outcome.dataset_config} if outcome.dataset_config else {})},
        "options": {k: list(v) if isinstance(v, tuple) else v for k, v in {**options, **outcome.options_used}.items()},
        "seeds": outcome.seeds,
        "main_metric": outcome.main_metric,
        "metrics": {name: metric.to_dict() for name, metric in metrics.items()},
        "details": outcome.details,
        "table": outcome.table,
        "seconds": None if seconds is None else round(seconds, 3),
    }


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if a != a or b != b:  # NaN
        return a != a and b != b
    return abs(a - b) <= 1e-9 + 1e-6 * abs(b)  # float32 means in some protocol code


def checked_metrics(task: Task, outcome: TaskOutcome, options: dict[str, Any]) -> dict[str, Metric]:
    """The metrics recomputed from the per-sample rows (what ``--from-predictions`` computes),
    after checking they are the protocol code's own numbers: a disagreement is a bug, not noise.
    The rows give every metric its ``n``; a protocol that reports none is not contradicted."""
    rescored = task.scored(outcome.samples, options)
    if outcome.metrics:
        differ = [
            name
            for name in set(rescored) | set(outcome.metrics)
            if name not in rescored
            or name not in outcome.metrics
            or not _same(rescored[name].value, outcome.metrics[name].value)
            or not _same(rescored[name].stderr, outcome.metrics[name].stderr)
            or (outcome.metrics[name].n is not None and rescored[name].n != outcome.metrics[name].n)
        ]
        if differ:
            name = sorted(differ)[0]
            raise RuntimeError(
                f"{task.name}: metric {name} from the per-sample rows ({rescored.get(name)}) differs from the "
                f"protocol's ({outcome.metrics.get(name)})"
            )
    return rescored


# ----------------------------------------------------------------------------------- output
def format_value(metric: dict[str, Any] | None, unit: Unit = PERCENT) -> str:
    """A metric's value in its ``unit`` (``loaders.harness.units.format_metric``): ``71.25 ± 1.10``
    (percent), ``8 of 240`` (a count), ``0.1234`` (a score)."""
    return format_metric(metric, unit)


def dataset_label(dataset: dict[str, Any], digits: int = 12) -> str:
    """``repo@revision (sha…)``, or ``repo (local-…)`` for a local folder."""
    at = f"@{dataset['revision']}" if dataset.get("revision") else ""
    return f"{dataset['repo']}{at} ({short_sha(dataset.get('sha'), digits)})"


def results_markdown(payload: dict[str, Any]) -> str:
    """The run as markdown: one row per (task, metric), the dataset commit beside it."""
    from conceptforge.loaders.harness.reports import markdown_table

    model = payload["model"]
    revision = model.get("sha") or model.get("revision") or ""
    rows, used = [], []
    for task in payload["tasks"]:
        dataset = task["dataset"]
        data = dataset_label(dataset)
        for name, metric in task["metrics"].items():
            mark = " *" if name == task["main_metric"] else ""
            unit = metric_unit(task["task"], name, metric)
            used.append(unit)
            rows.append([task["task"], name + mark, format_value(metric, unit), unit.label, task["variant"], data])
    lines = [
        f"# conceptforge evaluate: {model['id']} ({model['kind']}, {short_sha(revision, 20)})",
        "",
        # a sweep's results have no time ("created" empty): they are the same however the sweep ran
        f"conceptforge {payload['conceptforge_version']}{', ' + payload['created'] if payload.get('created') else ''}"
        "; each value in the unit of its row, ± standard error over seeds or episodes where the protocol has them."
        + (f" {units_note(used)}" if used else ""),
        "",
    ]
    lines.append(
        markdown_table(["task", "metric", "value", "unit", "variant", "dataset"], rows) if rows else "(no task ran)"
    )
    if payload["skipped"]:
        lines += ["", "Skipped:", ""] + [f"- {s['reason']}" for s in payload["skipped"]]
    return "\n".join(lines) + "\n"


def write_results(payload: dict[str, Any], path: str | Path) -> tuple[Path, Path]:
    """Write ``path`` (JSON) and the markdown table beside it (same name, ``.md``)."""
    from conceptforge.loaders.harness.reports import write_json
    from conceptforge.serialization import atomic_write_bytes

    path = claim_results_output(path)
    write_json(path, payload)
    markdown = path.with_suffix(".md")
    atomic_write_bytes(markdown, results_markdown(payload).encode("utf-8"))
    return path, markdown


def claim_results_output(path: str | Path) -> Path:
    """Check (before any work) that ``path`` and the ``.md`` beside it may be written: each is
    absent or one we wrote (a results file of our format; our table's title line). A user's
    ``x.md`` next to ``--output x.json`` is never replaced."""
    from conceptforge.output import claim_files

    path = Path(path)
    if path.suffix != ".json":
        raise InvalidArgumentError(f"--output {path} must end in .json (the markdown table is written beside it)")

    def ours(file: Path, head: bytes) -> bool:
        if file.suffix == ".json":
            return head.lstrip().startswith(b"{") and f'"format": "{RESULTS_FORMAT}"'.encode() in head
        return head.startswith(b"# conceptforge evaluate: ")

    claim_files([path, path.with_suffix(".md")], ours=ours)
    return path


def default_output(model: ModelRef, directory: str | Path = "results") -> Path:
    if model.source == "endpoint":  # endpoint:NAME@URL -> endpoint__NAME (no URL in a file name)
        name = "endpoint__" + model.endpoint["served_model"].replace("/", "__").replace(":", "_")
    else:
        name = Path(model.id.rstrip("/")).name if model.source == "local" else model.id.replace("/", "__")
    return Path(directory) / f"{name}.json"
