"""``conceptforge evaluate --model ID_OR_PATH --tasks a,b,…``: every benchmark in one run.

The options live on the ``evaluate`` parser itself, before the per-benchmark sub-commands
(``sub``, ``binding``, ``conceptbed``, ``compmap`` keep their own); their ``dest`` names start with
``eval_`` so they never collide with a sub-command's ``--model``. The work is done by
``conceptforge.loaders.evaluation`` (the one path: run or rescore, write results + samples, the
analyses hook), ``loaders/harness/registry.py``, ``loaders/harness/runner.py`` and
``push_results``. The per-benchmark aliases call :func:`run_alias` with the task options their
flags became (flags built from the tasks' options by ``options.py``).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping
from typing import Any

from conceptforge import argtypes as at
from conceptforge.commands.base import add_endpoint_flags, endpoint_options
from conceptforge.commands.evaluate.flags import eval_flag_group
from conceptforge.commands.shared_flags import add_cub_dir, add_dry_run, add_results_output
from conceptforge.errors import ConceptforgeError, InvalidArgumentError

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group, add = eval_flag_group(parser, "all benchmarks in one run (--model/--tasks)")
    add(
        "--model",
        help="model to evaluate: Hub id, local folder, CBM factory package.module:function, or a served model "
        "endpoint:SERVED_NAME@BASE_URL (vLLM, SGLang, any OpenAI-compatible server) or PROVIDER:NAME "
        "(openai, gemini, anthropic, openrouter, together; key from the provider's environment variable)",
    )
    add_endpoint_flags(group, prefix="eval_")
    add("--model-revision", help="model revision on the Hub (tag/branch/commit)")
    add("--tasks", help="comma-separated tasks, each optionally TASK:REPO@REVISION; 'list' prints the registry")
    add(
        "--dataset",
        action="append",
        default=[],
        metavar="TASK=REPO[@REV]",
        help="dataset of a task: Hub id or local folder, optionally @revision (repeatable)",
    )
    add("--revision", action="append", default=[], metavar="TASK=REV", help="dataset revision of a task (repeatable)")
    add(
        "--task-option",
        action="append",
        default=[],
        metavar="TASK.NAME=VALUE",
        help="protocol setting of a task, e.g. binding-cdsm.seeds=0,1,2 (see --tasks list)",
    )
    add_cub_dir(add, help="CUB_200_2011 folder (sub-*, compmap-cub)")
    add(
        "--mit-states-dir",
        type=at.existing_dir.as_text(),
        help="MIT-States folder with images/ and compositional-split-natural/ (compmap-mit-states)",
    )
    add(
        "--compmap-spec",
        type=at.existing_file.as_text(),
        help="CompMap benchmark spec (compmap-cub: few_shot, compmap-mit-states: czsl): your own data and "
        "protocol settings (docs/compmap.md, Your own CompMap benchmark)",
    )
    add("--concepts", type=at.existing_file.as_text(), help="ConceptBed concept spec (conceptbed-ccd)")
    add(
        "--device",
        type=at.device_checked_in_run,  # the GPU is checked in run(): a served model takes no --device
        help="cpu, cuda, cuda:1 … (default: cuda if available)",
    )
    add(
        "--dtype",
        type=at.dtype,
        choices=at.DTYPES,
        default="auto",
        help="auto (the model's own), float32, float16 or bfloat16 (fp32, fp16, bf16 accepted)",
    )
    add(
        "--device-map",
        type=at.Choice(("auto", "balanced", "balanced_low_0", "sequential"), name="device_map"),
        choices=("auto", "balanced", "balanced_low_0", "sequential"),
        help="split a model larger than one GPU over the GPUs, then CPU memory, then disk (accelerate's "
        "big-model loading; transformers families); instead of --device",
    )
    add(
        "--max-memory",
        type=at.max_memory,
        metavar="DEV=SIZE,...",
        help="with --device-map: the most each device may hold, e.g. 0=20GiB,1=20GiB,cpu=64GiB",
    )
    add(
        "--offload-folder",
        type=at.creatable_dir,
        help="with --device-map: where weights that fit nowhere else go (default: a temporary folder)",
    )
    add("--batch-size", type=at.positive_int, default=32)
    add_dry_run(
        add,
        help="print per task the items, the forwards and the GPU-hours (cost table: conceptforge/gpu_costs.json); "
        "load no weights, open no connection",
    )
    add(
        "--seconds-per-forward",
        type=at.seconds_measured,
        help="with --dry-run: your measured time of one forward, instead of the table's FLOP floor",
    )
    from conceptforge.gpu_costs import DEFAULT_GPU, gpu_models

    add(
        "--gpu-model",
        choices=gpu_models(),
        default=DEFAULT_GPU,
        help=f"with --dry-run: the GPU whose figures it uses (default {DEFAULT_GPU})",
    )
    add("--cache-dir", type=at.output_dir.as_text(), help="embedding cache (shared by all tasks)")
    add_results_output(add, help="results JSON (markdown table written beside it; default results/<model>.json)")
    add(
        "--push-results",
        action="store_true",
        help="publish the results to the model repo (.eval_results + model-index, one commit; never to a dataset repo)",
    )
    add("--results-repo", type=at.hub_repo_id, help="model repo to push to (default: --model when it is a Hub id)")
    add("--results-pr", action="store_true", help="push as a pull request")
    add(
        "--no-samples",
        action="store_true",
        help="do not write the per-sample predictions (<output stem>.samples/<task>.parquet)",
    )
    add(
        "--push-samples",
        action="store_true",
        help="with --push-results: also push the per-sample parquet files (.eval_results/samples/)",
    )
    add(
        "--no-sample-cache",
        action="store_true",
        help="score every item again instead of resuming from the per-sample cache in --cache-dir",
    )
    add(
        "--from-predictions",
        metavar="DIR",
        help="recompute every metric from a samples folder of an earlier run (no model loaded); "
        "--task-option may pick a variant computed from the rows (e.g. compmap-mit-states.czsl_curve)",
    )
    from conceptforge.commands.evaluate.sweep import add_arguments as add_sweep_arguments

    add_sweep_arguments(parser)  # --models FILE_OR_LIST --out DIR: a sweep over many models


def wants_tasks(args: argparse.Namespace) -> bool:
    return bool(
        getattr(args, "eval_tasks", None)
        or getattr(args, "eval_model", None)
        or getattr(args, "eval_models", None)
        or getattr(args, "eval_from_predictions", None)
    )


def refuse_push_without_repo(args: argparse.Namespace) -> None:
    """``--push-results`` for a served model needs ``--results-repo``: said before the endpoint is
    asked anything (it was said only after the probe, issue 45.8); a served model has no Hub repo
    of its own to push its results to."""
    import os

    from conceptforge.endpoint_spec import is_endpoint_spec

    model = str(args.eval_model)
    if args.eval_push and not args.eval_results_repo and not os.path.isdir(model) and is_endpoint_spec(model):
        raise InvalidArgumentError(
            f"--push-results: {model} is a served model, not a Hub repo; pass --results-repo ORG/NAME"
        )


def report(
    written, *, push: bool = False, results_repo: str | None = None, create_pr: bool = False, push_samples: bool = False
) -> None:
    """Print the table and where everything went; push when asked (one path for every form)."""
    from conceptforge.loaders.harness.runner import results_markdown

    print(results_markdown(written.payload))
    print(f"results: {written.results} (table: {written.markdown})")
    if written.samples_dir is not None:
        print(f"samples: {written.samples_dir}/ ({', '.join(p.name for p in written.samples)})")
    if push:
        from conceptforge.loaders.harness.push_results import push_results

        pushed = push_results(
            written.payload, repo_id=results_repo, create_pr=create_pr, samples=written.samples if push_samples else []
        )
        where = f"pull request {pushed.pull_request}" if pushed.pull_request else f"commit {pushed.model_commit}"
        print(f"pushed results to {pushed.model_repo} ({where}; {pushed.entries} leaderboard entries)")
        for repo, missing in pushed.undeclared.items():
            if missing is None:
                print(
                    f"note: {repo} has no eval.yaml at the evaluated revision: the results show on the model page "
                    "only, until its owner declares the tasks (conceptforge publish --eval-framework ... --eval-tasks ...)"
                )
            elif missing:
                print(f"note: the eval.yaml of {repo} does not declare {', '.join(missing)}: not on its leaderboard")


def run(args: argparse.Namespace) -> int:
    from conceptforge.commands.base import settings_from_args
    from conceptforge.loaders.evaluation import check_output, evaluate, evaluate_from_predictions
    from conceptforge.loaders.harness.model_ref import resolve_model
    from conceptforge.loaders.harness.registry import format_task_list, select_tasks
    from conceptforge.loaders.harness.runner import RunSettings, default_output

    if args.eval_tasks == "list":
        print(format_task_list())
        return 0
    from conceptforge.commands.base import refuse_device_for_endpoint, refuse_endpoint_flags

    if args.eval_model:
        refuse_device_for_endpoint(args.eval_device, args.eval_model)
        refuse_device_for_endpoint(args.eval_device_map, args.eval_model, flag="--device-map")
        refuse_endpoint_flags(args, args.eval_model, prefix="eval_")
    from conceptforge.commands.evaluate.sweep import check_flags as check_sweep_flags
    from conceptforge.commands.evaluate.sweep import run as run_sweep

    check_sweep_flags(args)
    if args.eval_models:
        at.check_device(args.eval_device)  # a missing GPU, now that the flag is known to apply
        return run_sweep(args)
    if args.eval_push_samples and not args.eval_push:
        raise InvalidArgumentError("--push-samples goes with --push-results")
    for flag, given in (("--results-repo", args.eval_results_repo), ("--results-pr", args.eval_results_pr)):
        if given and not args.eval_push:  # else silently ignored: nothing is pushed
            raise InvalidArgumentError(f"{flag} goes with --push-results")
    from conceptforge.placement import make_placement

    placement = make_placement(  # every combination that would be ignored is one line, now
        args.eval_device_map, args.eval_max_memory, args.eval_offload_folder, device=args.eval_device
    )
    at.check_device(args.eval_device)  # after the conflict: "drop --device" before "no GPU here"
    if args.eval_from_predictions:
        if placement is not None:
            raise InvalidArgumentError("--from-predictions loads no model: drop --device-map")
        if args.eval_model or args.eval_tasks or args.eval_compmap_spec:
            raise InvalidArgumentError(
                "--from-predictions rescores a samples folder: it takes no --model, --tasks or --compmap-spec"
            )
        if args.eval_push:
            raise InvalidArgumentError("--from-predictions does not push: push the run it came from")
        # default beside the folder, never over the run's own results file: x.samples -> x.rescored.json
        output = (
            args.eval_output or str(args.eval_from_predictions).rstrip("/").removesuffix(".samples") + ".rescored.json"
        )
        written = evaluate_from_predictions(args.eval_from_predictions, output, options=args.eval_options)
        report(written)
        return 0
    if not args.eval_tasks:
        raise InvalidArgumentError("--model needs --tasks (e.g. --tasks sub-vlm,binding-clip; --tasks list shows them)")
    if not args.eval_model:
        raise InvalidArgumentError("--tasks needs --model ID_OR_PATH")
    from conceptforge.endpoint_spec import check_provider

    check_provider(args.eval_model)  # mistral:large: an unknown provider, not a CBM factory
    from conceptforge.loaders.harness.distributed import process_group

    # accelerate launch / torchrun: join the ranks first; rank 0 alone claims and writes the outputs
    main = process_group().is_main
    if args.eval_output and main:  # a user's file there (or beside it): refused before anything loads
        check_output(args.eval_output, samples=not args.eval_no_samples)
    selections = select_tasks(
        args.eval_tasks, datasets=args.eval_datasets, revisions=args.eval_revisions, options=args.eval_options
    )
    if args.eval_compmap_spec:
        apply_compmap_spec(args.eval_compmap_spec, selections)
    if args.eval_dry_run:  # the bill before any weight loads: nothing written, no connection
        from conceptforge.loaders.harness.cost import dry_run_lines, resolve_offline

        model = resolve_offline(args.eval_model, args.eval_model_revision)

        lines = dry_run_lines(
            [model], selections, gpu=args.eval_gpu_model, seconds_per_forward=args.eval_seconds_per_forward
        )
        print("\n".join(lines))
        return 0
    if args.eval_seconds_per_forward is not None:
        raise InvalidArgumentError("--seconds-per-forward goes with --dry-run")
    refuse_push_without_repo(args)  # before a served model is probed (seconds, or a bill)
    model = resolve_model(args.eval_model, revision=args.eval_model_revision, endpoint=endpoint_options(args, "eval_"))
    output = args.eval_output or default_output(model)
    if main:  # the default too: results come after every task ran
        check_output(output, samples=not args.eval_no_samples)
    results_repo = args.eval_results_repo or (model.id if model.source == "hub" else None)
    if args.eval_push and not results_repo:
        raise InvalidArgumentError(f"--push-results: {model.id} is not a Hub model; pass --results-repo ORG/NAME")
    if args.eval_push:  # what would fail after every task ran: said before the first one
        from conceptforge.loaders.harness.push_results import check_push

        check_push([selection.dataset or selection.task.dataset for selection in selections], results_repo=results_repo)
    logger.info("model %s: %s (%s)", model.id, model.kind, model.sha)
    settings = settings_from_args(
        RunSettings,
        args,
        prefix="eval_",
        sample_cache=not args.eval_no_sample_cache,
        dtype=None if args.eval_dtype == "auto" else args.eval_dtype,
        placement=placement,
    )
    written = evaluate(
        model,
        selections,
        settings,
        output,
        samples=not args.eval_no_samples,
        on_skip=lambda reason: print(f"skipped: {reason}", file=sys.stderr),
    )
    if written.main:  # other ranks of accelerate launch / torchrun: rank 0 wrote and reports
        report(
            written,
            push=args.eval_push,
            results_repo=results_repo,
            create_pr=args.eval_results_pr,
            push_samples=args.eval_push_samples,
        )
    process_group().close()  # every rank waits for rank 0's files, then leaves the group together
    return 0


def apply_compmap_spec(spec_file: str, selections: list) -> None:
    """``--compmap-spec FILE``: the spec is read now (a bad field is one line before anything
    loads) and sets the options of the CompMap task that runs its protocol, under any
    ``--task-option`` given for the same option (a given option wins, as over a default)."""
    from conceptforge.loaders.compmap.benchmark import load_compmap_spec
    from conceptforge.loaders.harness.registry import set_option

    spec = load_compmap_spec(spec_file)
    chosen = [selection for selection in selections if selection.task.name == spec.spec.task]
    if not chosen:
        raise InvalidArgumentError(
            f"--compmap-spec {spec_file}: its protocol runs as task {spec.spec.task}; add it to --tasks"
        )
    for selection in chosen:
        for name, value in spec.spec.task_options().items():
            if name not in selection.given:
                set_option(selection, name, value, where=f"{spec_file}: {name}")


def run_alias(
    *,
    model: str,
    revision: str | None,
    tasks: str,
    datasets: list[str] = (),
    options: list[str] = (),  # type: ignore[assignment]
    values: Mapping[str, Any] | None = None,
    settings,
    output: str | None,
    split: str | None = None,
    brief: bool = False,
    model_flag: str = "--model",
) -> dict[str, list[dict]]:
    """What every ``conceptforge evaluate <benchmark>`` alias does with the task options its flags
    became (``values``: option name -> value, set in every task declaring it; ``options``:
    ``TASK.NAME=VALUE`` texts): the one runner, the one results format (written when ``output``
    is given), and the benchmark's own tables printed (``brief``: only each table's first block).
    Returns each task's per-sample rows."""
    from conceptforge.commands.base import refuse_device_for_endpoint
    from conceptforge.commands.evaluate.options import flag_name
    from conceptforge.loaders.evaluation import evaluate
    from conceptforge.loaders.harness.model_ref import resolve_model
    from conceptforge.loaders.harness.registry import select_tasks, set_option
    from conceptforge.loaders.harness.runner import run_tasks

    # --device with a served model is a flag that does not apply, not a missing GPU: said first.
    refuse_device_for_endpoint(getattr(settings, "device", None), model)
    at.check_device(getattr(settings, "device", None))
    selections = select_tasks(tasks, datasets=list(datasets), options=list(options))
    for selection in selections:
        selection.split = split or selection.split
        declared = {option.name for option in selection.task.options}
        for name, value in (values or {}).items():
            if name in declared:
                set_option(selection, name, value, where=flag_name(name))
    try:
        ref = resolve_model(model, revision=revision)
    except ConceptforgeError as error:  # name the alias's own flag (--clip-model), not --model
        raise type(error)(str(error).replace("--model", model_flag, 1)) from None
    if output:
        written = evaluate(
            ref,
            selections,
            settings,
            output,
            samples=True,
            on_skip=lambda reason: print(f"skipped: {reason}", file=sys.stderr),
        )
        if not written.main:  # another rank of accelerate launch / torchrun: rank 0 prints
            return written.rows
        entries, rows = written.payload["tasks"], written.rows
    else:
        results = run_tasks(ref, selections, settings)
        if not results.tasks:
            raise InvalidArgumentError(
                f"{ref.id} (a {ref.kind} model) can run none of {tasks}: "
                + "; ".join(s["reason"] for s in results.skipped)
            )
        written, entries = None, results.tasks
        rows = {name: part for name, (part, _) in results.samples.items()}
    for position, entry in enumerate(entries):
        print(("\n" if position else "") + (entry["table"].split("\n\n")[0] if brief else entry["table"]))
    if written is not None:
        print(f"results: {written.results} (table: {written.markdown})")
        if written.samples_dir is not None:
            print(f"samples: {written.samples_dir}/")
    return rows


def alias_output(output: str | None, model: str, several: bool) -> str | None:
    """``--output`` of an alias evaluating several models: one results file per model
    (``x.json`` -> ``x.<model name>.json``); one model writes ``--output`` itself."""
    if not output or not several:
        return output
    from pathlib import Path

    path = Path(output)
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(model.rstrip("/")).name.replace(":", "_"))
    return str(path.with_name(f"{path.stem}.{name}{path.suffix}"))
