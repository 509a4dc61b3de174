"""SUB (SUB paper): Tied Diffusion Guidance over FLUX and the SUB candidate generator.

Python API (see docs/sub.md)::

    from conceptforge.generators.sub import TDGFlux, TDGParams, generate, load_cub, load_spec, plan_pairs

    flux = TDGFlux.from_pretrained()                       # black-forest-labs/FLUX.1-dev
    pair = flux.generate(prompt_reference=..., prompt_guidance=..., seed=0, params=TDGParams(tmax=0.6))
    pair.reference.save("r.png")

Importing this package imports torch (the TDG maths in ``tdg`` and ``flux_tdg`` are tensor code);
diffusers and the FLUX weights are loaded only by ``TDGFlux.from_pretrained``.
"""

from conceptforge.cub import CubMetadata, load_cub
from conceptforge.generators.sub.flux_tdg import DEFAULT_MODEL, GeneratedPair, TDGFlux
from conceptforge.generators.sub.spec import (
    CandidateSpec,
    Pair,
    PairPlan,
    Substitution,
    load_spec,
    make_prompts,
    make_substitution,
    plan_pairs,
    plan_reference_selection,
    read_candidate_spec,
)
from conceptforge.generators.sub.tdg import TDGParams, eta_schedule, tie, tie_mask, tie_pair

# The dataset side (card schema, stage, generate) needs `datasets`, a dependency of every install.
# Where it is missing on purpose (the GPU device check's image carries only diffusers,
# benchmarks/gpu.py) the model code above still imports; these names then say what is missing.
try:
    from conceptforge.generators.sub.card import FEATURES
    from conceptforge.generators.sub.stage import (
        GenerationSettings,
        RunSummary,
        SubStageConfig,
        build_stage,
        build_work_items,
        generate,
    )
except ImportError as error:
    if error.name not in ("datasets", "pyarrow"):
        raise
    _DATASET_SIDE_MISSING = error.name
    _DATASET_SIDE = ("FEATURES", "GenerationSettings", "RunSummary", "SubStageConfig", "build_stage")
    _DATASET_SIDE += ("build_work_items", "generate")

    def __getattr__(name: str):
        if name in _DATASET_SIDE:
            from conceptforge.errors import DependencyMissingError

            raise DependencyMissingError(
                f"conceptforge.generators.sub.{name} needs {_DATASET_SIDE_MISSING!r}: pip install conceptforge"
            )
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CubMetadata",
    "load_cub",
    "DEFAULT_MODEL",
    "GeneratedPair",
    "TDGFlux",
    "FEATURES",
    "SubStageConfig",
    "build_stage",
    "GenerationSettings",
    "RunSummary",
    "build_work_items",
    "generate",
    "CandidateSpec",
    "Pair",
    "PairPlan",
    "Substitution",
    "load_spec",
    "make_prompts",
    "make_substitution",
    "plan_pairs",
    "plan_reference_selection",
    "read_candidate_spec",
    "TDGParams",
    "eta_schedule",
    "tie",
    "tie_mask",
    "tie_pair",
]
