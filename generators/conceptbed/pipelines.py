"""The diffusion pipelines ConceptBed's learners train on, and what differs between them.

ConceptBed (Table 5) trains Textual Inversion on two base models: Stable Diffusion v1.5
(``StableDiffusionPipeline``: CLIP text encoder, KL autoencoder, PNDM sampling) and the Latent
Diffusion Model ``CompVis/ldm-text2im-large-256`` (``LDMTextToImagePipeline``: an LDMBert text
encoder trained from scratch, a KL or VQ autoencoder, the model's own DDIM sampler with ``eta``).
The learner code (:mod:`conceptforge.generators.conceptbed.learners`) is the same for both; a
:class:`PipelineFamily` names the parts that differ: the pipeline's component names, how many
tokens a prompt is padded to, how images become latents, how the sampling pipeline is set up and
which learners the paper ran on it.

A model's family is read from its own ``model_index.json`` (``_class_name``), never from its name.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from conceptforge.errors import InvalidArgumentError, WeightsUnavailableError, one_line

logger = logging.getLogger(__name__)

STABLE_DIFFUSION = "stable-diffusion"
LDM = "ldm"


@dataclass(frozen=True)
class PipelineFamily:
    """One kind of text-to-image pipeline, as far as a concept learner needs to know it."""

    name: str  # recorded in learner.json (``LearnerConfig.pipeline``)
    pipeline_class: str  # model_index.json's _class_name
    text_encoder: str  # the pipeline's component holding the token embeddings
    autoencoder: str  # the pipeline's image <-> latent component
    learners: tuple[str, ...]  # what ConceptBed trains on it (Table 5), and "none" (the base model alone)
    # Tokens a prompt is padded to: the tokenizer's own length (None) or the pipeline's fixed one
    # (LDMTextToImagePipeline pads to 77 whatever its BERT tokenizer's model_max_length says).
    prompt_length: int | None
    sampler: str | None  # scheduler swapped in for sampling (Table 5: PNDM for SD); None keeps the model's
    uses_eta: bool  # the pipeline call takes DDIM's eta
    plan_resolution: int  # image size of the paper's model, for --dry-run before any weights load
    title: str

    def text_encoder_of(self, pipe: Any) -> Any:
        return getattr(pipe, self.text_encoder)

    def autoencoder_of(self, pipe: Any) -> Any:
        return getattr(pipe, self.autoencoder)

    def max_length(self, tokenizer: Any) -> int:
        return int(self.prompt_length or tokenizer.model_max_length)

    def sample_kwargs(self, eta: float) -> dict[str, Any]:
        """Extra arguments of the pipeline call beyond prompt, steps, guidance and size."""
        return {"eta": float(eta)} if self.uses_eta else {}

    def check_learner(self, learner: str) -> None:
        if learner not in self.learners:
            raise InvalidArgumentError(
                f"{learner} cannot run on {self.title} ({self.pipeline_class}): ConceptBed trains only "
                f"{', '.join(n for n in self.learners if n != 'none')} on it; use --learner {self.learners[0]} or a Stable Diffusion --model-id"
            )


PIPELINE_FAMILIES: dict[str, PipelineFamily] = {
    STABLE_DIFFUSION: PipelineFamily(
        name=STABLE_DIFFUSION,
        pipeline_class="StableDiffusionPipeline",
        text_encoder="text_encoder",
        autoencoder="vae",
        learners=("textual-inversion", "dreambooth", "custom-diffusion", "none"),
        prompt_length=None,
        sampler="PNDMScheduler",
        uses_eta=False,
        plan_resolution=512,
        title="Stable Diffusion",
    ),
    LDM: PipelineFamily(
        name=LDM,
        pipeline_class="LDMTextToImagePipeline",
        text_encoder="bert",
        autoencoder="vqvae",
        learners=("textual-inversion", "none"),
        prompt_length=77,
        sampler=None,
        uses_eta=True,
        plan_resolution=256,
        title="a latent-diffusion model",
    ),
}
BY_CLASS = {family.pipeline_class: family for family in PIPELINE_FAMILIES.values()}


def family_named(name: str) -> PipelineFamily:
    try:
        return PIPELINE_FAMILIES[name]
    except KeyError:
        raise InvalidArgumentError(f"unknown pipeline {name!r}; choose {', '.join(PIPELINE_FAMILIES)}") from None


def read_model_index(model_id: str, revision: str | None = None) -> dict[str, Any]:
    """``model_index.json`` of a local pipeline folder or a Hub id."""
    local = Path(model_id).expanduser()
    if local.is_absolute() or model_id.startswith(".") or local.exists():  # a folder, never a Hub id
        if not (local / "model_index.json").is_file():
            raise WeightsUnavailableError(
                f"cannot read the model_index.json of {model_id!r}: "
                f"{'no such folder' if not local.is_dir() else 'the folder holds none'} (pass a diffusers pipeline folder or Hub id)"
            )
    try:
        if local.is_dir():
            path = local / "model_index.json"
        else:
            from huggingface_hub import hf_hub_download

            path = Path(hf_hub_download(model_id, "model_index.json", revision=revision))
        data = json.loads(path.read_text(encoding="utf-8"))
    except Exception as error:  # missing file, offline Hub, unknown repo, not JSON: one line either way
        raise WeightsUnavailableError(
            f"cannot read the model_index.json of {model_id!r} (a diffusers pipeline folder or Hub id): {one_line(error)}"
        ) from None
    if not isinstance(data, dict):
        raise WeightsUnavailableError(f"the model_index.json of {model_id!r} is not a JSON object")
    return data


@lru_cache(maxsize=16)
def detect_family(model_id: str, revision: str | None = None) -> PipelineFamily:
    """The family of ``model_id`` from its model_index.json's ``_class_name``."""
    name = read_model_index(model_id, revision).get("_class_name")
    family = BY_CLASS.get(str(name))
    if family is None:
        raise InvalidArgumentError(
            f"{model_id} is a {name}: ConceptBed's learners train on {' or '.join(sorted(BY_CLASS))} pipelines"
        )
    return family


