"""CompMap (CompMap paper): concept activations, composition models, usefulness and interpretability.

Each name is imported on first use (:mod:`conceptforge.lazy_exports`): the benchmark spec
(``benchmark``) is read by ``conceptforge spec check`` without torch, which the metrics, the
episode sampler and the logistic regression import.
"""

from conceptforge.lazy_exports import lazy_exports

# Public name -> the module that defines it.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "LogRegConfig": ".logreg",
        "LogRegModel": ".logreg",
        "fit_logreg": ".logreg",
        "CZSL_CURVES": ".metrics",
        "CzslResult": ".metrics",
        "accuracy": ".metrics",
        "calibration_biases": ".metrics",
        "generalized_czsl": ".metrics",
        "interpretability_delta": ".metrics",
        "intervene_full": ".metrics",
        "intervene_partial": ".metrics",
        "weight_analysis": ".metrics",
        "CUB_PROTOCOLS": ".sampler",
        "Episodes": ".sampler",
        "EpisodeSpec": ".sampler",
        "sample_episodes": ".sampler",
        "sample_split_episodes": ".sampler",
    },
)
__all__ = __dir__()
