"""Models larger than one GPU: ``--device-map`` and ``--max-memory`` (accelerate's big-model loading).

Why through ``from_pretrained``: transformers hands ``device_map``, ``max_memory`` and
``offload_folder`` to accelerate, which sizes every module on the meta device, places whole
blocks (``_no_split_modules``) on the GPUs in order, then the CPU, then the disk, and hooks each
module so its weights come to the execution device for its forward. The model's numbers do not
change: the same weights run the same operations, only where they live moves. Every
transformers family takes it (dual encoders, ITM heads, generative VLMs); open_clip, diffusers
and a CBM factory load their own way and refuse it in one line, before anything loads.

On a machine without GPUs the map has only ``cpu`` and ``disk``: ``--max-memory cpu=200KiB``
splits a tiny model between memory and ``--offload-folder`` (a stand-in for several GPUs that the
tests use). The run records the placement in the results' ``settings`` (``device_map``,
``max_memory``) and the map accelerate chose is logged.
"""

from __future__ import annotations

import functools
import logging
import re
import tempfile
import warnings
from dataclasses import dataclass
from typing import Any

from conceptforge.errors import InvalidArgumentError

logger = logging.getLogger(__name__)

DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")
#: The families whose adapters load through transformers' from_pretrained (the ones a map applies to).
PLACEABLE_FAMILIES = ("clip", "itm", "vlm")

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]I?B|B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``20GiB``, ``500MB``, ``1.5GB`` or a number of bytes -> bytes (ValueError otherwise)."""
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a size (e.g. 20GiB, 500MB, 1.5GB)")
    value = float(match.group(1)) * _UNITS[(match.group(2) or "").upper()]
    if value < 1:
        raise ValueError(f"{text!r} is not a positive size")
    return int(value)


def parse_max_memory(text: str) -> dict[int | str, int]:
    """``0=20GiB,1=20GiB,cpu=64GiB`` -> ``{0: bytes, 1: bytes, "cpu": bytes}`` (ValueError: why not)."""
    limits: dict[int | str, int] = {}
    for part in [p.strip() for p in str(text).split(",") if p.strip()] or [""]:
        device, equals, size = part.partition("=")
        device = device.strip().lower()
        if not equals or not device:
            raise ValueError(f"{part!r} is not DEVICE=SIZE (e.g. 0=20GiB,cpu=64GiB)")
        key: int | str
        if device.isdigit():
            key = int(device)
        elif device.startswith("cuda:") and device[5:].isdigit():
            key = int(device[5:])
        elif device in ("cpu", "mps"):
            key = device
        else:
            raise ValueError(f"device {device!r}: use a GPU index (0, 1, …), cpu or mps")
        if key in limits:
            raise ValueError(f"device {device!r} is given twice")
        limits[key] = parse_size(size)
    return limits


def check_gpus(limits: dict[int | str, int], flag: str = "--max-memory") -> None:
    """A GPU index the machine does not have is one line now, not a placement that ignores it."""
    from conceptforge.errors import DeviceUnavailableError

    gpus = [key for key in limits if isinstance(key, int)]
    if not gpus:
        return
    import torch

    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    missing = [g for g in gpus if g >= visible]
    if missing:
        raise DeviceUnavailableError(
            f"{flag}: GPU {missing[0]} is not visible here ({visible} CUDA GPU(s)); "
            "name the GPUs by index 0.. or give cpu=SIZE only"
        )


def size_text(size: int) -> str:
    """Bytes in the largest unit that divides them exactly (``20GiB``, ``200KB``), else bytes."""
    for unit in ("TiB", "TB", "GiB", "GB", "MiB", "MB", "KiB", "KB"):
        if size % _UNITS[unit.upper()] == 0:
            return f"{size // _UNITS[unit.upper()]}{unit}"
    return str(size)


@dataclass(frozen=True)
class Placement:
    """Where a model's weights go: accelerate's ``device_map`` strategy, per-device limits in
    bytes (GPU index, ``cpu``, ``mps``) and the folder for what goes to ``disk``."""

    device_map: str = "auto"
    max_memory: tuple[tuple[int | str, int], ...] = ()
    offload_folder: str | None = None

    def record(self) -> dict[str, Any]:
        """What the results' ``settings`` keep: the strategy and the limits (the folder is a path
        on one machine, not a property of the numbers)."""
        return {
            "device_map": self.device_map,
            "max_memory": {str(k): size_text(v) for k, v in self.max_memory} or None,
        }

    def from_pretrained_kwargs(self) -> dict[str, Any]:
        """``device_map``, ``max_memory`` and ``offload_folder`` for transformers' from_pretrained
        (a temporary folder when none was given, removed when the process exits: offloaded
        weights are a copy, made per load)."""
        quiet_accelerate_notes()
        folder = self.offload_folder
        if folder is None:
            import atexit
            import shutil

            folder = tempfile.mkdtemp(prefix="conceptforge-offload-")
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
        kwargs: dict[str, Any] = {"device_map": self.device_map, "offload_folder": folder}
        if self.max_memory:
            kwargs["max_memory"] = dict(self.max_memory)
        return kwargs


#: What accelerate says in every run that offloads as asked: notes, not problems (the map it chose
#: is logged by :func:`input_device`). A warning of its own (``warnings.warn``) and a log line.
_ACCELERATE_NOTES = (
    r"The following device_map keys do not match any submodules",  # a top-level parameter (CLIP's logit_scale)
    r"Some parameters are on the meta device because they were offloaded",
)


class _AccelerateNotes(logging.Filter):
    """Moves accelerate's offload notes to a debug line of ``conceptforge.placement``."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if any(re.match(note, message) for note in _ACCELERATE_NOTES):
            logger.debug("accelerate: %s", message)
            return False
        return True


