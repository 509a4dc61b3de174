"""``--aot``: the FLUX transformer exported and compiled ahead of time, cached on disk, loaded by
every process (docs/sub.md, "Fast paths").

Why: ``torch.compile`` pays its warm-up (minutes for FLUX.1-dev with max-autotune) in every
process: every rank of a sharded run and every resumed Slurm task. ``torch.export`` +
AOTInductor (``torch._inductor.aoti_compile_and_package``) compiles the transformer's pass once
into a package file; ``aoti_load_package`` loads it in a second. One package per input shapes
(a TDG batch of 2 at 1024 px is one shape for a whole run), kept in the run's work folder or a
shared ``--compile-cache`` folder and recorded with what it was built from: the device model
('cpu' or the GPU's name), the shapes, the torch version, the model (id and revision) and the
transformations before the compile (fused q/k/v, quantisation, attention backend, compile mode).
A package whose record differs from this run's (stale: another torch; foreign: another model or
GPU), or whose bytes no longer match their record, is refused in one warning line and rebuilt.

Weights are not copied into the package (``aot_inductor.package_constants_in_so`` off): the
loaded package reads the live transformer's parameters, so a 24 GB model is not written to disk
once more per shape, and a package stays a few MB. Builders take a file lock, so ranks sharing a
cache build each package once and the others wait and load it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

logger = logging.getLogger(__name__)

#: The transformer's tensor inputs in the step loop's call (``TDGFlux.denoise_groups``), in the
#: package's positional order; an input that is None (``guidance`` of an undistilled model) is left out.
INPUT_NAMES = (
    "hidden_states",
    "timestep",
    "guidance",
    "pooled_projections",
    "encoder_hidden_states",
    "txt_ids",
    "img_ids",
)
#: Bumped when what a package holds or how it is called changes: older packages are then stale.
PACKAGE_FORMAT = 1
#: flux-fast's inductor flags for ``max-autotune`` (the PyTorch blog "Presenting Flux Fast").
MAX_AUTOTUNE_INDUCTOR_FLAGS = {
    "conv_1x1_as_mm": True,
    "epilogue_fusion": False,
    "coordinate_descent_tuning": True,
    "coordinate_descent_check_all_directions": True,
}
#: The fields of a package's record that must equal this run's, in the order a refusal names them.
KEY_FIELDS = ("format", "device", "torch", "model", "transforms", "inputs")


def device_model(device: torch.device) -> str:
    """'cpu', or the GPU's model name (e.g. 'NVIDIA H100 80GB HBM3'): a package holds kernels
    tuned for one GPU model."""
    if device.type != "cuda":
        return "cpu"
    return torch.cuda.get_device_name(device)


class _Positional(torch.nn.Module):
    """The transformer's pass as a function of positional tensors (what ``torch.export`` takes)."""

    def __init__(self, transformer: torch.nn.Module, names: tuple[str, ...]) -> None:
        super().__init__()
        self.transformer = transformer
        self.names = names

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        return self.transformer(**dict(zip(self.names, tensors)), return_dict=False)[0]


