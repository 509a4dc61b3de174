"""CompMap's rows that skip concept activations, beside the composition models of Table 1.

- Table 5, "CLIP (zero-shot)": each candidate pair is scored by ``cos(image, "this is {attr}
  {obj}")`` with no composition model at all — what CLIP alone knows of composite concepts.
- Table 6, the ablation asking whether CLIP-Prim's usefulness comes from concept prompting or from
  the image encoder: the composition model of Section 4.2 trained on (a) the image embedding
  itself, (b) the embedding through a *learned* projection to as many dimensions as there are
  primitives (trained end to end with the model), (c) the embedding through a frozen *random*
  projection of that size. CLIP-Prim is (c) with the projection made of the primitives' prompt
  embeddings, which is why the three are its controls.

Each row is a scorer with the ``iter_scores(features, targets)`` of
:class:`~conceptforge.loaders.compmap.contrastive.TwoProjectionModel`, so the generalized CZSL
sweep runs on it unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from conceptforge.loaders.compmap.contrastive import ContrastiveConfig, TwoProjectionModel, train_contrastive

ZERO_SHOT = "clip_zero_shot"
IMAGE_EMBED = "image_embed"
LEARNED_PROJECTION = "learned_projection"
RANDOM_PROJECTION = "random_projection"
#: Rows whose candidate-pair targets are the pairs' prompt embeddings whatever ``targets`` says.
TEXT_TARGET_ROWS = frozenset({ZERO_SHOT})


class ZeroShot:
    """``score = image · text`` of L2-normalised embeddings (CLIP's zero-shot classifier)."""

    @torch.no_grad()
    def iter_scores(self, images: Tensor, texts: Tensor, *, batch_size: int = 1024) -> Iterator[tuple[slice, Tensor]]:
        for i in range(0, len(images), batch_size):
            yield slice(i, i + batch_size), images[i : i + batch_size].float() @ texts.float().T


@dataclass(frozen=True)
class FixedProjection:
    """A composition model fed ``features @ projection`` (the frozen random projection)."""

    projection: Tensor
    model: TwoProjectionModel

    def iter_scores(self, features: Tensor, targets: Tensor, *, batch_size: int = 1024):
        return self.model.iter_scores(features.float() @ self.projection, targets, batch_size=batch_size)


def random_projection(in_dim: int, out_dim: int, *, seed: int) -> Tensor:
    """[in_dim, out_dim] Gaussian matrix with variance 1/in_dim, from ``seed`` alone."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(in_dim, out_dim, generator=generator) / math.sqrt(in_dim)


def train_ablation_rows(
    image_embeddings: Tensor,
    labels: Tensor,
    seen_targets: Tensor,
    *,
    num_primitives: int,
    config: ContrastiveConfig,
) -> dict[str, object]:
    """The four scorers, trained on the training images' embeddings and seen-pair labels."""
    projection = random_projection(image_embeddings.shape[1], num_primitives, seed=config.seed)
    return {
        ZERO_SHOT: ZeroShot(),
        IMAGE_EMBED: train_contrastive(image_embeddings, labels, seen_targets, config=config),
        LEARNED_PROJECTION: train_contrastive(
            image_embeddings, labels, seen_targets, config=config, input_projection=num_primitives
        ),
        RANDOM_PROJECTION: FixedProjection(
            projection, train_contrastive(image_embeddings.float() @ projection, labels, seen_targets, config=config)
        ),
    }
