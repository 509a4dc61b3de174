"""The VQA fast input path (reused token ids, PIL resize + one torch normalise) equals the processor's."""

import numpy as np
import pytest
import torch
from PIL import Image

from conceptforge.cub import CubAttributes
from conceptforge.filters.vqa.inputs import PIXEL_ATOL, BatchEncoder, ClipStylePixels
from conceptforge.filters.vqa.questions import QuestionBuilder
from conceptforge.filters.vqa.scorer import VQAScorer
from conceptforge.testing.sub_inputs import MINI_ATTRIBUTES
from conceptforge.testing.tiny_vlms import build_tiny_llava

GROUPS = CubAttributes.from_names(MINI_ATTRIBUTES).groups
SIZES = [(320, 240), (240, 320), (64, 64), (33, 91), (1000, 37), (20, 15), (225, 224)]


def _random_images(sizes, seed=0, mode="RGB"):
    rng = np.random.default_rng(seed)
    images = [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in sizes]
    return [image.convert(mode) for image in images]


@pytest.fixture(scope="module")
def clip224_scorer(tmp_path_factory):
    path = build_tiny_llava(tmp_path_factory.mktemp("llava224"), image_size=224, patch=16)
    return VQAScorer.from_pretrained(str(path), device="cpu")


@pytest.mark.parametrize("mode", ["RGB", "L", "RGBA"])
def test_pixels_equal_the_image_processor_for_many_sizes(clip224_scorer, tiny_scorer, mode):
    for scorer in (clip224_scorer, tiny_scorer):
        image_processor = scorer.processor.image_processor
        pixels = ClipStylePixels.from_image_processor(image_processor)
        assert pixels is not None
        for size in SIZES:
            images = _random_images([size, size], seed=size[0], mode=mode)
            expected = image_processor(images=images, return_tensors="pt")["pixel_values"]
            ours = pixels(images)
            assert ours.dtype == torch.float32 and ours.shape == expected.shape
            assert float((ours - expected).abs().max()) <= 1e-5, (size, mode)


def test_pixels_split_over_a_pool_are_the_same(clip224_scorer):
    from concurrent.futures import ThreadPoolExecutor

    pixels = ClipStylePixels.from_image_processor(clip224_scorer.processor.image_processor)
    images = _random_images([(320, 240)] * 5)
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert torch.equal(pixels(images, pool=pool), pixels(images))


def test_encoder_reuses_ids_only_after_checking_and_matches_the_processor(clip224_scorer):
    builder = QuestionBuilder(GROUPS)
    texts = [clip224_scorer.prompt(builder(group)) for group in sorted(GROUPS)[:3]]
    encoder = BatchEncoder(clip224_scorer.processor, clip224_scorer.tokenizer)
    assert encoder.verified is None
    first = _random_images([(320, 240)] * 3, seed=1)
    encoder(first, texts)  # through the processor, checked
    assert encoder.verified is True
    second = _random_images([(320, 240)] * 3, seed=2)
    fast = encoder(second, texts[::-1])
    expected = clip224_scorer.processor(
        text=texts[::-1], images=second, return_tensors="pt", padding=True, padding_side="right"
    )
    assert set(fast) == set(expected)
    assert torch.equal(fast["input_ids"], expected["input_ids"])
    assert torch.equal(fast["attention_mask"], expected["attention_mask"])
    assert float((fast["pixel_values"] - expected["pixel_values"]).abs().max()) <= PIXEL_ATOL


def test_a_mismatch_turns_the_fast_path_off(clip224_scorer):
    builder = QuestionBuilder(GROUPS)
    texts = [clip224_scorer.prompt(builder(sorted(GROUPS)[0]))] * 2
    encoder = BatchEncoder(clip224_scorer.processor, clip224_scorer.tokenizer)
    encoder.pixels.mean = encoder.pixels.mean + 0.01  # a fast path that would be wrong
    images = _random_images([(100, 80)] * 2)
    out = encoder(images, texts)
    assert encoder._sizes == {(100, 80): False}  # that size goes through the processor from now on
    expected = clip224_scorer.processor(
        text=texts, images=images, return_tensors="pt", padding=True, padding_side="right"
    )
    assert torch.equal(out["pixel_values"], expected["pixel_values"])
    again = encoder(images, texts)  # still the processor's numbers
    assert torch.equal(out["pixel_values"], again["pixel_values"])


def test_a_batch_is_encoded_the_same_whatever_came_before(clip224_scorer):
    """Issue 32: the first batch of a process went through the processor (float64), later ones the
    fast path (float32): a resumed or sharded run scored some images in the last digits differently."""
    builder = QuestionBuilder(GROUPS)
    texts = [clip224_scorer.prompt(builder(group)) for group in sorted(GROUPS)[:3]]
    batch = _random_images([(320, 240), (200, 260), (320, 240)], seed=5)
    fresh = BatchEncoder(clip224_scorer.processor, clip224_scorer.tokenizer)(batch, texts)
    used = BatchEncoder(clip224_scorer.processor, clip224_scorer.tokenizer)
    used(_random_images([(320, 240), (200, 260), (320, 240)], seed=6), texts)  # other images, same keys, first
    later = used(batch, texts)
    assert set(fresh) == set(later) and all(torch.equal(fresh[key], later[key]) for key in fresh)


def test_scores_with_the_fast_path_equal_the_processor_path(clip224_scorer, tmp_path):
    builder = QuestionBuilder(GROUPS)
    groups = sorted(GROUPS)
    images = _random_images([(320, 240)] * 6 + [(200, 260)] * 3, seed=3)
    questions = [builder(groups[i % len(groups)]) for i in range(len(images))]
    clip224_scorer.score(images[:3], questions[:3], batch_size=3)  # warms the id cache
    fast = clip224_scorer.score(images, questions, batch_size=4)
    assert clip224_scorer._encoder.verified is True
    slow_scorer = VQAScorer(clip224_scorer.model, clip224_scorer.processor, device=torch.device("cpu"))
    slow_scorer._encoder.verified = False  # processor for every batch
    slow = slow_scorer.score(images, questions, batch_size=4, prefetch=False)
    for a, b in zip(fast, slow):
        assert a.options == b.options
        assert max(abs(x - y) for x, y in zip(a.probs, b.probs)) < 1e-5