def quiet_accelerate_notes() -> None:
    """Keep a clean offload run's output clean (issue 45.8: two accelerate lines in every one):
    its notes on offloaded parameters and unmatched map keys go to debug, under conceptforge.
    Other accelerate warnings still show. Called whenever a map is used (the warnings filter is
    per ``catch_warnings`` context; the same filter again replaces the first)."""
    _filter_accelerate_logs()
    warnings.filterwarnings("ignore", message=_ACCELERATE_NOTES[0], category=UserWarning)


@functools.cache
def _filter_accelerate_logs() -> None:
    for name in ("accelerate.big_modeling", "accelerate.utils.modeling"):
        logging.getLogger(name).addFilter(_AccelerateNotes())


def make_placement(
    device_map: str | None, max_memory: dict[int | str, int] | None, offload_folder: str | None, *, device: str | None
) -> Placement | None:
    """The run's :class:`Placement` from its flags (None: the model goes whole to ``--device``);
    the combinations that would be ignored are refused in one line."""
    if device_map is None:
        if max_memory:
            raise InvalidArgumentError("--max-memory goes with --device-map (e.g. --device-map auto)")
        if offload_folder:
            raise InvalidArgumentError("--offload-folder goes with --device-map (e.g. --device-map auto)")
        return None
    if device is not None:
        raise InvalidArgumentError(
            f"--device {device} and --device-map {device_map}: the map places the model; drop --device"
        )
    if device_map not in DEVICE_MAPS:
        raise InvalidArgumentError(f"--device-map {device_map!r}: choose one of {', '.join(DEVICE_MAPS)}")
    if max_memory:
        check_gpus(max_memory)
    return Placement(device_map, tuple((max_memory or {}).items()), offload_folder)


def check_family(placement: Placement | None, model: Any) -> None:
    """Refuse a map for a family that does not load through transformers (before it loads)."""
    if placement is not None and model.kind not in PLACEABLE_FAMILIES:
        article = "an" if model.kind[0] in "aeiou" else "a"
        raise InvalidArgumentError(
            f"--device-map: {model.id} ({article} {model.kind} model) does not load through transformers' "
            f"from_pretrained; big-model loading covers {', '.join(PLACEABLE_FAMILIES)} models (drop --device-map)"
        )


def input_device(model: Any) -> str:
    """Where a placed model's inputs go: the first GPU of its map, else the CPU (accelerate's hooks
    bring CPU- and disk-offloaded weights to that device for each forward)."""
    devices = list(dict.fromkeys((getattr(model, "hf_device_map", None) or {}).values()))
    logger.info("device map: %s", ", ".join(f"{d}" for d in devices) or "none")
    for where in devices:
        if isinstance(where, int):
            return f"cuda:{where}"
        if str(where).startswith(("cuda", "mps")):
            return str(where)
    return "cpu"


def placed_devices(model: Any) -> set[str]:
    """The devices a loaded model's map spreads it over (``{"cpu", "disk"}`` for a split on CPU)."""
    return {str(d) for d in (getattr(model, "hf_device_map", None) or {}).values()}
