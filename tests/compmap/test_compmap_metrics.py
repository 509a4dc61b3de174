import pytest
import torch

from conceptforge.loaders.compmap.metrics import (
    accuracy,
    calibration_biases,
    generalized_czsl,
    interpretability_delta,
    intervene_full,
    intervene_partial,
    weight_analysis,
)

# Pairs 0 and 1 are seen, pair 2 unseen. Hand-computed in the docstring of test_czsl_hand_example.
SCORES = torch.tensor([[3.0, 1.0, 2.8], [1.0, 3.0, 0.0], [2.0, 0.0, 1.0], [0.0, 1.0, 3.5], [2.5, 0.0, 2.0]])
LABELS = torch.tensor([0, 1, 2, 2, 2])
SEEN = torch.tensor([True, True, False])


def test_czsl_hand_example():
    """Δ (best seen − ground truth) of the unseen samples: 1, −2.5, 0.5 -> sorted [−2.5, 0.5, 1].

    Three biases (one per chunk) b = Δ − 1e-4: −2.5001 -> seen 2/2, unseen 0/3; 0.4999 -> sample 0
    flips to the unseen pair (3 < 3.2999), sample 3 is right: seen 1/2, unseen 1/3; 0.9999 ->
    samples 3 and 4 right: seen 1/2, unseen 2/3; then the unseen-wins endpoint (bias 2 = max Δ + 1):
    seen 1/2, unseen 3/3. AUC over (unseen, seen) = 1/3·(1+.5)/2 + 1/3·(.5+.5)/2 + 1/3·.5 =
    0.58333; best HM = 2·.5·1/(.5+1) = 0.6667; best GM = sqrt(.5·1).
    """
    biases = calibration_biases(SCORES, LABELS, SEEN, num_biases=3)
    torch.testing.assert_close(biases, torch.tensor([-2.5001, 0.4999, 0.9999], dtype=torch.float64))
    r = generalized_czsl(SCORES, LABELS, SEEN, num_biases=3)
    assert r.seen_curve == pytest.approx([100.0, 50.0, 50.0, 50.0])
    assert r.unseen_curve == pytest.approx([0.0, 100 / 3, 200 / 3, 100.0])
    assert r.auc == pytest.approx(58.3333, abs=1e-3)
    assert r.best_seen == 100.0 and r.best_unseen == pytest.approx(100.0)
    assert r.best_hm == pytest.approx(200 / 3, abs=1e-4)
    assert r.best_gm == pytest.approx(5000**0.5)
    assert r.best_gm > r.best_hm  # the geometric mean flatters: it is not the harmonic mean


def test_czsl_uses_twenty_biases_and_topk():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(400, 10, generator=g)
    labels = torch.randint(0, 10, (400,), generator=g)
    seen = torch.arange(10) < 5
    r1 = generalized_czsl(scores, labels, seen)
    r3 = generalized_czsl(scores, labels, seen, topk=3)
    assert len(r1.biases) == 20 and len(r1.seen_curve) == 21
    assert sorted(r1.biases) == r1.biases
    assert r3.best_unseen >= r1.best_unseen and r3.auc >= r1.auc
    # unseen accuracy grows and seen accuracy shrinks along the sweep
    assert r1.unseen_curve == sorted(r1.unseen_curve)
    # every unseen sample whose pair is the best unseen one is right at the endpoint
    unseen = ~seen[labels]
    best_unseen_possible = (scores[unseen][:, ~seen].argmax(1) + 5 == labels[unseen]).double().mean() * 100
    assert r1.unseen_curve[-1] == pytest.approx(float(best_unseen_possible))
    assert r1.seen_curve == sorted(r1.seen_curve, reverse=True)


def test_interventions_and_delta():
    pred = torch.tensor([[0.2, 0.7, 0.1], [0.5, 0.4, 0.9]])
    gt = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    torch.testing.assert_close(intervene_full(pred, gt), gt)
    torch.testing.assert_close(intervene_partial(pred, gt), torch.tensor([[1.0, 0.7, 0.1], [0.5, 0.4, 1.0]]))
    assert interpretability_delta(66.0, 100.0) == -34.0
    assert accuracy(torch.tensor([1, 2, 3]), torch.tensor([1, 0, 3])) == pytest.approx(200 / 3)


def test_weight_analysis_on_known_weights():
    gt = torch.tensor([[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 1]], dtype=torch.float32)
    weights = torch.tensor(
        [
            [0.9, 0.8, 0.1, 0.0],  # top-2 = {0, 1}: both right
            [0.9, 0.0, 0.8, 0.1],  # top-2 = {0, 2}: one of two right
            [0.5, 0.0, 0.0, 0.4],  # top-2 = {0, 3}: both right
        ]
    )
    r = weight_analysis(weights, gt, groups={"first_half": [0, 1], "second_half": [2, 3]})
    assert r.acc_instance == pytest.approx(100 * 5 / 6)
    assert r.acc_class == pytest.approx(100 * 2 / 3)
    assert r.per_group["first_half"] == pytest.approx(100.0)  # gt entries at dims 0,1: (0,0),(0,1),(2,0)
    assert r.per_group["second_half"] == pytest.approx(100 * 2 / 3)  # (1,2) ok, (1,3) missed, (2,3) ok


def test_row_blocks_give_the_same_sweep_as_the_whole_matrix():
    from conceptforge.loaders.compmap.metrics import CzslRowStats, czsl_row_stats, generalized_czsl_from_stats

    g = torch.Generator().manual_seed(3)
    scores = torch.randn(300, 40, generator=g)
    labels = torch.randint(0, 40, (300,), generator=g)
    seen = torch.rand(40, generator=g) < 0.5
    stats = CzslRowStats.cat([czsl_row_stats(scores[i : i + 64], labels[i : i + 64], seen) for i in range(0, 300, 64)])
    for k in (1, 2, 3):
        assert generalized_czsl_from_stats(stats, topk=k) == generalized_czsl(scores, labels, seen, topk=k)
        # top-k hits agree with torch.topk on tie-free scores at bias 0
        hits = (scores.topk(k, dim=1).indices == labels[:, None]).any(1)
        from conceptforge.loaders.compmap.metrics import _hits

        assert torch.equal(_hits(stats, 0.0, k), hits)
