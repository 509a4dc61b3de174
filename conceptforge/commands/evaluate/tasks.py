"""``conceptforge evaluate --model ID_OR_PATH --tasks a,b,…``: every benchmark in one run.

The options live on the ``evaluate`` parser itself, before the per-benchmark sub-commands
(``sub``, ``binding``, ``conceptbed``, ``compmap`` keep their own); their ``dest`` names start with
``eval_`` so they never collide with a sub-command's ``--model``. The work is done by
``conceptforge.loaders.tasks`` (registry), ``eval_run`` (runner, results) and ``push_results``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from conceptforge import argtypes as at

from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("all benchmarks in one run (--model/--tasks)")
    group.add_argument("--model", dest="eval_model", default=None,
                       help="model to evaluate: Hub id, local folder, or CBM factory package.module:function")
    group.add_argument("--model-revision", dest="eval_model_revision", default=None, help="model revision on the Hub (tag/branch/commit)")
    group.add_argument("--tasks", dest="eval_tasks", default=None,
                       help="comma-separated tasks, each optionally TASK:REPO@REVISION; 'list' prints the registry")
    group.add_argument("--dataset", dest="eval_datasets", action="append", default=[], metavar="TASK=REPO[@REV]",
                       help="dataset of a task: Hub id or local folder, optionally @revision (repeatable)")
    group.add_argument("--revision", dest="eval_revisions", action="append", default=[], metavar="TASK=REV",
                       help="dataset revision of a task (repeatable)")
    group.add_argument("--task-option", dest="eval_options", action="append", default=[], metavar="TASK.NAME=VALUE",
                       help="protocol setting of a task, e.g. binding-cdsm.seeds=0,1,2 (see --tasks list)")
    group.add_argument("--cub-dir", dest="eval_cub_dir", type=at.existing_dir.as_text(), default=None, help="CUB_200_2011 folder (sub-*, compmap-cub)")
    group.add_argument("--mit-states-dir", dest="eval_mit_states_dir", type=at.existing_dir.as_text(), default=None,
                       help="MIT-States folder with images/ and compositional-split-natural/ (compmap-mit-states)")
    group.add_argument("--concepts", dest="eval_concepts", type=at.existing_file.as_text(), default=None, help="ConceptBed concept spec (conceptbed-ccd)")
    group.add_argument("--device", dest="eval_device", type=at.device, default=None, help="cpu, cuda, cuda:1 … (default: cuda if available)")
    group.add_argument("--dtype", dest="eval_dtype", default=None, choices=("float32", "float16", "bfloat16"))
    group.add_argument("--batch-size", dest="eval_batch_size", type=at.positive_int, default=32)
    group.add_argument("--cache-dir", dest="eval_cache_dir", type=at.output_dir.as_text(), default=None, help="embedding cache (shared by all tasks)")
    group.add_argument("--output", dest="eval_output", type=at.output_file.as_text(), default=None,
                       help="results JSON (markdown table written beside it; default results/<model>.json)")
    group.add_argument("--push-results", dest="eval_push", action="store_true",
                       help="publish the results to the model repo (.eval_results + model-index, one commit) and "
                            "declare the tasks in our datasets' eval.yaml")
    group.add_argument("--results-repo", dest="eval_results_repo", default=None,
                       help="model repo to push to (default: --model when it is a Hub id)")
    group.add_argument("--results-pr", dest="eval_results_pr", action="store_true", help="push as a pull request")


def wants_tasks(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "eval_tasks", None) or getattr(args, "eval_model", None))


def run(args: argparse.Namespace) -> int:
    from conceptforge.loaders.eval_run import RunSettings, default_output, results_markdown, run_tasks, write_results
    from conceptforge.loaders.model_ref import resolve_model
    from conceptforge.loaders.tasks import format_task_list, select_tasks

    if args.eval_tasks == "list":
        print(format_task_list())
        return 0
    if not args.eval_tasks:
        raise InvalidArgumentError("--model needs --tasks (e.g. --tasks sub-vlm,binding-clip; --tasks list shows them)")
    if not args.eval_model:
        raise InvalidArgumentError("--tasks needs --model ID_OR_PATH")
    if args.eval_batch_size < 1:
        raise InvalidArgumentError("--batch-size must be at least 1")
    selections = select_tasks(args.eval_tasks, datasets=args.eval_datasets, revisions=args.eval_revisions,
                              options=args.eval_options)
    model = resolve_model(args.eval_model, revision=args.eval_model_revision)
    output = args.eval_output or default_output(model)
    at.check_writable(output, what="--output")  # results are written after every task ran: check first
    results_repo = args.eval_results_repo or (model.id if model.source == "hub" else None)
    if args.eval_push and not results_repo:
        raise InvalidArgumentError(f"--push-results: {model.id} is not a Hub model; pass --results-repo ORG/NAME")
    logger.info("model %s: %s (%s)", model.id, model.kind, model.sha)
    settings = RunSettings(device=args.eval_device, dtype=args.eval_dtype, batch_size=args.eval_batch_size,
                           cache_dir=args.eval_cache_dir, cub_dir=args.eval_cub_dir, concepts=args.eval_concepts,
                           mit_states_dir=args.eval_mit_states_dir)
    results = run_tasks(model, selections, settings)
    for skipped in results.skipped:
        print(f"skipped: {skipped['reason']}", file=sys.stderr)
    if not results.tasks:
        raise InvalidArgumentError(f"no task of --tasks can run with {model.id} (a {model.kind} model): see the skipped lines")
    payload = results.to_dict()
    path, markdown = write_results(payload, output)
    print(results_markdown(payload))
    print(f"results: {path} (table: {markdown})")
    if args.eval_push:
        from conceptforge.loaders.push_results import push_results

        report = push_results(payload, repo_id=results_repo, create_pr=args.eval_results_pr)
        print(f"pushed results to {report.model_repo} (commit {report.model_commit})")
        for repo, commit in report.dataset_commits.items():
            print(f"declared tasks in {repo}/eval.yaml" + (f" (commit {commit})" if commit else " (already declared)"))
    return 0
