"""SUB (SUB paper): Tied Diffusion Guidance over FLUX and the SUB candidate generator.

Python API (see docs/sub.md)::

    from conceptforge.generators.sub import TDGFlux, TDGParams, generate, load_cub, load_spec, plan_pairs

    flux = TDGFlux.from_pretrained()                       # black-forest-labs/FLUX.1-dev
    pair = flux.generate(prompt_reference=..., prompt_guidance=..., seed=0, params=TDGParams(tmax=0.6))
    pair.reference.save("r.png")

Each name is imported on first use (PEP 562), so importing one part costs only that part: the
spec, its planning, the TDG schedule and the defaults (``spec``, ``benchmark``, ``schedule``,
``options``) import neither torch nor ``datasets``, which keeps ``conceptforge spec check``,
``generate sub --help`` and ``--dry-run`` instant; the tie and the model (``tdg``, ``flux_tdg``)
import torch; diffusers and the FLUX weights load only in ``TDGFlux.from_pretrained``. The dataset
side (card schema, stage, ``generate``) needs ``datasets``, a dependency of every install; where it
is missing on purpose (the GPU device check's image carries only diffusers, benchmarks/gpu.py) the
model code still imports and those names say what is missing.
"""

from conceptforge.lazy_exports import lazy_exports

# Public name -> the module that defines it; the card and the stage need ``datasets`` (see above).
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CubMetadata": "conceptforge.cub",
        "load_cub": "conceptforge.cub",
        "DEFAULT_MODEL": ".options",
        "GeneratedPair": ".flux_tdg",
        "TDGFlux": ".flux_tdg",
        "FEATURES": ".card",
        "SubStageConfig": ".stage",
        "build_stage": ".stage",
        "GenerationSettings": ".stage",
        "RunSummary": ".stage",
        "build_work_items": ".stage",
        "generate": ".stage",
        "CandidateSpec": ".spec",
        "Pair": ".spec",
        "PairPlan": ".spec",
        "Substitution": ".spec",
        "load_spec": ".spec",
        "make_prompts": ".spec",
        "make_substitution": ".spec",
        "plan_pairs": ".spec",
        "plan_reference_selection": ".spec",
        "read_candidate_spec": ".spec",
        "TDGParams": ".schedule",
        "eta_schedule": ".schedule",
        "tie": ".tdg",
        "tie_mask": ".tdg",
        "tie_pair": ".tdg",
    },
    optional=(".card", ".stage"),
)
__all__ = __dir__()
