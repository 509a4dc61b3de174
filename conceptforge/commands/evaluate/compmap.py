"""``conceptforge evaluate compmap``: CompMap usefulness and interpretability on CUB or MIT-States.

Prints paper-style tables (Tables 1–4 of "Do Vision-Language Pretrained Models Learn Composable
Primitive Concepts?") and writes every number to a JSON file. An alias of ``conceptforge evaluate
--model M --tasks compmap-cub`` (``--cub-dir``) or ``compmap-mit-states`` (``--mit-states-dir``):
its flags become task options and the one runner writes the one results format. The protocol
flags are built from the two tasks' options (``options.py``); a flag of the other task than
``--benchmark`` names is not used.

``--spec FILE`` runs a CompMap benchmark spec (``loaders/compmap/benchmark.py``: CZSL on any
attribute-object pairs, n-way k-shot on any class x attribute table); ``--preset NAME`` a built-in
one (``compmap-cub-paper``, ``compmap-mit-states-paper``: today's defaults, on ``--data-dir``).
The spec picks the protocol (``--benchmark`` may be left out) and sets the protocol's options;
a flag given beside it wins, as a flag wins over a default.
"""

from __future__ import annotations

import argparse
import logging

from conceptforge import argtypes as at
from conceptforge.commands.shared_flags import add_dry_run, add_results_output
from conceptforge.commands.spec_flags import add_spec_or_preset
from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)

