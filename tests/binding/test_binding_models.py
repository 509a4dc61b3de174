import itertools

import pytest
import torch

from conceptforge.loaders.binding.data import ADJ_NOUN, RELATIONAL, BindingSplit
from conceptforge.loaders.binding.models import CDSM, CSP, Vocabulary, circular_convolution, circular_convolution_direct
from conceptforge.loaders.binding.scoring import accuracy, error_breakdown, prediction_mass
from conceptforge.loaders.binding.train import TrainConfig, candidate_scores, train_run

pytestmark = pytest.mark.usefixtures("offline_single_thread")

SHAPES = ["cube", "sphere", "cylinder"]
REL_VOCAB = Vocabulary(RELATIONAL, nouns=SHAPES, adjectives=[], relations=["behind", "front", "left", "right"])


def test_conv_fft_equals_direct_circular_convolution():
    g = torch.Generator().manual_seed(0)
    for n in (1, 2, 7, 16, 33):
        a, b = torch.randn(4, n, generator=g, dtype=torch.float64), torch.randn(4, n, generator=g, dtype=torch.float64)
        assert torch.allclose(circular_convolution(a, b), circular_convolution_direct(a, b), atol=1e-10)
    # the definition itself: c_i = sum_j a_j b_{(i-j) mod n}
    a, b = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.0, 1.0, 0.0])  # b = shift by one
    assert torch.allclose(circular_convolution_direct(a, b), torch.tensor([3.0, 1.0, 2.0]))


@pytest.mark.parametrize("kind", ["add", "mult", "conv"])
def test_commutative_models_score_aRb_and_bRa_identically(kind):
    model = CDSM(kind, REL_VOCAB, 24, generator=torch.Generator().manual_seed(1))
    pairs = [(s, r, o) for s, o in itertools.permutations(SHAPES, 2) for r in REL_VOCAB.relations]
    forward = model.encode([f"{s} {r} {o}" for s, r, o in pairs])
    backward = model.encode([f"{o} {r} {s}" for s, r, o in pairs])
    assert torch.allclose(forward, backward, rtol=1e-5, atol=1e-4)  # N(0, 1) vectors: values of ~10-60
    # so an image never prefers aRb over bRa: each gets half the credit at best
    split = BindingSplit(
        "gen", [], ["cube left sphere"], [["sphere left cube", "cube left sphere"]], [1], [["bRa", "true"]]
    )
    image = torch.randn(1, 24, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        scores = candidate_scores(model, image, split.candidates)
    assert accuracy(scores, [1]) == pytest.approx(0.5)


@pytest.mark.parametrize("kind", ["tl", "rf"])
def test_order_sensitive_models_distinguish_aRb_from_bRa(kind):
    model = CDSM(kind, REL_VOCAB, 24, generator=torch.Generator().manual_seed(1))
    assert not torch.allclose(model.encode(["cube left sphere"]), model.encode(["sphere left cube"]), atol=1e-4)


def test_table8_parameter_counts():
    single = Vocabulary(
        ADJ_NOUN,
        nouns=SHAPES,
        adjectives=["blue", "gray", "yellow", "brown", "green", "purple", "red", "cyan"],
        relations=[],
    )
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(CDSM("add", single, 768)) == 8448 and count(CDSM("rf", single, 768)) == 9984
    assert count(CDSM("conv", REL_VOCAB, 768)) == 5376 and count(CDSM("rf", REL_VOCAB, 768)) == 7680


def test_constant_scorer_cannot_be_inflated_by_candidate_order():
    scores = torch.zeros(6, 5)
    for label_index in ([0] * 6, [4] * 6, [0, 1, 2, 3, 4, 0]):
        assert accuracy(scores, label_index) == pytest.approx(0.2)
    # a scorer that prefers a fixed position is at chance on a shuffled order
    positional = torch.tensor([[5.0, 4, 3, 2, 1]]).repeat(5, 1)
    assert accuracy(positional, [0, 1, 2, 3, 4]) == pytest.approx(0.2)
    mass = prediction_mass(torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0 - 1e-9]]))
    assert torch.allclose(mass, torch.tensor([[0.0, 1 / 3, 1 / 3, 0.0, 1 / 3]], dtype=mass.dtype))


def test_error_breakdowns_on_hand_made_scores():
    adj = BindingSplit(
        "gen",
        [],
        ["red cube"] * 3,
        [["red cube", "blue cube", "red sphere", "blue sphere", "gray cylinder"]] * 3,
        [0] * 3,
        [["true"] + ["random"] * 4] * 3,
    )
    scores = torch.tensor([[0.0, 1, 0, 0, 0], [0.0, 0, 1, 0, 0], [0.0, 0, 0, 1, 1]])
    assert error_breakdown(scores, adj) == pytest.approx({"Adj": 1 / 3, "Noun": 1 / 3, "Both": 1 / 3})
    rel = BindingSplit(
        "gen",
        [],
        ["cube left sphere"] * 2,
        [["sphere left cube", "cube left sphere", "cube right sphere", "cube left cylinder", "cylinder left sphere"]]
        * 2,
        [1, 1],
        [["bRa", "true", "aSb", "aRc", "cRb"]] * 2,
    )
    scores = torch.tensor([[1.0, 1.0, 0, 0, 0], [0.0, 0, 1, 0, 0]])  # tie with true -> half an error
    assert error_breakdown(scores, rel) == pytest.approx({"bRa": 1 / 3, "aSb": 2 / 3, "aRc": 0.0, "cRb": 0.0})


