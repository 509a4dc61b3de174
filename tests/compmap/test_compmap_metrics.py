import pytest
import torch

from conceptforge.loaders.compmap import metrics as cm

# Pairs 0 and 1 are seen, pair 2 unseen. Hand-computed in the docstrings of the tests below.
SCORES = torch.tensor([[3.0, 1.0, 2.8], [1.0, 3.0, 0.0], [2.0, 0.0, 1.0], [0.0, 1.0, 3.5], [2.5, 0.0, 2.0]])
LABELS = torch.tensor([0, 1, 2, 2, 2])
SEEN = torch.tensor([True, True, False])


def test_czsl_paper_curve_by_hand():
    """Paper A.6.2 with 3 biases instead of 20 (same rule, smaller example).

    Δ = (best seen score) − (ground-truth score) of the unseen samples 2, 3, 4:
    2 − 1 = 1, 1 − 3.5 = −2.5, 2.5 − 2 = 0.5 -> sorted [−2.5, 0.5, 1]; 3 chunks of one -> biases
    Δ − 1e-4 = [−2.5001, 0.4999, 0.9999]. An unseen sample is right once b > Δ; seen sample 0
    (3 vs unseen 2.8 + b) is right while 2.8 + b < 3, i.e. only at b = −2.5001; seen sample 1 is
    always right. Seen curve [2/2, 1/2, 1/2], unseen curve [0, 1/3, 2/3] (no end point: the
    largest bias leaves sample 2, the last chunk, wrong).
    AUC = trapezoid of seen over unseen = 1/3·(1 + 0.5)/2 + 1/3·(0.5 + 0.5)/2 = 0.25 + 0.16667
    = 0.41667 -> 41.667%. GM (the paper's "HM", Eq. 1) = max(sqrt(1·0), sqrt(.5·1/3),
    sqrt(.5·2/3)) = sqrt(1/3) = 0.57735; harmonic = max(0, 2·.5·(1/3)/(5/6) = 0.4,
    2·.5·(2/3)/(7/6) = 4/7 = 0.571429).
    """
    biases = cm.calibration_biases(SCORES, LABELS, SEEN, num_biases=3)
    torch.testing.assert_close(biases, torch.tensor([-2.5001, 0.4999, 0.9999], dtype=torch.float64))
    r = cm.generalized_czsl(SCORES, LABELS, SEEN, num_biases=3)
    assert r.curve == "paper"
    assert r.biases == pytest.approx([-2.5001, 0.4999, 0.9999])
    assert r.seen_curve == pytest.approx([100.0, 50.0, 50.0])
    assert r.unseen_curve == pytest.approx([0.0, 100 / 3, 200 / 3])
    assert r.auc == pytest.approx(41.6667, abs=1e-3)
    assert r.best_seen == 100.0 and r.best_unseen == pytest.approx(66.6667, abs=1e-3)
    assert r.best_gm == pytest.approx(57.735, abs=1e-3)
    assert r.best_hm == pytest.approx(57.1429, abs=1e-3)
    assert r.best_gm > r.best_hm  # the geometric mean flatters: it is not the harmonic mean


def test_czsl_authors_curve_by_hand():
    """The authors' variant on the same scores: at the closing bias 1e3 every unseen sample is
    right (seen 0/2), so all three Δ − 1e-4 are kept; skip = max(3 // 3, 1) = 1 -> biases
    [−2.5001, 0.4999, 0.9999] then 1e3. Seen [1, .5, .5, 0], unseen [0, 1/3, 2/3, 1].
    AUC = 0.41667 (as above) + 1/3·(0.5 + 0)/2 = 0.5 -> 50%. Best unseen 100; GM max stays
    sqrt(.5·2/3) = 0.57735 (the closing point has sqrt(0·1) = 0).
    """
    r = cm.generalized_czsl(SCORES, LABELS, SEEN, num_biases=3, curve="authors")
    assert r.curve == "authors"
    assert r.biases == pytest.approx([-2.5001, 0.4999, 0.9999, 1000.0])
    assert r.seen_curve == pytest.approx([100.0, 50.0, 50.0, 0.0])
    assert r.unseen_curve == pytest.approx([0.0, 100 / 3, 200 / 3, 100.0])
    assert r.auc == pytest.approx(50.0, abs=1e-3)
    assert r.best_unseen == pytest.approx(100.0) and r.best_gm == pytest.approx(57.735, abs=1e-3)


# Pair 0 seen, pairs 1 and 2 unseen; sample 3's ground truth (pair 2) always loses to pair 1.
SCORES2 = torch.tensor([[2.0, 0.0, 0.0], [1.0, 3.0, 0.0], [2.0, 1.0, 0.0], [0.0, 5.0, 1.0], [3.0, 0.0, 1.0]])
LABELS2 = torch.tensor([0, 1, 1, 2, 2])
SEEN2 = torch.tensor([True, False, False])


