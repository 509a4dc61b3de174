"""The diffusers family's adapter (``generate``): a tiny SD pipeline, seeded per prompt."""

from __future__ import annotations

import numpy as np


def test_generate_is_seeded_per_prompt_and_equals_the_pipeline(tiny_sd):
    import torch
    from diffusers import DiffusionPipeline

    from conceptforge.loaders.harness.adapters.base import load_adapter
    from conceptforge.loaders.harness.model_ref import resolve_model

    model = resolve_model(str(tiny_sd))
    assert model.kind == "diffusers"
    adapter = load_adapter(model, device="cpu", dtype=None, cache_dir=None)
    both = adapter.generate(["a photo of a dog", "a sketch of a cat"], seed=3, steps=2, size=32)
    alone = adapter.generate(["a sketch of a cat"], seed=4, steps=2, size=32)  # prompt 1 of the call: seed 3 + 1
    assert np.array_equal(np.asarray(both[1]), np.asarray(alone[0]))
    pipe = DiffusionPipeline.from_pretrained(str(tiny_sd))
    pipe.set_progress_bar_config(disable=True)
    expected = pipe(
        "a photo of a dog", num_inference_steps=2, height=32, width=32, generator=torch.Generator().manual_seed(3)
    ).images[0]
    assert np.array_equal(np.asarray(both[0]), np.asarray(expected))
