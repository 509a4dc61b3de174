"""SUB evaluation of concept-bottleneck models (SUB paper Table 2): any callable from PIL images
to concept logits, or a torch module plus a per-image transform.

Split from ``sub.py`` (data, scoring, VLMs) so each stays small; the scoring rules are there.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from conceptforge.cub import CBM_MIN_CLASS_COUNT, CubMetadata, to_cub_attribute
from conceptforge.errors import InvalidArgumentError
from conceptforge.loaders.sub.protocol import _resolve_items
from conceptforge.loaders.sub.scoring import SubReport, build_report, score_cbm_predictions

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


def evaluate_cbm(
    model: Any,
    dataset: Any,
    *,
    cub: CubMetadata,
    concept_names: Sequence[str] | None = None,
    transform: Callable[[Any], torch.Tensor] | None = None,
    outputs: str = "logits",
    threshold: float = 0.5,
    name: str = "cbm",
    dataset_revision: str | None = None,
    split: str = "test",
    batch_size: int = 32,
    device: str = "cpu",
    s_minus: str = "paper",
    cbm_min_classes: int = CBM_MIN_CLASS_COUNT,
) -> SubReport:
    """Evaluate a concept-bottleneck model; present = sigmoid(logit) ≥ ``threshold`` (or
    probability ≥ ``threshold`` with ``outputs="probabilities"``)."""
    from conceptforge.loaders.harness.embeddings import load_pil
    from conceptforge.progress import tqdm

    if outputs not in ("logits", "probabilities"):
        raise InvalidArgumentError(f"outputs must be 'logits' or 'probabilities', got {outputs!r}")
    predict = as_concept_predictor(model, transform=transform, device=device)
    items = _resolve_items(dataset, cub, dataset_revision, split)
    chunks = []
    for start in tqdm(range(0, len(items), batch_size), desc="CBM", leave=False):
        batch = [load_pil(item.image) for item in items[start : start + batch_size]]
        output = predict(batch)
        chunks.append(
            torch.as_tensor(
                np.asarray(output.detach().cpu() if isinstance(output, torch.Tensor) else output), dtype=torch.float32
            )
        )
    scores = torch.cat(chunks) if chunks else torch.zeros((0, len(cub.attributes)))
    probabilities = torch.sigmoid(scores) if outputs == "logits" else scores
    names = cbm_concept_names(scores.shape[1], cub, concept_names)
    results = score_cbm_predictions(
        items, (probabilities >= threshold).numpy(), names, cub=cub, s_minus=s_minus, cbm_min_classes=cbm_min_classes
    )
    return build_report(
        "cbm",
        name,
        "",
        results,
        {
            "threshold": threshold,
            "outputs": outputs,
            "num_concepts": len(names),
            "s_minus": s_minus,
            "cbm_min_classes": cbm_min_classes,
        },
    )
