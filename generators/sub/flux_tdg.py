"""The TDG denoising loop over FluxPipeline's own components (SUB paper, Fig. 2).

Why a loop of our own: FluxPipeline's ``callback_on_step_end`` sees the latents only after the
scheduler step, so it cannot change the model prediction that TDG ties. The loop below reuses
the pipeline's ``encode_prompt``, ``prepare_latents``, timestep shift and retrieval, scheduler
and VAE decoding, and differs from ``FluxPipeline.__call__`` in one line: the prediction of the
batch [R, G] goes through :func:`generators.sub.tdg.tie_pair` before the scheduler step. With
eta = 0 at every step it reproduces ``FluxPipeline.__call__`` on the same batch bit for bit
(tested).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from conceptforge.errors import DeviceUnavailableError, InvalidArgumentError, ItemError, WeightsUnavailableError
from conceptforge.generators.sub.options import (  # noqa: F401 (the model's defaults, importable from here too)
    DEFAULT_GUIDANCE,
    DEFAULT_MAX_SEQUENCE_LENGTH,
    DEFAULT_MODEL,
    DEFAULT_RESOLUTION,
    DEFAULT_STEPS,
)
from conceptforge.generators.sub.tdg import TDGParams, eta_schedule, tie_pair
from conceptforge.progress import quiet_model_library_bars

logger = logging.getLogger(__name__)

#: Above this many transformer parameters a CPU run is refused unless ``device="cpu"`` is explicit.
CPU_PARAMETER_LIMIT = 1_000_000_000

GATED_HELP = (
    "FLUX.1-dev is gated: accept its license at https://huggingface.co/black-forest-labs/FLUX.1-dev, "
    "run `hf auth login` on a machine with internet access (the weights are ~24 GB), "
    "or pass --model a local copy of a FLUX pipeline"
)
GPU_HELP = (
    "FLUX.1-dev (12B parameters) needs a CUDA GPU: about 40 GB of GPU memory in bf16, or 24 GB "
    "with --offload (model CPU offload); --device cpu forces a (very slow) CPU run"
)

EtaFunction = Callable[[float], float]
StepCallback = Callable[[int, float, float, torch.Tensor, torch.Tensor], None]


@dataclass
class DenoiseResult:
    """Final packed latents of the batch, plus the per-step diffusion times and etas used."""

    latents: torch.Tensor
    times: list[float] = field(default_factory=list)
    etas: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class PairRequest:
    """One image to make: the R prompt, the G prompt (TDG) or None (prompt-only), its seed and
    its eta schedule (default: :class:`TDGParams`' colour/shape values)."""

    prompt_reference: str
    prompt_guidance: str | None
    seed: int
    params: TDGParams | None = None


def _schedule(params: TDGParams) -> EtaFunction:
    return lambda t: eta_schedule(t, params.tmin, params.tmax, params.k)


@dataclass
class GroupResult:
    """Final packed latents of a batch of groups (``group_size`` rows each, one after another),
    the per-step diffusion times, and each group's etas."""

    latents: torch.Tensor
    times: list[float]
    etas: list[list[float]]
    group_size: int

    def group(self, index: int) -> torch.Tensor:
        return self.latents[index * self.group_size : (index + 1) * self.group_size]


def tie_pairs(noise_pred: torch.Tensor, etas: Sequence[float]) -> torch.Tensor:
    """Tie the pairs of a batch [R1, G1, R2, G2, ...], pair j at ``etas[j]``; runs of pairs with
    the same eta are tied in one :func:`tie_pair` call (its mask is per pair, row by row)."""
    out = []
    start = 0
    while start < len(etas):
        end = start + 1
        while end < len(etas) and etas[end] == etas[start]:
            end += 1
        block = noise_pred[2 * start : 2 * end]
        tied_r, tied_g = tie_pair(block[0::2], block[1::2], etas[start])
        out.append(torch.stack([tied_r, tied_g], dim=1).reshape(block.shape))
        start = end
    return out[0] if len(out) == 1 else torch.cat(out)


@dataclass
class GeneratedPair:
    """What :meth:`TDGFlux.generate` returns: the R image (kept) and, when asked, the G image."""

    reference: PIL.Image.Image  # noqa: F821
    guidance: PIL.Image.Image | None = None  # noqa: F821
    times: list[float] = field(default_factory=list)
    etas: list[float] = field(default_factory=list)


def _execution_device(module: torch.nn.Module) -> torch.device:
    try:
        from diffusers.utils.torch_utils import get_module_execution_device

        return get_module_execution_device(module)
    except ImportError:  # older diffusers
        return next(module.parameters()).device


class TDGFlux:
    """Tied Diffusion Guidance over a loaded ``FluxPipeline`` (components reused, not forked).

    Keyword-only settings mirror FluxPipeline's defaults: 28 steps, guidance 3.5, 1024 px,
    512 T5 tokens.
    """

    def __init__(
        self,
        pipe,
        *,
        model_id: str = "",
        model_revision: str = "",
        max_sequence_length: int = DEFAULT_MAX_SEQUENCE_LENGTH,
    ) -> None:
        self.pipe = pipe
        self.model_id = model_id
        self.model_revision = model_revision
        self.max_sequence_length = max_sequence_length
        #: What the step loop calls instead of ``pipe.transformer`` (same keywords, returns a
        #: tuple whose first element is the prediction): an ahead-of-time compiled package
        #: (``--aot``) or a CUDA-graph replay (``--cuda-graphs``); None: the module itself.
        self.transformer_forward: Callable[..., Any] | None = None

    # -- building blocks ------------------------------------------------------------------------
    def check_size(self, height: int, width: int) -> None:
        multiple = self.pipe.vae_scale_factor * 2
        if height % multiple or width % multiple or height <= 0 or width <= 0:
            raise InvalidArgumentError(
                f"resolution {width}x{height} must be a positive multiple of {multiple} for this model"
            )

    def initial_noise(
        self, seed: int, height: int, width: int, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One packed noise sample (batch 1) drawn on the CPU from ``seed``: device-independent."""
        pipe = self.pipe
        generator = torch.Generator(device="cpu").manual_seed(int(seed))
        channels = pipe.transformer.config.in_channels // 4
        return pipe.prepare_latents(1, channels, height, width, dtype, pipe._execution_device, generator)

    @torch.no_grad()
    def denoise(
        self,
        prompts: Sequence[str],
        *,
        seed: int,
        height: int = DEFAULT_RESOLUTION,
        width: int = DEFAULT_RESOLUTION,
        num_inference_steps: int = DEFAULT_STEPS,
        guidance_scale: float = DEFAULT_GUIDANCE,
        eta: EtaFunction | None = None,
        on_step: StepCallback | None = None,
    ) -> DenoiseResult:
        """Denoise ``prompts`` as one batch from one shared noise sample.

        With two prompts and ``eta`` given, the predictions are tied every step with
        ``tie_pair(pred[0], pred[1], eta(t))``; ``eta=None`` leaves the batch untied.
        ``on_step(i, t, eta, noise_pred, latents)`` sees each step's (tied) prediction and the
        latents after the scheduler step (used by tests).
        """
        if eta is not None and len(prompts) != 2:
            raise ValueError("tying needs exactly two prompts: [reference, guidance]")
        result = self.denoise_groups(
            [list(prompts)],
            seeds=[seed],
            etas=None if eta is None else [eta],
            height=height,
            width=width,
            num_inference_steps=num_inference_steps,
            guidance_scale=guidance_scale,
            on_step=None
            if on_step is None
            else lambda i, t, etas, pred, latents: on_step(i, t, etas[0], pred, latents),
        )
        return DenoiseResult(latents=result.latents, times=result.times, etas=result.etas[0])

    @torch.no_grad()
    def denoise_groups(
        self,
        groups: Sequence[Sequence[str]],
        *,
        seeds: Sequence[int],
        etas: Sequence[EtaFunction] | None = None,
        height: int = DEFAULT_RESOLUTION,
        width: int = DEFAULT_RESOLUTION,
        num_inference_steps: int = DEFAULT_STEPS,
        guidance_scale: float = DEFAULT_GUIDANCE,
        on_step: Callable | None = None,
    ) -> GroupResult:
        """Denoise several groups in one transformer batch: each group's prompts (a TDG pair
        [R, G], or one prompt) start from the noise of its own seed, exactly as
        :meth:`denoise` would run that group alone.

        The batch is the groups' rows one after another ([R1, G1, R2, G2, ...]). Each group's
        prompts are encoded on their own (a batch of two, as alone). With ``etas`` (one
        schedule per pair, every group a pair) the predictions are tied per pair; pairs with the
        same eta at a step are tied in one call. The etas are Python floats computed before the
        loop: the step loop never waits for the GPU.
        """
        from diffusers.pipelines.flux.pipeline_flux import calculate_shift, retrieve_timesteps

        pipe = self.pipe
        if len(seeds) != len(groups) or not groups:
            raise ValueError("one seed per group, at least one group")
        sizes = {len(g) for g in groups}
        if len(sizes) != 1:
            raise ValueError("every group of a batch needs the same number of prompts")
        per_group = sizes.pop()
        if etas is not None and (per_group != 2 or len(etas) != len(groups)):
            raise ValueError("tying needs pairs of prompts [reference, guidance] and one schedule per pair")
        self.check_size(height, width)
        device = pipe._execution_device
        encoded = [
            pipe.encode_prompt(
                prompt=list(group), prompt_2=None, device=device, max_sequence_length=self.max_sequence_length
            )
            for group in groups
        ]
        prompt_embeds = torch.cat([e[0] for e in encoded])
        pooled_prompt_embeds = torch.cat([e[1] for e in encoded])
        text_ids = encoded[0][2]
        noises = []
        for seed in seeds:
            noise, latent_image_ids = self.initial_noise(seed, height, width, prompt_embeds.dtype)
            noises.append(noise.repeat(per_group, 1, 1))  # x_T^R = x_T^G
        latents = torch.cat(noises)

        scheduler = pipe.scheduler
        sigmas = np.linspace(1.0, 1 / num_inference_steps, num_inference_steps)
        if getattr(scheduler.config, "use_flow_sigmas", False):
            sigmas = None
        mu = calculate_shift(
            latents.shape[1],
            scheduler.config.get("base_image_seq_len", 256),
            scheduler.config.get("max_image_seq_len", 4096),
            scheduler.config.get("base_shift", 0.5),
            scheduler.config.get("max_shift", 1.15),
        )
        timesteps, _ = retrieve_timesteps(scheduler, num_inference_steps, device, sigmas=sigmas, mu=mu)
        if hasattr(scheduler, "set_begin_index"):
            scheduler.set_begin_index(0)
        # Diffusion time in [0, 1] (1 = noise) per step, read once: no host sync inside the loop.
        times = (timesteps.float() / scheduler.config.num_train_timesteps).tolist()
        schedules = list(etas) if etas is not None else [None] * len(groups)
        step_etas = [[float(eta(t)) if eta is not None else 0.0 for eta in schedules] for t in times]

        if pipe.transformer.config.guidance_embeds:
            guidance = torch.full([1], guidance_scale, device=device, dtype=torch.float32).expand(latents.shape[0])
        else:
            guidance = None
        cache_context = getattr(pipe.transformer, "cache_context", None)
        forward = self.transformer_forward
        for i, t in enumerate(timesteps):
            timestep = t.expand(latents.shape[0]).to(latents.dtype)
            call = dict(
                hidden_states=latents,
                timestep=timestep / 1000,
                guidance=guidance,
                pooled_projections=pooled_prompt_embeds,
                encoder_hidden_states=prompt_embeds,
                txt_ids=text_ids,
                img_ids=latent_image_ids,
                joint_attention_kwargs={},
                return_dict=False,
            )
            if forward is not None:  # a compiled package or a graph replay: the transformer's pass only
                noise_pred = forward(**call)[0]
            elif cache_context is not None:
                with cache_context("cond"):
                    noise_pred = pipe.transformer(**call)[0]
            else:  # pragma: no cover - diffusers without cache hooks
                noise_pred = pipe.transformer(**call)[0]
            if etas is not None and any(eta > 0.0 for eta in step_etas[i]):
                noise_pred = tie_pairs(noise_pred, step_etas[i])
            latents = scheduler.step(noise_pred, t, latents, return_dict=False)[0]
            if on_step is not None:
                on_step(i, times[i], step_etas[i], noise_pred, latents)
        per_pair_etas = [[step[g] for step in step_etas] for g in range(len(groups))]
        return GroupResult(latents=latents, times=times, etas=per_pair_etas, group_size=per_group)

    @torch.no_grad()
    def decode(self, latents: torch.Tensor, height: int, width: int, output_type: str = "pil"):
        """The pipeline's own VAE decoding (unpack, unscale, decode, post-process)."""
        pipe = self.pipe
        latents = pipe._unpack_latents(latents, height, width, pipe.vae_scale_factor)
        latents = (latents / pipe.vae.config.scaling_factor) + pipe.vae.config.shift_factor
        latents = latents.to(_execution_device(pipe.vae))
        image = pipe.vae.decode(latents, return_dict=False)[0]
        if not bool(torch.isfinite(image).all()):  # post-processing would turn it into a black image, silently
            raise ItemError(
                "the generated image came out NaN or infinite (an fp16 overflow?): try --dtype bf16 or fp32"
            )
        return pipe.image_processor.postprocess(image, output_type=output_type)

    # -- the two generation modes -----------------------------------------------------------------
    @torch.no_grad()
    def generate(
        self,
        *,
        prompt_reference: str,
        prompt_guidance: str | None,
        seed: int,
        params: TDGParams | None = None,
        **options: Any,
    ) -> GeneratedPair:
        """Generate one R image; ``options`` are :meth:`generate_batch`'s keywords (``mode``,
        ``height``, ``width``, ``num_inference_steps``, ``guidance_scale``, ``return_guidance``),
        with its defaults.

        ``mode="tdg"``: c_R and c_G from the same noise as one batch of 2, tied with the eta
        schedule of ``params``; the G image is decoded only when ``return_guidance``.
        ``mode="prompt-only"``: the paper's Fig. 4 baseline — c_R alone from the same noise the
        TDG run of this seed starts from, no tying.
        """
        return self.generate_batch([PairRequest(prompt_reference, prompt_guidance, seed, params)], **options)[0]

    @torch.no_grad()
    def generate_batch(
        self,
        requests: Sequence[PairRequest],
        *,
        mode: str = "tdg",
        height: int = DEFAULT_RESOLUTION,
        width: int = DEFAULT_RESOLUTION,
        num_inference_steps: int = DEFAULT_STEPS,
        guidance_scale: float = DEFAULT_GUIDANCE,
        return_guidance: bool = False,
    ) -> list[GeneratedPair]:
        """:meth:`generate` for several requests in one transformer batch (2 rows per TDG pair, 1
        per prompt-only image); each image is decoded on its own, as alone. On the CPU the images
        are byte-identical to one request at a time (tested); on a GPU, batched matmuls may pick
        other kernels (the device check states the PSNR)."""
        if mode == "tdg":
            if any(not r.prompt_guidance for r in requests):
                raise ValueError("TDG needs a guidance prompt")
            params = [r.params or TDGParams() for r in requests]
            result = self.denoise_groups(
                [[r.prompt_reference, r.prompt_guidance] for r in requests],
                seeds=[r.seed for r in requests],
                etas=[_schedule(p) for p in params],
                height=height,
                width=width,
                num_inference_steps=num_inference_steps,
                guidance_scale=guidance_scale,
            )
        elif mode == "prompt-only":
            result = self.denoise_groups(
                [[r.prompt_reference] for r in requests],
                seeds=[r.seed for r in requests],
                height=height,
                width=width,
                num_inference_steps=num_inference_steps,
                guidance_scale=guidance_scale,
            )
        else:
            raise ValueError(f"unknown mode {mode!r}; use 'tdg' or 'prompt-only'")
        pairs = []
        for index in range(len(requests)):
            rows = result.group(index)
            images = self.decode(rows if mode == "tdg" and return_guidance else rows[0:1], height, width)
            pairs.append(
                GeneratedPair(
                    reference=images[0],
                    guidance=images[1] if len(images) > 1 else None,
                    times=result.times,
                    etas=result.etas[index],
                )
            )
        self.pipe.maybe_free_model_hooks()
        return pairs

    # -- loading ----------------------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        model: str = DEFAULT_MODEL,
        *,
        revision: str | None = None,
        device: str = "auto",
        dtype: torch.dtype | None = None,
        offload: bool = False,
        max_sequence_length: int = DEFAULT_MAX_SEQUENCE_LENGTH,
    ) -> TDGFlux:
        """Load a FluxPipeline (HF id or local folder) with clear errors instead of stack traces.

        ``device="auto"`` uses CUDA when present; bf16 on CUDA and fp32 on CPU unless ``dtype``
        says otherwise; ``offload`` enables model CPU offload (CUDA only).
        """
        target = resolve_device(device, model=model, revision=revision, offload=offload)
        if dtype is None:
            dtype = torch.bfloat16 if target.type == "cuda" else torch.float32
        pipe = _load_pipeline(model, revision=revision, dtype=dtype)
        if offload:
            pipe.enable_model_cpu_offload(device=target)
        else:
            pipe.to(target)
        return cls(
            pipe,
            model_id=model,
            model_revision=resolve_revision(model, revision),
            max_sequence_length=max_sequence_length,
        )


