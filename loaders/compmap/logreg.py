"""Batched multinomial logistic regression: many independent episodes fitted at once in torch.

Why: the CUB protocol fits 600 composition models per setting (n-way k-shot episodes). Fitting
scikit-learn's ``LogisticRegression`` one episode at a time spends most of its time in Python
and float64 BLAS calls on small matrices; here every episode of a chunk is one slice of a
batched tensor, so each L-BFGS iteration is two ``bmm`` calls for the whole chunk.

The objective is exactly scikit-learn's multinomial one with an L2 penalty:
``sum_i CE(W x_i + b, y_i) + ||W||^2 / (2 C)`` (intercept not penalised), so ``C=1`` is the
paper's "default sklearn hyper-parameters and L2 regularisation of 1".

The stopping rule is scikit-learn's too (L-BFGS ``gtol``: the largest absolute entry of the
gradient of the *sample-averaged* objective below ``tol``), so both stop at solutions of the same
quality; ``python -m benchmarks compmap`` reports how often predictions agree. Features are centred per episode
(an exact reparametrisation of the intercept) so the intercept is not coupled to the weights'
mean direction, which keeps L-BFGS at the ~10 iterations scikit-learn needs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import Tensor

from conceptforge.loaders.compmap._threads import single_thread_if

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LogRegConfig:
    """Hyper-parameters of :func:`fit_logreg`.

    ``C`` is scikit-learn's inverse regularisation strength. ``tol`` stops an episode when the
    largest absolute entry of the sample-averaged gradient falls below it (scikit-learn's
    L-BFGS criterion); ``max_iter`` and ``history`` (L-BFGS memory) match scikit-learn/SciPy.
    """

    C: float = 1.0
    max_iter: int = 100
    tol: float = 1e-4
    history: int = 10
    chunk_size: int = 64
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        if self.C <= 0:
            raise ValueError(f"C must be > 0, got {self.C}")
        if self.max_iter < 1 or self.history < 1 or self.chunk_size < 1:
            raise ValueError("max_iter, history and chunk_size must be >= 1")


@dataclass
class LogRegModel:
    """Fitted weights of a batch of episodes: ``coef`` [E, C, D], ``intercept`` [E, C]."""

    coef: Tensor
    intercept: Tensor
    n_iter: Tensor

    def decision_function(self, X: Tensor) -> Tensor:
        """Logits [E, M, C] for features ``X`` [E, M, D] (or [M, D] shared by all episodes)."""
        X = X.to(self.coef.dtype)
        if X.dim() == 2:
            return torch.einsum("md,ecd->emc", X, self.coef) + self.intercept[:, None, :]
        return torch.bmm(X, self.coef.transpose(1, 2)) + self.intercept[:, None, :]

    def predict(self, X: Tensor) -> Tensor:
        return self.decision_function(X).argmax(-1)


class _Problem:
    """One chunk of episodes with centred features; evaluates loss and gradient."""

    def __init__(self, X: Tensor, y: Tensor, num_classes: int, config: LogRegConfig) -> None:
        E, N, D = X.shape
        self.C = config.C
        self.mean = X.mean(dim=1, keepdim=True)
        # Centred features plus a constant column: the intercept is the last row of theta, so
        # one bmm gives the logits and one the whole gradient (no broadcast adds, no concat).
        self.features = torch.cat([X - self.mean, torch.ones(E, N, 1, dtype=X.dtype)], dim=2)
        self.labels = y[..., None]
        self.minus_ones = torch.full(self.labels.shape, -1.0, dtype=X.dtype)
        self.shape = (E, D + 1, num_classes)
        self.num_samples = N
        self.evaluations = 0

    def loss_grad(self, theta: Tensor) -> tuple[Tensor, Tensor]:
        """Objective [E] and gradient [E, D+1, C] at ``theta`` = [W; b] (centred coordinates)."""
        self.evaluations += theta.shape[0]
        W = theta[:, :-1, :]
        # Fused log-softmax, then probabilities in place: the [E, N, C] tensor is the largest one
        # here, so every pass over it counts.
        logp = torch.log_softmax(torch.bmm(self.features, theta), dim=-1)
        data = -logp.gather(-1, self.labels).sum(dim=(1, 2))
        resid = logp.exp_().scatter_add_(-1, self.labels, self.minus_ones)
        reg = 0.5 / self.C * torch.linalg.vecdot(W.reshape(W.shape[0], -1), W.reshape(W.shape[0], -1))
        grad = torch.bmm(self.features.transpose(1, 2), resid)
        grad[:, :-1, :].add_(W, alpha=1.0 / self.C)
        return data + reg, grad

    def to_model(self, theta: Tensor) -> tuple[Tensor, Tensor]:
        """(coef [E, C, D], intercept [E, C]) in the original, uncentred coordinates."""
        W, b = theta[:, :-1, :], theta[:, -1, :]
        return W.transpose(1, 2).contiguous(), b - torch.bmm(self.mean, W).squeeze(1)


def _bdot(a: Tensor, b: Tensor) -> Tensor:
    """Per-episode dot products [E] (``vecdot`` is fused: no [E, P] temporary)."""
    E = a.shape[0]
    return torch.linalg.vecdot(a.reshape(E, -1), b.reshape(E, -1))


def _axpy_(y: Tensor, alpha: Tensor, x: Tensor) -> None:
    """``y += alpha[e] * x`` per episode, in place."""
    y.view(y.shape[0], -1).addcmul_(x.reshape(x.shape[0], -1), alpha[:, None])


def _lbfgs(problem: _Problem, config: LogRegConfig) -> tuple[Tensor, Tensor]:
    """Batched L-BFGS with a per-episode backtracking (Armijo) line search.

    Converged episodes get a zero direction, so they stay put (and their history pairs are
    zero, which the recursion ignores) while the rest of the chunk continues. Vector updates are
    in place: with tens of MB per tensor, fresh allocations cost as much as the arithmetic.
    """
    E = problem.shape[0]
    theta = torch.zeros(problem.shape, dtype=problem.features.dtype)
    f, g = problem.loss_grad(theta)
    history: list[tuple[Tensor, Tensor, Tensor]] = []
    active = torch.ones(E, dtype=torch.bool)
    n_iter = torch.zeros(E, dtype=torch.long)
    for _ in range(config.max_iter):
        # scikit-learn averages the loss over samples and stops when max |grad| <= tol.
        gmax = g.abs().amax(dim=(1, 2)) / problem.num_samples
        active &= gmax > config.tol
        if not bool(active.any()):
            break
        # Two-loop recursion, every episode with its own history pairs.
        q = g.clone()
        alphas = []
        for s, y_, rho in reversed(history):
            a = rho * _bdot(s, q)
            _axpy_(q, -a, y_)
            alphas.append(a)
        if history:
            s, y_, _ = history[-1]
            sy, yy = _bdot(s, y_), _bdot(y_, y_)
            gamma = torch.where(yy > 0, sy / yy.clamp_min(1e-30), torch.ones_like(sy))
            q.mul_(gamma.view(E, 1, 1))
        else:  # first step: unit length, as SciPy's L-BFGS-B
            q.div_(g.flatten(1).norm(dim=-1).clamp_min(1e-12).view(E, 1, 1))
        for (s, y_, rho), a in zip(history, reversed(alphas)):
            _axpy_(q, a - rho * _bdot(y_, q), s)
        direction = q.neg_()
        direction.mul_(active.view(E, 1, 1).to(direction.dtype))
        slope = _bdot(g, direction)
        bad = active & (slope >= 0)  # not a descent direction: fall back to steepest descent
        if bool(bad.any()):
            direction[bad] = -g[bad]
            slope = _bdot(g, direction)
        step = torch.ones(E, dtype=theta.dtype)
        new_theta = theta + direction
        new_f, new_g = problem.loss_grad(new_theta)
        for _ in range(20):
            fail = active & ~(new_f <= f + 1e-4 * step * slope)
            if not bool(fail.any()):
                break
            idx = fail.nonzero().squeeze(1)
            step[idx] *= 0.5
            trial = theta[idx] + step[idx, None, None] * direction[idx]
            tf, tg = _Subset(problem, idx).loss_grad(trial)
            new_theta[idx], new_f[idx], new_g[idx] = trial, tf, tg
        # The old iterate's buffers become the new history pair (s, y).
        s_new = theta.neg_().add_(new_theta)
        y_new = g.neg_().add_(new_g)
        sy = _bdot(s_new, y_new)
        rho = torch.where(sy > 1e-10, 1.0 / sy.clamp_min(1e-10), torch.zeros_like(sy))
        history.append((s_new, y_new, rho))
        if len(history) > config.history:
            history.pop(0)
        theta, g, f = new_theta, new_g, new_f
        n_iter += active.long()
    return theta, n_iter


class _Subset:
    """View of some episodes of a problem (for line-search retries)."""

    def __init__(self, problem: _Problem, idx: Tensor) -> None:
        self.C = problem.C
        self.features = problem.features[idx]
        self.labels = problem.labels[idx]
        self.minus_ones = problem.minus_ones[idx]
        self.parent = problem

    def loss_grad(self, theta: Tensor) -> tuple[Tensor, Tensor]:
        self.parent.evaluations += theta.shape[0]
        self.evaluations = 0
        return _Problem.loss_grad(self, theta)


_SMALL_WORK = 2_000_000  # multiply-adds per evaluation below which threads cost more than they give


def fit_logreg(
    X: Tensor,
    y: Tensor,
    num_classes: int | None = None,
    *,
    config: LogRegConfig = LogRegConfig(),
) -> LogRegModel:
    """Fit one multinomial logistic regression per episode.

    ``X`` is [E, N, D] (or [N, D] for a single episode), ``y`` [E, N] integer labels in
    ``[0, num_classes)``. Episodes are processed ``config.chunk_size`` at a time.
    """
    if X.dim() == 2:
        X, y = X[None], y[None]
    if X.dim() != 3 or y.shape != X.shape[:2]:
        raise ValueError(f"expected X [E, N, D] and y [E, N], got {tuple(X.shape)} and {tuple(y.shape)}")
    num_classes = int(num_classes if num_classes is not None else int(y.max()) + 1)
    X = X.to(config.dtype)
    y = y.long()
    coefs, intercepts, iters = [], [], []
    work = min(X.shape[0], config.chunk_size) * X.shape[1] * X.shape[2] * num_classes
    with single_thread_if(work < _SMALL_WORK):
        for start in range(0, X.shape[0], config.chunk_size):
            problem = _Problem(
                X[start : start + config.chunk_size], y[start : start + config.chunk_size], num_classes, config
            )
            theta, n_iter = _lbfgs(problem, config)
            logger.debug("chunk of %d episodes: %d evaluations", len(n_iter), problem.evaluations)
            coef, intercept = problem.to_model(theta)
            coefs.append(coef)
            intercepts.append(intercept)
            iters.append(n_iter)
    return LogRegModel(torch.cat(coefs), torch.cat(intercepts), torch.cat(iters))
