"""Devices, memory limits and dtypes. The device check (:func:`check_device`) is shared with library
code: a ``--device cuda`` on a machine without CUDA is one
:class:`~conceptforge.errors.DeviceUnavailableError` line whether the command line or a library
caller asked for it.
"""

from __future__ import annotations

import argparse
import re

from conceptforge.argtypes.base import ArgType, Examples
from conceptforge.errors import DeviceUnavailableError, InvalidArgumentError

_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def check_device(name: str | None, *, flag: str = "--device") -> str | None:
    """Refuse a device this machine does not have: one :class:`DeviceUnavailableError` line.

    ``None`` and ``auto`` mean "CUDA when there is one" and always pass; other torch device types
    (``xpu`` …) are left to torch. Why here: every model loader (VQA, oracles, CLIP, FLUX) used to
    fail on its own, most with a torch traceback; the command line's ``--device`` type and the
    loaders all call this.
    """
    if name is None:
        return None
    if re.match(r"^cuda(:|$)", name) and not _DEVICE.match(name):
        raise InvalidArgumentError(f"{flag}: unknown device {name!r}: use cpu, cuda, cuda:N, mps or auto")
    if name.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise DeviceUnavailableError(
                f"{flag} {name}: no CUDA GPU is visible on this machine "
                "(check nvidia-smi and CUDA_VISIBLE_DEVICES, or pass --device cpu)"
            )
        index = int(name.split(":", 1)[1]) if ":" in name else 0
        if index >= torch.cuda.device_count():
            raise DeviceUnavailableError(f"{flag} {name}: only {torch.cuda.device_count()} CUDA GPU(s) are visible")
    elif name == "mps":
        import torch

        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise DeviceUnavailableError(f"{flag} mps: Apple's Metal backend is not available here")
    return name


class DeviceType(ArgType):
    """``--device``: cpu, cuda, cuda:N, mps or auto; with ``check=True`` the machine must have it.
    ``checked_in_run``: the command checks the machine itself, first thing in its run, after
    refusing the flag where it does not apply (``evaluate`` with a served model)."""

    def __init__(self, *, check: bool = True, checked_in_run: bool = False) -> None:
        self.check = check
        self.checked_in_run = checked_in_run
        self.__name__ = "device"

    def __call__(self, text: str) -> str:
        text = str(text).strip()
        if not _DEVICE.match(text):
            raise argparse.ArgumentTypeError(f"unknown device {text!r}: use cpu, cuda, cuda:N, mps or auto")
        # DeviceUnavailableError is no ValueError: argparse lets it through as our own one line.
        return check_device(text) if self.check else text

    def good_example(self, paths: Examples) -> str:
        return "cpu"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["tpu", "cuda:x", ""]


device = DeviceType()
device_name = DeviceType(check=False)  # checked when the model loads (a --dry-run needs no GPU)
device_checked_in_run = DeviceType(check=False, checked_in_run=True)  # evaluate: a served model takes no --device


class MaxMemory(ArgType):
    """``--max-memory 0=20GiB,1=20GiB,cpu=64GiB``: accelerate's per-device limits for a model split
    by ``--device-map`` (GPU index, ``cpu`` or ``mps`` = size), as ``{device: bytes}``; a GPU
    this machine does not have is refused now, not ignored by the placement later."""

    __name__ = "max_memory"

    def __call__(self, text: str) -> dict:
        from conceptforge.placement import check_gpus, parse_max_memory

        try:
            limits = parse_max_memory(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        check_gpus(limits)  # DeviceUnavailableError: our own one line through argparse
        return limits

    def good_example(self, paths: Examples) -> str:
        return "cpu=64GiB"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["20GiB", "cpu=lots", "tpu=1GiB", "cpu=1GiB,cpu=2GiB", ""]


max_memory = MaxMemory()
#: The number formats a model runs in, spelled one way for every command (torch's names); ``auto``
#: lets the command choose (bfloat16 on CUDA, float32 on the CPU). Before, ``evaluate`` took
#: ``float16``, ``generate sub`` ``fp16`` and ``generate conceptbed --mixed-precision`` ``fp16``/``no``.
DTYPES = ("auto", "float32", "float16", "bfloat16")
#: The other spellings, still accepted (documented in docs/evaluation.md, "--dtype"): each reads as its DTYPES name.
DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "no": "float32"}
#: The short names the SUB generator and accelerate's ``mixed_precision`` store.
SHORT_DTYPES = {"auto": "auto", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


class DType(ArgType):
    """One of :data:`DTYPES`, or an alias of one (returned as its :data:`DTYPES` name): the one
    choices list of every ``--dtype`` flag."""

    def __init__(self) -> None:
        self.__name__ = "dtype"
        self.choices = DTYPES

    def __call__(self, text: str) -> str:
        value = str(text).strip().lower()
        value = DTYPE_ALIASES.get(value, value)
        if value not in DTYPES:
            aliases = ", ".join(f"{a}={n}" for a, n in DTYPE_ALIASES.items())
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(DTYPES)} (aliases: {aliases}), got {text!r}")
        return value

    def good_example(self, paths: Examples) -> str:
        return "bf16"

    def bad_examples(self, paths: Examples) -> list[str]:
        return ["float8", "half", ""]


dtype = DType()
