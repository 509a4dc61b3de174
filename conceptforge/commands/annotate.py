"""``conceptforge annotate``: human validation studies: serve the annotation app, export results, apply them to the dataset.

    conceptforge annotate DATASET_DIR --study STUDY [--per-group N] [--port 8080]      serve (default)
    conceptforge annotate DATASET_DIR --study STUDY --export results.json              write results JSON
    conceptforge annotate DATASET_DIR --study STUDY --apply OUT_DIR                    filtered dataset dir

``--export`` and ``--apply`` may be combined and do not serve. See docs/annotation.md.
"""

from __future__ import annotations

import argparse
import logging
import sys

from conceptforge import argtypes as at
from conceptforge.commands.base import settings_from_args
from conceptforge.commands.shared_flags import add_cub_dir
from conceptforge.filters.annotation.results import Rules
from conceptforge.filters.annotation.studies import STUDIES

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = __doc__.split("\n", 2)[2]
    parser.add_argument(
        "dataset_dir",
        metavar="DATASET_DIR",
        type=at.existing_dir.as_text(),
        help="SUB filtered/candidates or ConceptBed generated dataset",
    )
    parser.add_argument("--study", required=True, help=f"one of: {', '.join(STUDIES)}")
    parser.add_argument(
        "--per-group",
        type=at.positive_int,
        help="items sampled per group (default: 40 per attribute for sub-faithfulness, 3 per "
        "bird-attribute pair for sub-attribute, 10 per learner-concept, 25 per learner-category)",
    )
    parser.add_argument(
        "--seed", type=at.seed, default=None, help="sampling seed (default 0; fixed once the study exists)"
    )
    parser.add_argument(
        "--split", default=None, help="split to study (default: test/candidates, concept or composition)"
    )
    parser.add_argument(
        "--db",
        type=at.output_file.as_text(),
        help="SQLite file (default: DATASET_DIR/../<name>.annotations/<study>.sqlite)",
    )
    add_cub_dir(
        parser.add_argument,
        help="CUB dir with attributes.txt: sub-attribute offers every value of the group "
        "(default: only the values present in the dataset)",
    )
    serve = parser.add_argument_group("serving")
    serve.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1; 0.0.0.0 only if you mean it)")
    serve.add_argument("--port", type=at.port, default=8080, help="port (0: any free port)")
    out = parser.add_argument_group("results")
    out.add_argument(
        "--export",
        metavar="JSON",
        type=at.output_file.as_text(),
        help="write the results (scores, agreement, decisions, answers) and exit",
    )
    out.add_argument(
        "--apply",
        metavar="OUT_DIR",
        type=at.output_dir.as_text(),
        help="write the filtered dataset directory (card shows the statistics)",
    )
    out.add_argument(
        "--license", type=at.hub_license, default=None, help="license for --apply when the input card has none"
    )
    out.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="NAME=FILE.json|COLUMN",
        help="ConceptBed: correlate a metric with the human scores (JSON object key -> number; keys are "
        "item ids, learners, concepts, learner|concept, …) or a numeric dataset column; repeatable",
    )
    rules = parser.add_argument_group("rules (see docs/annotation.md)")
    defaults = Rules()
    rules.add_argument("--min-attribute-yes", type=at.unit_interval, default=defaults.min_attribute_yes)
    rules.add_argument("--min-pair-attribute", type=at.unit_interval, default=defaults.min_pair_attribute)
    rules.add_argument("--min-pair-bird", type=at.unit_interval, default=defaults.min_pair_bird)
    rules.add_argument(
        "--keep-unvalidated", action="store_true", help="sub-faithfulness: keep attributes nobody annotated"
    )
    rules.add_argument(
        "--min-pair-accuracy",
        type=at.unit_interval,
        help="sub-attribute: drop pairs below this S+ accuracy",
    )
    rules.add_argument(
        "--min-item-score", type=at.rating, default=None, help="conceptbed: drop items below this mean rating"
    )
    rules.add_argument("--annotated-only", action="store_true", help="keep only annotated rows")


