"""The MIT-States composition model: two linear projections trained contrastively.

Section 4.2 of CompMap paper: primitive activations ``e`` (attributes then objects) and the text
embedding ``t_q`` of each composite concept are projected into one space by linear maps ``A`` and
``B``; the score is their dot product, trained with softmax cross-entropy over the *seen* pairs
only. Because ``score(e, q) = e^T (A^T B t_q)``, the model is a linear composition model with
per-concept weights ``w_q = A^T B t_q`` for *any* pair, seen or not — which is what makes both
closed-world and open-world evaluation (and the weight analysis of Table 4) possible.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from conceptforge.loaders.compmap._threads import single_thread_if
from conceptforge.progress import tqdm

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ContrastiveConfig:
    dim: int = 256
    epochs: int = 20
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-5
    seed: int = 0


class TwoProjectionModel(nn.Module):
    """``score(e, t) = (A e) · (B t)`` with bias-free linear ``A`` and ``B``.

    ``input_projection=K`` makes ``A`` the product of a learned ``K``-wide projection and ``A``
    (Table 6's "learned projection" of an image embedding, trained end to end)."""

    def __init__(self, num_primitives: int, target_dim: int, dim: int, *, input_projection: int | None = None) -> None:
        super().__init__()
        if input_projection is None:
            self.primitive_proj: nn.Module = nn.Linear(num_primitives, dim, bias=False)
        else:
            self.primitive_proj = nn.Sequential(
                nn.Linear(num_primitives, input_projection, bias=False), nn.Linear(input_projection, dim, bias=False)
            )
        self.target_proj = nn.Linear(target_dim, dim, bias=False)

    def scores(self, activations: Tensor, targets: Tensor) -> Tensor:
        """[M, Q] scores of ``activations`` [M, P] against composite targets [Q, T]."""
        return self.primitive_proj(activations) @ self.target_proj(targets).T

    @torch.no_grad()
    def composition_weights(self, targets: Tensor) -> Tensor:
        """[Q, P] effective linear weights ``A^T B t_q`` of each composite concept."""
        if not isinstance(self.primitive_proj, nn.Linear):
            raise TypeError("composition weights are defined over primitives, not a projected embedding")
        return self.target_proj(targets) @ self.primitive_proj.weight

    @torch.no_grad()
    def iter_scores(self, activations: Tensor, targets: Tensor, *, batch_size: int = 1024):
        """Yield (row slice, [rows, Q] scores) blocks: the open world has 28,175 targets."""
        projected = self.target_proj(targets.float())
        for i in range(0, len(activations), batch_size):
            yield slice(i, i + batch_size), self.primitive_proj(activations[i : i + batch_size].float()) @ projected.T

    @torch.no_grad()
    def score_batched(self, activations: Tensor, targets: Tensor, *, batch_size: int = 1024) -> Tensor:
        out = [block for _, block in self.iter_scores(activations, targets, batch_size=batch_size)]
        return torch.cat(out) if out else torch.zeros((0, len(targets)))


def train_contrastive(
    activations: Tensor,
    labels: Tensor,
    targets: Tensor,
    *,
    config: ContrastiveConfig = ContrastiveConfig(),
    input_projection: int | None = None,
) -> TwoProjectionModel:
    """Fit on training ``activations`` [N, P] with ``labels`` [N] indexing the seen ``targets`` [Q, T]
    (``input_projection``: see :class:`TwoProjectionModel`)."""
    activations, targets, labels = activations.float(), targets.float(), labels.long()
    generator = torch.Generator().manual_seed(config.seed)
    torch.manual_seed(config.seed)
    model = TwoProjectionModel(activations.shape[1], targets.shape[1], config.dim, input_projection=input_projection)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    small = config.batch_size * (activations.shape[1] + targets.shape[1]) * config.dim < 2_000_000
    with single_thread_if(small):
        _train_loop(model, optimizer, activations, labels, targets, config, generator)
    return model.eval()


def _train_loop(model, optimizer, activations, labels, targets, config, generator) -> None:
    n = len(activations)
    for epoch in tqdm(range(config.epochs), desc="composition model", unit="epoch", leave=False):
        order = torch.randperm(n, generator=generator)
        total = 0.0
        for start in range(0, n, config.batch_size):
            idx = order[start : start + config.batch_size]
            loss = nn.functional.cross_entropy(model.scores(activations[idx], targets), labels[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(idx)
        logger.debug("epoch %d: loss %.4f", epoch, total / max(n, 1))
