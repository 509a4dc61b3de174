"""The fast paths of ``generate sub`` on a loaded FLUX transformer (docs/sub.md, "Fast paths").

Each is an option, off by default, and a stored setting of the run (``GenerationSettings``):
``--attention-backend`` (diffusers' SDPA kernel choice), ``--quantize`` (torchao weight-only int8
/ fp8 of the Linear layers) and ``--compile``; ``--pairs-per-batch`` is the stage's batching.
None touches TDG's step loop, so the tie stays exact and the loop never waits for the GPU.
Whether any is faster is for the GPU device check (benchmarks/gpu.py) to show.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import TYPE_CHECKING, Any, Protocol

from conceptforge.errors import DependencyMissingError, DeviceUnavailableError, InvalidArgumentError
from conceptforge.generators.sub.flux_tdg import _execution_device

if TYPE_CHECKING:
    from conceptforge.generators.sub.flux_tdg import TDGFlux


class FastPathSettings(Protocol):
    """What :func:`apply_fast_paths` reads of a run's settings (``stage.GenerationSettings``,
    which imports this module: a protocol, not that class, keeps the two free of a cycle)."""

    attention_backend: str | None
    quantize: str | None
    compile: bool


#: diffusers' names of PyTorch's SDPA kernels (``native`` lets PyTorch choose, the default).
ATTENTION_BACKENDS = ("native", "_native_cudnn", "_native_flash", "_native_efficient", "_native_math")
CUDA_ATTENTION_BACKENDS = ("_native_cudnn", "_native_flash", "_native_efficient")
#: ``--quantize``: torchao's weight-only configs for the transformer's Linear layers, applied to the
#: loaded bf16/fp32 model (a plain checkpoint: nothing quantised is stored or downloaded).
QUANTIZE_MODES = ("int8-weight", "fp8-weight")
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
        from torchao.quantization import Float8WeightOnlyConfig, Int8WeightOnlyConfig
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
    return Int8WeightOnlyConfig() if mode == "int8-weight" else Float8WeightOnlyConfig()


def check_quantize(mode: str | None, device: Any) -> None:
    """Refuse a ``--quantize`` this machine cannot run, before any model loads or anything is
    written: an unknown name, fp8 without a GPU of compute capability >= 8.9, torchao missing.
    ``device`` is ``generate sub``'s ``--device`` ("auto", "cpu", "cuda:N") or a ``torch.device``."""
    if not mode:
        return
    check_quantize_name(mode)
    if mode == "fp8-weight":
        import torch

        name = str(device)
        if name == "auto":
            name = "cuda" if torch.cuda.is_available() else "cpu"
        target = torch.device(name)
        if target.type != "cuda" or not torch.cuda.is_available():
            raise DeviceUnavailableError(
                f"--quantize fp8-weight needs a CUDA GPU of compute capability >= 8.9 (Ada, Hopper); "
                f"this run is on {target.type}: use --quantize int8-weight or leave --quantize off"
            )
        capability = torch.cuda.get_device_capability(target)
        if capability < FP8_MIN_CAPABILITY:
            raise DeviceUnavailableError(
                f"--quantize fp8-weight needs compute capability >= 8.9 (Ada, Hopper); "
                f"{torch.cuda.get_device_name(target)} has {capability[0]}.{capability[1]}: use --quantize int8-weight"
            )
    _quantize_config(mode)


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


def apply_fast_paths(generator: TDGFlux, settings: FastPathSettings) -> None:
    """``--attention-backend``, ``--quantize`` and ``--compile`` on the loaded transformer (in
    place; quantised before it is compiled, so the compiled graph has the quantised matmuls)."""
    transformer = generator.pipe.transformer
    if settings.attention_backend:
        device = next(transformer.parameters()).device
        if settings.attention_backend in CUDA_ATTENTION_BACKENDS and device.type != "cuda":
            raise InvalidArgumentError(
                f"--attention-backend {settings.attention_backend} is a CUDA kernel; the transformer is on {device}"
            )
        if not hasattr(transformer, "set_attention_backend"):
            raise DependencyMissingError("--attention-backend needs diffusers >= 0.35 (set_attention_backend)")
        try:
            transformer.set_attention_backend(settings.attention_backend)
        except (ValueError, RuntimeError, ImportError) as error:
            raise InvalidArgumentError(
                f"--attention-backend {settings.attention_backend}: {str(error).strip().splitlines()[0]}"
            ) from None
    if settings.quantize:
        quantize_transformer(transformer, settings.quantize)
    if settings.compile:
        transformer.compile()  # nn.Module.compile: in place, the module keeps its class and config
