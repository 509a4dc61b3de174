"""Concept prompting on tiny offline models: dual-encoder activations, ensembling, ITM path."""

import numpy as np
import pytest
import torch
from PIL import Image

from conceptforge.errors import ConceptforgeError
from conceptforge.loaders.compmap.activations import (
    ConceptVocabulary,
    ItmScorer,
    concept_text_embeddings,
    dual_encoder_activations,
    group_softmax,
    itm_activations,
)
from conceptforge.loaders.compmap.cub_arrays import cub_primitives
from conceptforge.loaders.compmap.pipeline import cub_vocabulary, load_vl_model
from conceptforge.loaders.compmap.prompts import TABLE_A3_TEMPLATES, cub_attribute_prompts, mit_prompts, parse_templates


def test_templates():
    paper = parse_templates("paper")
    assert cub_attribute_prompts("bill shape", "needle", paper) == ["a photo of bird whose bill shape is needle"]
    assert mit_prompts("ripe apple", paper) == ["this is ripe apple"]
    a3 = parse_templates("a3")
    assert len(a3.a3_templates) == 7 and mit_prompts("ripe", a3)[0] == "itap of a ripe"
    sub = parse_templates("a3:1,4,7")
    assert mit_prompts("apple", sub) == ["itap of a apple", "a photo of the large apple", "a photo of the small apple"]
    assert cub_attribute_prompts("wing color", "red", parse_templates("a3:6")) == [
        "art of the bird whose wing color is red"
    ]
    assert TABLE_A3_TEMPLATES[4] == "a {} in a video game"
    for bad in ("a3:0", "a3:8", "a3:x", "imagenet"):
        with pytest.raises(ConceptforgeError):
            parse_templates(bad)


def test_group_softmax_sums_to_one_per_group():
    x = torch.randn(4, 7)
    groups = {"a": np.array([0, 1, 2]), "b": np.array([3, 4])}
    y = group_softmax(x, groups)
    torch.testing.assert_close(y[:, :3].sum(1), torch.ones(4))
    torch.testing.assert_close(y[:, 3:5].sum(1), torch.ones(4))
    torch.testing.assert_close(y[:, 5:], x[:, 5:])  # ungrouped columns untouched


def test_dual_encoder_activations_and_ensembling(tiny_clip_dir, fake_cub, tmp_path):
    model = load_vl_model(str(tiny_clip_dir), cache_dir=str(tmp_path / "emb"), device="cpu")
    assert model.kind == "dual"
    cub = cub_primitives(fake_cub)
    images = [str(p) for p in cub.image_paths[:5]]
    vocab = cub_vocabulary(cub, parse_templates("paper"))
    acts = model.activations(images, vocab, apply_group_softmax=True, batch_size=4)
    assert acts.shape == (5, 8)
    for idx in cub.groups.values():
        torch.testing.assert_close(acts[:, idx].sum(1), torch.ones(5))
    raw = dual_encoder_activations(model.embedder, images, vocab, apply_group_softmax=False)
    img = model.embedder.embed_images(images)
    txt = model.embedder.embed_texts([p[0] for p in vocab.prompts])
    torch.testing.assert_close(raw, model.embedder.logit_scale * img @ txt.T)
    # ensembling: the concept embedding is the renormalised mean of its prompts' embeddings
    prompts = [["itap of a red", "art of the red", "a origami red"]]
    single = model.embedder.embed_texts(prompts[0])
    expected = torch.nn.functional.normalize(single.mean(0, keepdim=True), dim=-1)
    torch.testing.assert_close(concept_text_embeddings(model.embedder, prompts), expected)
    model.embedder.close()


def test_blip_itm_path_matches_the_full_forward(tiny_blip_dir):
    scorer = ItmScorer.from_pretrained(str(tiny_blip_dir), device="cpu")
    image = Image.new("RGB", (40, 30), (200, 20, 20))
    texts = ["this is a bird", "a photo of the bird whose bill is red", "the"]
    fast = scorer.score_image(image, texts, batch_size=2)
    inputs = scorer.processor(images=[image] * 3, text=texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = scorer.model(**inputs, use_itm_head=True).itm_score
    torch.testing.assert_close(fast, logits[:, 1] - logits[:, 0], atol=1e-5, rtol=1e-4)


def test_vilt_itm_activations_average_prompts(tiny_vilt_dir):
    model = load_vl_model(str(tiny_vilt_dir), device="cpu")
    assert model.kind == "itm" and model.name == "ViLT"
    images = [Image.new("RGB", (32, 32), c) for c in [(255, 0, 0), (0, 0, 255)]]
    vocab = ConceptVocabulary(
        names=["red", "blue"], prompts=[["this is red", "the red"], ["this is blue"]], groups={"g": np.array([0, 1])}
    )
    acts = itm_activations(model.scorer, images, vocab, apply_group_softmax=False)
    s = model.scorer.score_image(images[1], ["this is red", "the red", "this is blue"])
    torch.testing.assert_close(acts[1], torch.stack([(s[0] + s[1]) / 2, s[2]]))
    soft = itm_activations(model.scorer, images, vocab, apply_group_softmax=True)
    torch.testing.assert_close(soft.sum(1), torch.ones(2))