# -- loading helpers ------------------------------------------------------------------------------
def _estimate_transformer_parameters(config: dict) -> int:
    """Rough parameter count of a FluxTransformer2DModel from its config (12B for FLUX.1-dev)."""
    inner = int(config.get("num_attention_heads", 24)) * int(config.get("attention_head_dim", 128))
    double = int(config.get("num_layers", 19)) * 24 * inner * inner  # two streams of attn + 4x MLP
    single = int(config.get("num_single_layers", 38)) * 12 * inner * inner
    return double + single


def _read_transformer_config(model: str, revision: str | None) -> dict | None:
    path = Path(model) / "transformer" / "config.json"
    if not path.is_file():
        try:
            from huggingface_hub import hf_hub_download

            path = Path(hf_hub_download(model, "transformer/config.json", revision=revision))
        except Exception:  # no network, gated, not a repo: loading will say why
            return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _gpu_help(model: str, revision: str | None) -> str:
    """What the GPU is for, in terms of the model asked for (FLUX.1-dev's 12B text only for a large one)."""
    config = _read_transformer_config(model, revision)
    if config is None:
        return GPU_HELP if model == DEFAULT_MODEL else "--device cpu forces a CPU run"
    parameters = _estimate_transformer_parameters(config)
    if parameters > CPU_PARAMETER_LIMIT:
        if model == DEFAULT_MODEL:
            return GPU_HELP
        return f"{model} (~{parameters / 1e9:.1f}B transformer parameters) needs a CUDA GPU; --device cpu forces a (very slow) CPU run"
    return f"{model} is small (~{parameters / 1e6:.1f}M transformer parameters) and runs on the CPU: pass --device cpu or auto"


