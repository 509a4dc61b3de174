"""The fast paths of ``generate sub`` on a loaded FLUX pipeline (docs/sub.md, "Fast paths").

Each is an option, off by default, and a stored setting of the run (``GenerationSettings``):
``--attention-backend`` (diffusers' kernel choice; ``best``: FA3 where installed, cuDNN SDPA
otherwise), ``--fuse-qkv`` (one matmul for q, k and v), ``--quantize`` (torchao: weight-only int8 /
fp8, or ``fp8-dynamic``, activations and weights in fp8 with per-row scales), ``--compile`` /
``--aot`` with ``--compile-mode`` (torch.compile, or an ahead-of-time compiled package cached on
disk: :mod:`generators.sub.aot`), ``--cuda-graphs`` (:mod:`generators.sub.cuda_graphs`) and
``--vae-channels-last``; ``--fast`` is all of them at once (:func:`fast_recipe`), the flux-fast
recipe; ``--pairs-per-batch`` is the stage's batching. Every one of them changes only what runs
inside the transformer (or the VAE): TDG's etas are Python floats computed before the step loop
and the tie (per-pair threshold, mean) runs eagerly between two transformer calls, so the tie is
exact in every path. Whether any is faster is for the GPU device check (benchmarks/_gpu_fast.py).
"""

from __future__ import annotations

import importlib.util
import logging
from typing import TYPE_CHECKING, Any, Protocol

from conceptforge.errors import DependencyMissingError, DeviceUnavailableError, InvalidArgumentError
from conceptforge.generators.sub.flux_tdg import _execution_device
from conceptforge.generators.sub.options import (  # noqa: F401 (importable from here too)
    ATTENTION_BACKENDS,
    COMPILE_MODES,
    CUDA_ATTENTION_BACKENDS,
    FP8_MODES,
    QUANTIZE_MODES,
)

if TYPE_CHECKING:
    from conceptforge.generators.sub.flux_tdg import TDGFlux


class FastPathSettings(Protocol):
    """What :func:`apply_fast_paths` reads of a run's settings (``stage.GenerationSettings``,
    which imports this module: a protocol, not that class, keeps the two free of a cycle)."""

    attention_backend: str | None
    quantize: str | None
    compile: bool
    # fuse_qkv, compile_mode, aot, cuda_graphs and vae_channels_last are read with getattr and
    # their defaults: settings objects written before they existed still apply.


#: fp8 matmuls need Ada (8.9) or Hopper (9.0) tensor cores; older GPUs and CPUs have none.
FP8_MIN_CAPABILITY = (8, 9)


def check_quantize_name(mode: str | None) -> None:
    if mode is not None and mode not in QUANTIZE_MODES:
        raise InvalidArgumentError(
            f"unknown --quantize {mode!r}; use one of {', '.join(QUANTIZE_MODES)} (or leave it off)"
        )


def _quantize_config(mode: str):
    """torchao's config for ``mode``, torchao imported with torch's deprecation notes about it
    (logged once per enum at import, not ours to fix) kept out of the one-line errors and logs."""
    pytree = logging.getLogger("torch.utils._pytree")
    level = pytree.level
    pytree.setLevel(logging.ERROR)
    try:
        from torchao.quantization import (
            Float8DynamicActivationFloat8WeightConfig,
            Float8WeightOnlyConfig,
            Int8WeightOnlyConfig,
            PerRow,
        )
    except ImportError as error:
        import torch

        if importlib.util.find_spec("torchao") is None:
            raise DependencyMissingError(
                f"--quantize {mode} needs torchao: pip install 'conceptforge[quantize]' (or pip install torchao)"
            ) from None
        raise DependencyMissingError(  # installed, but built for another torch
            f"--quantize {mode}: torchao does not import beside torch {torch.__version__} "
            f"({str(error).strip().splitlines()[0]}): install the torchao release made for this torch"
        ) from None
    finally:
        pytree.setLevel(level)
    if mode == "fp8-dynamic":
        return Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())
    return Int8WeightOnlyConfig() if mode == "int8-weight" else Float8WeightOnlyConfig()


def check_quantize(mode: str | None, device: Any) -> None:
    """Refuse a ``--quantize`` this machine cannot run, before any model loads or anything is
    written: an unknown name, fp8 without a GPU of compute capability >= 8.9, torchao missing.
    ``device`` is ``generate sub``'s ``--device`` ("auto", "cpu", "cuda:N") or a ``torch.device``."""
    if not mode:
        return
    check_quantize_name(mode)
    if mode in FP8_MODES:
        check_fp8_device(f"--quantize {mode}", device, "use --quantize int8-weight or leave --quantize off")
    _quantize_config(mode)


