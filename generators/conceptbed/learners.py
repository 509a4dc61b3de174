"""Per-concept learners: Textual Inversion, DreamBooth (LoRA by default, full UNet optional) and
Custom Diffusion on a Stable-Diffusion-1.5-style pipeline, and Textual Inversion on a Latent
Diffusion Model (LDMTextToImagePipeline), with Table 5's defaults. What differs between the two
pipelines (component names, prompt length, latents, sampling) is a
:class:`~conceptforge.generators.conceptbed.pipelines.PipelineFamily`; the training loop is one.

Each learner trains one concept from its reference images and writes a small artifact folder:

* textual-inversion: ``learned_embeds.safetensors`` ({placeholder: vector}, diffusers' format);
* dreambooth (lora): ``pytorch_lora_weights.safetensors`` (diffusers' LoRA format, loadable by
  ``pipe.load_lora_weights``); dreambooth (full): ``unet/`` (a complete UNet);
* custom-diffusion: ``learned_embeds.safetensors`` + ``custom_diffusion.safetensors`` (the
  cross-attention ``attn2.to_k``/``attn2.to_v`` weights, keyed by UNet parameter name);

plus ``learner.json`` (the config it was trained with). The folder is written under a temp name
and renamed, so a concept is either fully learned or not at all; a rerun skips learned concepts
(the artifact side, with ``train_and_save``, is :mod:`conceptforge.generators.conceptbed.artifacts`).

Training runs on ``accelerate``: mixed precision (fp16/bf16) on GPU with the frozen modules cast
down, fp32 on CPU. Each rank of a multi-process launch trains its own concepts (no gradient
sync), which is why only the optimizer goes through ``accelerator.prepare``.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from conceptforge.errors import ConceptforgeError, DataNotFoundError, InvalidArgumentError
from conceptforge.generators.conceptbed.pipelines import (
    LDM,
    PIPELINE_FAMILIES,
    STABLE_DIFFUSION,
    PipelineFamily,
    detect_family,
    family_named,
    latent_stats,
    load_family_components,
)
from conceptforge.generators.conceptbed.spec import Concept

logger = logging.getLogger(__name__)

DEFAULT_MODEL_ID = "runwayml/stable-diffusion-v1-5"
#: No learner: the base model samples the prompts with V* replaced by the concept's class noun
#: (ConceptBed Table 2's "Stable Diffusion" row, the reference for what learning costs compositions).
NO_LEARNER = "none"
LEARNERS: tuple[str, ...] = ("textual-inversion", "dreambooth", "custom-diffusion", NO_LEARNER)
CONFIG_NAME = "learner.json"
EMBEDS_NAME = "learned_embeds.safetensors"
LORA_NAME = "pytorch_lora_weights.safetensors"
CUSTOM_DIFFUSION_NAME = "custom_diffusion.safetensors"

# Table 5 of the paper (SD-based columns): the "paper" preset. The "lora" preset is the documented
# cheaper option for DreamBooth only: rank-4 LoRA at diffusers' LoRA rate 1e-4 (the paper's 5e-6
# is for full fine-tuning and barely moves rank-4 adapters); other learners are unchanged by it.
TABLE5: dict[str, dict[str, Any]] = {
    "textual-inversion": {"steps": 3000, "learning_rate": 5e-4, "placeholder_token": "<object>", "num_class_images": 0},
    "dreambooth": {"steps": 400, "learning_rate": 5e-6, "placeholder_token": "sks", "num_class_images": 200},
    "custom-diffusion": {"steps": 250, "learning_rate": 1e-5, "placeholder_token": "<new1>", "num_class_images": 200},
}
# Table 5's "Textual Inversion (LDM)" column: the same schedule, the placeholder "*" (a token of
# BERT's vocabulary: its row is the one learned, as the LDM Textual Inversion code did).
TABLE5_LDM: dict[str, dict[str, Any]] = {
    "textual-inversion": {**TABLE5["textual-inversion"], "placeholder_token": "*"},
}
TABLE5_BY_PIPELINE = {STABLE_DIFFUSION: TABLE5, LDM: TABLE5_LDM}
DREAMBOOTH_LORA_LEARNING_RATE = 1e-4
LEARNER_PRESETS = ("paper", "lora")
PRESET_DREAMBOOTH_MODE = {"paper": "full", "lora": "lora"}

OBJECT_TEMPLATES = (
    "a photo of a {}",
    "a rendering of a {}",
    "a cropped photo of the {}",
    "a close-up photo of a {}",
    "a good photo of a {}",
)
STYLE_TEMPLATES = (
    "a painting in the style of {}",
    "a rendering in the style of {}",
    "a picture in the style of {}",
    "a good painting in the style of {}",
)


@dataclass
class LearnerConfig:
    """Everything that determines a learned artifact (saved beside it as learner.json)."""

    learner: str
    model_id: str = DEFAULT_MODEL_ID
    revision: str | None = None
    # The pipeline family of ``model_id`` (pipelines.PIPELINE_FAMILIES): the command line reads it from the
    # model's model_index.json; the generator refuses a config whose family is not the model's.
    pipeline: str = STABLE_DIFFUSION
    steps: int | None = None
    learning_rate: float | None = None
    placeholder_token: str | None = None
    initializer_token: str | None = None  # default: the concept's parent word
    preset: str = "paper"  # paper: Table 5 (DreamBooth = full UNet, lr 5e-6) | lora: DreamBooth LoRA at 1e-4
    dreambooth_mode: str | None = None  # lora | full; default from the preset
    lora_rank: int = 4
    num_class_images: int | None = None  # regularisation images (DreamBooth, Custom Diffusion)
    prior_loss_weight: float = 1.0
    resolution: int | None = None  # default: the UNet's sample size x VAE scale factor
    train_batch_size: int = 1
    num_inference_steps: int = 50
    guidance_scale: float = 7.5
    eta: float = 0.0  # DDIM's eta for pipelines that sample with it (LDM); Stable Diffusion's PNDM has none
    mixed_precision: str = "auto"  # auto | no | fp16 | bf16
    seed: int = 0

    def __post_init__(self) -> None:
        if self.learner not in LEARNERS:
            raise InvalidArgumentError(f"unknown learner {self.learner!r}; choose {', '.join(LEARNERS)}")
        family_named(self.pipeline).check_learner(self.learner)
        if self.eta < 0:
            raise InvalidArgumentError(f"eta must be >= 0, got {self.eta}")
        if self.eta and not self.family.uses_eta:
            raise InvalidArgumentError(
                f"--eta is DDIM's, for an LDM's sampling; a {self.family.pipeline_class} samples with "
                f"{self.family.sampler} (Table 5), which has none: drop --eta"
            )
        if self.learner == NO_LEARNER:
            given = [name for name in ("steps", "learning_rate", "placeholder_token") if getattr(self, name)]
            if given:
                flags = ", ".join("--" + name.replace("_", "-") for name in given)
                raise InvalidArgumentError(f"--learner none trains nothing: drop {flags}")
            self.steps, self.num_class_images = 0, 0
            return
        if self.preset not in LEARNER_PRESETS:
            raise InvalidArgumentError(f"--preset must be one of {', '.join(LEARNER_PRESETS)}, got {self.preset!r}")
        if self.dreambooth_mode is None:
            self.dreambooth_mode = PRESET_DREAMBOOTH_MODE[self.preset]
        if self.dreambooth_mode not in ("lora", "full"):
            raise InvalidArgumentError(f"--dreambooth-mode must be lora or full, got {self.dreambooth_mode!r}")
        defaults = TABLE5_BY_PIPELINE[self.pipeline][self.learner]
        if self.steps is None:
            self.steps = defaults["steps"]
        if self.learning_rate is None:
            lora = self.learner == "dreambooth" and self.dreambooth_mode == "lora"
            self.learning_rate = DREAMBOOTH_LORA_LEARNING_RATE if lora else defaults["learning_rate"]
        if self.placeholder_token is None:
            self.placeholder_token = defaults["placeholder_token"]
        if self.num_class_images is None:
            self.num_class_images = defaults["num_class_images"]
        if self.steps < 0 or self.learning_rate <= 0:
            raise InvalidArgumentError("steps must be >= 0 and the learning rate > 0")

    @property
    def family(self) -> PipelineFamily:
        return PIPELINE_FAMILIES[self.pipeline]

    @property
    def uses_prior(self) -> bool:
        return self.learner in ("dreambooth", "custom-diffusion") and (self.num_class_images or 0) > 0

    @property
    def label(self) -> str:
        """The dataset's ``learner`` column: the learner, suffixed by the pipeline family off Stable
        Diffusion ("textual-inversion-ldm"), so Table 1's "Textual Inversion (LDM)" and "(SD)" rows
        stay apart when both datasets are evaluated or annotated together."""
        return self.learner if self.pipeline == STABLE_DIFFUSION else f"{self.learner}-{self.pipeline}"

    @property
    def trains(self) -> bool:
        """False for the base model alone (``--learner none``): no artifact, nothing applied."""
        return self.learner != NO_LEARNER

    @property
    def adds_token(self) -> bool:
        return self.learner in ("textual-inversion", "custom-diffusion")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def concept_phrase(config: LearnerConfig, concept: Concept) -> str:
    """V* as written in prompts: the new token (TI), token + class noun (DreamBooth, CD), or the
    class noun alone (no learner: the base model's prompt for the concept)."""
    if config.learner == NO_LEARNER:
        return concept.class_noun
    if config.learner == "textual-inversion":
        return str(config.placeholder_token)
    return f"{config.placeholder_token} {concept.class_noun}"


def training_templates(concept: Concept) -> tuple[str, ...]:
    return STYLE_TEMPLATES if concept.kind == "style" else OBJECT_TEMPLATES


def class_prompt(concept: Concept) -> str:
    """The prior-preservation prompt, C("<concept-name>") in Appendix D."""
    return training_templates(concept)[0].format(concept.class_noun)


# ------------------------------------------------------------------------------------------------
# Components


@dataclass
class Components:
    tokenizer: Any
    text_encoder: Any
    vae: Any
    unet: Any
    noise_scheduler: Any
    family: PipelineFamily = PIPELINE_FAMILIES[STABLE_DIFFUSION]

    @property
    def vae_scale_factor(self) -> int:
        return 2 ** (len(self.vae.config.block_out_channels) - 1)

    def default_resolution(self) -> int:
        return int(self.unet.config.sample_size) * self.vae_scale_factor


def load_components(model_id: str, revision: str | None = None) -> Components:
    """Load the five trainable-pipeline components of ``model_id`` (Hub id or local folder): an
    SD-1.x layout or an LDMTextToImagePipeline, whichever its model_index.json names."""
    family = detect_family(model_id, revision)
    return Components(**load_family_components(family, model_id, revision), family=family)


def add_placeholder_token(tokenizer: Any, text_encoder: Any, token: str, initializer: str | None) -> int:
    """Add ``token`` (if new) and initialise its embedding from ``initializer``'s tokens."""
    if token in tokenizer.get_vocab():
        token_id = tokenizer.convert_tokens_to_ids(token)
    else:
        tokenizer.add_tokens([token])
        token_id = tokenizer.convert_tokens_to_ids(token)
        text_encoder.resize_token_embeddings(len(tokenizer))
    if initializer:
        init_ids = tokenizer.encode(initializer, add_special_tokens=False)
        if init_ids:
            embeddings = text_encoder.get_input_embeddings().weight
            with torch.no_grad():
                embeddings[token_id] = embeddings[init_ids].mean(dim=0)
    return token_id


def load_image_tensor(path: Path, resolution: int) -> torch.Tensor:
    """Resize the short side to ``resolution``, centre-crop, scale to [-1, 1] (CHW float)."""
    with Image.open(path) as image:
        image = image.convert("RGB")
        scale = resolution / min(image.size)
        size = (max(resolution, round(image.width * scale)), max(resolution, round(image.height * scale)))
        image = image.resize(size, Image.BICUBIC)
        left, top = (image.width - resolution) // 2, (image.height - resolution) // 2
        image = image.crop((left, top, left + resolution, top + resolution))
        array = np.asarray(image, dtype=np.float32) / 127.5 - 1.0
    return torch.from_numpy(array).permute(2, 0, 1).contiguous()


def prior_preservation_loss(
    prediction: torch.Tensor, target: torch.Tensor, prior_weight: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DreamBooth's loss on a batch whose first half is instance and second half class images.

    Returns (total, instance term, prior term): total = instance + lambda * prior (Appendix D).
    """
    pred_instance, pred_prior = torch.chunk(prediction, 2, dim=0)
    target_instance, target_prior = torch.chunk(target, 2, dim=0)
    instance = F.mse_loss(pred_instance.float(), target_instance.float(), reduction="mean")
    prior = F.mse_loss(pred_prior.float(), target_prior.float(), reduction="mean")
    return instance + prior_weight * prior, instance, prior


# ------------------------------------------------------------------------------------------------
# Training


@dataclass
class TrainState:
    """What one learner optimises, and how to keep everything else frozen."""

    parameters: list[torch.nn.Parameter]
    token_id: int | None = None
    original_embeddings: torch.Tensor | None = None
    lora: bool = False
    history: list[float] = field(default_factory=list)


def _mixed_precision(setting: str, device_type: str) -> str:
    if setting != "auto":
        return setting
    if device_type != "cuda":
        return "no"
    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"


def configure_trainable(components: Components, config: LearnerConfig, concept: Concept) -> TrainState:
    """Freeze everything, then unfreeze what the learner optimises (Table 5 "Optimized")."""
    for module in (components.text_encoder, components.vae, components.unet):
        module.requires_grad_(False)
    state = TrainState(parameters=[])
    if config.adds_token:
        token_id = add_placeholder_token(
            components.tokenizer,
            components.text_encoder,
            str(config.placeholder_token),
            config.initializer_token or concept.parent,
        )
        embeddings = components.text_encoder.get_input_embeddings()
        embeddings.weight.requires_grad_(True)
        state.token_id = token_id
        state.original_embeddings = embeddings.weight.detach().clone()
        state.parameters.append(embeddings.weight)
    if config.learner == "dreambooth":
        if config.dreambooth_mode == "lora":
            from peft import LoraConfig

            components.unet.add_adapter(
                LoraConfig(
                    r=config.lora_rank,
                    lora_alpha=config.lora_rank,
                    init_lora_weights="gaussian",
                    target_modules=["to_k", "to_q", "to_v", "to_out.0"],
                )
            )
            state.lora = True
            state.parameters.extend(p for p in components.unet.parameters() if p.requires_grad)
        else:
            components.unet.requires_grad_(True)
            state.parameters.extend(components.unet.parameters())
    elif config.learner == "custom-diffusion":
        for name, parameter in components.unet.named_parameters():
            if cross_attention_kv(name):
                parameter.requires_grad_(True)
                state.parameters.append(parameter)
    return state


def cross_attention_kv(parameter_name: str) -> bool:
    """Custom Diffusion's trainable UNet weights: cross-attention (attn2) key and value."""
    return ".attn2.to_k." in parameter_name or ".attn2.to_v." in parameter_name


def restore_frozen_embeddings(state: TrainState, text_encoder: Any) -> None:
    """Textual Inversion's rule: only the new token's row may change; put every other row back."""
    if state.token_id is None or state.original_embeddings is None:
        return
    weight = text_encoder.get_input_embeddings().weight
    keep = torch.ones(weight.shape[0], dtype=torch.bool, device=weight.device)
    keep[state.token_id] = False
    with torch.no_grad():
        weight[keep] = state.original_embeddings.to(weight.device, weight.dtype)[keep]


class ConceptTrainer:
    """Train one concept with one learner; everything seeded from ``config.seed`` and the concept."""

    def __init__(self, config: LearnerConfig, components: Components, *, accelerator: Any = None) -> None:
        from accelerate import Accelerator

        self.config = config
        self.components = components
        if accelerator is None:
            device_type = "cuda" if torch.cuda.is_available() else "cpu"
            accelerator = Accelerator(
                mixed_precision=_mixed_precision(config.mixed_precision, device_type),
                cpu=device_type == "cpu",
            )
        self.accelerator = accelerator

    @property
    def weight_dtype(self) -> torch.dtype:
        precision = self.accelerator.mixed_precision
        return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)

    def _encode_prompts(self, prompts: Sequence[str]) -> torch.Tensor:
        tokenizer = self.components.tokenizer
        ids = tokenizer(
            list(prompts),
            padding="max_length",
            truncation=True,
            max_length=self.components.family.max_length(tokenizer),
            return_tensors="pt",
        ).input_ids.to(self.accelerator.device)
        return self.components.text_encoder(ids)[0]

    def _latent_stats(self, images: Sequence[Path], resolution: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Encode each image once; a step then samples from its cached latent distribution."""
        vae = self.components.vae
        stats = []
        with torch.no_grad():
            for path in images:
                pixels = load_image_tensor(path, resolution).unsqueeze(0).to(self.accelerator.device, self.weight_dtype)
                stats.append(latent_stats(vae, pixels))
        return stats

    def train(
        self,
        concept: Concept,
        *,
        class_images: Sequence[Path] = (),
        step_callback: Callable[[int, float], None] | None = None,
    ) -> TrainState:
        """Optimise the learner's parameters for ``config.steps`` steps; returns the train state."""
        from conceptforge.engine.workitems import derive_seed

        config, comps, accelerator = self.config, self.components, self.accelerator
        if not concept.reference_images:
            raise DataNotFoundError(f"concept {concept.name!r} has no reference images to learn from")
        if config.uses_prior and not class_images:
            raise DataNotFoundError(f"{config.learner} needs regularisation (class) images for {concept.name!r}")
        seed = derive_seed(config.seed, "train", config.learner, concept.name)
        random_gen = random.Random(seed)
        torch_gen = torch.Generator(device="cpu").manual_seed(seed)
        torch.manual_seed(seed)

        if comps.family.name != config.pipeline:
            raise InvalidArgumentError(
                f"the learner config is for pipeline {config.pipeline!r} but the components are a {comps.family.pipeline_class}"
            )
        state = configure_trainable(comps, config, concept)
        device = accelerator.device
        for module in (comps.text_encoder, comps.vae, comps.unet):
            module.to(device)
        # Frozen modules run in the low precision; trainable parameters stay fp32 masters.
        comps.vae.to(dtype=self.weight_dtype)
        if not config.adds_token:
            comps.text_encoder.to(dtype=self.weight_dtype)
        if config.learner != "dreambooth" or config.dreambooth_mode == "lora":
            for parameter in comps.unet.parameters():
                if not parameter.requires_grad:
                    parameter.data = parameter.data.to(self.weight_dtype)
        if config.adds_token:
            state.original_embeddings = state.original_embeddings.to(device)

        resolution = config.resolution or comps.default_resolution()
        instance_latents = self._latent_stats(concept.reference_images, resolution)
        class_latents = self._latent_stats(class_images, resolution) if config.uses_prior else []
        templates = training_templates(concept)
        phrase = concept_phrase(config, concept)
        prior_prompt = class_prompt(concept)

        optimizer = torch.optim.AdamW(state.parameters, lr=config.learning_rate, weight_decay=0.0)
        optimizer = accelerator.prepare(optimizer)
        comps.unet.train()
        comps.text_encoder.train(config.adds_token)
        scheduler = comps.noise_scheduler
        scaling = float(getattr(comps.vae.config, "scaling_factor", 0.18215))

        for step in range(int(config.steps)):
            batch, prompts = [], []
            for _ in range(config.train_batch_size):
                mean, std = instance_latents[random_gen.randrange(len(instance_latents))]
                batch.append(mean + std * torch.randn(mean.shape, generator=torch_gen).to(device))
                prompts.append(random_gen.choice(templates).format(phrase))
            if config.uses_prior:
                for _ in range(config.train_batch_size):
                    mean, std = class_latents[random_gen.randrange(len(class_latents))]
                    batch.append(mean + std * torch.randn(mean.shape, generator=torch_gen).to(device))
                    prompts.append(prior_prompt)
            latents = torch.cat(batch).to(device) * scaling
            noise = torch.randn(latents.shape, generator=torch_gen).to(device)
            timesteps = torch.randint(
                0, scheduler.config.num_train_timesteps, (latents.shape[0],), generator=torch_gen
            ).to(device)
            noisy = scheduler.add_noise(latents, noise, timesteps)
            if scheduler.config.prediction_type == "v_prediction":
                target = scheduler.get_velocity(latents, noise, timesteps)
            else:
                target = noise
            with accelerator.autocast():
                hidden = self._encode_prompts(prompts)
                prediction = comps.unet(noisy.to(self.weight_dtype), timesteps, hidden.to(self.weight_dtype)).sample
            if config.uses_prior:
                loss, _, _ = prior_preservation_loss(prediction, target, config.prior_loss_weight)
            else:
                loss = F.mse_loss(prediction.float(), target.float(), reduction="mean")
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            restore_frozen_embeddings(state, comps.text_encoder)
            value = float(loss.detach())
            if not math.isfinite(value):
                raise ConceptforgeError(f"training {concept.name!r} diverged at step {step} (loss {value})")
            state.history.append(value)
            if step_callback is not None:
                step_callback(step, value)
        comps.unet.eval()
        comps.text_encoder.eval()
        return state
