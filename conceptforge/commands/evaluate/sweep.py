"""``conceptforge evaluate --models FILE_OR_LIST --tasks … --out DIR``: a sweep, many models × tasks.

Each (model, task) pair is an item of one engine stage (``conceptforge.loaders.sweep``),
so the sweep runs with the launchers generation has: one process, a Slurm array
(``--num-shards``; with as many shards as items each array task is one pair), ``srun``,
torchrun or MPI, or ``--executor ray``. The flags of ``--model/--tasks`` (datasets, task
options, device, dtype, batch size, folders) apply to every model; a models file may override
device, dtype and batch size per model. ``--plan`` prints the items and what each needs.
"""

from __future__ import annotations

import argparse
import logging
import sys

from conceptforge import argtypes as at
from conceptforge.commands.evaluate.flags import eval_flag_group, first_given_flag
from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sweep's own flags, on the ``evaluate`` parser beside ``--model/--tasks``."""
    from conceptforge.commands.base import add_bootstrap_flags, add_executor_arguments

    group, add = eval_flag_group(parser, "sweeps: many models x tasks (--models, --out)")
    add(
        "--models",
        metavar="FILE_OR_LIST",
        help="models of a sweep: a file (one 'ID key=value ...' a line, or a YAML/JSON list; keys: "
        "revision, device, dtype, batch_size, needs=gpu|cpu|any, name) or a comma list of ids",
    )
    add(
        "--out",
        type=at.output_dir.as_text(),
        help="the sweep's folder: results/<model>.json per model and the leaderboard (.md, .html, .json)",
    )
    add("--num-shards", type=at.positive_int)
    add("--shard-index", type=at.non_negative_int)
    add(
        "--plan",
        action="store_true",
        help="print the sweep's items (id, model x task, needs gpu/cpu) and the sbatch arrays, then exit",
    )
    add_bootstrap_flags(group, where="of the sweep's leaderboard (HTML, JSON)", prefix="eval_")
    add_executor_arguments(parser)


def check_flags(args: argparse.Namespace) -> None:
    """A sweep's flags against the single-model ones (each would be silently ignored)."""
    if not args.eval_models:
        if flag := first_given_flag(args, ("--out", "--num-shards", "--shard-index", "--plan")):
            raise InvalidArgumentError(f"{flag} goes with --models (a sweep); one model writes --output")
        if getattr(args, "executor", "local") != "local" or getattr(args, "ray_address", None):
            raise InvalidArgumentError("--executor/--ray-address go with --models (a sweep)")
        return
    single_model = ("--model", "--output", "--push-results", "--from-predictions", "--no-samples")
    if flag := first_given_flag(args, single_model):
        raise InvalidArgumentError(f"{flag} does not go with --models: a sweep writes DIR/results/<model>.json")
    if getattr(args, "eval_compmap_spec", None):  # the sweep's items do not carry a spec (yet): refused, not ignored
        raise InvalidArgumentError("--compmap-spec does not go with --models: evaluate each model with --model")
    # a sweep loads each model whole on its device: these flags would be silently ignored
    if flag := first_given_flag(args, ("--device-map", "--max-memory", "--offload-folder")):
        raise InvalidArgumentError(
            f"{flag} does not go with --models: a sweep loads each model whole (give a model a device=… "
            "in the models file), or evaluate the large model alone with --model"
        )
    if not args.eval_tasks or args.eval_tasks == "list":
        raise InvalidArgumentError("--models needs --tasks (e.g. --tasks sub-vlm,binding-clip)")
    if not args.eval_out and not args.eval_plan and not args.eval_dry_run:
        raise InvalidArgumentError("--models needs --out DIR (the sweep's folder)")


#: The sweep settings that are the value of the ``evaluate`` flag of the same name, as given.
SETTINGS_AS_GIVEN = (
    "tasks",
    "device",
    "batch_size",
    "cache_dir",
    "cub_dir",
    "concepts",
    "mit_states_dir",
    "bootstrap_resamples",
    "bootstrap_seed",
)


def config_from_args(args: argparse.Namespace):
    from conceptforge.loaders.sweep import SweepConfig, parse_models

    return SweepConfig(
        models=parse_models(args.eval_models),
        datasets=list(args.eval_datasets),
        revisions=list(args.eval_revisions),
        options=list(args.eval_options),
        dtype=None if args.eval_dtype == "auto" else args.eval_dtype,
        sample_cache=not args.eval_no_sample_cache,
        **{name: getattr(args, f"eval_{name}") for name in SETTINGS_AS_GIVEN},
    )


def run(args: argparse.Namespace) -> int:
    from conceptforge.engine.launchers import resolve_shard
    from conceptforge.interrupts import Interrupted

    check_flags(args)
    config = config_from_args(args)
    if args.eval_dry_run:  # the bill of every (model, task) before any weight loads: nothing written
        return dry_run(args, config)
    shard = None
    try:
        shard = resolve_shard(args.eval_num_shards, args.eval_shard_index)
        return _run_sweep(args, config, shard)
    except Interrupted as error:
        if shard is not None and args.eval_out:
            from conceptforge.engine.runner import record_stop_before_start

            record_stop_before_start(args.eval_out, shard, f"interrupted by {error.signal_name} before its first item")
        raise