def check_model_family(model_id: str, revision: str | None, pipeline: str) -> PipelineFamily:
    """The family the model's files say, refused where it is not the one a learner config names."""
    family = detect_family(model_id, revision)
    if family.name != pipeline:
        raise InvalidArgumentError(
            f"{model_id} is a {family.pipeline_class}, but the learner config says pipeline={pipeline!r}: "
            f"pass pipeline={family.name!r} (the command line reads it from the model)"
        )
    return family


def latent_stats(autoencoder: Any, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, std) of an image's latent: a KL autoencoder's posterior, or a VQ encoder's
    pre-quantisation latent with zero spread (LDM trains on those; the decoder quantises)."""
    encoded = autoencoder.encode(pixels)
    dist = getattr(encoded, "latent_dist", None)
    if dist is not None:
        return dist.mean.float(), dist.std.float()
    latents = encoded.latents.float()
    return latents, torch.zeros_like(latents)


def load_sd_components(model_id: str, revision: str | None) -> dict[str, Any]:
    from diffusers import AutoencoderKL, DDPMScheduler, UNet2DConditionModel
    from transformers import CLIPTextModel, CLIPTokenizer

    return {
        "tokenizer": CLIPTokenizer.from_pretrained(model_id, subfolder="tokenizer", revision=revision),
        "text_encoder": CLIPTextModel.from_pretrained(model_id, subfolder="text_encoder", revision=revision),
        "vae": AutoencoderKL.from_pretrained(model_id, subfolder="vae", revision=revision),
        "unet": UNet2DConditionModel.from_pretrained(model_id, subfolder="unet", revision=revision),
        "noise_scheduler": DDPMScheduler.from_pretrained(model_id, subfolder="scheduler", revision=revision),
    }


def load_ldm_components(model_id: str, revision: str | None) -> dict[str, Any]:
    """The LDM's parts through its own pipeline class (its BERT tokenizer, LDMBert and KL/VQ
    autoencoder are whatever model_index.json names); training noise from its scheduler's betas."""
    from diffusers import DDPMScheduler, LDMTextToImagePipeline

    from conceptforge.progress import quiet_model_library_bars

    quiet_model_library_bars()  # "Loading pipeline components..." follows conceptforge's switch
    pipe = LDMTextToImagePipeline.from_pretrained(model_id, revision=revision)
    return {
        "tokenizer": pipe.tokenizer,
        "text_encoder": pipe.bert,
        "vae": pipe.vqvae,
        "unet": pipe.unet,
        "noise_scheduler": DDPMScheduler.from_config(pipe.scheduler.config),
    }


def load_family_components(family: PipelineFamily, model_id: str, revision: str | None) -> dict[str, Any]:
    loader = load_ldm_components if family.name == LDM else load_sd_components
    try:
        return loader(model_id, revision)
    except (OSError, ValueError) as error:
        raise WeightsUnavailableError(
            f"cannot load a {family.pipeline_class} from {model_id!r}: {one_line(error)}"
        ) from None


def load_sampling_pipeline(family: PipelineFamily, model_id: str, revision: str | None, dtype: torch.dtype) -> Any:
    """The family's pipeline with its sampling scheduler, no safety checker, progress bar off."""
    import diffusers

    cls = getattr(diffusers, family.pipeline_class)
    extra = {"safety_checker": None, "requires_safety_checker": False} if family.name == STABLE_DIFFUSION else {}
    try:
        pipe = cls.from_pretrained(model_id, revision=revision, dtype=dtype, **extra)
    except (OSError, ValueError) as error:
        raise WeightsUnavailableError(
            f"cannot load a {family.pipeline_class} from {model_id!r}: {one_line(error)}"
        ) from None
    if family.sampler is not None:
        pipe.scheduler = getattr(diffusers, family.sampler).from_config(pipe.scheduler.config)
    pipe.set_progress_bar_config(disable=True)
    return pipe
