"""Concept-bottleneck models for SUB (SUB paper Table 2): any callable from PIL images to concept
logits, or a torch module plus a per-image transform, and the order of its outputs.

The task ``sub-cbm`` (``tasks.py``) runs them, from the command line (``--cbm module:function``)
or from Python with :func:`conceptforge.loaders.harness.runner.run_task`; the scoring rules are in
``scoring.py``.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch

from conceptforge.cub import CubMetadata, to_cub_attribute
from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------- CBMs
ConceptPredictor = Callable[[list[Any]], Any]


def as_concept_predictor(
    model: Any, *, transform: Callable[[Any], torch.Tensor] | None = None, device: str = "cpu"
) -> ConceptPredictor:
    """Wrap a callable on PIL images, or a torch module plus a per-image ``transform``, as
    ``predict(list_of_PIL) -> logits [B, C]``."""
    if isinstance(model, torch.nn.Module):
        if transform is None:
            raise InvalidArgumentError("a torch module CBM needs a transform mapping a PIL image to an input tensor")
        module = model.eval().to(device)

        def predict(images: list[Any]) -> torch.Tensor:
            batch = torch.stack([transform(image) for image in images]).to(device)
            with torch.inference_mode():
                output = module(batch)
            return output[0] if isinstance(output, (tuple, list)) else output

        return predict
    if not callable(model):
        raise InvalidArgumentError(f"a CBM must be callable or a torch module, got {type(model).__name__}")
    return model


def load_cbm_factory(spec: str) -> Any:
    """``package.module:function`` -> the object the function returns (a callable, a module, or
    a ``(module, transform)`` pair)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise InvalidArgumentError(f"--cbm must be 'package.module:function', got {spec!r}")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as error:
        raise InvalidArgumentError(f"cannot import CBM factory {spec!r}: {error}") from None
    return factory()


def cbm_concept_names(num_concepts: int, cub: CubMetadata, concept_names: Sequence[str] | None = None) -> list[str]:
    """Concept order of a CBM's outputs: explicit names, all 312 CUB attributes, or the 112 subset."""
    if concept_names is not None:
        names = [to_cub_attribute(n) for n in concept_names]
        if len(names) != num_concepts:
            raise InvalidArgumentError(
                f"the CBM outputs {num_concepts} concepts but {len(names)} concept names were given: vocabularies do not match"
            )
        for name in names:
            cub.check_attribute(name)
        return names
    if num_concepts == len(cub.attributes):
        return list(cub.attributes)
    subset = cub.cbm_attributes() if cub.class_labels is not None else []
    if num_concepts == len(subset):
        return subset
    raise InvalidArgumentError(
        f"the CBM outputs {num_concepts} concepts, matching neither CUB's {len(cub.attributes)} attributes nor the "
        f"{len(subset) or 112}-attribute CBM subset: pass concept names"
    )
