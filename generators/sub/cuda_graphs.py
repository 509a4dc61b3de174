"""``--cuda-graphs``: the transformer's pass recorded once per input shape as a CUDA graph and
replayed every step (docs/sub.md, "Fast paths").

Why: at FLUX's size a pass launches thousands of kernels; replaying a recorded graph removes the
CPU's launch cost and gaps between kernels. TDG's shapes are static for a whole run (a batch of
2 rows per pair, one resolution), so one recording serves every step of every pair. The tie
stays outside the graph: the recorded pass is the transformer's alone, its output is copied out
before the next replay overwrites it, and the etas and the per-pair threshold are computed
eagerly between passes. Works around the plain module, a ``torch.compile``d one or an
ahead-of-time compiled package (:mod:`generators.sub.aot`). CUDA only (refused elsewhere before
anything loads: ``fast_paths.check_fast_paths``).
"""

from __future__ import annotations

import logging
from typing import Any

import torch

logger = logging.getLogger(__name__)

#: Passes run before recording: lazy initialisation, autotuning and allocator warm-up happen there.
WARMUP_PASSES = 2


class _Recording:
    """One shape's graph: static input buffers, the graph, its static output."""

    def __init__(self, forward: Any, call: dict[str, Any]) -> None:
        self.names = [name for name, value in call.items() if isinstance(value, torch.Tensor)]
        self.constants = {name: value for name, value in call.items() if name not in self.names}
        self.inputs = {name: call[name].clone() for name in self.names}
        device = next(iter(self.inputs.values())).device
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):  # warm-up off the default stream, as CUDA graph capture asks
            for _ in range(WARMUP_PASSES):
                forward(**self.inputs, **self.constants)
        torch.cuda.current_stream(device).wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.output = forward(**self.inputs, **self.constants)[0]

    def __call__(self, call: dict[str, Any]) -> torch.Tensor:
        for name in self.names:
            self.inputs[name].copy_(call[name])
        self.graph.replay()
        return self.output.clone()  # the next replay writes into the same memory


class CudaGraphForward:
    """``TDGFlux.transformer_forward`` for ``--cuda-graphs``: ``forward(**call)`` recorded once per
    input shape (and dtype), replayed after."""

    cuda_graphs = True

    def __init__(self, forward: Any) -> None:
        self.forward = forward
        self.recordings: dict[tuple, _Recording] = {}

    def __call__(self, **call: Any) -> tuple[torch.Tensor]:
        signature = tuple(
            (name, tuple(value.shape), value.dtype) if isinstance(value, torch.Tensor) else (name, repr(value))
            for name, value in call.items()
        )
        recording = self.recordings.get(signature)
        if recording is None:
            logger.info("recording a CUDA graph of the transformer for %s", signature)
            recording = self.recordings[signature] = _Recording(self.forward, call)
        return (recording(call),)