COMPMAP_TASKS = {"cub": "compmap-cub", "mit-states": "compmap-mit-states"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from conceptforge.commands.evaluate.options import add_cache_and_device, add_task_options
    from conceptforge.loaders.harness.model_ref import DEFAULT_CLIP

    # Stored as ``args.dataset`` (``args.benchmark`` is the sub-command name, ``compmap``).
    parser.add_argument(
        "--benchmark",
        dest="dataset",
        choices=tuple(COMPMAP_TASKS),
        default=None,
        help="cub: task compmap-cub (n-way k-shot); mit-states: task compmap-mit-states (generalized CZSL); "
        "required unless --spec or --preset says it",
    )
    from conceptforge.specs import preset_names

    add_spec_or_preset(
        parser,
        spec_help="a CompMap benchmark spec (YAML/JSON): CZSL on your attribute-object pairs or n-way k-shot on "
        "your class x attribute table (docs/compmap.md, Your own CompMap benchmark)",
        preset_help="a built-in spec: compmap-cub-paper or compmap-mit-states-paper (the paper's setups, on "
        "--data-dir)",
        spec_metavar=None,
        preset_metavar=None,
        preset_choices=preset_names("compmap"),
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        type=at.existing_dir.as_text(),
        help="CUB_200_2011 directory, or the MIT-States root (not needed when the spec names its data)",
    )
    parser.add_argument(
        "--model",
        default=DEFAULT_CLIP,
        help="dual encoder (CLIP, SigLIP) or ITM model (ViLT, BLIP); Hub id or local dir",
    )
    parser.add_argument("--model-kind", choices=("auto", "dual", "itm"), default="auto")
    parser.add_argument("--revision", default=None)
    add_results_output(parser.add_argument, help="JSON results file (default: compmap-<benchmark>.json)")
    add_dry_run(
        parser.add_argument,
        help="print the plan (the data's classes, attributes or pairs, the settings, the forwards) and exit: "
        "no model loads, nothing is written",
    )
    add_cache_and_device(parser, cache_help="embedding and activation cache (default: the shared embedding cache)")
    parser.add_argument("--batch-size", type=at.positive_int, default=32)
    add_task_options(parser, tuple(COMPMAP_TASKS.values()))


def run(args: argparse.Namespace) -> int:
    """Flags -> options of task compmap-cub or compmap-mit-states, then the one runner."""
    from conceptforge.commands.evaluate.options import given_options, refuse_unused, task_values
    from conceptforge.commands.evaluate.tasks import run_alias
    from conceptforge.loaders.compmap.prompts import parse_templates
    from conceptforge.loaders.harness.runner import RunSettings

    spec = _read_spec(args)
    task = COMPMAP_TASKS[args.dataset]
    refuse_unused(args, tuple(COMPMAP_TASKS.values()), (task,), how=f"--benchmark {args.dataset}")
    values = given_options(args, (task,))
    if spec is not None:
        values = {**spec.spec.task_options(), **values}  # the spec's protocol; a flag given beside it wins
    options = {**task_values(args, (task,)), **values}
    parse_templates(options["templates"])  # a bad --templates fails before any model or data is read
    stem = args.dataset if spec is None or spec.file.preset else spec.file.name
    output = args.output or f"compmap-{stem}.json"
    from conceptforge.loaders.evaluation import check_output

    spec_file = str(spec.file.path) if spec is not None and spec.file.preset is None else None
    if spec_file is None and not args.dry_run:
        check_output(output, samples=True)  # the results file is refused before the data and the model are read
    if spec_file is not None and spec.spec.names_its_data and args.data_dir:
        raise InvalidArgumentError(f"--data-dir: the spec {spec_file} names its own data; drop --data-dir")
    if args.data_dir is None and (spec_file is None or not spec.spec.names_its_data):
        raise InvalidArgumentError(
            "--data-dir is required: the CUB_200_2011 or MIT-States folder"
            + (" (the spec names no folder)" if spec is not None else "")
        )
    folders = {"cub_dir" if args.dataset == "cub" else "mit_states_dir": args.data_dir}
    settings = RunSettings(
        device=args.device, batch_size=args.batch_size, cache_dir=args.cache_dir, compmap_spec=spec_file, **folders
    )
    data = _check_data(args, options, spec if spec_file else None)  # the data is read before the model loads
    if args.dry_run:
        from conceptforge.loaders.compmap.plan import czsl_plan, few_shot_plan

        name = spec.file.name if spec is not None else args.dataset
        print("\n".join((few_shot_plan if args.dataset == "cub" else czsl_plan)(name, data, options)))
        return 0
    if spec_file is not None:  # a bad spec or its data is said before anything is claimed or written
        check_output(output, samples=True)
    if args.model_kind != "auto":
        from conceptforge.loaders.harness.model_ref import resolve_model

        kind = resolve_model(args.model, revision=args.revision).kind
        if kind not in {"dual": ("clip", "open_clip"), "itm": ("itm",)}[args.model_kind]:
            raise InvalidArgumentError(f"--model-kind {args.model_kind}: {args.model} is a {kind} model")
    run_alias(
        model=args.model,
        revision=args.revision,
        tasks=task,
        values=values,
        settings=settings,
        output=output,
    )
    return 0


def _read_spec(args: argparse.Namespace):
    """The ``--spec`` / ``--preset`` given (validated: one line naming the field), and
    ``args.dataset`` set from it; ``--benchmark`` alone: None."""
    if args.spec is None and args.preset is None:
        if args.dataset is None:
            raise InvalidArgumentError(
                "--benchmark is required (cub or mit-states), or give --spec FILE / --preset NAME"
            )
        return None
    from conceptforge.loaders.compmap.benchmark import load_compmap_spec

    spec = load_compmap_spec(args.spec, preset=args.preset)
    benchmark = next(name for name, task in COMPMAP_TASKS.items() if task == spec.spec.task)
    if args.dataset is not None and args.dataset != benchmark:
        given = f"--spec {args.spec}" if args.spec else f"--preset {args.preset}"
        raise InvalidArgumentError(f"--benchmark {args.dataset}: {given} runs {benchmark}; drop --benchmark")
    args.dataset = benchmark
    return spec


def _check_data(args: argparse.Namespace, options: dict, spec):
    """Read the data the run will use, so a missing file or column is one line before the model
    loads; returns it (``--dry-run`` plans from it)."""
    if args.dataset == "cub":
        from conceptforge.loaders.compmap.cub_arrays import cub_primitives

        if spec is None:
            return cub_primitives(args.data_dir)
        from conceptforge.loaders.compmap.spec_run import check_spec_input

        check_spec_input("compmap-cub", {"compmap_spec": str(spec.file.path), "cub_dir": args.data_dir})
        few = spec.spec.few_shot
        if few.cub is not None:
            return cub_primitives(str(spec.resolve(few.cub.folder)) if few.cub.folder else args.data_dir)
        from conceptforge.loaders.compmap.spec_data import few_shot_table_data

        return few_shot_table_data(spec)
    if spec is None:
        from conceptforge.loaders.compmap.mit_states import load_mit_states

        return load_mit_states(args.data_dir, split_dir=options["split_dir"], metadata=options["metadata"] or None)
    from conceptforge.loaders.compmap.spec_data import czsl_data

    return czsl_data(spec, folder=args.data_dir)