def _toy_problem(n_per_label=6, dim=16, seed=0):
    """Images = u_adj + v_noun + noise: learnable by Add."""
    g = torch.Generator().manual_seed(seed)
    adjectives, nouns = ["red", "blue", "green", "gray"], SHAPES
    u, v = torch.randn(len(adjectives), dim, generator=g), torch.randn(len(nouns), dim, generator=g)
    labels = [f"{a} {n}" for a in adjectives for n in nouns]

    def split(name, chosen):
        images, rows, cands, idx = [], [], [], []
        for label in chosen:
            a, n = label.split()
            for _ in range(n_per_label):
                images.append(u[adjectives.index(a)] + v[nouns.index(n)] + 0.1 * torch.randn(dim, generator=g))
                others = [x for x in labels if x != label]
                pick = torch.randperm(len(others), generator=g)[:4].tolist()
                row = [label] + [others[p] for p in pick]
                perm = torch.randperm(5, generator=g).tolist()
                cands.append([row[p] for p in perm])
                idx.append(perm.index(0))
                rows.append(label)
        return BindingSplit(name, [], rows, cands, idx, [["true"] * 5] * len(rows)), torch.stack(images)

    train, val, gen = split("train", labels[:-3]), split("val", labels[-3:-1]), split("gen", labels[-1:])
    splits = {"train": train[0], "val": val[0], "gen": gen[0]}
    images = {"train": train[1], "val": val[1], "gen": gen[1]}
    return splits, images, Vocabulary.from_splits(list(splits.values()))


@pytest.mark.parametrize("kind", ["add", "rf"])
def test_training_reduces_loss_on_a_learnable_toy_problem(kind):
    splits, images, vocab = _toy_problem()
    result = train_run(
        kind,
        splits,
        images,
        vocab=vocab,
        embedder=None,
        dim=16,
        logit_scale=10.0,
        seed=0,
        config=TrainConfig(epochs=15, batch_size=8, lr=5e-2),
    )
    assert result.losses[-1] < 0.5 * result.losses[0]
    assert result.accuracy["train"] > 0.9
    assert 1 <= result.best_epoch <= 15 and result.val_history[result.best_epoch - 1] == max(result.val_history)


def test_seeds_are_reproducible():
    splits, images, vocab = _toy_problem()
    config = TrainConfig(epochs=2, batch_size=8, lr=1e-2)
    a = train_run("conv", splits, images, vocab=vocab, embedder=None, dim=16, logit_scale=10.0, seed=3, config=config)
    b = train_run("conv", splits, images, vocab=vocab, embedder=None, dim=16, logit_scale=10.0, seed=3, config=config)
    assert a.losses == b.losses and a.accuracy == b.accuracy


def test_csp_soft_tokens_splice_into_clip_and_learn(embedder):
    # with single-character words the initial soft tokens equal the real token embeddings,
    # so CSP's first encoding equals CLIP's own text features of the same prompt
    vocab = Vocabulary(ADJ_NOUN, nouns=["b"], adjectives=["a"], relations=[])
    csp = CSP(embedder, vocab)
    try:
        with torch.no_grad():
            soft = csp.encode(["a b"])
            plain = embedder.encode_texts_uncached(["a photo of a b"])
        assert torch.allclose(soft, plain, atol=1e-5)
        before = [p.detach().clone() for p in embedder.model.parameters()]
        optimizer = torch.optim.Adam([csp.soft], lr=1e-2)
        loss = csp.encode(["a b"]).sum()
        loss.backward()
        optimizer.step()
        assert csp.soft.grad is not None and csp.soft.grad.abs().sum() > 0
        assert all(torch.equal(p, q) for p, q in zip(before, embedder.model.parameters()))
        with torch.no_grad():
            assert not torch.allclose(csp.encode(["a b"]), plain, atol=1e-5)
    finally:
        csp.remove_hook()
    with torch.no_grad():  # the shared encoder is left untouched once the hook is gone
        assert torch.allclose(embedder.encode_texts_uncached(["a photo of a b"]), plain)


