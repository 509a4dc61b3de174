"""Concept-binding evaluation (Binding paper): CLIP zero-shot, CSP, CDSMs, calibrated stacking.

Run from Python as the command line does: ``run_task("binding-clip" | "binding-cdsm", model=…,
dataset=…)`` (:func:`conceptforge.loaders.harness.runner.run_task`)."""

from conceptforge.loaders.binding.data import BindingSplit, load_binding, parse_label
from conceptforge.loaders.binding.evaluate import BindingReport, ModelSummary, train_on_frozen, zero_shot_scores
from conceptforge.loaders.binding.models import CDSM, CSP, Vocabulary, circular_convolution, circular_convolution_direct
from conceptforge.loaders.binding.scoring import accuracy, error_breakdown, prediction_mass
from conceptforge.loaders.binding.train import TrainConfig, train_run

__all__ = [
    "BindingSplit",
    "load_binding",
    "parse_label",
    "BindingReport",
    "ModelSummary",
    "train_on_frozen",
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
