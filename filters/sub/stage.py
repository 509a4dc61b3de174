"""``conceptforge filter sub`` as a library call: SUB candidates -> VQA scores -> the SUB dataset.

Why here and not in the command: the filter is a stage like every generator's, built by
:func:`build_stage` from one config dataclass, so the command line, ``status``/``assemble`` and
anything that re-scores single candidates (``build_stage(config).process_batch``) share it. The
checks run in the order the command always ran them, before any model time is spent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from conceptforge.engine.runner import RunReport, Stage, check_output, run_stage
from conceptforge.engine.workitems import ShardSpec
from conceptforge.errors import InvalidArgumentError
from conceptforge.filters.sub.decision import FilterParams
from conceptforge.filters.vqa.questions import DEFAULT_ANSWER_HINT
from conceptforge.filters.vqa.scorer import DEFAULT_VQA_MODEL
from conceptforge.generators.sub.own_benchmark import carried, load_sub_benchmark, questions_of, vocabulary
from conceptforge.specs.release import BENCHMARK_SPEC_NAME

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServedScorer:
    """A served ``--vqa-model`` (``endpoint:NAME@URL``, ``PROVIDER:NAME``), resolved by the layer
    that talks to servers (the harness): the fingerprint the run records as the model's revision,
    and how to open its option-letter scorer. Why injected: the filters layer sits below the
    harness and may not import it (tests/core/test_layering.py)."""

    revision: str
    load: Callable[[], Any]


@dataclass
class SubFilterConfig:
    """Everything ``conceptforge filter sub`` needs besides where to write and which shard."""

    candidates: Path
    cub_dir: str | Path | None
    params: FilterParams = field(default_factory=lambda: FilterParams(0.1, None, 0.0))
    vqa_model: str = DEFAULT_VQA_MODEL
    vqa_revision: str | None = None
    trust_remote_code: bool = False
    answer_hint: str = DEFAULT_ANSWER_HINT
    license: str | None = None  # default: the candidates card's license
    batch_size: int = 8
    chunk_size: int = 100
    device: str | None = None
    argv: list[str] | None = None
    #: ``--vqa-model endpoint:NAME@URL``: the client's settings (``EndpointOptions``; None: defaults)
    endpoint: Any = None
    #: resolves a served ``--vqa-model`` into a :class:`ServedScorer` (the command line passes
    #: :func:`conceptforge.commands.filter.sub.served_vqa_scorer`); None: a served model is refused
    resolve_served: Callable[[SubFilterConfig], ServedScorer] | None = None
    #: a SUB spec (``--spec``/``--preset``, or the candidates' ``benchmark_spec.yaml``): its question,
    #: its groups' values (in place of --cub-dir's) and, for a user's spec, what the dataset carries
    benchmark: Any = None


def build_stage(config: SubFilterConfig, *, out: str | Path | None = None) -> Stage:
    """The SUB VQA filter as an engine stage (checks the inputs first; the model loads lazily).

    ``out``, when given, is refused if it is the candidates folder itself.
    """
    from conceptforge.cub import load_attributes
    from conceptforge.filters.sub.pipeline import (
        FilterRunConfig,
        candidates_license,
        check_candidate_groups,
        open_candidates,
        provenance_for,
        scoring_stage,
    )
    from conceptforge.filters.vqa.questions import QuestionBuilder
    from conceptforge.filters.vqa.scorer import VQAScorer

    params = config.params
    if config.batch_size < 1:
        raise InvalidArgumentError(f"--batch-size must be >= 1, got {config.batch_size}")
    candidates_dir = Path(config.candidates)
    benchmark = config.benchmark
    if benchmark is None and (candidates_dir / BENCHMARK_SPEC_NAME).is_file():  # made from a user's spec
        benchmark = load_sub_benchmark(candidates_dir / BENCHMARK_SPEC_NAME, with_labels=False)
    spec_vocabulary = vocabulary(benchmark) if benchmark is not None else {}
    own_values = bool(spec_vocabulary) and all(spec_vocabulary.values())
    if config.cub_dir is None and not own_values:
        raise InvalidArgumentError(
            "--cub-dir is required (the CUB_200_2011 directory, for the options of each attribute group)"
        )
    candidates = open_candidates(candidates_dir)
    if out is not None and Path(out).resolve() == candidates_dir.resolve():
        raise InvalidArgumentError("--out must differ from --candidates")
    answer_hint = config.answer_hint
    groups = spec_vocabulary if own_values else load_attributes(config.cub_dir).groups
    asked = questions_of(benchmark) if benchmark is not None else {}
    questions = QuestionBuilder(groups, answer_hint=answer_hint, **asked)
    check_candidate_groups(candidates, questions)
    license = config.license or candidates_license(candidates_dir)
    if not license:
        raise InvalidArgumentError("the candidates card names no license; pass --license (e.g. cc-by-nc-4.0)")

    if config.chunk_size < 1:
        raise InvalidArgumentError(f"--chunk-size must be >= 1, got {config.chunk_size}")
    served = served_vqa_model(config)  # a served model: resolved (and refused) before anything runs
    revision = served.revision if served is not None else config.vqa_revision
    run_config = FilterRunConfig(config.vqa_model, revision, answer_hint, str(candidates_dir.resolve()))

    def load_scorer() -> Any:
        if served is not None:  # option letters' probabilities through the server (the same rule)
            return served.load()
        return VQAScorer.from_pretrained(
            config.vqa_model,
            trust_remote_code=config.trust_remote_code,
            revision=config.vqa_revision,
            device=config.device,
        )

    provenance = provenance_for(run_config, params, batch_size=config.batch_size, argv=config.argv)
    return scoring_stage(
        candidates,
        load_scorer,
        questions,
        settings=run_config.as_store_config(),
        batch_size=config.batch_size,
        chunk_size=config.chunk_size,
        assembly_args={
            "candidates": str(candidates_dir.resolve()),
            "params": asdict(params),
            "license": license,
            "provenance": provenance,
            **({"benchmark": own} if (own := carried(benchmark)) is not None else {}),
        },
    )


def served_vqa_model(config: SubFilterConfig) -> ServedScorer | None:
    """The resolved :class:`ServedScorer` when ``--vqa-model`` names a served model
    (``endpoint:NAME@URL``, ``PROVIDER:NAME``), else ``None``. The filter ranks candidates by the
    option letters' probabilities, so ``config.resolve_served`` refuses a server that returns no
    token log-probabilities, in one line, before any candidate is read."""
    from conceptforge.endpoint_spec import is_endpoint_spec

    if not is_endpoint_spec(config.vqa_model):
        return None
    if config.vqa_revision is not None:
        raise InvalidArgumentError(
            f"--vqa-revision does not apply to a served model ({config.vqa_model}): the server reports what it serves"
        )
    if config.resolve_served is None:
        raise InvalidArgumentError(
            f"--vqa-model {config.vqa_model} is a served model: pass SubFilterConfig(resolve_served="
            "conceptforge.commands.filter.sub.served_vqa_scorer) to reach it"
        )
    return config.resolve_served(config)


def filter_sub(
    config: SubFilterConfig,
    out: str | Path,
    *,
    shard: ShardSpec | Callable[[], ShardSpec] = ShardSpec(),
    max_images: int | None = None,
    check_model: Callable[[], None] | None = None,
) -> tuple[RunReport, dict[str, Any] | None]:
    """Score this shard's missing candidates into ``out`` and assemble once all are scored.

    Returns the run report and, when this process assembled the dataset, its filter statistics.
    ``shard`` may be a zero-argument callable (``lambda: resolve_shard(n, i)``): it is resolved
    after the inputs are checked, so a bad input is reported before a launcher's environment.
    ``check_model`` (the command line's: a mistyped folder, an uncached model offline) runs after
    the inputs and the output are checked and before anything is written.
    """
    from conceptforge.filters.sub.pipeline import assemble_stats

    stage = build_stage(config, out=out)
    shard = shard() if callable(shard) else shard
    run = check_output(str(out), stage="sub/vqa-filter")  # one location object from here on
    if check_model is not None:
        check_model()
    report = run_stage(stage, run, shard=shard, max_items=max_images)
    if report.assembly is None or report.assembly.status != "assembled":
        return report, None
    return report, assemble_stats(run.store())
