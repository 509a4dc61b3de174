"""Fine-tune a concept oracle (Table 6): a pre-trained image classifier trained on the concepts'
reference images with the negative log-likelihood, optionally with outlier exposure.

Outlier exposure (Hendrycks et al. 2019, used by the paper for the ImageNet oracle) adds
``oe_weight * E_outlier[ -mean_k log p_k(x) ]``: the cross-entropy from the prediction to the
uniform distribution on images that belong to none of the concepts, so the oracle is not
confidently wrong on images unlike any concept (what a failed learner produces).

The result is saved with ``save_pretrained`` (model + image processor, labels = concept names)
into a temp folder renamed into place, and loads back through :mod:`filters.conceptbed_oracles`.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from PIL import Image

from conceptforge.errors import DataNotFoundError, InvalidArgumentError
from conceptforge.external_errors import require_model, weights_error
from conceptforge.files import write_directory_atomically
from conceptforge.output import claim_folder, hold_output

logger = logging.getLogger(__name__)
#: Who wrote an oracle folder (its marker): ``train-oracle`` replaces only its own folders.
ORACLE_MADE_BY = "train-oracle"


@dataclass
class OracleTrainingConfig:
    model_id: str
    epochs: int = 3
    learning_rate: float = 1e-4
    batch_size: int = 32
    outlier_weight: float = 0.5
    seed: int = 0
    validation_fraction: float = 0.1
    mixed_precision: str = "auto"


@dataclass
class OracleTrainingResult:
    labels: list[str]
    losses: list[float] = field(default_factory=list)
    validation_accuracy: float | None = None
    output_dir: Path | None = None


def outlier_exposure_loss(logits: torch.Tensor) -> torch.Tensor:
    """Cross-entropy to the uniform distribution: -mean over classes of log-softmax, batch mean."""
    return -(torch.log_softmax(logits.float(), dim=-1).mean(dim=-1)).mean()


def oracle_loss(
    logits: torch.Tensor, labels: torch.Tensor, outlier_logits: torch.Tensor | None, outlier_weight: float
) -> torch.Tensor:
    loss = F.nll_loss(torch.log_softmax(logits.float(), dim=-1), labels)
    if outlier_logits is not None and outlier_logits.shape[0]:
        loss = loss + outlier_weight * outlier_exposure_loss(outlier_logits)
    return loss


def load_image_processor(model_id: str) -> object:
    """``AutoImageProcessor`` on its PIL backend when torchvision is absent (transformers 5)."""
    import importlib.util

    from transformers import AutoImageProcessor

    if importlib.util.find_spec("torchvision") is None:
        try:
            return AutoImageProcessor.from_pretrained(model_id, backend="pil")
        except TypeError:  # older transformers: no backend argument
            pass
    return AutoImageProcessor.from_pretrained(model_id)


def _open(path: Path) -> Image.Image:
    with Image.open(path) as image:
        return image.convert("RGB")


def finetune_oracle(
    samples: Sequence[tuple[Path, str]],
    out_dir: str | Path,
    config: OracleTrainingConfig,
    *,
    outliers: Sequence[Path] = (),
) -> OracleTrainingResult:
    """Fine-tune ``config.model_id`` on ``(image path, concept)`` pairs; save to ``out_dir``."""
    from accelerate import Accelerator
    from transformers import AutoModelForImageClassification

    claim_folder(out_dir, made_by=ORACLE_MADE_BY)  # a file or someone's folder: refused before any training
    if int(os.environ.get("RANK", "0")) == 0:  # one holder per run (accelerate's ranks are one run)
        hold_output(out_dir)  # a second train-oracle on this --out meanwhile is refused, not silently replaced
    require_model(config.model_id, "--model-id")  # a mistyped folder, an uncached default offline: before training
    if not samples:
        raise DataNotFoundError("no training images for the oracle")
    labels = sorted({label for _, label in samples})
    if len(labels) < 2:
        raise InvalidArgumentError("an oracle needs at least two concepts to tell apart")
    label2id = {name: i for i, name in enumerate(labels)}
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    order = list(samples)
    rng.shuffle(order)
    n_val = int(len(order) * config.validation_fraction)
    validation, training = order[:n_val], order[n_val:]

    cuda = torch.cuda.is_available()
    precision = config.mixed_precision if config.mixed_precision != "auto" else ("bf16" if cuda else "no")
    accelerator = Accelerator(mixed_precision=precision, cpu=not cuda)
    try:
        processor = load_image_processor(config.model_id)
        model = AutoModelForImageClassification.from_pretrained(
            config.model_id,
            num_labels=len(labels),
            id2label=dict(enumerate(labels)),
            label2id=label2id,
            ignore_mismatched_sizes=True,
        )
    except OSError as error:
        raise weights_error("classifier", config.model_id, error) from None
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    model, optimizer = accelerator.prepare(model, optimizer)
    result = OracleTrainingResult(labels=labels)

    def pixels(paths: Sequence[Path]) -> torch.Tensor:
        return processor(images=[_open(p) for p in paths], return_tensors="pt")["pixel_values"].to(accelerator.device)

    outliers = list(outliers)
    steps_per_epoch = max(1, (len(training) + config.batch_size - 1) // config.batch_size)
    model.train()
    for epoch in range(config.epochs):
        rng.shuffle(training)
        for step in range(steps_per_epoch):
            batch = training[step * config.batch_size : (step + 1) * config.batch_size]
            if not batch:
                continue
            targets = torch.tensor([label2id[label] for _, label in batch], device=accelerator.device)
            with accelerator.autocast():
                logits = model(pixel_values=pixels([p for p, _ in batch])).logits
                outlier_logits = None
                if outliers:
                    chosen = [outliers[rng.randrange(len(outliers))] for _ in batch]
                    outlier_logits = model(pixel_values=pixels(chosen)).logits
            loss = oracle_loss(logits, targets, outlier_logits, config.outlier_weight)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            result.losses.append(float(loss.detach()))
        logger.info(
            "oracle epoch %d/%d: loss %.4f",
            epoch + 1,
            config.epochs,
            result.losses[-1] if result.losses else float("nan"),
        )
    model.eval()
    if validation:
        correct = 0
        with torch.no_grad():
            for start in range(0, len(validation), config.batch_size):
                batch = validation[start : start + config.batch_size]
                predicted = model(pixel_values=pixels([p for p, _ in batch])).logits.argmax(dim=-1).cpu().tolist()
                correct += sum(int(p == label2id[label]) for p, (_, label) in zip(predicted, batch))
        result.validation_accuracy = correct / len(validation)
        logger.info("oracle validation accuracy %.3f on %d images", result.validation_accuracy, len(validation))

    def save(folder: Path) -> None:
        accelerator.unwrap_model(model).to(torch.float32).save_pretrained(folder)
        processor.save_pretrained(folder)

    result.output_dir = write_directory_atomically(out_dir, save, made_by=ORACLE_MADE_BY)
    return result
