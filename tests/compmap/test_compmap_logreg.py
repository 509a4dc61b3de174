"""The batched logistic regression solves scikit-learn's problem, episode by episode."""

import numpy as np
import pytest
import torch

from conceptforge.loaders.compmap.logreg import LogRegConfig, fit_logreg


def _objective(coef, intercept, X, y, C=1.0):
    X, coef, intercept = X.double(), torch.as_tensor(coef).double(), torch.as_tensor(intercept).double()
    z = X @ coef.T + intercept
    return float((torch.logsumexp(z, -1) - z[torch.arange(len(y)), y]).sum() + 0.5 / C * (coef**2).sum())


def _episodes(E=4, n=5, k=6, D=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(E, n, D, generator=g)
    y = torch.arange(n).repeat_interleave(k).expand(E, -1)
    X = means.gather(1, y[..., None].expand(-1, -1, D)) + 0.8 * torch.randn(E, n * k, D, generator=g)
    return X, y


def test_matches_sklearn_solution_and_predictions():
    sklearn = pytest.importorskip("sklearn.linear_model")
    X, y = _episodes()
    model = fit_logreg(X, y, 5, config=LogRegConfig(tol=1e-6))
    for e in range(len(X)):
        ref = sklearn.LogisticRegression(C=1.0, tol=1e-8, max_iter=5000).fit(X[e].numpy(), y[e].numpy())
        ours = _objective(model.coef[e], model.intercept[e], X[e], y[e])
        theirs = _objective(ref.coef_, ref.intercept_, X[e], y[e])
        assert ours == pytest.approx(theirs, rel=1e-4)
        Xt = X[e] + 0.3
        np.testing.assert_array_equal(model.predict(Xt)[e].numpy(), ref.predict(Xt.numpy()))


def test_batched_equals_one_by_one_and_chunking():
    X, y = _episodes(E=5)
    together = fit_logreg(X, y, 5, config=LogRegConfig(chunk_size=2, tol=1e-6))
    for e in range(5):
        alone = fit_logreg(X[e], y[e], 5, config=LogRegConfig(tol=1e-6))
        torch.testing.assert_close(together.coef[e], alone.coef[0], atol=2e-3, rtol=1e-3)


def test_regularisation_strength_shrinks_weights():
    X, y = _episodes(E=1)
    strong = fit_logreg(X, y, 5, config=LogRegConfig(C=0.01))
    weak = fit_logreg(X, y, 5, config=LogRegConfig(C=100.0))
    assert strong.coef.norm() < 0.5 * weak.coef.norm()


def test_rejects_bad_shapes():
    with pytest.raises(ValueError):
        fit_logreg(torch.zeros(2, 3, 4), torch.zeros(2, 4, dtype=torch.long))