def resolve_device(device: str, *, model: str, revision: str | None = None, offload: bool = False) -> torch.device:
    """Pick the device, refusing a CPU run of a full-size FLUX unless asked for explicitly."""
    cuda = torch.cuda.is_available()
    if device not in {"auto", "cuda", "cpu"} and not device.startswith("cuda:"):
        raise InvalidArgumentError(f"unknown --device {device!r}; use auto, cuda, cuda:N or cpu")
    if device.startswith("cuda") and not cuda:
        raise DeviceUnavailableError(f"--device {device} but no CUDA GPU is visible; {_gpu_help(model, revision)}")
    if offload and not cuda:
        raise DeviceUnavailableError("--offload moves FLUX between CPU and a CUDA GPU, but no CUDA GPU is visible")
    if device in {"auto", "cuda"} and cuda:
        # Under accelerate launch / torchrun every rank takes its own GPU.
        return torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}")
    if device == "auto":
        config = _read_transformer_config(model, revision)
        too_big = (
            model == DEFAULT_MODEL if config is None else _estimate_transformer_parameters(config) > CPU_PARAMETER_LIMIT
        )
        if too_big:
            import huggingface_hub.constants

            uncached = ""
            if (
                config is None and huggingface_hub.constants.HF_HUB_OFFLINE
            ):  # the weights are the other half of the story
                from conceptforge.external_errors import offline_fix, offline_reason

                uncached = f"; also, {offline_reason()} and {model} is not in the local cache: {offline_fix()}"
            raise DeviceUnavailableError(f"no CUDA GPU found for {model}: {_gpu_help(model, revision)}{uncached}")
        return torch.device("cpu")
    return torch.device(device)


