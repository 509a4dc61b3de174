"""What every benchmark module shares: interleaved timing, results, and the machine's state.

Why interleaved: the development machine is shared, so its load changes during a run. Running
ours and the baseline alternately (A, B, B, A, A, B, ...) exposes both to the same load, and the
ratio of the two is what reproduces between runs, not the absolute seconds.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field


class Skip(Exception):
    """Raised by a benchmark that cannot run here (no Blender, no CUDA ...); the reason is printed."""


@dataclass
class Result:
    """Seconds for the same work done by ours and by the baseline, one value per repeat.

    ``ratio`` is ours / baseline of the medians of the per-round ratios (< 1: ours is faster).
    ``extra`` carries other measured figures (memory, shares) printed under the result.
    """

    name: str
    ours_label: str
    ours: list[float]
    baseline_label: str
    baseline: list[float]
    work: str = ""  # what one repeat does, e.g. "600 episodes"
    extra: dict[str, str] = field(default_factory=dict)
    ours_cpu: list[float] | None = None  # CPU seconds (all threads of the measuring process), per repeat
    baseline_cpu: list[float] | None = None

    @property
    def cpu_ratio(self) -> float | None:
        """Like ``ratio`` on CPU time: what the work costs, nearly independent of other jobs' load."""
        if not self.ours_cpu or not self.baseline_cpu:
            return None
        return statistics.median(a / b for a, b in zip(self.ours_cpu, self.baseline_cpu))

    @property
    def ratio(self) -> float:
        """Median over rounds of ours/baseline within the round (both ran under the same load)."""
        return statistics.median(a / b for a, b in zip(self.ours, self.baseline))

    def lines(self) -> list[str]:
        width = max(len(self.ours_label), len(self.baseline_label))
        out = [f"## {self.name}" + (f" ({self.work})" if self.work else "")]
        out.append(f"  {'':{width}}  {'min s':>9}  {'median s':>9}  repeats")
        for label, values in ((self.ours_label, self.ours), (self.baseline_label, self.baseline)):
            out.append(f"  {label:{width}}  {min(values):9.3f}  {statistics.median(values):9.3f}  {len(values)}")
        per_round = ", ".join(f"{a / b:.3g}" for a, b in zip(self.ours, self.baseline))
        out.append(f"  ratio ours/baseline (time, median of rounds): {self.ratio:.3g}x   [rounds: {per_round}]")
        if self.cpu_ratio is not None:
            for label, values in ((self.ours_label, self.ours_cpu), (self.baseline_label, self.baseline_cpu)):
                out.append(f"  CPU s, {label}: min {min(values):.3f}, median {statistics.median(values):.3f}")
            per_round = ", ".join(f"{a / b:.3g}" for a, b in zip(self.ours_cpu, self.baseline_cpu))
            out.append(
                f"  ratio ours/baseline (CPU time, median of rounds): {self.cpu_ratio:.3g}x   [rounds: {per_round}]"
            )
        for key, value in self.extra.items():
            out.append(f"  {key}: {value}")
        return out


def interleave(
    ours: Callable[[int], object],
    baseline: Callable[[int], object],
    repeats: int,
    cpu: dict[str, list[float]] | None = None,
) -> tuple[list[float], list[float]]:
    """Time ``ours(round)`` and ``baseline(round)`` alternately, swapping which goes first each round.

    Swapping the order (A B, B A, ...) keeps "runs first after the other" from favouring one side.
    Warm-up is the caller's job (call both once before). With ``cpu`` (a dict), the process's CPU
    seconds of each call are appended to ``cpu["ours"]`` / ``cpu["baseline"]``.
    """
    times: dict[str, list[float]] = {"ours": [], "baseline": []}
    cpu_times: dict[str, list[float]] = cpu if cpu is not None else {}
    cpu_times.setdefault("ours", [])
    cpu_times.setdefault("baseline", [])
    for round_ in range(repeats):
        order = (("ours", ours), ("baseline", baseline))
        for name, fn in order if round_ % 2 == 0 else order[::-1]:
            cpu_start = time.process_time()
            start = time.perf_counter()
            fn(round_)
            times[name].append(time.perf_counter() - start)
            cpu_times[name].append(time.process_time() - cpu_start)
    return times["ours"], times["baseline"]


def compare(
    name: str,
    ours: tuple[str, Callable[[int], object]],
    baseline: tuple[str, Callable[[int], object]],
    repeats: int,
    work: str = "",
    extra: dict[str, str] | None = None,
    cpu: bool = True,
) -> Result:
    """Time ``ours`` and ``baseline`` (each a label and a callable) with ``interleave`` into one
    Result. Warm-up is still the caller's job; figures known only after the rounds go into
    ``result.extra`` afterwards. ``cpu=False`` where the work runs outside this process (other
    processes, a server): this process's CPU seconds would not be the work's."""
    cpu_s: dict[str, list[float]] = {}
    ours_s, base_s = interleave(ours[1], baseline[1], repeats, cpu_s)
    result = Result(name, ours[0], ours_s, baseline[0], base_s, work=work, extra=dict(extra or {}))
    if cpu:
        result.ours_cpu, result.baseline_cpu = cpu_s["ours"], cpu_s["baseline"]
    return result


def machine_state() -> dict[str, str]:
    """Load average and thread settings, printed before and after the run."""
    import torch

    one, five, fifteen = os.getloadavg()
    return {
        "load average (1/5/15 min)": f"{one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} CPUs",
        "torch threads": f"{torch.get_num_threads()} intra-op, {torch.get_num_interop_threads()} inter-op",
        "env": ", ".join(
            f"{k}={os.environ.get(k, '(unset)')}"
            for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
        ),
    }