def test_tl_and_rf_follow_the_paper_formulas():
    single = Vocabulary(ADJ_NOUN, nouns=["cube", "sphere"], adjectives=["blue", "red"], relations=[])
    words = single.words
    tl = CDSM("tl", single, 8, generator=torch.Generator().manual_seed(0))
    expected = tl.matrices[tl.operator_index["red"]] @ tl.vectors[words.index("cube")]
    assert torch.allclose(tl.encode(["red cube"])[0], expected, atol=1e-6)
    rel = CDSM("tl", REL_VOCAB, 8, generator=torch.Generator().manual_seed(0))
    w = REL_VOCAB.words
    expected = rel.vectors[w.index("cube")] * (
        rel.matrices[rel.operator_index["left"]] @ rel.vectors[w.index("sphere")]
    )
    assert torch.allclose(rel.encode(["cube left sphere"])[0], expected, atol=1e-6)
    rf = CDSM("rf", REL_VOCAB, 8, generator=torch.Generator().manual_seed(0))
    s, r, o = (rf.vectors[w.index(x)] for x in ("cube", "left", "sphere"))
    expected = sum(circular_convolution_direct(x, role) for x, role in zip((s, r, o), rf.roles))
    assert torch.allclose(rf.encode(["cube left sphere"])[0], expected, atol=1e-5)


def _two_word_add_model(score: str) -> CDSM:
    """Add over adjectives [red] and nouns [cube, sphere] in 2-d, with hand-set vectors:
    red = [1, 2], cube = [0, 1], sphere = [-1, 3] -> "red cube" = [1, 3], "red sphere" = [0, 5]."""
    vocab = Vocabulary(ADJ_NOUN, nouns=["cube", "sphere"], adjectives=["red"], relations=[])
    model = CDSM("add", vocab, 2, score=score)
    with torch.no_grad():
        model.vectors.copy_(torch.tensor([[1.0, 2.0], [0.0, 1.0], [-1.0, 3.0]]))  # words = adjectives + nouns
    return model


def test_cdsm_dot_score_is_algorithm_1_by_hand():
    """Image [3, 4] -> unit vector x = [0.6, 0.8].
    Paper (dot): x·[1, 3] = 0.6 + 2.4 = 3.0 and x·[0, 5] = 4.0 -> "red sphere" wins;
    cross-entropy of "red cube" = −log(e^3 / (e^3 + e^4)) = log(1 + e) = 1.313262.
    Variant (scaled-cosine, logit_scale 10): cos = 3/sqrt(10) = 0.948683 and 4/5 = 0.8 ->
    "red cube" wins: the two classifiers disagree on this image."""
    image = torch.tensor([[3.0, 4.0]])
    candidates = [["red cube", "red sphere"]]
    dot = candidate_scores(_two_word_add_model("dot"), image, candidates).detach()
    torch.testing.assert_close(dot, torch.tensor([[3.0, 4.0]]))
    loss = torch.nn.functional.cross_entropy(dot, torch.tensor([0]))
    assert float(loss) == pytest.approx(1.313262, abs=1e-6)
    cosine = candidate_scores(_two_word_add_model("scaled-cosine"), image, candidates).detach()
    torch.testing.assert_close(cosine, torch.tensor([[3 / 10**0.5, 0.8]]))
    assert int(dot.argmax()) == 1 and int(cosine.argmax()) == 0


def test_cdsm_initialisation_follows_the_score():
    """Paper/authors: nn.Embedding's N(0, 1); the scaled-cosine variant: N(0, 1/d)."""
    vocab = Vocabulary(ADJ_NOUN, nouns=SHAPES, adjectives=["red", "blue"], relations=[])
    dot = CDSM("tl", vocab, 256, generator=torch.Generator().manual_seed(0))
    assert dot.score == "dot" and float(dot.matrices.detach().std()) == pytest.approx(1.0, abs=0.02)
    assert float(dot.vectors.detach().std()) == pytest.approx(1.0, abs=0.1)
    cos = CDSM("tl", vocab, 256, generator=torch.Generator().manual_seed(0), score="scaled-cosine")
    assert float(cos.matrices.detach().std()) == pytest.approx(256**-0.5, rel=0.02)
    with pytest.raises(ValueError, match="unknown CDSM score"):
        TrainConfig(cdsm_score="cosine")


def test_dot_training_uses_no_logit_scale():
    """With score="dot" the logit scale must not matter: two runs differing only in logit_scale
    are identical; with "scaled-cosine" they differ."""
    splits, images, vocab = _toy_problem()
    config = TrainConfig(epochs=2, batch_size=8, lr=1e-2)
    a = train_run("add", splits, images, vocab=vocab, embedder=None, dim=16, logit_scale=10.0, seed=0, config=config)
    b = train_run("add", splits, images, vocab=vocab, embedder=None, dim=16, logit_scale=100.0, seed=0, config=config)
    assert a.losses == b.losses
    cos = TrainConfig(epochs=2, batch_size=8, lr=1e-2, cdsm_score="scaled-cosine")
    c = train_run("add", splits, images, vocab=vocab, embedder=None, dim=16, logit_scale=10.0, seed=0, config=cos)
    d = train_run("add", splits, images, vocab=vocab, embedder=None, dim=16, logit_scale=100.0, seed=0, config=cos)
    assert c.losses != d.losses