def test_czsl_curves_differ_where_the_authors_filter_and_skip():
    """Δ of the unseen samples 1-4: 1 − 3 = −2, 2 − 1 = 1, 0 − 1 = −1, 3 − 1 = 2.

    Paper, 2 biases: sorted [−2, −1, 1, 2] in chunks [−2, −1], [1, 2] -> b = [−2.0001, 0.9999].
    b = −2.0001: seen sample 0 right (unseen 0 − 2 < 2), no unseen right (need b > Δ).
    b = 0.9999: sample 0 right (0.9999 < 2); sample 1 right (3.9999 > 1 and > 0.9999); sample 2
    (1.9999 < 2), sample 3 (pair 1 at 5.9999 beats 1.9999) and sample 4 (1.9999 < 3) wrong.
    Seen [1, 1], unseen [0, 1/4]: AUC = 1/4·(1 + 1)/2 = 0.25 -> 25%; GM = sqrt(1·1/4) = 50%.

    Authors, 2 biases: at 1e3 sample 3 is wrong (pair 1 scores 1005 > 1001), so only samples 1,
    2, 4 are kept: Δ − 1e-4 sorted [−2.0001, 0.9999, 1.9999]; skip = max(3 // 2, 1) = 1 keeps all
    three (more biases than asked, as in their code), then 1e3. At 1.9999: sample 0 right
    (1.9999 < 2), samples 1 and 2 right (2.9999 > 2), sample 4 wrong (2.9999 < 3). At 1e3: seen
    wrong, unseen 1, 2, 4 right. Seen [1, 1, 1, 0], unseen [0, 1/4, 2/4, 3/4]:
    AUC = 1/4·1 + 1/4·1 + 1/4·(1 + 0)/2 = 0.625 -> 62.5%; GM = sqrt(1·1/2) = 70.711%;
    harmonic = 2·1·.5/1.5 = 66.667%.
    """
    p = cm.generalized_czsl(SCORES2, LABELS2, SEEN2, num_biases=2)
    assert p.biases == pytest.approx([-2.0001, 0.9999])
    assert p.seen_curve == pytest.approx([100.0, 100.0]) and p.unseen_curve == pytest.approx([0.0, 25.0])
    assert p.auc == pytest.approx(25.0) and p.best_gm == pytest.approx(50.0) and p.best_unseen == pytest.approx(25.0)
    a = cm.generalized_czsl(SCORES2, LABELS2, SEEN2, num_biases=2, curve="authors")
    assert a.biases == pytest.approx([-2.0001, 0.9999, 1.9999, 1000.0])
    assert a.seen_curve == pytest.approx([100.0, 100.0, 100.0, 0.0])
    assert a.unseen_curve == pytest.approx([0.0, 25.0, 50.0, 75.0])
    assert a.auc == pytest.approx(62.5)
    assert a.best_gm == pytest.approx(100 * 0.5**0.5) and a.best_hm == pytest.approx(200 / 3)
    with pytest.raises(ValueError, match="unknown CZSL curve"):
        cm.generalized_czsl(SCORES2, LABELS2, SEEN2, curve="purushwalkam")


def test_czsl_uses_twenty_biases_and_topk():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(400, 10, generator=g)
    labels = torch.randint(0, 10, (400,), generator=g)
    seen = torch.arange(10) < 5
    r1 = cm.generalized_czsl(scores, labels, seen)
    r3 = cm.generalized_czsl(scores, labels, seen, topk=3)
    assert len(r1.biases) == 20 and len(r1.seen_curve) == 20
    assert sorted(r1.biases) == r1.biases
    assert r3.best_unseen >= r1.best_unseen
    # unseen accuracy grows and seen accuracy shrinks along the sweep
    assert r1.unseen_curve == sorted(r1.unseen_curve)
    assert r1.seen_curve == sorted(r1.seen_curve, reverse=True)
    a1 = cm.generalized_czsl(scores, labels, seen, curve="authors")
    assert a1.biases[-1] == 1e3 and len(a1.biases) >= 21
    # at the closing bias every unseen sample whose pair is the best unseen one is right
    unseen = ~seen[labels]
    best_unseen_possible = (scores[unseen][:, ~seen].argmax(1) + 5 == labels[unseen]).double().mean() * 100
    assert a1.unseen_curve[-1] == pytest.approx(float(best_unseen_possible)) and a1.seen_curve[-1] == 0.0
    assert r1.best_unseen <= a1.best_unseen


def test_interventions_and_delta():
    pred = torch.tensor([[0.2, 0.7, 0.1], [0.5, 0.4, 0.9]])
    gt = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    torch.testing.assert_close(cm.intervene_full(pred, gt), gt)
    torch.testing.assert_close(cm.intervene_partial(pred, gt), torch.tensor([[1.0, 0.7, 0.1], [0.5, 0.4, 1.0]]))
    assert cm.interpretability_delta(66.0, 100.0) == -34.0
    assert cm.accuracy(torch.tensor([1, 2, 3]), torch.tensor([1, 0, 3])) == pytest.approx(200 / 3)


def test_weight_analysis_on_known_weights():
    gt = torch.tensor([[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 1]], dtype=torch.float32)
    weights = torch.tensor(
        [
            [0.9, 0.8, 0.1, 0.0],  # top-2 = {0, 1}: both right
            [0.9, 0.0, 0.8, 0.1],  # top-2 = {0, 2}: one of two right
            [0.5, 0.0, 0.0, 0.4],  # top-2 = {0, 3}: both right
        ]
    )
    r = cm.weight_analysis(weights, gt, groups={"first_half": [0, 1], "second_half": [2, 3]})
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
        for curve in ("paper", "authors"):
            assert generalized_czsl_from_stats(stats, topk=k, curve=curve) == cm.generalized_czsl(
                scores, labels, seen, topk=k, curve=curve
            )
        # top-k hits agree with torch.topk on tie-free scores at bias 0
        hits = (scores.topk(k, dim=1).indices == labels[:, None]).any(1)
        from conceptforge.loaders.compmap.metrics import _hits

        assert torch.equal(_hits(stats, 0.0, k), hits)