def target_device(device: Any):
    """``--device`` ("auto", "cpu", "cuda:N") or a ``torch.device`` as the device the run uses."""
    import torch

    name = str(device)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def check_fp8_device(what: str, device: Any, fix: str) -> None:
    """Refuse ``what`` (an fp8 option) unless the run's device is a CUDA GPU of compute capability
    >= 8.9 (Ada, Hopper): their tensor cores are the only ones with fp8 matmuls."""
    import torch

    target = target_device(device)
    if target.type != "cuda" or not torch.cuda.is_available():
        raise DeviceUnavailableError(
            f"{what} needs a CUDA GPU of compute capability >= 8.9 (Ada, Hopper); this run is on {target.type}: {fix}"
        )
    capability = torch.cuda.get_device_capability(target)
    if capability < FP8_MIN_CAPABILITY:
        raise DeviceUnavailableError(
            f"{what} needs compute capability >= 8.9 (Ada, Hopper); "
            f"{torch.cuda.get_device_name(target)} has {capability[0]}.{capability[1]}: {fix}"
        )


def flash_attention_3_installed() -> bool:
    """Whether diffusers' ``_flash_3`` backend can run: the FA3 package (``flash_attn_interface``,
    built for Hopper) imports."""
    return importlib.util.find_spec("flash_attn_interface") is not None


def resolve_attention_backend(name: str | None, device: Any) -> str | None:
    """``best`` as the fastest kernel this machine has: FA3 on a Hopper GPU where installed, cuDNN
    SDPA on other CUDA GPUs, PyTorch's own SDPA choice (``native``) on a CPU. Other names as given."""
    if name != "best":
        return name
    import torch

    target = target_device(device)
    if target.type != "cuda" or not torch.cuda.is_available():
        return "native"
    if flash_attention_3_installed() and torch.cuda.get_device_capability(target) >= (9, 0):
        return "_flash_3"
    return "_native_cudnn"


def fast_recipe(device: Any) -> dict[str, Any]:
    """``--fast``: every part at once (flux-fast's recipe), as the settings it stands for. Refused
    in one line where it cannot run whole (fp8 matmuls and CUDA graphs need an Ada/Hopper GPU):
    the parts that run elsewhere are options of their own."""
    check_fp8_device(
        "--fast",
        device,
        "its parts that run here are --fuse-qkv, --compile or --aot, --vae-channels-last (and --quantize int8-weight)",
    )
    return {
        "fuse_qkv": True,
        "quantize": "fp8-dynamic",
        "aot": True,
        "compile_mode": "max-autotune",
        "cuda_graphs": True,
        "attention_backend": resolve_attention_backend("best", device),
        "vae_channels_last": True,
    }


def check_fast_paths(settings: FastPathSettings, device: Any) -> None:
    """Everything about the fast paths that can be refused before a model loads or anything is
    written: a quantisation this machine cannot run, CUDA graphs or a CUDA kernel off CUDA, a
    compile mode without a compile, two compiles at once."""
    check_quantize(settings.quantize, device)
    target = target_device(device)
    aot, compile_mode = getattr(settings, "aot", False), getattr(settings, "compile_mode", None)
    if settings.compile and aot:
        raise InvalidArgumentError("--compile and --aot both compile the transformer: choose one")
    if compile_mode is not None and compile_mode not in COMPILE_MODES:
        raise InvalidArgumentError(f"unknown --compile-mode {compile_mode!r}; use one of {', '.join(COMPILE_MODES)}")
    if compile_mode is not None and not (settings.compile or aot):
        raise InvalidArgumentError(f"--compile-mode {compile_mode} needs --compile or --aot")
    if getattr(settings, "cuda_graphs", False) and target.type != "cuda":
        raise DeviceUnavailableError(
            f"--cuda-graphs replays the transformer's GPU kernels: it needs a CUDA GPU; this run is on {target.type}"
        )
    if settings.attention_backend in CUDA_ATTENTION_BACKENDS and target.type != "cuda":
        raise InvalidArgumentError(
            f"--attention-backend {settings.attention_backend} is a CUDA kernel; this run is on {target.type}"
        )
    if settings.attention_backend == "_flash_3" and not flash_attention_3_installed():
        raise DependencyMissingError(
            "--attention-backend _flash_3 needs Flash-Attention 3 (flash_attn_interface, built from "
            "Dao-AILab/flash-attention's hopper/ folder); --attention-backend best picks cuDNN SDPA without it"
        )


def quantize_transformer(transformer: Any, mode: str) -> None:
    """Weight-only ``mode`` quantisation of every Linear layer of the loaded transformer, in place
    (torchao's ``quantize_``). Why after loading, not diffusers' ``TorchAoConfig`` at
    ``from_pretrained``: the same call then serves a loaded generator passed in, ``verify``'s
    rebuild and the device check, from the same plain checkpoint. Applying the same mode twice is a
    no-op (a reused generator); another mode on top would quantise twice and is refused."""
    done = getattr(transformer, "_conceptforge_quantize", None)
    if done == mode:
        return
    if done is not None:
        raise InvalidArgumentError(f"the transformer is already quantised ({done}); load the model again for {mode}")
    check_quantize(mode, _execution_device(transformer))  # with --offload: the GPU it runs on, not the CPU it waits on
    from torchao.quantization import quantize_

    quantize_(transformer, _quantize_config(mode))
    transformer._conceptforge_quantize = mode