def _run_sweep(args: argparse.Namespace, config, shard) -> int:
    """Resolve the models, run this process's items, and publish what succeeded.

    Exit 1 when items failed every attempt (a model that does not load): the results and the
    leaderboard of the others are still written (assembled without the failed items, as
    ``conceptforge assemble --allow-failed`` does) and each failure is one line on stderr."""
    from conceptforge.commands.base import executor_for
    from conceptforge.engine.runner import check_output, run_stage
    from conceptforge.loaders.sweep import SWEEP_STAGE, build_stage, plan_items

    stage = build_stage(config)  # models resolved, tasks and options checked: before anything is written
    if args.eval_plan:
        from conceptforge.loaders.sweep import plan_lines

        refs = stage.make_item.refs
        print("\n".join(plan_lines(plan_items(config, refs))))
        return 0
    if getattr(args, "executor", "local") == "local":  # on Ray each GPU item asks the cluster for a GPU
        refuse_gpu_items_without_gpu(stage, shard)
    out = check_output(args.eval_out, stage=SWEEP_STAGE)
    try:
        with executor_for(args):
            # allow_failed: a model that does not load must not keep the others' results unpublished
            report = run_stage(stage, out, shard=shard, allow_failed=True)
    finally:
        stage.make_item.close()
    if report.assembled:
        written = len({item["model"] for item in stage.assembly_args["items"]} - failed_models(stage, report))
        print(f"{args.eval_out}: results/ ({written} models), leaderboard.md, leaderboard.html, leaderboard.json")
    print(report.message(args.eval_out), file=sys.stderr)
    if not report.failed:
        return 0
    for line in failure_lines(stage, report, args.eval_out):
        print(line, file=sys.stderr)
    return 1


def failed_models(stage, report) -> set[int]:
    """Indices of the models every item of which failed (no results file of theirs)."""
    items = stage.assembly_args["items"]
    failed = {failure.item_id for failure in report.failed}
    models = {item["model"] for item in items}
    return {m for m in models if all(i["id"] in failed for i in items if i["model"] == m)}


def failure_lines(stage, report, out: str, limit: int = 10) -> list[str]:
    """One line per failed (model, task) item, then what to do; the same cause of one model's
    items (a model that does not load) is said once for the model."""
    labels = {item["id"]: item["label"] for item in stage.assembly_args["items"]}
    by_error: dict[str, list[str]] = {}
    for failure in report.failed:
        by_error.setdefault(failure.error, []).append(labels.get(failure.item_id, failure.item_id))
    lines = []
    for error, names in list(by_error.items())[:limit]:
        lines.append(f"failed: {', '.join(names)}: {error}")
    if len(by_error) > limit:
        lines.append(f"failed: ... {len(by_error) - limit} more (`conceptforge status {out}` lists them)")
    lines.append(
        f"error: {len(report.failed)} of {len(stage.items)} sweep item(s) failed"
        + ("; the results and leaderboard hold the others" if report.assembled else "")
        + ": fix the cause and rerun the same command (only the failed items run again)"
    )
    return lines


def dry_run(args: argparse.Namespace, config) -> int:
    """``--models … --dry-run``: the cost lines of ``evaluate --dry-run`` for every model of the
    sweep (read offline, no weights), from the same cost table; nothing is written."""
    from conceptforge.loaders.harness.cost import dry_run_lines, resolve_offline
    from conceptforge.loaders.harness.registry import select_tasks

    selections = select_tasks(
        config.tasks, datasets=config.datasets, revisions=config.revisions, options=config.options
    )
    models = [resolve_offline(spec.model, spec.revision) for spec in config.models]
    lines = dry_run_lines(
        models, selections, gpu=args.eval_gpu_model, seconds_per_forward=args.eval_seconds_per_forward
    )
    print("\n".join(lines))
    return 0


def refuse_gpu_items_without_gpu(stage, shard) -> None:
    """This process's items that need a GPU, when it sees none (a CPU-only partition by
    accident): one line naming them and the sbatch array that gives them a GPU, before anything
    is written."""
    from conceptforge.engine.launchers import array_spec
    from conceptforge.engine.runner import plan_chunks, shard_chunks
    from conceptforge.errors import DeviceUnavailableError
    from conceptforge.loaders.sweep import gpu_visible

    mine = [chunk for chunk in shard_chunks(plan_chunks(stage.items, stage.chunk_size), shard)]
    wanting = [chunk.index for chunk in mine if any(item.payload.get("needs") == "gpu" for item in chunk.items)]
    if not wanting or gpu_visible():
        return
    first = stage.items[wanting[0]]
    raise DeviceUnavailableError(
        f"{len(wanting)} item(s) of this process need a GPU and it sees none (item {wanting[0]}: "
        f"{first.item_id}): run them where there is one, e.g. sbatch --array={array_spec(wanting)} --gres=gpu:1 "
        "SCRIPT with --num-shards = the number of items (`--plan` lists them), or set needs=cpu for their model"
    )
