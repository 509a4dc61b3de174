import numpy as np
import pytest

from conceptforge.errors import ConceptforgeError
from conceptforge.loaders.compmap.sampler import EpisodeSpec, sample_episodes

LABELS = np.repeat(np.arange(12), 9)  # 12 classes x 9 images


def test_exact_counts_and_no_overlap():
    spec = EpisodeSpec(n_way=5, k_shot=3, n_query=4, n_episodes=50, seed=1)
    ep = sample_episodes(LABELS, spec)
    assert ep.support.shape == (50, 15) and ep.query.shape == (50, 20) and ep.classes.shape == (50, 5)
    for e in range(50):
        assert len(set(ep.classes[e])) == 5
        assert not set(ep.support[e]) & set(ep.query[e])
        assert len(set(ep.support[e])) == 15 and len(set(ep.query[e])) == 20
        # every local label maps to its class, exactly k support and q query images each
        np.testing.assert_array_equal(LABELS[ep.support[e]], ep.classes[e][ep.support_labels[e]])
        np.testing.assert_array_equal(LABELS[ep.query[e]], ep.classes[e][ep.query_labels[e]])
        assert np.bincount(ep.support_labels[e]).tolist() == [3] * 5
        assert np.bincount(ep.query_labels[e]).tolist() == [4] * 5


def test_seeded_and_prefix_stable():
    a = sample_episodes(LABELS, EpisodeSpec(5, 1, 2, 20, seed=7))
    b = sample_episodes(LABELS, EpisodeSpec(5, 1, 2, 20, seed=7))
    c = sample_episodes(LABELS, EpisodeSpec(5, 1, 2, 20, seed=8))
    shorter = sample_episodes(LABELS, EpisodeSpec(5, 1, 2, 5, seed=7))
    np.testing.assert_array_equal(a.support, b.support)
    assert not np.array_equal(a.support, c.support)
    np.testing.assert_array_equal(a.support[:5], shorter.support)
    assert len({tuple(row) for row in a.classes}) > 1  # episodes differ from each other


def test_too_few_images_is_a_clear_error():
    with pytest.raises(ConceptforgeError, match="needs 13 classes"):
        sample_episodes(LABELS, EpisodeSpec(13, 1, 1, 1))
    with pytest.raises(ConceptforgeError, match=">= 10 images"):
        sample_episodes(LABELS, EpisodeSpec(2, 5, 5, 1))


def test_authors_protocol_supports_from_train_and_queries_every_test_image():
    from conceptforge.loaders.compmap.sampler import PAD, sample_split_episodes

    # 12 classes x 9 images: the first 3 of each class are train, 6 test; class 11 has 7 test.
    labels = np.concatenate([LABELS, [11]])
    is_train = np.concatenate([np.tile(np.arange(9) < 3, 12), [False]])
    spec = EpisodeSpec(n_way=4, k_shot=2, n_episodes=30, seed=0)
    ep = sample_split_episodes(labels, is_train, spec)
    assert ep.support.shape == (30, 8) and ep.query.shape[1] == 4 * 6 + 1  # padded to the widest episode
    for e in range(30):
        assert is_train[ep.support[e]].all() and np.bincount(ep.support_labels[e]).tolist() == [2] * 4
        q = ep.query[e][ep.query[e] != PAD]
        expected = np.flatnonzero(np.isin(labels, ep.classes[e]) & ~is_train)
        assert sorted(q) == expected.tolist()  # every test image of the episode's classes, once
        np.testing.assert_array_equal(labels[q], ep.classes[e][ep.query_labels[e][ep.query[e] != PAD]])
    again = sample_split_episodes(labels, is_train, EpisodeSpec(n_way=4, k_shot=2, n_episodes=5, seed=0))
    np.testing.assert_array_equal(again.support, ep.support[:5])
    with pytest.raises(ConceptforgeError, match=">= 4 train images"):
        sample_split_episodes(labels, is_train, EpisodeSpec(n_way=2, k_shot=4, n_episodes=1))
