"""CompMap (CompMap paper): concept activations, composition models, usefulness and interpretability."""

from conceptforge.loaders.compmap.logreg import LogRegConfig, LogRegModel, fit_logreg
from conceptforge.loaders.compmap.metrics import (
    CZSL_CURVES,
    CzslResult,
    accuracy,
    calibration_biases,
    generalized_czsl,
    interpretability_delta,
    intervene_full,
    intervene_partial,
    weight_analysis,
)
from conceptforge.loaders.compmap.sampler import (
    CUB_PROTOCOLS,
    Episodes,
    EpisodeSpec,
    sample_episodes,
    sample_split_episodes,
)

__all__ = [
    "CUB_PROTOCOLS",
    "CZSL_CURVES",
    "CzslResult",
    "EpisodeSpec",
    "Episodes",
    "LogRegConfig",
    "LogRegModel",
    "accuracy",
    "calibration_biases",
    "fit_logreg",
    "generalized_czsl",
    "interpretability_delta",
    "intervene_full",
    "intervene_partial",
    "sample_episodes",
    "sample_split_episodes",
    "weight_analysis",
]