class AotTransformer:
    """Stands in for ``pipe.transformer(**call)`` in the step loop (``TDGFlux.transformer_forward``):
    the package for the call's shapes, loaded from ``cache_dir`` or built there first."""

    cuda_graphs = False  # not a CUDA-graph replay (apply_fast_paths wraps it in one for --cuda-graphs)

    def __init__(
        self,
        transformer: torch.nn.Module,
        cache_dir: str | os.PathLike | None,
        *,
        model: str,
        transforms: dict[str, Any],
        max_autotune: bool = False,
    ) -> None:
        self.transformer = transformer
        if cache_dir is None:  # verify's rebuild, a bare generator: this process only
            self._temporary = tempfile.TemporaryDirectory(prefix="conceptforge-aot-")
            cache_dir = self._temporary.name
        self.cache_dir = Path(cache_dir)
        self.model = model
        self.transforms = dict(transforms)
        self.max_autotune = max_autotune
        self.runners: dict[tuple, Any] = {}
        #: Packages this process built, and those it loaded as they were (tests, the device check).
        self.built: list[Path] = []
        self.loaded: list[Path] = []

    def key(self, inputs: dict[str, torch.Tensor]) -> dict[str, Any]:
        """What a package for these inputs is built from (its record, compared on load)."""
        device = next(self.transformer.parameters()).device
        return {
            "format": PACKAGE_FORMAT,
            "device": device_model(device),
            "torch": torch.__version__,
            "model": self.model,
            "transforms": {**self.transforms, "max_autotune": self.max_autotune},
            "inputs": [
                [name, list(value.shape), str(value.dtype).removeprefix("torch.")] for name, value in inputs.items()
            ],
        }

    def package_path(self, key: dict[str, Any]) -> Path:
        """One file per device model and input shapes; the rest of the key is checked, not named, so
        a package built by another torch or for another model is found and refused, not kept beside."""
        device = re.sub(r"[^A-Za-z0-9]+", "-", key["device"]).strip("-").lower()
        shapes = hashlib.sha256(json.dumps(key["inputs"]).encode()).hexdigest()[:12]
        return self.cache_dir / f"flux-transformer-{device}-{shapes}.pt2"

    def __call__(self, **call: Any) -> tuple[torch.Tensor]:
        inputs = {name: call[name] for name in INPUT_NAMES if call.get(name) is not None}
        signature = tuple((name, tuple(value.shape), value.dtype) for name, value in inputs.items())
        runner = self.runners.get(signature)
        if runner is None:
            runner = self.runners[signature] = self._runner(inputs)
        return (runner(*inputs.values()),)

    def _runner(self, inputs: dict[str, torch.Tensor]) -> Any:
        key = self.key(inputs)
        path = self.package_path(key)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with _locked(path):
            reason = stale_reason(path, key)
            if reason is None:
                try:
                    runner = self._load(path)
                    self.loaded.append(path)
                    logger.info("compiled transformer loaded from %s", path)
                    return runner
                except Exception as error:  # a package cut short, a torch that reads it differently
                    reason = f"it does not load: {str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__}"
            if reason != ABSENT:
                logger.warning("compile cache %s refused (%s): rebuilding it", path, reason)
            self._build(path, key, inputs)
            self.built.append(path)
            return self._load(path)

    def _build(self, path: Path, key: dict[str, Any], inputs: dict[str, torch.Tensor]) -> None:
        logger.warning(
            "compiling the transformer ahead of time for %s (once per shape; cached in %s)", key["inputs"], path
        )
        module = _Positional(self.transformer, tuple(inputs)).eval()
        with torch.no_grad():
            exported = torch.export.export(module, tuple(inputs.values()), strict=False)
        configs: dict[str, Any] = {"aot_inductor.package_constants_in_so": False}
        if self.max_autotune:
            configs.update({"max_autotune": True, **MAX_AUTOTUNE_INDUCTOR_FLAGS})
        partial = path.with_name(f".{path.stem}.{os.getpid()}.partial.pt2")  # AOTInductor wants the .pt2 suffix
        try:
            torch._inductor.aoti_compile_and_package(exported, package_path=str(partial), inductor_configs=configs)
            record = {**key, "sha256": _digest(partial)}
            os.replace(partial, path)  # the package first: a record always names a whole package
            _write_atomic(path.with_suffix(".json"), json.dumps(record, indent=1) + "\n")
        finally:
            partial.unlink(missing_ok=True)

    def _load(self, path: Path) -> Any:
        runner = torch._inductor.aoti_load_package(str(path))
        state = plain_constants(self.transformer)
        wanted = runner.get_constant_fqns()
        missing = [name for name in wanted if name not in state]
        if missing:
            raise ValueError(f"the package wants {len(missing)} weights the model lacks (e.g. {missing[0]})")
        runner.load_constants({name: state[name] for name in wanted}, check_full_update=True, user_managed=True)
        return runner


def plain_constants(transformer: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The live model's weights by their names in the exported package: ``transformer.`` + the
    state-dict name for a plain tensor; a tensor subclass (torchao's quantised weights) is exported
    as its inner plain tensors, depth first in ``__tensor_flatten__`` order, named
    ``<module>.parametrizations.<name>.original<i>`` (torch's ``UnwrapTensorSubclass``)."""
    constants: dict[str, torch.Tensor] = {}
    for name, value in transformer.state_dict(keep_vars=True).items():
        if not hasattr(value, "__tensor_flatten__"):
            constants[f"transformer.{name}"] = value
            continue
        module, _, attribute = name.rpartition(".")
        prefix = f"transformer.{module}." if module else "transformer."
        for index, inner in enumerate(_flatten(value)):
            constants[f"{prefix}parametrizations.{attribute}.original{index}"] = inner
    return constants


def _flatten(tensor: Any) -> list[torch.Tensor]:
    if not hasattr(tensor, "__tensor_flatten__"):
        return [tensor]
    names, _ = tensor.__tensor_flatten__()
    return [inner for name in names for inner in _flatten(getattr(tensor, name))]


#: ``stale_reason`` for a cache that has no package for these shapes yet (built without a warning).
ABSENT = "absent"


def stale_reason(path: Path, key: dict[str, Any]) -> str | None:
    """None if the package at ``path`` was built from exactly ``key`` and is whole; else why not,
    in a few words for the one warning line (``ABSENT`` when there is nothing there yet)."""
    record_path = path.with_suffix(".json")
    if not path.is_file() and not record_path.is_file():
        return ABSENT
    if not path.is_file():
        return "its package is missing"
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "it has no readable record of what it was built from"
    for field in KEY_FIELDS:
        if record.get(field) != key[field]:
            return f"built for {field} {_short(record.get(field))}, this run has {_short(key[field])}"
    if record.get("sha256") != _digest(path):
        return "its bytes do not match its record (changed or cut short)"
    return None


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def _digest(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def _write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock beside ``path``: one rank builds, the others wait and then load."""
    with open(path.with_name(f".{path.name}.lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
