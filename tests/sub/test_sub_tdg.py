"""The TDG tie and eta schedule against a float64 reference (SUB paper, Eqs. 3-6)."""

import math

import numpy as np
import pytest
import torch

from conceptforge.errors import ConceptforgeError
from conceptforge.generators.sub.tdg import TDGParams, eta_schedule, tie, tie_count, tie_mask, tie_pair

ETAS = [0.0, 1e-7, 0.05, 0.3, 0.37, 0.5, 0.9, 0.999999, 1.0]


def reference_tie(e1: np.ndarray, e2: np.ndarray, eta: float) -> tuple[np.ndarray, np.ndarray]:
    """Float64 reference: per pair (dim 0), tie the ceil(eta * n) smallest |e1 - e2|."""
    a, b = e1.astype(np.float64), e2.astype(np.float64)
    out = a.copy()
    masks = np.zeros(a.shape, dtype=bool)
    for i in range(a.shape[0]):
        diff = np.abs(a[i] - b[i]).ravel()
        n = diff.size
        k = min(n, math.ceil(round(eta * n, 9)))
        if k == 0:
            continue
        threshold = np.sort(diff)[k - 1]
        mask = np.abs(a[i] - b[i]) <= threshold
        masks[i] = mask
        out[i] = np.where(mask, (a[i] + b[i]) / 2, a[i])
    return out, masks