def _dtype_kwarg(dtype: torch.dtype) -> dict:
    """``dtype=`` where diffusers has it (``torch_dtype`` is deprecated there), else ``torch_dtype=``."""
    from diffusers.pipelines import pipeline_utils

    return {"dtype": dtype} if hasattr(pipeline_utils, "_resolve_dtype") else {"torch_dtype": dtype}


def _load_pipeline(model: str, *, revision: str | None, dtype: torch.dtype):
    from diffusers import FluxPipeline

    from conceptforge.external_errors import model_unavailable

    problem = model_unavailable(model)  # a mistyped folder, or an uncached model offline
    if problem is not None:
        raise WeightsUnavailableError(f"--model: {problem}")
    local = Path(model)
    looks_local = local.is_absolute() or model.startswith(".") or local.exists()
    if looks_local and not (local / "model_index.json").is_file():
        raise WeightsUnavailableError(f"--model {model} is not a FLUX pipeline folder (no model_index.json)")
    quiet_model_library_bars()  # "Loading pipeline components..." writes \r frames into logs otherwise
    try:
        pipeline = FluxPipeline.from_pretrained(model, revision=revision, **_dtype_kwarg(dtype))
        quiet_model_library_bars(pipeline)
        return pipeline
    except (OSError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if looks_local:
            raise WeightsUnavailableError(f"cannot load the FLUX pipeline in {model}: {reason}") from None
        raise WeightsUnavailableError(f"cannot load {model} ({type(error).__name__}); {GATED_HELP}") from None


_SNAPSHOT = re.compile(r"[\\/]snapshots[\\/]([0-9a-f]{40})[\\/]")


def resolve_revision(model: str, revision: str | None) -> str:
    """The commit a Hub model resolved to (from the local cache), or a local folder's
    ``local-sha256:`` fingerprint (:func:`conceptforge.cards.provenance.resolve_model_revision`,
    the spelling every other model of a card has).

    Recorded with every image so a dataset says exactly which weights made it.
    """
    if Path(model).exists():
        from conceptforge.cards.provenance import resolve_model_revision

        return resolve_model_revision(model, revision)
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "model_index.json", revision=revision)
        if isinstance(cached, str):
            match = _SNAPSHOT.search(cached.replace(os.sep, "/") if os.sep != "/" else cached)
            if match:
                return match.group(1)
    except Exception:  # pragma: no cover - cache layout changes
        logger.debug("could not resolve the revision of %s", model, exc_info=True)
    return revision or "main"