def apply_fast_paths(generator: TDGFlux, settings: FastPathSettings, *, compile_cache: Any = None) -> None:
    """The run's fast paths on the loaded pipeline, in place, in the one order that composes:
    attention backend, fused q/k/v (before quantising: the fused Linear is what gets quantised),
    quantisation, VAE channels-last, then the compile (``--compile``: torch.compile of the module;
    ``--aot``: an ahead-of-time compiled package from ``compile_cache``, a local folder, built once
    per shape; None: a temporary folder) of what the steps before made, and CUDA graphs around
    whichever transformer call that leaves."""
    transformer = generator.pipe.transformer
    if settings.attention_backend:
        set_attention_backend(transformer, settings.attention_backend)
    if getattr(settings, "fuse_qkv", False):
        fuse_qkv(transformer)
    if settings.quantize:
        quantize_transformer(transformer, settings.quantize)
    if getattr(settings, "vae_channels_last", False):
        import torch

        generator.pipe.vae.to(memory_format=torch.channels_last)
    compile_mode = getattr(settings, "compile_mode", None) or "default"
    if settings.compile and transformer._compiled_call_impl is None:
        _set_inductor_flags(compile_mode)
        # nn.Module.compile: in place, the module keeps its class and config; fullgraph: a graph
        # break would be an error, not a silent slow path. Inductor's own CUDA graphs stay off
        # (they are --cuda-graphs).
        mode = "max-autotune-no-cudagraphs" if compile_mode == "max-autotune" else None
        transformer.compile(fullgraph=True, mode=mode)
    if getattr(settings, "aot", False) and generator.transformer_forward is None:
        from conceptforge.generators.sub.aot import AotTransformer

        generator.transformer_forward = AotTransformer(
            transformer,
            compile_cache,
            model=f"{generator.model_id}@{generator.model_revision}",
            transforms=transform_names(settings),
            max_autotune=compile_mode == "max-autotune",
        )
    if getattr(settings, "cuda_graphs", False) and not getattr(generator.transformer_forward, "cuda_graphs", False):
        from conceptforge.generators.sub.cuda_graphs import CudaGraphForward

        generator.transformer_forward = CudaGraphForward(generator.transformer_forward or transformer)


def transform_names(settings: FastPathSettings) -> dict[str, Any]:
    """What was done to the transformer before it is compiled ahead of time: part of the compile
    cache's key (a package built from a differently transformed model is foreign)."""
    return {
        "attention_backend": settings.attention_backend or "native",
        "fuse_qkv": bool(getattr(settings, "fuse_qkv", False)),
        "quantize": settings.quantize,
        "compile_mode": getattr(settings, "compile_mode", None) or "default",
    }


def set_attention_backend(transformer: Any, backend: str) -> None:
    device = next(transformer.parameters()).device
    if backend in CUDA_ATTENTION_BACKENDS and device.type != "cuda":
        raise InvalidArgumentError(f"--attention-backend {backend} is a CUDA kernel; the transformer is on {device}")
    if backend == "best":
        backend = resolve_attention_backend(backend, device) or "native"
    if not hasattr(transformer, "set_attention_backend"):
        raise DependencyMissingError("--attention-backend needs diffusers >= 0.35 (set_attention_backend)")
    try:
        transformer.set_attention_backend(backend)
    except (ValueError, RuntimeError, ImportError) as error:
        raise InvalidArgumentError(f"--attention-backend {backend}: {str(error).strip().splitlines()[0]}") from None


def fuse_qkv(transformer: Any) -> None:
    """diffusers' ``fuse_qkv_projections``: q, k and v (and the text stream's added q, k, v) of
    every attention as one Linear whose weight is the three stacked, so one matmul reads the
    input once. The same products, summed in the same order per output: exact (tested on the
    tiny FLUX). Twice is a no-op (a reused generator)."""
    if getattr(transformer, "_conceptforge_fused_qkv", False):
        return
    if getattr(transformer, "_conceptforge_quantize", None):
        raise InvalidArgumentError("--fuse-qkv on an already quantised transformer: load the model again")
    transformer.fuse_qkv_projections()
    transformer._conceptforge_fused_qkv = True


def _set_inductor_flags(compile_mode: str) -> None:
    if compile_mode == "max-autotune":
        import torch._inductor.config as inductor

        from conceptforge.generators.sub.aot import MAX_AUTOTUNE_INDUCTOR_FLAGS

        for name, value in MAX_AUTOTUNE_INDUCTOR_FLAGS.items():
            setattr(inductor, name, value)
