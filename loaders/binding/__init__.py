"""Concept-binding evaluation (Binding paper): CLIP zero-shot, CSP, CDSMs, calibrated stacking."""

from conceptforge.loaders.binding.data import BindingSplit, load_binding, parse_label
from conceptforge.loaders.binding.evaluate import (
    BindingReport,
    ModelSummary,
    evaluate_binding,
    evaluate_clip_zero_shot,
    zero_shot_scores,
)
from conceptforge.loaders.binding.models import CDSM, CSP, Vocabulary, circular_convolution, circular_convolution_direct
from conceptforge.loaders.binding.scoring import accuracy, error_breakdown, prediction_mass
from conceptforge.loaders.binding.train import TrainConfig, train_run

__all__ = [
    "BindingSplit",
    "load_binding",
    "parse_label",
    "BindingReport",
    "ModelSummary",
    "evaluate_binding",
    "evaluate_clip_zero_shot",
    "zero_shot_scores",
    "CDSM",
    "CSP",
    "Vocabulary",
    "circular_convolution",
    "circular_convolution_direct",
    "accuracy",
    "error_breakdown",
    "prediction_mass",
    "TrainConfig",
    "train_run",
]
