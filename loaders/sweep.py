"""Sweeps: many models × many tasks as one resumable engine run (``conceptforge evaluate --models``).

Why on the engine: a lab comparing 40 checkpoints on every task used to write its own loop of
``evaluate`` calls and its own sbatch scripts, and lost work when a node died. Here each
(model, task) pair is one :class:`~conceptforge.engine.workitems.WorkItem` of one engine stage,
in a chunk of its own, so everything generation has comes for free: shards from a Slurm array,
``srun``, torchrun or MPI, the Ray executor, resume (a finished pair is never run again), failed
items recorded and retried, ``conceptforge status`` with the exact resubmission command, and
exactly one assembly. The assembly writes one results file per model (the format of
``conceptforge evaluate --output``, samples, breakdowns and charts beside it) and the leaderboard
(markdown, HTML, JSON) over all of them, keyed by task, dataset, config, revision and protocol
as ``conceptforge leaderboard`` keys it.

An item's id is stable: it is derived from the model id and resolved revision, the task, its
options and the dataset (repo and revision) it reads, so a rerun, another shard count or another
launcher finds the same items. The published files are a pure function of the items' results:
``created`` and each task's ``seconds`` are left out of a sweep's results (they live in the item
store), so a sweep split, killed and resumed any way publishes the bytes of one uninterrupted run.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import logging
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from conceptforge.errors import ConceptforgeError, DeviceUnavailableError, InvalidArgumentError, PermanentItemError
from conceptforge.loaders.harness.settings import EvaluationInputs

logger = logging.getLogger(__name__)

SWEEP_STAGE = "evaluate-sweep"
SWEEP_SPLIT = "sweep"
RESULTS_DIR = "results"
LEADERBOARD_STEM = "leaderboard"
#: What a model line may set (``ID key=value ...``); anything else is refused with one line.
MODEL_KEYS = ("revision", "device", "dtype", "batch_size", "needs", "name")
NEEDS = ("gpu", "cpu", "any")


@dataclass(frozen=True)
class ModelSpec:
    """One model of a sweep and its own options (they override the command line's for it).

    ``needs``: where its items may run, ``gpu``, ``cpu`` or ``any`` (default: ``gpu`` when its
    device is ``cuda…``, ``cpu`` when it is ``cpu``, else ``any``); ``name``: the stem of its
    results file (default: the model's folder or repo name). ``where``: the line (or entry) of
    the models file that gave it, for error lines only (not a setting: not compared, not stored).
    """

    model: str
    revision: str | None = None
    device: str | None = None
    dtype: str | None = None
    batch_size: int | None = None
    needs: str | None = None
    name: str | None = None
    where: str | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None and key != "where"}


def _entry_spec(entry: Any, where: str) -> ModelSpec:
    """A models-file entry (a string or a mapping) as a checked :class:`ModelSpec`."""
    from conceptforge import argtypes

    if isinstance(entry, str):
        entry = {"model": entry}
    if not isinstance(entry, Mapping) or not isinstance(entry.get("model"), str) or not entry["model"].strip():
        raise InvalidArgumentError(f"--models {where}: each entry needs a model (a string, or a 'model:' key)")
    unknown = [key for key in entry if key != "model" and key not in MODEL_KEYS]
    if unknown:
        raise InvalidArgumentError(
            f"--models {where}: unknown option {unknown[0]!r} of {entry['model']} (options: {', '.join(MODEL_KEYS)})"
        )
    values: dict[str, Any] = {"model": entry["model"].strip()}
    for key in MODEL_KEYS:
        value = entry.get(key)
        if value is None:
            continue
        text = str(value)
        try:
            if key == "batch_size":
                values[key] = argtypes.positive_int(text)
            elif key == "dtype":
                parsed = argtypes.dtype(text)
                values[key] = None if parsed == "auto" else parsed
            elif key == "device":
                values[key] = argtypes.device_name(text)
            elif key == "needs":
                if text not in NEEDS:
                    raise ValueError(f"expected one of {', '.join(NEEDS)}, got {text!r}")
                values[key] = text
            elif key == "name":
                if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$", text):
                    raise ValueError(f"{text!r} is not a safe file name")
                values[key] = text
            else:
                values[key] = text
        except (ValueError, TypeError, argparse.ArgumentTypeError) as error:
            raise InvalidArgumentError(f"--models {where}: {entry['model']} {key}: {error}") from None
    return ModelSpec(**values, where=where)


def _line_entry(line: str, where: str) -> dict[str, str]:
    """``MODEL key=value ...`` (shell quoting) -> a mapping."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError as error:
        raise InvalidArgumentError(f"--models {where}: {error}") from None
    entry = {"model": words[0]}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep:
            raise InvalidArgumentError(
                f"--models {where}: {word!r} is not KEY=VALUE (options: {', '.join(MODEL_KEYS)})"
            )
        entry[key] = value
    return entry


def parse_models(text: str) -> list[ModelSpec]:
    """``--models``: a file (one model a line ``ID key=value ...``, or a YAML/JSON list of ids or
    ``{model: ID, key: value}`` mappings) or a comma-separated list of ids."""
    path = Path(text)
    if not path.exists() and path.suffix in (".txt", ".json", ".yaml", ".yml", ".list"):
        raise InvalidArgumentError(f"--models {text}: no such file (give a models file or a comma list of ids)")
    if path.is_file():
        content = path.read_text(encoding="utf-8")
        if path.suffix in (".json", ".yaml", ".yml"):
            import yaml

            try:  # YAML reads JSON too
                entries = yaml.safe_load(content)
            except yaml.YAMLError as error:
                raise InvalidArgumentError(f"--models {path}: not YAML/JSON ({str(error).splitlines()[0]})") from None
            if isinstance(entries, Mapping) and "models" in entries:
                entries = entries["models"]
            if not isinstance(entries, list):
                raise InvalidArgumentError(f"--models {path}: expected a list of models")
            specs = [_entry_spec(entry, f"{path} entry {i + 1}") for i, entry in enumerate(entries)]
        else:
            specs = [
                _entry_spec(_line_entry(line, f"{path}:{number}"), f"{path}:{number}")
                for number, line in enumerate(content.splitlines(), start=1)
                if line.strip() and not line.strip().startswith("#")
            ]
        where = str(path)
    else:
        specs = [_entry_spec(part.strip(), "list") for part in text.split(",") if part.strip()]
        specs = [replace(spec, where=None) for spec in specs]  # "--models a,b": the id alone names it
        where = "list"
    if not specs:
        raise InvalidArgumentError(f"--models {where}: no models")
    seen: set[tuple[str, str | None]] = set()
    for spec in specs:
        key = (spec.model, spec.revision)
        if key in seen:
            raise InvalidArgumentError(f"--models {where}: {spec.model} is listed twice")
        seen.add(key)
    return specs


# -- the plan ------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class SweepConfig(EvaluationInputs):
    """Everything a sweep item needs, as plain data (it travels to Slurm tasks via the command
    line and to Ray workers pickled): the models, the task selection as given, the run settings
    every model shares (:class:`~conceptforge.loaders.harness.settings.EvaluationInputs`)."""

    models: list[ModelSpec]
    tasks: str
    datasets: list[str] = field(default_factory=list)
    revisions: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    bootstrap_resamples: int = 1000
    bootstrap_seed: int = 0

    def selections(self) -> list[Any]:
        from conceptforge.loaders.harness.registry import select_tasks

        return select_tasks(self.tasks, datasets=self.datasets, revisions=self.revisions, options=self.options)

    def settings_for(self, spec: ModelSpec) -> Any:
        """The :class:`RunSettings` of one model's items: its own options over the command line's."""
        from conceptforge.loaders.harness.runner import RunSettings

        own = {"device": spec.device or self.device, "dtype": spec.dtype or self.dtype}
        return RunSettings(**{**self.evaluation_inputs(), **own, "batch_size": spec.batch_size or self.batch_size})

    def needs(self, spec: ModelSpec) -> str:
        """``gpu``, ``cpu`` or ``any``: where this model's items may run (the plan says it)."""
        if spec.needs:
            return spec.needs
        device = spec.device or self.device or ""
        if device.startswith("cuda"):
            return "gpu"
        if device == "cpu":
            return "cpu"
        return "any"


@dataclass(frozen=True)
class PlannedItem:
    """One (model, task) pair: its stable id, which model (index) and task, and what it needs."""

    item_id: str
    model: int
    task: str
    needs: str
    label: str


def _safe_stem(text: str) -> str:
    base = re.sub(r"[^A-Za-z0-9._+-]", "_", text) or "model"
    return base if base[0].isalnum() else "m" + base


def served_results_name(model: str) -> str:
    """The stem of a served model's results file: its served name's last segment and where it is
    served, e.g. ``Qwen2-VL-2B-Instruct.127.0.0.1-8000`` for
    ``endpoint:Qwen/Qwen2-VL-2B-Instruct@http://127.0.0.1:8000/v1``, ``gpt-4o.openai`` for
    ``openai:gpt-4o``.

    Why not the folder rule: the last segment of ``…/v1`` is ``v1``, so every served model of a
    sweep was ``results/v1.json`` (issue 45.8); the host keeps one model served twice apart."""
    from urllib.parse import urlsplit

    from conceptforge.endpoint_spec import GENERIC, parse_endpoint_spec

    spec = parse_endpoint_spec(model)
    served = spec.model.rstrip("/").rsplit("/", 1)[-1] or spec.model
    if spec.provider != GENERIC:
        return _safe_stem(f"{served}.{spec.provider}")
    parts = urlsplit(spec.base_url)
    where = parts.hostname or "server"
    if parts.port:
        where += f"-{parts.port}"
    return _safe_stem(f"{served}.{where}")


def results_name(spec: ModelSpec) -> str:
    """The stem of a model's results file: ``name``, else the model's folder or repo name (a
    served model: :func:`served_results_name`)."""
    from conceptforge.endpoint_spec import is_endpoint_spec

    if spec.name:
        return spec.name
    if is_endpoint_spec(spec.model):
        return served_results_name(spec.model)
    return _safe_stem(Path(spec.model.rstrip("/")).name.replace(":", "_"))


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def plan_items(config: SweepConfig, refs: Sequence[Any]) -> list[PlannedItem]:
    """Models × tasks in the order given (model-major), each with its stable id.

    The id hashes what decides the numbers: model id and resolved revision (``refs``), task,
    options, dataset repo and revision asked for, split, the model's dtype and batch size. The
    readable head (``<results name>.<task>``) is for people; the hash keeps two variants apart.
    """
    from conceptforge.serialization import canonical_json

    selections = config.selections()
    items = []
    names = [results_name(spec) for spec in config.models]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise InvalidArgumentError(
            f"--models: two models would write results/{duplicates[0]}.json: give them a name=... option"
        )
    for index, (spec, ref) in enumerate(zip(config.models, refs)):
        settings = config.settings_for(spec)
        for selection in selections:
            repo, revision = selection.data_source()
            identity = {
                "model": ref.id,
                "model_revision": ref.sha or ref.revision,
                "task": selection.task.name,
                "options": _jsonable(selection.options),
                "dataset": repo,
                "dataset_revision": revision,
                "split": selection.split,
                "dtype": settings.dtype,
                "batch_size": settings.batch_size,
            }
            digest = hashlib.sha256(canonical_json(identity)).hexdigest()[:10]
            items.append(
                PlannedItem(
                    item_id=f"{names[index]}.{selection.task.name}.{digest}",
                    model=index,
                    task=selection.task.name,
                    needs=config.needs(spec),
                    label=f"{spec.model} × {selection.task.name}",
                )
            )
    return items


# -- running one item ----------------------------------------------------------------------------
def gpu_visible() -> bool:
    """Whether this process can use a CUDA GPU (torch's own answer)."""
    import torch

    return bool(torch.cuda.is_available())


class SweepWorker:
    """``make_item`` of the sweep stage: runs one (model, task) pair and returns its results.

    Keeps the last model's session open, so consecutive items of one model in one process load
    it once. Pickled as plain data (the session is per process, never shipped to Ray)."""

    def __init__(self, config: SweepConfig, refs: Sequence[Any]) -> None:
        self.config = config
        self.refs = list(refs)
        self._session: tuple[int, Any] | None = None
        #: Models of this process that failed to load (index -> the one line): their other
        #: items fail at once with that line instead of loading the damaged files again.
        self._unloadable: dict[int, str] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "refs": self.refs, "_session": None, "_unloadable": {}}

    def close(self) -> None:
        if self._session is not None:
            self._session[1].close()
            self._session = None

    def _session_for(self, index: int, settings: Any) -> Any:

        if self._session is not None and self._session[0] == index:
            return self._session[1]
        self.close()
        session = _load_checked_session_class()(
            self.refs[index], device=settings.device, dtype=settings.dtype, cache_dir=settings.cache_dir
        )
        session.spec, session.unloadable, session.index = self.config.models[index], self._unloadable, index
        self._session = (index, session)
        return session

    def __call__(self, item: Any) -> Any:
        from conceptforge.engine.store import ItemResult
        from conceptforge.loaders.harness.runner import run_tasks

        index, task = int(item.payload["model"]), str(item.payload["task"])
        spec, ref = self.config.models[index], self.refs[index]
        needs = str(item.payload.get("needs", "any"))
        if needs == "gpu" and not gpu_visible():  # a GPU model on a CPU-only node: the run's error, not the item's
            raise DeviceUnavailableError(
                f"{item.item_id}: {spec.model} needs a GPU and this process sees none: submit the GPU items "
                "with --gres=gpu:1 (`conceptforge evaluate --models ... --plan` lists them), or set needs=cpu"
            )
        if index in self._unloadable:  # this model did not load for an earlier item: the same line, at once
            raise PermanentItemError(self._unloadable[index])
        (selection,) = [s for s in self.config.selections() if s.task.name == task]
        settings = self.config.settings_for(spec)
        results = run_tasks(ref, [selection], settings, session=self._session_for(index, settings))
        metadata: dict[str, Any] = {
            "model": ref.to_dict(),
            "task": task,
            "settings": {"device": settings.device, "dtype": settings.dtype, "batch_size": settings.batch_size},
            "skipped": results.skipped,
            "record": None,
            "seconds": None,
        }
        files: dict[str, bytes] = {}
        if results.tasks:
            record = dict(results.tasks[0])
            metadata["seconds"] = record.get("seconds")
            record["seconds"] = None  # published results are a function of the items, not of the clock
            results.tasks[0] = record
            metadata["record"] = record
            rows, columns = results.samples[task]
            metadata["columns"] = [list(column) for column in columns]
            files["samples.parquet"] = _rows_bytes(rows, columns)
        # The item's results payload as evaluate builds it, in its own key order (the store keeps
        # metadata as canonical, key-sorted JSON): the assembly merges these, so a sweep's results
        # file is the bytes `evaluate --output` writes for the same model.
        files[RESULTS_FILE] = json.dumps({**results.to_dict(), "created": ""}, allow_nan=True).encode("utf-8")
        return ItemResult(files=files, metadata=json.loads(json.dumps(metadata, allow_nan=True)))


def load_failure(spec: ModelSpec, error: BaseException) -> str:
    """One line for a sweep model that does not load: the model (and its line of the models file)
    and the cause in our words where we know it (a cut-short weights file names the file and how
    to get it again), else the library's first line."""
    from conceptforge.errors import one_line
    from conceptforge.external_errors import translate

    known = error if isinstance(error, ConceptforgeError) else translate(error)
    cause = str(known) if known is not None else f"{type(error).__name__}: {one_line(error)}"
    where = f" ({spec.where})" if spec.where else ""
    return f"cannot load {spec.model}{where}: {cause}"


@functools.cache
def _load_checked_session_class() -> type:
    from conceptforge.interrupts import Interrupted
    from conceptforge.loaders.harness.runner import ModelSession

    class LoadCheckedSession(ModelSession):
        """A :class:`ModelSession` whose model load failure is the item's permanent failure.

        Why: a load that failed on a damaged file fails again; retried three times it printed the
        raw SafetensorError three times (issue 45.8). The run's own errors (no GPU, an interrupt,
        out of memory) pass through unchanged."""

        spec: ModelSpec
        unloadable: dict[int, str]
        index: int

        def adapter(self):  # noqa: ANN201 (the adapter's type is the family's)
            if self._adapter is not None:
                return self._adapter
            try:
                return super().adapter()
            except (Interrupted, DeviceUnavailableError, MemoryError):
                raise
            except Exception as error:
                line = load_failure(self.spec, error)
                self.unloadable[self.index] = line
                raise PermanentItemError(line) from error

    return LoadCheckedSession


def _rows_bytes(rows: Sequence[Mapping[str, Any]], columns: Sequence[Sequence[str]]) -> bytes:
    """A task's per-sample rows as parquet bytes (the samples schema), read back at assembly."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from conceptforge.loaders.harness.samples import schema_for

    schema = schema_for([tuple(c) for c in columns])
    table = pa.Table.from_pylist([{f.name: row.get(f.name) for f in schema} for row in rows], schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def _rows_of(data: bytes) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pq.read_table(pa.BufferReader(data)).to_pylist()


# -- the stage ------------------------------------------------------------------------------------
def build_stage(config: SweepConfig, refs: Sequence[Any] | None = None) -> Any:
    """The engine stage of a sweep (models resolved here unless ``refs`` are given)."""
    from conceptforge.engine.runner import Stage
    from conceptforge.engine.workitems import WorkItem, derive_seed
    from conceptforge.loaders.harness.model_ref import resolve_model

    if refs is None:
        refs = [_resolve(spec, resolve_model) for spec in config.models]
    planned = plan_items(config, refs)
    items = [
        WorkItem(
            item.item_id,
            derive_seed(0, item.item_id),
            SWEEP_SPLIT,
            {"model": item.model, "task": item.task, "needs": item.needs},
        )
        for item in planned
    ]
    settings = {
        "models": [{**spec.to_dict(), "sha": ref.sha, "kind": ref.kind} for spec, ref in zip(config.models, refs)],
        "tasks": config.tasks,
        "datasets": list(config.datasets),
        "revisions": list(config.revisions),
        "options": list(config.options),
        "inputs": {"cub_dir": config.cub_dir, "concepts": config.concepts, "mit_states_dir": config.mit_states_dir},
        "run": {"device": config.device, "dtype": config.dtype, "batch_size": config.batch_size},
    }
    args = {
        "models": [results_name(spec) for spec in config.models],
        "items": [
            {"id": i.item_id, "model": i.model, "task": i.task, "needs": i.needs, "label": i.label} for i in planned
        ],
        "bootstrap": {"resamples": config.bootstrap_resamples, "seed": config.bootstrap_seed},
    }
    return Stage(
        name=SWEEP_STAGE,
        items=items,
        settings=settings,
        make_item=SweepWorker(config, refs),
        assembler=ASSEMBLER,
        assembly_args=args,
        chunk_size=1,  # one item a chunk: a killed item is made again alone
        description="model × task items",
        unit="item",
        resources=_resources,
        claim_chunks=True,  # two sweeps into one --out share the items instead of both making each
    )


def _resolve(spec: ModelSpec, resolve_model: Any) -> Any:
    """One model of the sweep resolved; its error names the model and its line of the models file
    (a sweep of 40 models refused with "no adapter for a 'zebra' model" left the user to find it)."""
    try:
        return resolve_model(spec.model, revision=spec.revision)
    except ConceptforgeError as error:
        where = f"--models {spec.where}: " if spec.where else "--models: "
        raise _renamed(error, f"{where}{spec.model}: {error}") from None


def _renamed(error: ConceptforgeError, message: str) -> ConceptforgeError:
    """``error``'s kind with another message (its exit code kept); InvalidArgumentError for a kind
    whose constructor takes more than the message."""
    try:
        return type(error)(message)
    except TypeError:
        return InvalidArgumentError(message)


def _resources(chunk: Any) -> dict[str, float]:
    """Ray resources of a chunk (one item): a GPU for an item that needs one."""
    needs = {item.payload.get("needs") for item in chunk.items}
    return {"num_gpus": 1} if "gpu" in needs else {"num_cpus": 1}


# -- assembly --------------------------------------------------------------------------------------
def assemble_sweep(store: Any, staging: Path, args: Mapping[str, Any]) -> None:
    """Write ``results/<model>.json`` (+ markdown, samples, breakdowns, charts) per model and the
    leaderboard (``leaderboard.md``, ``.html``, ``.json``) from the finished items, in plan order."""
    from conceptforge.files import write_json
    from conceptforge.loaders.analysis.bootstrap import BootstrapConfig
    from conceptforge.loaders.analysis.leaderboard import leaderboard, load_results
    from conceptforge.loaders.analysis.leaderboard_html import analyse, leaderboard_html, leaderboard_json
    from conceptforge.loaders.evaluation import write_outputs
    from conceptforge.loaders.harness.runner import created_now, merge_results, reproducible, write_results
    from conceptforge.serialization import atomic_write_bytes

    stored = {item.item_id: item for item in store.records(SWEEP_SPLIT)}
    paths: list[Path] = []
    # no time of its own (items ran whenever); SOURCE_DATE_EPOCH's where set, as evaluate's
    created = created_now() if reproducible() else ""
    for index, name in enumerate(args["models"]):
        entries = [stored[i["id"]] for i in args["items"] if i["model"] == index and i["id"] in stored]
        if not entries:  # every item of this model failed (assembled with --allow-failed)
            continue
        payload = merge_results([_item_results(e) for e in entries], created=created)
        path = staging / RESULTS_DIR / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        if payload["tasks"]:
            samples = {
                e.metadata["task"]: (
                    _rows_of(e.read_file("samples.parquet")),
                    tuple(tuple(c) for c in e.metadata["columns"]),
                )
                for e in entries
                if e.metadata.get("record")
            }
            write_outputs(payload, path, samples=samples)
        else:
            write_results(payload, path)
        paths.append(path)
    if not paths:
        return
    payloads = load_results(paths)
    atomic_write_bytes(staging / f"{LEADERBOARD_STEM}.md", leaderboard(payloads).encode("utf-8"))
    bootstrap = BootstrapConfig(resamples=int(args["bootstrap"]["resamples"]), seed=int(args["bootstrap"]["seed"]))
    analysed = analyse(payloads, config=bootstrap)
    page = leaderboard_html(payloads, config=bootstrap, analysed=analysed)
    atomic_write_bytes(staging / f"{LEADERBOARD_STEM}.html", page.encode("utf-8"))
    write_json(staging / f"{LEADERBOARD_STEM}.json", leaderboard_json(payloads, config=bootstrap, analysed=analysed))


RESULTS_FILE = "results.json"  # an item's results payload, key order kept (SweepWorker)


def _item_results(item: Any) -> dict[str, Any]:
    """One item's results payload as its run built it (:data:`RESULTS_FILE`); an item stored by
    a version without that file: rebuilt from its (key-sorted) metadata."""
    if RESULTS_FILE in item.files:
        return json.loads(item.read_file(RESULTS_FILE))
    meta = item.metadata
    tasks = [meta["record"]] if meta.get("record") else []
    return {"model": meta["model"], "settings": meta["settings"], "tasks": tasks, "skipped": meta.get("skipped", [])}


def _register() -> Any:
    from conceptforge.engine.assembly import register_assembler

    return register_assembler("conceptforge.loaders.sweep:assemble_sweep", assemble_sweep)


ASSEMBLER = _register()


# -- what people read: the plan, and a sweep's lines in `conceptforge status` ---------------------
def plan_lines(items: Sequence[PlannedItem], *, script: str = "SCRIPT") -> list[str]:
    """The plan: one line per item (array task id = item index with ``--num-shards`` = items),
    then the Slurm arrays to submit, GPU items with ``--gres=gpu:1`` and the others without."""
    from conceptforge.engine.launchers import array_spec

    lines = [f"{len(items)} items (array task id = item index with --num-shards {len(items)}):"]
    width = len(str(len(items) - 1))
    for index, item in enumerate(items):
        lines.append(f"  {index:>{width}}  {item.item_id}  {item.label}  needs {item.needs}")
    gpu = [i for i, item in enumerate(items) if item.needs == "gpu"]
    other = [i for i, item in enumerate(items) if item.needs != "gpu"]
    if gpu:
        lines.append(f"GPU items: sbatch --array={array_spec(gpu)} --gres=gpu:1 {script}")
    if other:
        lines.append(f"CPU items: sbatch --array={array_spec(other)} {script}")
    return lines


def status_lines(config: Mapping[str, Any], args: Mapping[str, Any], done: Sequence[int], limit: int = 20) -> list[str]:
    """For ``conceptforge status``: the (model, task) pairs still missing, with what each needs."""
    items = args.get("items") or []
    missing = [(index, item) for index, item in enumerate(items) if index not in set(done)]
    if not missing:
        return [f"  sweep: every one of the {len(items)} (model, task) items is done"]
    lines = [f"  sweep: {len(missing)} of {len(items)} (model, task) items missing:"]
    lines += [
        f"    {index}: {item['label']} (item {item['id']}, needs {item['needs']})" for index, item in missing[:limit]
    ]
    if len(missing) > limit:
        lines.append(f"    ... {len(missing) - limit} more")
    return lines


def gpu_item_indices(args: Mapping[str, Any]) -> set[int]:
    """Indices (= chunk indices) of the items that need a GPU."""
    return {index for index, item in enumerate(args.get("items") or []) if item.get("needs") == "gpu"}
