"""What ``conceptforge generate sub`` asks for, as a plan: the pairs, the TDG overrides, the
dtype and the command line the card records.

Why a library module: the command only parses flags into a :class:`PlanRequest`; the plan is
the same whoever asks for it (the command, a script, a helper that regenerates single items).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from conceptforge.cub import load_cub
from conceptforge.errors import InvalidArgumentError
from conceptforge.generators.sub.own_benchmark import SubBenchmark
from conceptforge.generators.sub.schedule import TDGParams
from conceptforge.generators.sub.spec import (
    PairPlan,
    load_spec,
    plan_pairs,
    plan_reference_selection,
    read_candidate_spec,
)


@dataclass
class PlanRequest:
    """The flags that decide the pairs (``--cub-dir``, ``--pairs``, ``--tdg`` ...)."""

    cub_dir: str | None = None
    reference_selection: bool = False
    candidate_spec: str | None = None
    classes: Sequence[str] | None = None
    tdg: Sequence[str] = ()
    drop_present: bool | None = None
    pairs: Sequence[str] | None = None
    spec: str | None = None
    preset: str | None = None


def parse_tdg_overrides(values: Sequence[str]) -> dict[str, TDGParams]:
    overrides = {}
    for value in values:
        category, _, numbers = value.partition("=")
        parts = numbers.split(",")
        if category not in {"colour", "shape", "pattern"} or len(parts) != 3:
            raise InvalidArgumentError(
                f"--tdg {value!r}: expected CATEGORY=K,TMIN,TMAX with CATEGORY colour, shape or pattern"
            )
        try:
            k, tmin, tmax = (float(x) for x in parts)
        except ValueError:
            raise InvalidArgumentError(f"--tdg {value!r}: K, TMIN and TMAX must be numbers") from None
        overrides[category] = TDGParams(k=k, tmin=tmin, tmax=tmax)
    return overrides


def _matches(selector: str, bird: str, attribute: str) -> bool:
    wanted_bird, eq, wanted_attribute = selector.partition("=")
    if eq:
        return bird == wanted_bird and attribute == wanted_attribute
    return selector in (bird, attribute)


def select_pairs(plan: PairPlan, selectors: Sequence[str] | None) -> PairPlan:
    """Keep pairs matching any selector: ``BIRD=ATTRIBUTE``, a bird name, or an attribute."""
    if not selectors:
        return plan
    unused = [s for s in selectors if not any(_matches(s, p.bird, p.attribute) for p in plan.pairs)]
    if unused:
        dropped = set(plan.dropped)
        notes = [
            f"{s} (dropped: the bird already has S+ in CUB; use --no-drop-present)"
            if "=" in s and tuple(s.split("=", 1)) in dropped
            else s
            for s in unused
        ]
        raise InvalidArgumentError(f"--pairs selects nothing for: {', '.join(notes)}")
    return PairPlan(
        pairs=[p for p in plan.pairs if any(_matches(s, p.bird, p.attribute) for s in selectors)],
        # Only the dropped pairs the selection would have held: the card counts what was asked for.
        dropped=[d for d in plan.dropped if any(_matches(s, *d) for s in selectors)],
    )


def class_labels(args: PlanRequest, benchmark: SubBenchmark | None):
    """CUB's table (``--cub-dir``), a dataset source's table, or ``None`` (a dry run without CUB)."""
    if benchmark is not None and benchmark.table is not None:
        if args.cub_dir:
            raise InvalidArgumentError(
                f"--cub-dir does not apply: the spec's source is {benchmark.table.description}; leave --cub-dir out"
            )
        return benchmark.table
    return load_cub(args.cub_dir) if args.cub_dir else None


def build_plan(args: PlanRequest, benchmark: SubBenchmark | None = None) -> tuple[PairPlan, dict]:
    """The pairs to generate. Without class-level labels (dry runs only) nothing is dropped or checked.

    ``benchmark`` (``--spec``/``--preset``): its classes, substitutions, rules and labels; else the paper's.
    """
    cub = class_labels(args, benchmark)
    spec = benchmark.spec if benchmark is not None else load_spec()
    if args.reference_selection:
        if args.candidate_spec:
            raise InvalidArgumentError("--reference-selection and --candidate-spec exclude each other")
        if cub is None and not args.classes:
            raise InvalidArgumentError(
                "--reference-selection without --classes lists CUB's 200 classes: pass --cub-dir or --classes"
            )
        plan = plan_reference_selection(cub, args.classes, spec=spec)
        # Which classes is not bound to the store: a later run may add classes to the same folder.
        return select_pairs(plan, args.pairs), {"plan": "reference-selection"}
    if args.classes:
        raise InvalidArgumentError("--classes only applies to --reference-selection")
    overrides = parse_tdg_overrides(args.tdg)
    if args.candidate_spec:
        candidate = read_candidate_spec(args.candidate_spec)
        drop = False if args.drop_present is None else args.drop_present
        plan = plan_pairs(
            candidate.birds,
            candidate.attributes,
            cub=cub,
            drop_present=drop,
            guidance_birds=candidate.guidance_birds,
            tdg_overrides=overrides,
            spec=spec,
        )
        info = {"plan": "candidate-grid", "guidance_birds": dict(candidate.guidance_birds)}
    else:
        drop = spec.drop_present if args.drop_present is None else args.drop_present
        plan = plan_pairs(
            spec.reference_birds, spec.substitutions, cub=cub, drop_present=drop, tdg_overrides=overrides, spec=spec
        )
        info = {"plan": "paper"}
        if benchmark is not None and benchmark.carries_spec:  # a resumed run must be of the same spec
            info = {"plan": "spec", "spec_name": benchmark.spec_file.name, "spec_sha256": benchmark.spec_file.sha256}
    info["tdg_overrides"] = {k: v.to_dict() for k, v in overrides.items()}
    return select_pairs(plan, args.pairs), info


# Options that say how this process runs, not what the data is: left out of the card's command line,
# so every shard and rerun records (and assembles) the same card.
_RUN_ONLY = {
    "--num-shards": 1,
    "--shard-index": 1,
    "--max-items": 1,
    "--chunk-size": 1,
    "--device": 1,
    "--offload": 0,
    "-v": 0,
    "--verbose": 0,
    "--executor": 1,
    "--ray-address": 1,
    "--compile-cache": 1,
}


def strip_run_only_options(argv: Sequence[str]) -> list[str]:
    """``argv`` without the run-only options (shards, chunking, device, verbosity)."""
    out: list[str] = []
    skip = 0
    for arg in argv:
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in _RUN_ONLY:
            skip = 0 if "=" in arg else _RUN_ONLY[name]
            continue
        out.append(arg)
    return out


def resolve_dtype_name(dtype: str, device: str) -> str:
    if dtype != "auto":
        return dtype
    import torch

    on_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    return "bf16" if on_cuda else "fp32"