def run(args: argparse.Namespace) -> int:
    from conceptforge.errors import InvalidArgumentError
    from conceptforge.filters.annotation.session import StudySettings, export_results, open_study, write_json
    from conceptforge.filters.annotation.studies import get_study

    get_study(args.study)  # unknown study: fail before touching anything
    if args.per_group is not None and args.per_group < 1:
        raise InvalidArgumentError("--per-group must be at least 1")
    if args.metric and not args.study.startswith("conceptbed"):
        raise InvalidArgumentError("--metric correlations apply to the conceptbed studies only")
    settings = settings_from_args(StudySettings, args, metrics=args.metric)
    if args.export:  # a user's file of that name is never replaced: only an export of ours
        from conceptforge.filters.annotation.session import claim_export

        claim_export(args.export)
    if args.apply:  # someone's folder: refused before any file (the export included) is written
        from conceptforge.filters.annotation.apply import APPLY_MADE_BY
        from conceptforge.output import claim_folder

        claim_folder(args.apply, made_by=APPLY_MADE_BY, flag="--apply")
    if args.export or args.apply:
        app, config = open_study(settings, create=False)
        rules = settings_from_args(Rules, args)
        results = export_results(app, config, rules=rules, metric_specs=args.metric)
        if args.export:
            write_json(args.export, results)
            print(f"results: {args.export}")
        if args.apply:
            from conceptforge.filters.annotation.apply import apply_results

            stats = apply_results(results, dataset_dir=args.dataset_dir, out_dir=args.apply, license=args.license)
            print(f"filtered dataset: {args.apply} (kept {stats['rows']['kept']}, dropped {stats['rows']['dropped']})")
        print(results_table(results))
        print(summary_line(results))
        return 0

    from conceptforge.filters.annotation.server import make_server, server_url

    if args.host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning("serving on %s: anyone who can reach this machine can annotate", args.host)
    app, _ = open_study(settings, create=True)
    server = make_server(app, host=args.host, port=args.port)
    print(f"serving {args.study} ({len(app.sample)} items) at {server_url(server)}  (Ctrl+C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt as stop:  # Ctrl+C or kill -TERM (conceptforge.interrupts): 130 / 143
        signal_name = getattr(stop, "signal_name", "SIGINT")
        print(f"stopped by {signal_name}; answers are saved, rerun the same command to resume", file=sys.stderr)
        return getattr(stop, "exit_code", 130)
    finally:
        server.server_close()
    return 0


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}"


def results_table(results: dict) -> str:
    """The headline table of the study as markdown (the full numbers are in the JSON)."""
    study = results["study"]
    if study == "sub-faithfulness":
        lines = [
            "| attribute | answers | attribute score % | 'yes' % | bird score % | kept |",
            "| --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for name, row in results["attributes"].items():
            lines.append(
                f"| {name} | {row['answers']} | {_pct(row['attribute_score'])} | {_pct(row['attribute_yes'])} | "
                f"{_pct(row['bird_score'])} | {'yes' if row['kept'] else 'no: ' + row['reason']} |"
            )
    elif study == "sub-attribute":
        lines = ["| attribute | answers | S+ accuracy % | S- accuracy % |", "| --- | ---: | ---: | ---: |"]
        for name, row in results["attributes"].items():
            lines.append(
                f"| {name} | {row['answers']} | {_pct(row['splus_accuracy'])} | {_pct(row['sminus_accuracy'])} |"
            )
        overall = results["overall"]
        lines.append(
            f"| **Human (all)** | {overall['answers']} | {_pct(overall['splus_accuracy'])} | {_pct(overall['sminus_accuracy'])} |"
        )
    else:
        lines = ["| learner | answers | human score (1-5) |", "| --- | ---: | ---: |"]
        for name, row in results["learners"].items():
            score = "n/a" if row["mean_rating"] is None else f"{row['mean_rating']:.3f}"
            lines.append(f"| {name} | {row['answers']} | {score} |")
    for question, report in results["agreement"].items():
        alpha = report["krippendorff_alpha"]
        lines.append(
            f"agreement ({question}): Krippendorff's alpha ({report['metric']}) = "
            f"{'n/a' if alpha is None else f'{alpha:.3f}'}, percent agreement "
            f"{'n/a' if report['percent_agreement'] is None else _pct(report['percent_agreement']) + '%'}"
            f" over {report['items_with_2plus_annotators']} items with 2+ annotators"
        )
    return "\n".join(lines)


def summary_line(results: dict) -> str:
    progress = results["progress"]
    head = (
        f"{results['study']}: {progress['answers']} answers from {len(progress['annotators'])} annotator(s), "
        f"{progress['annotated_items']}/{progress['sample_items']} items annotated"
    )
    if "human" in results:
        human = results["human"]
        fmt = lambda v: "n/a" if v is None else f"{v:.1f}%"  # noqa: E731
        head += f"; human S+ {fmt(human['splus'])}, S- {fmt(human['sminus'])}"
    if "dropped_attributes" in results:
        head += f"; attributes kept {len(results['kept_attributes'])}, pairs kept {len(results['kept_pairs'])}"
    for corr in results.get("correlations", []):
        r = "n/a" if corr["pearson"] is None else f"{corr['pearson']:.4f}"
        head += f"; pearson({corr['metric']}, human) = {r} over {corr['n']} {corr['level']}(s)"
    return head
