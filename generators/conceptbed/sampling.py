"""Sampling: class (regularisation) images from the base model, and concept images from a
learned artifact, with Table 5's inference settings (50 steps, guidance 7.5; PNDM on Stable
Diffusion, the model's own DDIM with ``eta`` on an LDM).

Prompts (paper Section 3.2.2): objects and CUB birds "A photo of V*"; styles "A photo of a
<entity> in the style of V*" over the seven PACS entities; composite prompts R(V*, b) from the
captions. Every image has its own seed, so an image never depends on which others were made.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from conceptforge.cards.grid import png_bytes
from conceptforge.engine.workitems import derive_seed
from conceptforge.generators.conceptbed.learners import class_prompt
from conceptforge.generators.conceptbed.pipelines import detect_family, load_sampling_pipeline
from conceptforge.generators.conceptbed.spec import Concept, ConceptPrompts
from conceptforge.progress import quiet_model_library_bars
from conceptforge.serialization import atomic_write_bytes

logger = logging.getLogger(__name__)


def concept_prompts(concept: Concept, phrase: str, count: int, prompts: ConceptPrompts | None = None) -> list[str]:
    """The ``count`` concept-split prompts (styles cycle through the style subjects: the paper's
    seven PACS entities unless a spec names others)."""
    prompts = prompts or ConceptPrompts()
    if concept.kind == "style":
        subjects = prompts.style_subjects
        entities = [subjects[i % len(subjects)] for i in range(count)]
        return [prompts.style.format(phrase, article="an" if e[0] in "aeiou" else "a", subject=e) for e in entities]
    return [prompts.concept.format(phrase) for _ in range(count)]


def load_pipeline(model_id: str, revision: str | None = None, *, device: str | None = None, dtype: str = "auto") -> Any:
    """The model's sampling pipeline, no safety checker, progress bar off: a StableDiffusionPipeline
    with a PNDM scheduler (Table 5), or an LDMTextToImagePipeline with its own (DDIM) scheduler,
    whichever its model_index.json names.

    fp16 on CUDA by default (``dtype="auto"``), fp32 elsewhere.
    """
    if device is None:  # under `accelerate launch` each rank gets its own GPU
        from accelerate import PartialState

        device = str(PartialState().device)
    torch_dtype = torch.float16 if (dtype == "auto" and device.startswith("cuda")) or dtype == "fp16" else torch.float32
    family = detect_family(model_id, revision)
    quiet_model_library_bars()  # diffusers' loading bar follows conceptforge's switch
    return load_sampling_pipeline(family, model_id, revision, torch_dtype).to(device)


def generate_image(
    pipe: Any,
    prompt: str,
    seed: int,
    *,
    num_inference_steps: int,
    guidance_scale: float,
    resolution: int | None = None,
    eta: float | None = None,
) -> Image.Image:
    """One image from its own seeded CPU generator; ``eta`` only for pipelines whose call takes it."""
    generator = torch.Generator(device="cpu").manual_seed(int(seed))
    kwargs: dict[str, Any] = {}
    if resolution:
        kwargs = {"height": resolution, "width": resolution}
    if eta is not None:
        kwargs["eta"] = eta
    result = pipe(
        prompt, num_inference_steps=num_inference_steps, guidance_scale=guidance_scale, generator=generator, **kwargs
    )
    return result.images[0]


def ensure_class_images(
    pipe: Any,
    concept: Concept,
    directory: Path,
    count: int,
    *,
    run_seed: int,
    num_inference_steps: int,
    guidance_scale: float,
    resolution: int | None = None,
) -> list[Path]:
    """Generate (or reuse) ``count`` prior-preservation images of the concept's class prompt.

    Each image is its own file written atomically, so an interrupted run keeps what it made.
    """
    prompt = class_prompt(concept)
    paths = []
    for index in range(count):
        path = Path(directory) / f"{index:04d}.png"
        if not path.exists():
            seed = derive_seed(run_seed, "class-image", prompt, index)
            image = generate_image(
                pipe,
                prompt,
                seed,
                num_inference_steps=num_inference_steps,
                guidance_scale=guidance_scale,
                resolution=resolution,
            )
            atomic_write_bytes(path, png_bytes(image))
        paths.append(path)
    if count:
        logger.info("%s: %d class images for %r in %s", concept.name, count, prompt, directory)
    return paths


def reference_thumbnails(concept: Concept, count: int = 3, size: int = 256) -> list[dict[str, Any]]:
    """Up to ``count`` reference images as PNG dicts for the ``reference_images`` column."""
    out = []
    for path in concept.reference_images[:count]:
        with Image.open(path) as image:
            image = image.convert("RGB")
            image.thumbnail((size, size))
            out.append({"bytes": png_bytes(image), "path": None})
    return out