@pytest.mark.parametrize("shape", [(1, 7, 13), (3, 5, 11, 2), (2, 1), (1, 4096 // 64, 64)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_tie_matches_float64_reference(shape, dtype):
    gen = torch.Generator().manual_seed(hash(shape) % 1000)
    e1 = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
    e2 = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
    a, b = e1.double().numpy(), e2.double().numpy()
    tol = {torch.float64: 0.0, torch.float32: 1e-7, torch.bfloat16: 2**-8}[dtype]
    for eta in ETAS:
        expected, expected_mask = reference_tie(a, b, eta)
        mask = tie_mask(e1, e2, eta)
        assert np.array_equal(mask.numpy(), expected_mask), (eta, dtype)
        got = tie(e1, e2, eta)
        assert got.dtype == dtype and got.shape == e1.shape
        np.testing.assert_allclose(got.double().numpy(), expected, rtol=tol, atol=tol)
        # Where not tied, e1 is kept bit for bit.
        assert torch.equal(got[~mask], e1[~mask])


def test_tie_fraction_is_eta_and_pairs_are_independent():
    gen = torch.Generator().manual_seed(1)
    e1 = torch.randn(2, 1000, generator=gen)
    e2 = torch.randn(2, 1000, generator=gen)
    e2[1] *= 100  # a very different second pair must not change the first pair's threshold
    mask = tie_mask(e1, e2, 0.25)
    assert mask[0].sum() == 250 and mask[1].sum() == 250
    alone = tie_mask(e1[:1], e2[:1], 0.25)
    assert torch.equal(alone[0], mask[0])


def test_tie_pair_is_symmetric_and_extremes():
    gen = torch.Generator().manual_seed(2)
    er, eg = torch.randn(1, 9, 5, generator=gen), torch.randn(1, 9, 5, generator=gen)
    r, g = tie_pair(er, eg, 0.4)
    assert torch.equal(r, tie(er, eg, 0.4)) and torch.equal(g, tie(eg, er, 0.4))
    mask = tie_mask(er, eg, 0.4)
    assert torch.equal(r[mask], g[mask]) and not torch.equal(r, g)
    r1, g1 = tie_pair(er, eg, 1.0)
    assert torch.equal(r1, g1) and torch.allclose(r1, (er + eg) / 2)
    r0, g0 = tie_pair(er, eg, 0.0)
    assert r0 is er and g0 is eg  # eta = 0 changes nothing


def test_tie_beyond_quantile_limits_in_bf16():
    n = 2**24 + 7  # torch.quantile refuses more than 2**24 elements, and bf16 at all
    e1 = torch.zeros(1, n, dtype=torch.bfloat16)
    e2 = torch.arange(n, dtype=torch.float32).remainder(256).to(torch.bfloat16).reshape(1, n)
    mask = tie_mask(e1, e2, 0.5)
    # |diff| takes values 0..255 evenly: the median ties values 0..127 (half the elements).
    counts = torch.bincount(e2[mask].float().long(), minlength=256)
    assert counts[:128].sum() == mask.sum() and counts[128:].sum() == 0
    assert abs(mask.sum().item() / n - 0.5) < 1e-3


def test_tie_count_boundaries():
    assert tie_count(0.0, 10) == 0
    assert tie_count(1.0, 10) == 10
    assert tie_count(0.3, 10) == 3  # 0.3 * 10 = 3.0000000000000004 in floating point
    assert tie_count(0.31, 10) == 4
    assert tie_count(1e-9, 10) == 1
    with pytest.raises(ValueError):
        tie_count(1.5, 10)
    with pytest.raises(ValueError):
        tie(torch.zeros(1, 3), torch.zeros(1, 4), 0.5)


def test_eta_schedule_boundaries():
    k, tmin, tmax = 10.0, 0.2, 0.6
    assert eta_schedule(1.0, tmin, tmax, k) == 1.0
    assert eta_schedule(0.6000001, tmin, tmax, k) == 1.0
    assert eta_schedule(tmax, tmin, tmax, k) == 1.0  # continuous at tmax
    assert eta_schedule(tmin, tmin, tmax, k) == 0.0  # continuous at tmin
    assert eta_schedule(0.19999, tmin, tmax, k) == 0.0
    assert eta_schedule(0.0, tmin, tmax, k) == 0.0
    assert eta_schedule(0.4, tmin, tmax, k) == pytest.approx(0.5**10)
    assert eta_schedule(0.5, 0.2, 0.9, 1.0) == pytest.approx(0.3 / 0.7)
    values = [eta_schedule(t / 100, tmin, tmax, k) for t in range(101)]
    assert values == sorted(values)  # monotone in t


def test_params_validation():
    assert TDGParams().to_dict() == {"k": 10.0, "tmin": 0.2, "tmax": 0.9}
    with pytest.raises(ConceptforgeError):
        TDGParams(tmin=0.7, tmax=0.6)
    with pytest.raises(ConceptforgeError):
        TDGParams(k=0)


def test_eta_zero_ties_nothing_where_the_literal_rule_would_tie_the_minimum():
    """Decision (docs/sub.md): at eta = 0 nothing is tied, so eta = 0 is plain FLUX.

    e1 = [0, 1, 5, 2], e2 = [0.5, 3, 5.25, 2.5]: |e1 − e2| = [0.5, 2, 0.25, 0.5]. The paper's
    literal rule "|e1 − e2| <= the 0th percentile" (= the minimum, 0.25) would tie element 2:
    mu = [0, 1, (5 + 5.25)/2 = 5.125, 2]. Ours ties ceil(0·4) = 0 elements: mu = e1 unchanged.
    At eta = 1/4 we tie ceil(1) = 1 element, the same one the literal rule ties at eta = 0; at
    eta = 0.3 ceil(1.2) = 2 elements are due, and the tie at the threshold 0.5 takes both
    0.5-differences (elements 0 and 3): 3 tied, means 0.25, 5.125 and 2.25.
    """
    e1 = torch.tensor([[0.0, 1.0, 5.0, 2.0]])
    e2 = torch.tensor([[0.5, 3.0, 5.25, 2.5]])
    assert tie(e1, e2, 0.0) is e1 and not tie_mask(e1, e2, 0.0).any()
    r, g = tie_pair(e1, e2, 0.0)
    assert r is e1 and g is e2
    torch.testing.assert_close(tie(e1, e2, 0.25), torch.tensor([[0.0, 1.0, 5.125, 2.0]]))
    torch.testing.assert_close(tie(e1, e2, 0.3), torch.tensor([[0.25, 1.0, 5.125, 2.25]]))
    literal = (e1 - e2).abs() <= (e1 - e2).abs().min()  # the rule read literally at eta = 0
    assert literal.tolist() == [[False, False, True, False]]
