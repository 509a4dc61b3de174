"""diffusers pipelines (``model_index.json``): ``generate``.

Images from prompts, each from its own seeded generator (``seed + i`` for prompt ``i``), so an
image does not depend on which other prompts share its call. ConceptBed's learners
(``generators/conceptbed``) train and sample their own pipelines; this adapter is the family's
view for the evaluation harness (a base model generating a benchmark's prompts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conceptforge.external_errors import weights_error
from conceptforge.loaders.harness.adapters.base import DIFFUSERS, load_revision


class DiffusersAdapter:
    family = DIFFUSERS

    def __init__(self, pipeline: Any, *, model_id: str, revision: str) -> None:
        self.pipeline = pipeline
        self.model_id = model_id
        self.revision = revision

    def generate(
        self, prompts: Sequence[str], *, seed: int, steps: int | None = None, size: int | None = None
    ) -> list[Any]:
        import torch

        images = []
        for i, prompt in enumerate(prompts):
            generator = torch.Generator(device="cpu").manual_seed(seed + i)
            kwargs: dict[str, Any] = {"generator": generator}
            if steps is not None:
                kwargs["num_inference_steps"] = steps
            if size is not None:
                kwargs["height"] = kwargs["width"] = size
            images.append(self.pipeline(prompt, **kwargs).images[0])
        return images

    def close(self) -> None:
        return None


def load(model: Any, *, device: str | None, dtype: str | None, cache_dir: str | None) -> DiffusersAdapter:
    import torch
    from diffusers import DiffusionPipeline

    from conceptforge.loaders.harness.embeddings import embedding_revision

    revision = load_revision(model)
    try:
        pipeline = DiffusionPipeline.from_pretrained(
            model.id, revision=revision, torch_dtype=getattr(torch, dtype) if dtype else None
        )
    except (OSError, ValueError) as error:
        raise weights_error("diffusers pipeline", model.id, error) from None
    pipeline.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    pipeline.set_progress_bar_config(disable=True)
    return DiffusersAdapter(pipeline, model_id=model.id, revision=embedding_revision(model.id, revision))
