"""The SUB generator's defaults and the values its options accept, as plain data.

Why a module of their own: ``conceptforge generate sub --help``, ``--dry-run`` and a spec check
show these and need nothing else of the generator. Where they lived beside the model code
(``flux_tdg``, ``stage``, ``fast_paths``) every one of those commands imported torch and
``datasets`` first, two to three seconds on a login node. Those modules import them from here, and
their names stay importable there too.
"""

from __future__ import annotations

DEFAULT_MODEL = "black-forest-labs/FLUX.1-dev"
DEFAULT_RESOLUTION = 1024
DEFAULT_STEPS = 28
DEFAULT_GUIDANCE = 3.5
DEFAULT_MAX_SEQUENCE_LENGTH = 512

CHUNK_SIZE = 8  # FLUX images per store chunk: a kill loses at most one chunk
MODES = ("tdg", "prompt-only")
#: The published SUB's license; the documented default for images made with FLUX.1-dev, whose
#: weights are under the FLUX.1 [dev] Non-Commercial License (CUB itself is for research use).
FLUX_DEV_DEFAULT_LICENSE = "cc-by-nc-4.0"

#: diffusers' names of PyTorch's SDPA kernels (``native`` lets PyTorch choose, the default).
#: ``_flash_3``: Flash-Attention 3 (``flash_attn_interface``, Hopper), where installed. ``best`` is not
#: stored: ``resolve_attention_backend`` turns it into the kernel this machine has before the run starts.
ATTENTION_BACKENDS = (
    "native",
    "best",
    "_flash_3",
    "_native_cudnn",
    "_native_flash",
    "_native_efficient",
    "_native_math",
)
CUDA_ATTENTION_BACKENDS = ("_flash_3", "_native_cudnn", "_native_flash", "_native_efficient")
#: ``--quantize``: torchao's configs for the transformer's Linear layers, applied to the loaded
#: bf16/fp32 model (a plain checkpoint: nothing quantised is stored or downloaded). ``fp8-dynamic``:
#: activations (per token row, scaled at run time) and weights (per output row) in float8, matmuls
#: in fp8 (``Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())``, flux-fast's choice).
QUANTIZE_MODES = ("int8-weight", "fp8-weight", "fp8-dynamic")
FP8_MODES = ("fp8-weight", "fp8-dynamic")
#: ``--compile-mode``: inductor's ``default``, or ``max-autotune`` (GEMM autotuning and flux-fast's
#: inductor flags) without inductor's own CUDA graphs: those are ``--cuda-graphs``, a part of its own.
COMPILE_MODES = ("default", "max-autotune")
